"""Symbolic tensors and the per-model solver context.

Every model gets its own z3 context, so that symbol ids, and hence the solver's
choices, depend on the seed alone and never on what was generated before.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Union

import z3

from generator.dtypes import DType
from generator.z3_contexts import ContextSupply

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


Concretizer = Callable[[str, bool, "int | None", "int | None"], int]
"""Draws a value for a variable (prefix, zero_ok, lo, hi) without the solver."""


@dataclass(frozen=True)
class BinVar:
    """A variable worth binning, with the interval its op declared for it."""

    var: z3.ArithRef
    zero_ok: bool
    """Whether 0 is a meaningful value (pads, starts): it then gets a bin of its own."""
    lo: int | None = None
    hi: int | None = None
    binned: bool = True

    def bound_constraints(self) -> list[z3.BoolRef]:
        cons: list[z3.BoolRef] = []
        if self.lo is not None:
            cons.append(self.var >= self.lo)
        if self.hi is not None:
            cons.append(self.var <= self.hi)
        return cons


@dataclass
class SymCtx:
    """Fresh symbols, the random choices of one model, and the variables worth binning."""

    rng: random.Random
    max_elements: int = 4096
    opset: int = 17
    """The opset being generated for: ops whose valid forms or dtypes changed across opsets read it."""
    binnable: list[BinVar] = field(default_factory=list)
    concrete: Concretizer | None = None
    """While set, `var` returns a drawn int instead of a z3 term (concrete-first insertion)."""
    drawn: list[tuple[str, int]] = field(default_factory=list)
    """(prefix, value) of every variable drawn concretely since the last reset."""
    contexts: ContextSupply | None = None
    """Where a fresh context comes from (made ahead, generator.z3_contexts); None: made here."""
    solver_backstops: int = 0
    """Checks the wall-clock backstop stopped (generator.solver.BACKSTOP_MS)."""
    _count: int = 0
    _ctx: z3.Context | None = None

    @property
    def ctx(self) -> z3.Context:
        """Created on first use: a model whose insertions all succeed concretely never
        pays for a z3 context (about as much as generating the model itself)."""
        if self._ctx is None:
            self._ctx = self.contexts.take() if self.contexts is not None else z3.Context()
        return self._ctx

    def var(
        self, prefix: str, *, zero_ok: bool = False, binnable: bool = True, lo: int | None = None, hi: int | None = None
    ) -> Dim:
        """A fresh integer. `lo`/`hi` bound it (the grower asserts them) and confine its bins,
        so that a small-domain attribute such as a stride never draws a bin it cannot take."""
        self._count += 1
        if self.concrete is not None:
            value = self.concrete(prefix, zero_ok, lo, hi)
            self.drawn.append((prefix, value))
            return value
        v = z3.Int(f"{prefix}_{self._count}", self.ctx)
        if binnable or lo is not None or hi is not None:
            self.binnable.append(BinVar(v, zero_ok, lo, hi, binnable))
        return v

    def fresh_shape(self, rank: int, prefix: str = "d") -> list[Dim]:
        return [self.var(prefix) for _ in range(rank)]


def floordiv(a: Dim, b: Dim) -> Dim:
    """Floor division of dims that may be ints or z3 terms (z3 integer `/` floors for the
    positive divisors dims have; Python `/` on two ints would give a float)."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return a / b


def ceildiv(a: Dim, b: Dim) -> Dim:
    return floordiv(a + b - 1, b)


def numel(shape: Sequence[Dim]) -> Dim:
    total: Dim = 1
    for d in shape:
        total = total * d
    return total
