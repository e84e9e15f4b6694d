"""What one entry of the unsafe-op table (generator.values.unsafe) is made of: a predicate in
NNSmith's canonical form, the margins it keeps, and the operand helpers the entries share.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

Attrs = dict[str, Any]


Operands = Sequence[torch.Tensor | None]


Violation = Callable[[Operands, Attrs], torch.Tensor]


MARGIN: dict[torch.dtype, float] = {torch.float16: 2.0**-5, torch.float32: 2.0**-10, torch.float64: 2.0**-20}
"""δ per float type: far more than correct kernels differ by on unit-scale values (a few
ulps, 1e-3 in float16 and 1e-7 in float32), far less than the values the generator draws.
Divisors, logarithm and root operands this close to zero are where a legitimate rounding
difference upstream stops being small downstream."""


JUMP_MARGIN: dict[torch.dtype, float] = {torch.float16: 2.0**-7, torch.float32: 2.0**-15, torch.float64: 2.0**-30}
"""Relative margin from a discontinuity (Floor's integers, ArgMax's runner-up). Only the
operand's own rounding can carry it across, a few ulps per inexact op upstream: 8 ulps in
float16, 256 in float32. δ itself (32 ulps in float16) made every Hardmax or TopK of a
float16 slice with a few dozen elements a near-tie, and the search dropped those models."""


STRICT_EPS = 1e-6
"""Added to the loss of a violated strict predicate, so that f == 0 scores above zero."""


def growth_limit(dtype: torch.dtype) -> float:
    """The largest exponent an exp-like op may see: half the overflow exponent, capped at 40.

    Half, so the result can still be squared once downstream (x*x, MatMul) without turning
    into Inf; 40 follows NNSmith's bound for Pow. float16 overflows near e^11, so it gets 5.5.
    """
    return min(40.0, 0.5 * math.log(torch.finfo(dtype).max))


TRIG_LIMIT: dict[torch.dtype, float] = {torch.float16: 8.0, torch.float32: 256.0, torch.float64: 256.0}
"""|x| bound for Sin/Cos/Tan: argument reduction turns the relative rounding error of a
large x into an absolute error of the result, which grows past tolerance beyond these."""


@dataclass(frozen=True)
class Predicate:
    """One inequality of an op's valid domain: valid where `f <= 0` (`f < 0` if strict)."""

    name: str
    slots: tuple[int, ...]
    """Operands the predicate reads; all must be present for it to apply."""
    f: Violation
    strict: bool = False
    integer: bool = False
    """Discrete operands: repaired by redrawing `repair` from `safe_values`, not by gradient."""
    repair: int = 0
    safe_values: Callable[[torch.dtype], list[int]] | None = None
    fixed_margin: float | None = None
    """A margin in the operand's own units (Cast ranges); otherwise δ of the operand's dtype."""
    applies: Callable[[Operands, Attrs], bool] = lambda ops, attrs: True
    inexact_only: bool = False
    """Only checked when the operand may differ in its bits between backends (see
    `same_bits`): conditioning limits, which bound how far a backend's rounding of the
    operand is amplified, and discontinuities, which it could cross."""

    margins: dict[torch.dtype, float] | None = None
    """A margin per dtype other than δ (`JUMP_MARGIN` for discontinuities)."""
    undefined: bool = False
    """Violating it leaves the result unspecified by ONNX (integer division by zero,
    integer overflow, a float cast out of an integer type's range, a shift past the
    width): no value there is wrong, though a crash on it is a robustness bug."""

    def margin(self, dtype: torch.dtype) -> float:
        if self.integer:
            return 0.0
        if self.fixed_margin is not None:
            return self.fixed_margin
        table = self.margins or MARGIN
        return table.get(dtype, table[torch.float32])

    def relevant(self, operands: Operands, attrs: Attrs) -> bool:
        """Whether the predicate constrains this node: operands present, dtypes matching."""
        if any(s >= len(operands) or operands[s] is None for s in self.slots):
            return False
        if self.integer == is_float(operands[self.slots[0]]):
            return False
        return self.applies(operands, attrs)

    def violated(self, f: torch.Tensor) -> torch.Tensor:
        """Elementwise: outside the valid domain (NaN counts as outside)."""
        return ~(f < 0) if self.strict else ~(f <= 0)

    def within(self, f: torch.Tensor, margin: float, exact: bool = False) -> torch.Tensor:
        """Elementwise: violated, or valid but within `margin` of the invalid domain.

        With `exact`, the closed boundary of a non-strict predicate (f == 0 exactly:
        Sqrt(0), Asin(1)) is not counted as near: the operand then comes from a graph input
        or an op with exact results (Relu's 0, Sign's 1, Clip's bounds) that every backend
        reproduces bit for bit, and refusing it would make Sqrt(Relu(x)) unsolvable. An
        inexact op can round onto the boundary in one backend and past it in another
        (float16 Acos(Acos(x)): 1.0 in one, 1.00098 in the other), so there it is near.
        """
        if margin <= 0:
            return self.violated(f)
        near = ~(f <= -margin)
        return near & (f != 0) if exact and not self.strict else near

    def margin_loss(self, f: torch.Tensor, margin: float, exact: bool = False) -> torch.Tensor:
        """Positive exactly when some element is within `margin` of the domain's edge."""
        if margin <= 0:
            return self.domain_loss(f)
        return torch.where(self.within(f, margin, exact), f + margin, torch.zeros_like(f)).sum()

    def domain_loss(self, f: torch.Tensor) -> torch.Tensor:
        """Positive exactly when some element violates the domain (Table 2 of NNSmith)."""
        if self.strict:
            return torch.where(f >= 0, f + STRICT_EPS, torch.zeros_like(f)).sum()
        return torch.relu(f).sum()


