"""The table of numerically unsafe operators, keyed by ONNX op_type.

Each entry is a conjunction of predicates in NNSmith's canonical form: an operand is in
the op's valid domain when `f(operands) <= 0` everywhere (`< 0` when the predicate is
strict). That one form gives three things at once: a domain loss that is positive exactly
when the domain is violated (what NNSmith optimises), a margin loss that is positive when
an operand is within `margin` of the invalid domain (what we optimise, so that a backend's
rounding cannot tip a value over the edge), and the margin check the oracles use to call a
difference numerically unstable rather than a bug.

Integer predicates are discrete: a zero divisor has no useful gradient, so they carry a
`repair` slot and the set of values it may be redrawn from instead. Integer overflow
(int32/int64 Mul, ReduceProd, ReduceSumSquare, Pow) is one of them: backends saturate or
wrap, and the repair shrinks the values behind the product.

Discontinuities (Floor, Ceil, Round, QuantizeLinear and DynamicQuantizeLinear, Sign, a cast
to an integer or bool, ArgMax, ArgMin, Hardmax, TopK, ThresholdedRelu at alpha, Shrink at
±lambd, OneHot's float indices) keep a computed operand `JUMP_MARGIN` (relative) away from
the jump: a backend that rounds the operand differently lands on the other side.
Comparisons are left out: campaigns showed no false positive from them, and their margin
made many models unsolvable.

The table reads nothing from the generator's op specs: it describes ONNX semantics, so it
applies equally to models fuzzbot did not generate (reduced models, user bundles).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from generator.quantization import dynamic_range, per_axis

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
        if self.integer == _is_float(operands[self.slots[0]]):
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


def _is_float(t: torch.Tensor | None) -> bool:
    return t is not None and t.is_floating_point()


def _x(ops: Operands, i: int = 0) -> torch.Tensor:
    t = ops[i]
    assert t is not None
    return t


def _abs_nz(x: torch.Tensor) -> torch.Tensor:
    """|x| whose derivative at 0 is ±1 instead of torch's 0, so a zero divisor moves: away
    from 0 on the side of its sign bit, so a -0.0 (Ceil(-0.3)) is pushed down, where the
    nonzero values on its side are."""
    sign = torch.where(torch.signbit(x), -1.0, 1.0).to(x.dtype).detach()
    return x * sign


def _nonzero_ints(dtype: torch.dtype) -> list[int]:
    lo = 1 if dtype == torch.uint8 else -8
    return [v for v in range(lo, 9) if v != 0]


def _shift_amounts(dtype: torch.dtype) -> list[int]:
    return list(range(min(8, torch.iinfo(dtype).bits)))


def _cast_target(ops: Operands, attrs: Attrs) -> torch.dtype | int:
    """Cast names its target in `to` (an ONNX type code), CastLike by its second input."""
    like = ops[1] if len(ops) > 1 else None
    return like.dtype if like is not None else int(attrs.get("to", 0))


def _int_info(ops: Operands, attrs: Attrs) -> torch.iinfo | None:
    to = _cast_target(ops, attrs)
    if isinstance(to, torch.dtype):
        return None if to.is_floating_point or to == torch.bool else torch.iinfo(to)
    return _ONNX_INT.get(to)


def _to_float16(ops: Operands, attrs: Attrs) -> bool:
    return _cast_target(ops, attrs) in (torch.float16, ONNX_FLOAT16)


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


def _cast_range(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Truncation toward zero must land in the target type: lo - 1 < x < hi + 1."""
    info = _int_info(ops, attrs)
    assert info is not None
    x = _x(ops)
    return torch.maximum((float(info.min) - 1) - x, x - (float(info.max) + 1))


