"""Symbolic tensors and the per-model solver context.

Every model gets its own z3 context, so that symbol ids, and hence the solver's
choices, depend on the seed alone and never on what was generated before.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Union

import z3

from generator.dtypes import DType

Dim = Union[z3.ArithRef, int]  # noqa: UP007 - z3 classes are not types to `|` at runtime
Cond = Union[z3.BoolRef, bool]  # noqa: UP007


@dataclass(frozen=True)
class TType:
    """The part of a tensor type that is fixed before solving: dtype and rank."""

    dtype: DType
    rank: int


@dataclass
class AbsTensor:
    """A tensor whose dimensions are z3 integer terms until the model is solved."""

    dtype: DType
    shape: list[Dim]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def ttype(self) -> TType:
        return TType(self.dtype, self.rank)


@dataclass
class SymCtx:
    """Fresh symbols, the random choices of one model, and the variables worth binning."""

    rng: random.Random
    max_elements: int = 4096
    ctx: z3.Context = field(default_factory=z3.Context)
    binnable: list[tuple[z3.ArithRef, bool]] = field(default_factory=list)
    """Variables to bin, each with whether 0 is a meaningful value for it (pads, starts)."""
    _count: int = 0

    def var(self, prefix: str, *, zero_ok: bool = False, binnable: bool = True) -> z3.ArithRef:
        self._count += 1
        v = z3.Int(f"{prefix}_{self._count}", self.ctx)
        if binnable:
            self.binnable.append((v, zero_ok))
        return v

    def fresh_shape(self, rank: int, prefix: str = "d") -> list[Dim]:
        return [self.var(prefix) for _ in range(rank)]

    def cond(self, c: Cond) -> z3.BoolRef:
        """Lift a plain bool (from comparing two concrete ints) into this context."""
        if isinstance(c, bool):
            return z3.BoolVal(c, self.ctx)
        return c


def numel(shape: list[Dim]) -> Dim:
    total: Dim = 1
    for d in shape:
        total = total * d
    return total