# The helpers below are shared by the predicate tables (unsafe.py, jumps.py, overflow.py,
# proxies.py): public, so that no module reaches into another's private names.


def is_float(t: torch.Tensor | None) -> bool:
    return t is not None and t.is_floating_point()


def operand(ops: Operands, i: int = 0) -> torch.Tensor:
    """The `i`-th operand, which the op's schema says is present."""
    t = ops[i]
    assert t is not None
    return t


def abs_nz(x: torch.Tensor) -> torch.Tensor:
    """|x| whose derivative at 0 is ±1 instead of torch's 0, so a zero divisor moves: away
    from 0 on the side of its sign bit, so a -0.0 (Ceil(-0.3)) is pushed down, where the
    nonzero values on its side are."""
    sign = torch.where(torch.signbit(x), -1.0, 1.0).to(x.dtype).detach()
    return x * sign


def nonzero_ints(dtype: torch.dtype) -> list[int]:
    lo = 1 if not dtype.is_signed else -8
    return [v for v in range(lo, 9) if v != 0]


def shift_amounts(dtype: torch.dtype) -> list[int]:
    return list(range(min(8, torch.iinfo(dtype).bits)))


def cast_target(ops: Operands, attrs: Attrs) -> torch.dtype | int:
    """Cast names its target in `to` (an ONNX type code), CastLike by its second input."""
    like = ops[1] if len(ops) > 1 else None
    return like.dtype if like is not None else int(attrs.get("to", 0))


def int_info(ops: Operands, attrs: Attrs) -> torch.iinfo | None:
    to = cast_target(ops, attrs)
    if isinstance(to, torch.dtype):
        return None if to.is_floating_point or to == torch.bool else torch.iinfo(to)
    return _ONNX_INT.get(to)


def to_float16(ops: Operands, attrs: Attrs) -> bool:
    return cast_target(ops, attrs) in (torch.float16, ONNX_FLOAT16)


_ONNX_INT: dict[int, torch.iinfo] = {
    2: torch.iinfo(torch.uint8),
    3: torch.iinfo(torch.int8),
    4: torch.iinfo(torch.uint16),
    5: torch.iinfo(torch.int16),
    6: torch.iinfo(torch.int32),
    7: torch.iinfo(torch.int64),
    12: torch.iinfo(torch.uint32),
    13: torch.iinfo(torch.uint64),
}
"""ONNX TensorProto element type codes of the integer types."""


ONNX_FLOAT16 = 10


FLOAT16_MAX = 65504.0


