"""The rewrite-template contract: a subgraph a compiler rewrites, as one insertion.

Random growth almost never assembles the nine nodes of a LayerNorm or the five of an erf
Gelu, so a generator that only grows op by op never reaches the fusions where most
optimizer bugs live (2,000 generated models met one fusion in all). A template is written
as an OpSpec: its validity and shapes are z3 constraints like any op's, so it enters the
growing graph as one insertion, forward or backward, mixed with random growth, and every
model stays valid. It writes several ONNX nodes, all registry ops, so the witness, the
reference and the reducer see nothing but standard ONNX.

A template also comes in near misses: variants that break exactly one precondition the
rewrite must check (an axis, where the epsilon sits, a second consumer of the fused
intermediate, a constant that became a runtime input), while the model stays valid. A
compiler that rewrites a near miss anyway computes something else, and the reference
catches it. Each variant is its own class (`variants`), so coverage and steering count
them apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from generator.dtypes import DType
from generator.ops.base import Attrs, Emitter, OpSpec, schema_dtypes
from generator.symbolic import AbsTensor, Cond, TType

PREFIX = "pattern:"
"""How a template's op type starts (`pattern:LayerNorm~axis`): never an ONNX op type."""
EXACT = ""
"""The variant that meets every precondition: the rewrite should fire."""
AXES_INPUT_SINCE = 18
"""The opset from which ReduceMean and ReduceSum take `axes` as an input."""


class Pattern(OpSpec):
    """One rewrite template in one variant."""

    template: ClassVar[str]
    source: ClassVar[str]
    """Which compilers perform the rewrite, and in which pass."""
    fires: ClassVar[tuple[str, ...]] = ()
    """Rewrite keys (generator.coverage.Coverage.rewrites) that show the rewrite fired."""
    uses: ClassVar[tuple[str, ...]]
    """The ONNX op types it writes whose schema and support must admit its dtype, each at
    its first input, or at input k where written `Op:k` (Where's data is its input 1)."""
    fixed_uses: ClassVar[dict[str, DType]] = {}
    """Ops it writes at a dtype of their own, whatever the template's (the uint8
    MatMulInteger behind a float32 template), checked at their first input."""
    near_misses: ClassVar[dict[str, str]] = {}
    """Variant -> the one precondition it breaks."""
    variant: ClassVar[str] = EXACT
    node_cost: ClassVar[int] = 3
    """About how many ONNX nodes it writes: what it counts toward a model's node budget."""
    second_output: ClassVar[bool] = False
    """The variant exposes the fused intermediate as a second output (a graph output, or a
    tensor later insertions read): the rewrite must keep it."""

    @classmethod
    def schema_allows(cls, opset: int, ins: Sequence[TType]) -> bool:
        dtype = cls.key_dtype(ins)
        slots = (use.partition(":") for use in cls.uses)
        fixed = all(dt in schema_dtypes(op, opset, 0) for op, dt in cls.fixed_uses.items())
        return fixed and all(dtype in schema_dtypes(op, opset, int(k or 0)) for op, _, k in slots)

    @classmethod
    def support_ops(cls) -> tuple[str, ...]:
        return (*(use.partition(":")[0] for use in cls.uses), *cls.fixed_uses)

    @classmethod
    def support_keys(cls, key: DType) -> list[tuple[str, DType]]:
        return [(use.partition(":")[0], key) for use in cls.uses] + list(cls.fixed_uses.items())

    @classmethod
    def name(cls) -> str:
        """`Template` or `Template~near_miss`, as coverage counts it."""
        return _name(cls.template, cls.variant)

    def outputs(self, out: AbsTensor, middle: AbsTensor) -> list[AbsTensor]:
        """The output, and for a second-consumer variant the exposed intermediate."""
        return [out, middle] if self.second_output else [out]

    def exposed(self, outs: list[str]) -> str | None:
        """The name the exposed intermediate is written to (None: kept internal)."""
        return outs[1] if self.second_output else None

    def dims(self, em: Emitter) -> list[int]:
        """The first input's dims, as emitted."""
        return [em.ival(d) for d in self.inputs[0].shape]

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        raise TypeError("a template is written as standard ONNX ops; their references compute it")


class Writer:
    """Writes a template's nodes: fresh intermediate names derived from the node's first
    output (unique in the model), constants in the template's dtype, and the opset's
    spelling of axes."""

    def __init__(self, em: Emitter, outs: list[str], dtype: DType) -> None:
        self.em = em
        self.outs = outs
        self.dtype = dtype
        self.made = 0

    def op(self, op_type: str, ins: Sequence[str], out: str | None = None, **attrs: Any) -> str:
        """Write one node; its output is `out`, or a fresh intermediate name."""
        if out is None:
            out = f"{self.outs[0]}_{self.made}"
            self.made += 1
        self.em.node(op_type, list(ins), [out], **attrs)
        return out

    def array(self, values: object) -> np.ndarray:
        """Values in the template's dtype."""
        return np.asarray(values, dtype=self.dtype.numpy)

    def const(self, values: object) -> str:
        return self.em.const(self.array(values))

    def reduce(self, op_type: str, x: str, axes: list[int], keepdims: int = 1, out: str | None = None) -> str:
        if self.em.opset >= AXES_INPUT_SINCE:
            return self.op(op_type, [x, self.em.const_i64(axes)], out, keepdims=keepdims)
        return self.op(op_type, [x], out, axes=axes, keepdims=keepdims)

    def runtime(self, values: np.ndarray) -> str:
        """A value the template needs as a graph input rather than a constant (a near miss
        whose constant became a runtime input)."""
        return self.em.runtime(np.asarray(values))


def variants(cls: type[Pattern]) -> list[type[Pattern]]:
    """The template's exact form and one class per near miss."""
    out = [_variant(cls, EXACT)]
    out += [_variant(cls, v) for v in cls.near_misses]
    return out


def _name(template: str, variant: str) -> str:
    return template + (f"~{variant}" if variant else "")


def _variant(cls: type[Pattern], variant: str) -> type[Pattern]:
    attrs = {
        "variant": variant,
        "op_type": PREFIX + _name(cls.template, variant),
        "second_output": variant == "second_consumer",
        "__doc__": cls.near_misses.get(variant, cls.__doc__),
    }
    return type(f"{cls.__name__}_{variant or 'exact'}", (cls,), attrs)


class SameShapePattern(Pattern):
    """A template whose output has its input's shape and type (normalizations,
    activations, eliminations): nothing to solve, and backward insertion knows its input."""

    min_rank: ClassVar[int] = 1
    max_rank: ClassVar[int] = 4

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return self.outputs(AbsTensor(ins[0].dtype, list(ins[0].shape)), AbsTensor(ins[0].dtype, list(ins[0].shape)))

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        return [list(out_shape)]