def _tan_pole(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the distance to the nearest pole pi/2 + k*pi."""
    r = torch.remainder(_x(ops) - math.pi / 2, math.pi)
    return -torch.minimum(r, math.pi - r)


CONDITION_LIMIT: dict[torch.dtype, float] = {torch.float16: 8.0, torch.float32: 4096.0, torch.float64: 2.0**30}
"""How far Tan may amplify a rounding difference of a computed operand: its absolute error
is |x|(1 + tan²x)·u for a relative operand error u, and the comparison allows about
tolerance / u of it, over max(1, |tan x|) (atol below 1, rtol above). float16's u = 2^-11
against rtol 1e-2 leaves about 20; 8 keeps a two-ulp disagreement well inside."""


def _tan_conditioning(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """|x|(1 + tan²x) / max(1, |tan x|) below the dtype's limit: near a pole, the error of
    Tan(y) for a y rounded differently upstream (float16 Tan(Tan(x))) outgrows any tolerance."""
    x = _x(ops)
    y = x.double() if x.dtype == torch.float64 else x.float()
    t = torch.tan(y)
    return (y.abs() * (1 + t * t) / t.abs().clamp_min(1.0) - CONDITION_LIMIT.get(x.dtype, 4096.0)).to(x.dtype)


def _trig_bound(ops: Operands, attrs: Attrs) -> torch.Tensor:
    x = _x(ops)
    return x.abs() - TRIG_LIMIT.get(x.dtype, 256.0)


def _pow_base(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """A float base must be positive under a fractional exponent (a negative one gives
    NaN), but any base is defined under an integer exponent: x**2 of a negative x is
    exact, and only 0 under a negative integer exponent divides by zero."""
    x, y = _x(ops, 0), _x(ops, 1)
    whole = (y == torch.round(y)) if y.is_floating_point() else torch.ones_like(y, dtype=torch.bool)
    whole, x = torch.broadcast_tensors(whole, x)
    free = -torch.ones_like(x)
    zero_gap = torch.where(torch.broadcast_to(y < 0, x.shape), -_abs_nz(x), free)
    return torch.where(whole, zero_gap, -x)


def _pow_base_computed(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """A computed exponent is an integer only up to rounding (1.0 in one backend,
    0.99951 in another), so under it a negative base is as unsafe as under 0.5."""
    x, y = _x(ops, 0), _x(ops, 1)
    base: torch.Tensor = torch.broadcast_tensors(-x.to(y.dtype) if y.is_floating_point() else -x, y)[0]
    return base


def _pow_growth(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """y * ln|x| stays below the growth limit (|x|: an integer exponent takes any base); ln of
    the clamped magnitude keeps the loss finite."""
    x, y = _x(ops, 0), _x(ops, 1)
    tiny = torch.finfo(x.dtype).tiny
    return y.to(x.dtype) * torch.log(_abs_nz(x).clamp_min(tiny)) - growth_limit(x.dtype)


def _exp_growth(ops: Operands, attrs: Attrs) -> torch.Tensor:
    x = _x(ops)
    return x - growth_limit(x.dtype)


def _cosh_growth(ops: Operands, attrs: Attrs) -> torch.Tensor:
    x = _x(ops)
    return x.abs() - growth_limit(x.dtype)


def _int_pow(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Integer Pow: a non-negative exponent and |x|^y well inside the type's range."""
    x, y = _x(ops, 0), _x(ops, 1)
    bits = torch.iinfo(x.dtype).bits - 2
    mag = torch.log2(x.abs().clamp_min(1).double()) * y.double()
    return torch.maximum(-y.double() - 0.5, mag - bits)


def _reduce_axes(ops: Operands, attrs: Attrs, rank: int) -> list[int] | None:
    """ONNX reduction axes, from the second input or the attribute; None: reduce nothing."""
    axes_in = ops[1] if len(ops) > 1 else None
    axes = [int(a) for a in axes_in.tolist()] if axes_in is not None else list(attrs.get("axes", []))
    if not axes:
        return None if attrs.get("noop_with_empty_axes", 0) else list(range(rank))
    return [a + rank if a < 0 else a for a in axes]


def _log_sum(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """ReduceLogSum takes the log of the sum: the sum must be positive."""
    x = _x(ops)
    axes = _reduce_axes(ops, attrs, x.dim())
    return -(x if axes is None else x.sum(dim=axes, keepdim=True))


def _lp_norm(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """LpNormalization divides by the norm; an exactly zero slice is left alone by every backend."""
    x = _x(ops)
    axis = int(attrs.get("axis", -1))
    p = int(attrs.get("p", 2))
    norm = x.abs().sum(dim=axis, keepdim=True) if p == 1 else (x * x).sum(dim=axis, keepdim=True).sqrt()
    return -norm


def _mvn_variance(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """MeanVarianceNormalization divides by sqrt(E[x^2] - E[x]^2), a cancellation. Even an
    exact 0 (a constant slice, a slice of one element) is unsafe: the spec's epsilon makes
    the result 0 there, onnxruntime, which drops it, gives 0/0."""
    x = _x(ops)
    axes = [a + x.dim() if a < 0 else a for a in attrs.get("axes", [0, 2, 3])]
    mean = x.mean(dim=axes, keepdim=True)
    return -((x * x).mean(dim=axes, keepdim=True) - mean * mean)


def _unit(*xs: torch.Tensor) -> torch.Tensor:
    """max(1, |x|, ...), detached: the scale a rounding difference of these operands has."""
    m = torch.ones((), dtype=xs[0].dtype)
    for x in xs:
        m = torch.maximum(m, x.detach().abs())
    return m


def _periodic_unit(x: torch.Tensor) -> torch.Tensor:
    """`_unit`, capped where the margin would reach a quarter of the period (1): jumps that
    recur every 1 leave no room for more, and a large |x| is there to be searched, not refused."""
    cap = 0.25 / JUMP_MARGIN.get(x.dtype, JUMP_MARGIN[torch.float32])
    return _unit(x).clamp_max(cap)


def _int_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance to the nearest integer, where Floor, Ceil and a cast to
    an integer jump by 1: an operand a few ulps from it lands on either side by backend."""
    x = _x(ops)
    return -_abs_nz(x - torch.round(x).detach()) / _periodic_unit(x)


def _trunc_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """`_int_gap` for a cast to an integer, which truncates toward zero: continuous at 0
    (-0.3 and 0.3 both give 0), so only the nonzero integers are jumps."""
    x = _x(ops)
    r = torch.round(x).detach()
    r = torch.where(r == 0, torch.where(x < 0, -1.0, 1.0).to(x.dtype), r)
    return -_abs_nz(x - r) / _periodic_unit(x)


def _threshold_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance to alpha, where ThresholdedRelu jumps from 0 to x."""
    x = _x(ops)
    return -_abs_nz(x - float(attrs.get("alpha", 1.0))) / _unit(x)


def _shrink_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance to ±lambd, where Shrink jumps by lambd - bias."""
    x, lambd = _x(ops), float(attrs.get("lambd", 0.5))
    return -torch.minimum(_abs_nz(x - lambd), _abs_nz(x + lambd)) / _unit(x)


def _shrink_jumps(ops: Operands, attrs: Attrs) -> bool:
    return _is_float(ops[0]) and float(attrs.get("bias", 0.0)) != float(attrs.get("lambd", 0.5))


def _half_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance to the nearest half-integer, where Round jumps."""
    return _half_gap_of(_x(ops))


def _half_gap_of(v: torch.Tensor) -> torch.Tensor:
    return -_abs_nz(v - torch.floor(v).detach() - 0.5) / _periodic_unit(v)


def _quant_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance of x / scale to the nearest half-integer, where
    QuantizeLinear's round-half-to-even jumps by one quantum; far (-1) where the result
    saturates whichever way it rounds."""
    x = _x(ops)
    v = x / per_axis(_x(ops, 1), attrs, x.dim()).to(x.dtype)
    zero = ops[2] if len(ops) > 2 and ops[2] is not None else torch.zeros((), dtype=torch.uint8)
    info = torch.iinfo(zero.dtype)
    q = v.detach() + per_axis(zero, attrs, x.dim()).to(x.dtype)
    gap = _half_gap_of(v)
    return torch.where((q < info.min - 1) | (q > info.max + 1), -torch.ones_like(gap), gap)


def _dynamic_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """`_quant_gap` under DynamicQuantizeLinear's computed scale."""
    x = _x(ops)
    return _half_gap_of(x / dynamic_range(x)[0])


def _dynamic_zero_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """The zero point is rounded too: -min / scale must not sit next to a half-integer."""
    return _half_gap_of(dynamic_range(_x(ops))[1]).reshape(1)


def _nonempty_float(ops: Operands, attrs: Attrs) -> bool:
    return _is_float(ops[0]) and _x(ops).numel() > 0


def _zero_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus |x|: Sign (and a cast to bool) jump at 0."""
    return -_abs_nz(_x(ops))


def _winner_gap(x: torch.Tensor, k: int, axis: int, largest: bool) -> torch.Tensor:
    """Minus the relative gaps between the `k` best elements along `axis`, best first.

    An exact tie (-1: far from the margin) mostly comes from duplicated values (Expand,
    Tile), which every backend breaks the same way (first index), and the search could never
    pull the copies apart: counting it cost 3.5 points of 10-node success. It can also come
    from rounding (float16 Sigmoid saturating onto 1.0 in one backend only): those false
    positives remain."""
    v = torch.topk(x, k, dim=axis, largest=largest, sorted=True).values
    hi, lo = v.narrow(axis, 0, k - 1), v.narrow(axis, 1, k - 1)
    gap = -_abs_nz(hi - lo) / _unit(hi, lo)
    return torch.where(hi == lo, -torch.ones_like(gap), gap)


def _arg_gap(largest: bool, default_axis: int = 0) -> Violation:
    """ArgMax/ArgMin/Hardmax: the winner must beat the runner-up, or the index (the 1's
    position) depends on rounding."""

    def f(ops: Operands, attrs: Attrs) -> torch.Tensor:
        x = _x(ops)
        return _winner_gap(x, 2, int(attrs.get("axis", default_axis)) % x.dim(), largest)

    return f


def _arg_applies(default_axis: int = 0) -> Callable[[Operands, Attrs], bool]:
    def applies(ops: Operands, attrs: Attrs) -> bool:
        x = _x(ops)
        return x.dim() > 0 and x.shape[int(attrs.get("axis", default_axis)) % x.dim()] >= 2

    return applies


def _topk_count(ops: Operands, attrs: Attrs) -> int:
    """How many leading elements decide TopK's indices: the k chosen and the first left out."""
    if len(ops) < 2 or ops[1] is None:
        return 0
    x, k = _x(ops, 0), _x(ops, 1)
    n = x.shape[int(attrs.get("axis", -1)) % x.dim()] if x.dim() else 0
    return min(int(k.reshape(-1)[0]) + 1, n) if k.numel() else 0


def _topk_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    x = _x(ops)
    axis = int(attrs.get("axis", -1)) % x.dim()
    return _winner_gap(x, _topk_count(ops, attrs), axis, bool(attrs.get("largest", 1)))


OVERFLOW_DTYPES = (torch.int32, torch.int64)
"""Where onnxruntime saturates or traps and torch wraps: overflow is undefined, so neither
is a bug. Narrower integers are left alone (their products overflow at once, and the
backends agree on wrapping them)."""


def _log2_mag(x: torch.Tensor) -> torch.Tensor:
    return torch.log2(x.double().abs().clamp_min(1.0))


def _overflow(log2_mag: torch.Tensor, has_zero: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Positive where an exact product of magnitude 2**log2_mag leaves the type's range."""
    f = log2_mag - (torch.iinfo(dtype).bits - 1) + 0.5
    return torch.where(has_zero, torch.full_like(f, -1.0), f)


def _mul_overflow(ops: Operands, attrs: Attrs) -> torch.Tensor:
    a, b = _x(ops, 0), _x(ops, 1)
    return _overflow(_log2_mag(a) + _log2_mag(b), (a == 0) | (b == 0), a.dtype)


def _prod_overflow(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """ReduceProd's exact product, in log space (so a long slice cannot overflow float64)."""
    x = _x(ops)
    axes = _reduce_axes(ops, attrs, x.dim())
    if axes is None or x.dim() == 0:
        return _overflow(_log2_mag(x), x == 0, x.dtype)
    mag = _log2_mag(x).sum(dim=axes, keepdim=True)
    return _overflow(mag, (x == 0).any(dim=axes, keepdim=True) if axes else x == 0, x.dtype)


def _sum_square_overflow(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """ReduceSumSquare's exact sum of squares (in float64: its log2 is all that matters)."""
    x = _x(ops)
    axes = _reduce_axes(ops, attrs, x.dim())
    sq = x.double() ** 2
    total = sq if axes is None or x.dim() == 0 else sq.sum(dim=axes, keepdim=True)
    return _overflow(torch.log2(total.clamp_min(1.0)), total == 0, x.dtype)


def _small_ints(dtype: torch.dtype) -> list[int]:
    """What an overflowing product's factors are redrawn from: small, and never 0 or of
    mixed signs, so a repaired product or sum never becomes a zero divisor downstream (whose
    own repair would then undo this one, back and forth)."""
    return [1, 2]


def _overflow_check(f: Violation) -> Predicate:
    return Predicate(
        "exact integer result fits its type",
        (0,),
        f,
        integer=True,
        repair=0,
        safe_values=_small_ints,
        applies=lambda ops, a: _x(ops).dtype in OVERFLOW_DTYPES,
        undefined=True,
    )


def _exact_overflow(compute: Callable[[list[torch.Tensor], Attrs], torch.Tensor]) -> Violation:
    """The op's exact result, computed in float64 (integers of the operands' magnitude are
    exact there, and an overflow of int64 is still far beyond its range), against the
    operand type's range: where the reference wraps, a backend may saturate or trap."""

    def f(ops: Operands, attrs: Attrs) -> torch.Tensor:
        args = [t.double() for t in ops if t is not None]
        exact = compute(args, attrs)
        dtype = _x(ops).dtype
        return _overflow(torch.log2(exact.abs().clamp_min(1.0)), exact == 0, dtype)

    return f


def _axis_sum(args: list[torch.Tensor], attrs: Attrs) -> torch.Tensor:
    x = args[0]
    axes = _reduce_axes([x, *args[1:2]], attrs, x.dim())
    return x if axes is None or x.dim() == 0 else x.sum(dim=axes, keepdim=True)


def _cumsum(args: list[torch.Tensor], attrs: Attrs) -> torch.Tensor:
    """The partial sums in either direction (`reverse`); `exclusive` only drops one."""
    x = args[0]
    if not x.dim():
        return x
    axis = int(args[1].reshape(-1)[0]) % x.dim()
    return torch.maximum(x.cumsum(axis).abs(), x.flip(axis).cumsum(axis).abs())


INT_OVERFLOW: dict[str, Callable[[list[torch.Tensor], Attrs], torch.Tensor]] = {
    "Add": lambda a, attrs: a[0] + a[1],
    "Sub": lambda a, attrs: a[0] - a[1],
    "Sum": lambda a, attrs: torch.stack(torch.broadcast_tensors(*a)).sum(dim=0),
    "Neg": lambda a, attrs: -a[0],
    "Abs": lambda a, attrs: a[0].abs(),
    "ReduceSum": _axis_sum,
    "ReduceL1": lambda a, attrs: _axis_sum([a[0].abs(), *a[1:]], attrs),
    "CumSum": _cumsum,
    "MatMul": lambda a, attrs: a[0] @ a[1] if a[0].dim() and a[1].dim() else a[0] * a[1],
}
"""Integer ops whose exact result can leave int32/int64 (overflow is undefined in ONNX)."""


def _jump(name: str, f: Violation, slots: tuple[int, ...] = (0,), **kw: Any) -> Predicate:
    """A discontinuity: only a computed operand (see `same_bits`) can round across it."""
    return Predicate(name, slots, f, inexact_only=True, margins=JUMP_MARGIN, **kw)


def _to_bool(ops: Operands, attrs: Attrs) -> bool:
    return _cast_target(ops, attrs) in (torch.bool, ONNX_BOOL)


ONNX_BOOL = 9


def _float_divisor(name: str) -> Predicate:
    return Predicate(f"{name} != 0", (1,), lambda ops, a: -_abs_nz(_x(ops, 1)), strict=True)


def _int_divisor(name: str) -> Predicate:
    return Predicate(
        f"{name} != 0",
        (1,),
        lambda ops, a: -_x(ops, 1).abs().double(),
        strict=True,
        integer=True,
        repair=1,
        safe_values=_nonzero_ints,
        undefined=True,
    )


CAST: tuple[Predicate, ...] = (
    Predicate(
        "float fits the integer target",
        (0,),
        _cast_range,
        strict=True,
        fixed_margin=0.5,
        applies=lambda ops, a: _int_info(ops, a) is not None,
        undefined=True,
    ),
    Predicate(
        "|x| <= float16 max",
        (0,),
        lambda ops, a: _x(ops).abs() - FLOAT16_MAX,
        fixed_margin=504.0,
        applies=_to_float16,
    ),
    _jump("float not near a nonzero integer", _trunc_gap, applies=lambda ops, a: _int_info(ops, a) is not None),
    _jump("float not near 0", _zero_gap, applies=_to_bool),
)
"""Cast and CastLike: a float must fit an integer target after truncation, or float16."""

UNSAFE: dict[str, tuple[Predicate, ...]] = {
    "Log": (Predicate("x > 0", (0,), lambda ops, a: -_x(ops), strict=True),),
    "Sqrt": (Predicate("x >= 0", (0,), lambda ops, a: -_x(ops)),),
    "Reciprocal": (Predicate("x != 0", (0,), lambda ops, a: -_abs_nz(_x(ops)), strict=True),),
    "Div": (_float_divisor("divisor"), _int_divisor("divisor")),
    "Mul": (_overflow_check(_mul_overflow),),
    "Mod": (_float_divisor("divisor"), _int_divisor("divisor")),
    "Pow": (
        Predicate("base > 0, or != 0 under an integer exponent", (0,), _pow_base, strict=True),
        Predicate("exponent * ln(base) <= limit", (0, 1), _pow_growth, applies=lambda ops, a: _is_float(ops[0])),
        Predicate("base > 0 under a computed exponent", (1,), _pow_base_computed, strict=True, inexact_only=True),
        Predicate(
            "integer exponent >= 0 and no overflow",
            (0, 1),
            _int_pow,
            integer=True,
            repair=1,
            safe_values=lambda dt: [0, 1, 2],
            undefined=True,
        ),
    ),
    "Asin": (Predicate("|x| <= 1", (0,), lambda ops, a: _x(ops).abs() - 1),),
    "Acos": (Predicate("|x| <= 1", (0,), lambda ops, a: _x(ops).abs() - 1),),
    "Atanh": (Predicate("|x| < 1", (0,), lambda ops, a: _x(ops).abs() - 1, strict=True),),
    "Acosh": (Predicate("x >= 1", (0,), lambda ops, a: 1 - _x(ops)),),
    "Exp": (Predicate("x <= growth limit", (0,), _exp_growth),),
    "Softplus": (Predicate("x <= growth limit", (0,), _exp_growth),),
    "Mish": (Predicate("x <= growth limit", (0,), _exp_growth),),
    "Sinh": (Predicate("|x| <= growth limit", (0,), _cosh_growth),),
    "Cosh": (Predicate("|x| <= growth limit", (0,), _cosh_growth),),
    "Tan": (
        Predicate("|x| <= trig limit", (0,), _trig_bound),
        Predicate("cos(x) != 0", (0,), _tan_pole, strict=True),
        Predicate("rounding of x stays within tolerance", (0,), _tan_conditioning, fixed_margin=1.0, inexact_only=True),
    ),
    "Sin": (Predicate("|x| <= trig limit", (0,), _trig_bound),),
    "Cos": (Predicate("|x| <= trig limit", (0,), _trig_bound),),
    "Cast": CAST,
    "CastLike": CAST,
    "BitShift": (
        Predicate(
            "0 <= shift < bits",
            (1,),
            lambda ops, a: torch.maximum(-_x(ops, 1).double(), _x(ops, 1).double() - (_bits(ops[0]) - 1)),
            integer=True,
            repair=1,
            safe_values=_shift_amounts,
            undefined=True,
        ),
    ),
    "BatchNormalization": (Predicate("variance >= 0", (4,), lambda ops, a: -_x(ops, 4)),),
    "ReduceLogSum": (Predicate("sum > 0", (0,), _log_sum, strict=True),),
    "ReduceLogSumExp": (Predicate("x <= growth limit", (0,), _exp_growth),),
    "ReduceProd": (_overflow_check(_prod_overflow),),
    "Floor": (_jump("x not near an integer", _int_gap),),
    "ThresholdedRelu": (_jump("x not near alpha", _threshold_gap),),
    "Shrink": (_jump("x not near ±lambd", _shrink_gap, applies=_shrink_jumps),),
    "OneHot": (_jump("float index not near an integer", _int_gap, applies=lambda ops, a: _is_float(ops[0])),),
    "Ceil": (_jump("x not near an integer", _int_gap),),
    "Round": (_jump("x not near a half-integer", _half_gap),),
    "QuantizeLinear": (_jump("x / scale not near a half-integer", _quant_gap, (0, 1), applies=_nonempty_float),),
    "DynamicQuantizeLinear": (
        _jump("x / scale not near a half-integer", _dynamic_gap, applies=_nonempty_float),
        _jump("zero point not near a half-integer", _dynamic_zero_gap, applies=_nonempty_float),
    ),
    "Sign": (_jump("x not near 0", _zero_gap),),
    "ReduceSumSquare": (_overflow_check(_sum_square_overflow),),
    "ArgMax": (_jump("a clear maximum", _arg_gap(True), applies=_arg_applies()),),
    "ArgMin": (_jump("a clear minimum", _arg_gap(False), applies=_arg_applies()),),
    "Hardmax": (_jump("a clear maximum", _arg_gap(True, -1), applies=_arg_applies(-1)),),
    "TopK": (_jump("no near-ties among the k + 1 best", _topk_gap, applies=lambda o, a: _topk_count(o, a) >= 2),),
    "LpNormalization": (Predicate("norm > 0 or exactly 0", (0,), _lp_norm),),
    "MeanVarianceNormalization": (Predicate("variance > 0", (0,), _mvn_variance, strict=True),),
}


EXACT_RESULT_OPS = frozenset(
    {"Relu", "Sign", "Clip", "Floor", "Ceil", "Round", "Shape", "Size", "ConstantOfShape", "Hardmax", "EyeLike"}
    | {"ThresholdedRelu", "Trilu"}
)
"""Ops whose results on a domain's boundary (0, ±1, a clip bound) are exact in every backend
(Hardmax and EyeLike write literal 0s and 1s, wherever they put them; ThresholdedRelu and
Trilu literal 0s where they drop a value)."""

PASSTHROUGH_OPS = frozenset(
    {
        "Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Slice", "Gather",
        "GatherElements", "GatherND", "Concat", "Split", "Tile", "Expand", "Pad", "Neg", "Abs",
        "Max", "Min", "Where", "ReduceMax", "ReduceMin", "DepthToSpace", "SpaceToDepth", "Compress",
        "ScatterElements", "ScatterND", "Dropout", "MaxPool", "GlobalMaxPool", "TopK", "OneHot",
    }
)  # fmt: skip
"""Ops that only move, select or negate values: their results are exact when their inputs are
(OneHot selects its off/on constants, at positions its indices decide)."""


BOUNDARY_ONLY_OPS = frozenset({"Relu", "Clip", "ThresholdedRelu", "Trilu"})
"""Exact on their boundary (0, a clip bound) only: elsewhere they pass their input through."""

CORRECTLY_ROUNDED_OPS = frozenset({"Cast", "CastLike"})
"""One correctly rounded conversion: the same bits everywhere when the input's bits are."""


def same_bits(op_type: str, inputs_same: Sequence[bool]) -> bool:
    """Whether every result of an op has the same bits in every backend, given its inputs':
    what a discontinuity (Floor, a comparison) needs before a value next to its jump is
    harmless. Stricter than `exact_output`: Relu(x) is only exact where it is 0."""
    if op_type in BOUNDARY_ONLY_OPS or op_type in CORRECTLY_ROUNDED_OPS:
        return all(inputs_same)
    return exact_output(op_type, inputs_same)


def exact_output(op_type: str, inputs_exact: Sequence[bool]) -> bool:
    """Whether an op's results are the same bits in every backend, given its inputs'."""
    return op_type in EXACT_RESULT_OPS or (op_type in PASSTHROUGH_OPS and all(inputs_exact))


def _bits(t: torch.Tensor | None) -> int:
    assert t is not None
    return torch.iinfo(t.dtype).bits


for _op, _compute in INT_OVERFLOW.items():
    UNSAFE[_op] = (*UNSAFE.get(_op, ()), _overflow_check(_exact_overflow(_compute)))


def predicates(op_type: str) -> tuple[Predicate, ...]:
    return UNSAFE.get(op_type, ())