def cast_range(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Truncation toward zero must land in the target type: lo - 1 < x < hi + 1."""
    info = int_info(ops, attrs)
    assert info is not None
    x = operand(ops)
    return torch.maximum((float(info.min) - 1) - x, x - (float(info.max) + 1))


def tan_pole(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the distance to the nearest pole pi/2 + k*pi."""
    r = torch.remainder(operand(ops) - math.pi / 2, math.pi)
    return -torch.minimum(r, math.pi - r)


CONDITION_LIMIT: dict[torch.dtype, float] = {torch.float16: 8.0, torch.float32: 4096.0, torch.float64: 2.0**30}
"""How far Tan may amplify a rounding difference of a computed operand: its absolute error
is |x|(1 + tan²x)·u for a relative operand error u, and the comparison allows about
tolerance / u of it, over max(1, |tan x|) (atol below 1, rtol above). float16's u = 2^-11
against rtol 1e-2 leaves about 20; 8 keeps a two-ulp disagreement well inside."""


def tan_conditioning(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """|x|(1 + tan²x) / max(1, |tan x|) below the dtype's limit: near a pole, the error of
    Tan(y) for a y rounded differently upstream (float16 Tan(Tan(x))) outgrows any tolerance."""
    x = operand(ops)
    y = x.double() if x.dtype == torch.float64 else x.float()
    t = torch.tan(y)
    return (y.abs() * (1 + t * t) / t.abs().clamp_min(1.0) - CONDITION_LIMIT.get(x.dtype, 4096.0)).to(x.dtype)


def trig_bound(ops: Operands, attrs: Attrs) -> torch.Tensor:
    x = operand(ops)
    return x.abs() - TRIG_LIMIT.get(x.dtype, 256.0)


def pow_base(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """A float base must be positive under a fractional exponent (a negative one gives
    NaN), but any base is defined under an integer exponent: x**2 of a negative x is
    exact, and only 0 under a negative integer exponent divides by zero."""
    x, y = operand(ops, 0), operand(ops, 1)
    whole = (y == torch.round(y)) if y.is_floating_point() else torch.ones_like(y, dtype=torch.bool)
    whole, x = torch.broadcast_tensors(whole, x)
    free = -torch.ones_like(x)
    zero_gap = torch.where(torch.broadcast_to(y < 0, x.shape), -abs_nz(x), free)
    return torch.where(whole, zero_gap, -x)


def pow_base_computed(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """A computed exponent is an integer only up to rounding (1.0 in one backend,
    0.99951 in another), so under it a negative base is as unsafe as under 0.5."""
    x, y = operand(ops, 0), operand(ops, 1)
    base: torch.Tensor = torch.broadcast_tensors(-x.to(y.dtype) if y.is_floating_point() else -x, y)[0]
    return base


def pow_growth(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """y * ln|x| stays below the growth limit (|x|: an integer exponent takes any base); ln of
    the clamped magnitude keeps the loss finite."""
    x, y = operand(ops, 0), operand(ops, 1)
    tiny = torch.finfo(x.dtype).tiny
    return y.to(x.dtype) * torch.log(abs_nz(x).clamp_min(tiny)) - growth_limit(x.dtype)


def exp_growth(ops: Operands, attrs: Attrs) -> torch.Tensor:
    x = operand(ops)
    return x - growth_limit(x.dtype)


def cosh_growth(ops: Operands, attrs: Attrs) -> torch.Tensor:
    x = operand(ops)
    return x.abs() - growth_limit(x.dtype)


def int_pow(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Integer Pow: a non-negative exponent and |x|^y well inside the type's range."""
    x, y = operand(ops, 0), operand(ops, 1)
    bits = torch.iinfo(x.dtype).bits - 2
    mag = torch.log2(x.abs().clamp_min(1).double()) * y.double()
    return torch.maximum(-y.double() - 0.5, mag - bits)


def reduce_axes(ops: Operands, attrs: Attrs, rank: int) -> list[int] | None:
    """ONNX reduction axes, from the second input or the attribute; None: reduce nothing."""
    axes_in = ops[1] if len(ops) > 1 else None
    axes = [int(a) for a in axes_in.tolist()] if axes_in is not None else list(attrs.get("axes", []))
    if not axes:
        return None if attrs.get("noop_with_empty_axes", 0) else list(range(rank))
    return [a + rank if a < 0 else a for a in axes]


def log_sum(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """ReduceLogSum takes the log of the sum: the sum must be positive."""
    x = operand(ops)
    axes = reduce_axes(ops, attrs, x.dim())
    return -(x if axes is None else x.sum(dim=axes, keepdim=True))


def lp_norm(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """LpNormalization divides by the norm; an exactly zero slice is left alone by every backend."""
    x = operand(ops)
    axis = int(attrs.get("axis", -1))
    p = int(attrs.get("p", 2))
    norm = x.abs().sum(dim=axis, keepdim=True) if p == 1 else (x * x).sum(dim=axis, keepdim=True).sqrt()
    return -norm


def det_conditioning(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Positive where a determinant is under a hundredth of the product of its rows' norms
    (Hadamard's bound on it): there the terms cancel, and each build's pivoting rounds them
    differently. One value per matrix, shaped to broadcast over it."""
    x = operand(ops)
    if x.dim() < 2 or x.shape[-1] != x.shape[-2] or not x.numel():
        return -torch.ones((), dtype=x.dtype)
    det = torch.linalg.det(x.double()).abs()
    bound = torch.linalg.vector_norm(x.double(), dim=-1).prod(dim=-1)
    violation: torch.Tensor = (0.01 * bound - det).to(x.dtype)
    return violation.unsqueeze(-1).unsqueeze(-1)


def mvn_variance(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """MeanVarianceNormalization divides by sqrt(E[x^2] - E[x]^2), a cancellation. Even an
    exact 0 (a constant slice, a slice of one element) is unsafe: the spec's epsilon makes
    the result 0 there, onnxruntime, which drops it, gives 0/0."""
    x = operand(ops)
    axes = [a + x.dim() if a < 0 else a for a in attrs.get("axes", [0, 2, 3])]
    mean = x.mean(dim=axes, keepdim=True)
    return -((x * x).mean(dim=axes, keepdim=True) - mean * mean)


def rounding_unit(*xs: torch.Tensor) -> torch.Tensor:
    """max(1, |x|, ...), detached: the scale a rounding difference of these operands has."""
    m = torch.ones((), dtype=xs[0].dtype)
    for x in xs:
        m = torch.maximum(m, x.detach().abs())
    return m


def periodic_unit(x: torch.Tensor) -> torch.Tensor:
    """`rounding_unit`, capped where the margin would reach a quarter of the period (1): jumps that
    recur every 1 leave no room for more, and a large |x| is there to be searched, not refused."""
    cap = 0.25 / JUMP_MARGIN.get(x.dtype, JUMP_MARGIN[torch.float32])
    return rounding_unit(x).clamp_max(cap)
