"""The operator spec contract and the operator registry.

A spec is everything the rest of the system needs to know about one ONNX op type:
what it accepts (z3 constraints), what it produces (shape transfer), how it is
written to ONNX, and what it computes (a torch implementation used by the
reference interpreter). Keeping the four together means a new op cannot be
generated without also being checkable.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import torch

from generator.dtypes import FLOATS, DType
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType

Attrs = dict[str, Any]


class Emitter(Protocol):
    """What an op may do while it is being written into an ONNX graph."""

    opset: int

    def ival(self, term: Dim) -> int: ...

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any) -> None: ...

    def const_i64(self, values: Sequence[int]) -> str: ...

    def weight(self, shape: Sequence[int], dtype: DType, fan_in: int = 1) -> str: ...


class OpSpec(ABC):
    """One ONNX op type; an instance is one node being inserted into a graph."""

    op_type: ClassVar[str]
    arity: ClassVar[int] = 1
    min_rank: ClassVar[int] = 1
    max_rank: ClassVar[int] = 4
    dtypes: ClassVar[tuple[DType, ...]] = FLOATS

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        """`out` is set for backward insertion: the type the node must produce."""
        self.sc = sc
        self.ins = list(ins)
        self.out = out
        self.inputs: list[AbsTensor] = []

    def bind(self, ins: list[AbsTensor]) -> tuple[list[Cond], list[AbsTensor]]:
        """Attach symbolic inputs; returns the validity constraints and the outputs."""
        self.inputs = ins
        return self.requires(ins), self.transfer(ins)

    @property
    def rng(self) -> random.Random:
        return self.sc.rng

    @classmethod
    def draw_arity(cls, rng: random.Random) -> int:
        """How many inputs this node will take; variadic ops override it."""
        return cls.arity

    @classmethod
    def slot_ok(cls, slot: int, t: TType) -> bool:
        return t.dtype in cls.dtypes and cls.min_rank <= t.rank <= cls.max_rank

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        """Cheap type matching before any solver call (NNSmith's TypeMatch)."""
        return all(cls.slot_ok(i, t) for i, t in enumerate(ins)) and len({t.dtype for t in ins}) == 1

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        """Input types from which this op can produce `out`, or None if it never can."""
        if out.dtype not in cls.dtypes or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [out] * cls.arity

    @abstractmethod
    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        """Constraints on inputs and attributes under which the op is valid."""

    @abstractmethod
    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        """Symbolic output types."""

    @abstractmethod
    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        """Write the op as ONNX nodes; symbolic attributes are read through `em.ival`."""

    @staticmethod
    @abstractmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Eager torch semantics of the ONNX node, read from its attributes alone."""


def full_and_lower_rank(out: TType, min_rank: int, rng: random.Random) -> list[TType]:
    """Two inputs for an op whose output takes the larger input rank: one input has
    the output's rank, the other any rank down to `min_rank`, in random order."""
    other = TType(out.dtype, rng.randint(min_rank, out.rank))
    return [out, other] if rng.random() < 0.5 else [other, out]


_REGISTRY: dict[str, type[OpSpec]] = {}


def register(cls: type[OpSpec]) -> type[OpSpec]:
    if cls.op_type in _REGISTRY:
        raise ValueError(f"op type {cls.op_type} registered twice")
    _REGISTRY[cls.op_type] = cls
    return cls


def registry() -> dict[str, type[OpSpec]]:
    """The registered specs; importing generator.ops fills it."""
    return dict(_REGISTRY)
