"""Interval (range) propagation over a growing graph, what `generator.feasibility` reads to
refuse insertions no values could make safe.

Each tensor gets a `Range`: bounds every element lies within, and `low_cap`, a bound the
*smallest* element never exceeds (1/N for a Softmax over N), which is what decides whether
every element can clear a lower bound at once. Rules are conservative: an op or attribute
not modelled gives (-inf, inf), so a range can only make the generator refuse what is
truly impossible. Placeholders (inputs and weights) are unbounded: the search moves them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from generator.binning import Solution
from generator.dtypes import DType
from generator.graph import GNode, Graph
from generator.ops.base import OpSpec
from generator.values.unsafe import needs, same_bits

INF = math.inf


@dataclass(frozen=True)
class Range:
    lo: float = -INF
    hi: float = INF
    low_cap: float = INF
    """The smallest element is at most this (min of it and `hi` is what counts)."""
    high_floor: float = -INF
    """The largest element is at least this (Hardmax's 1): what decides whether every
    element can stay below an upper bound at once."""
    zero: bool = False
    """Some element is exactly 0 whatever the inputs (an exclusive CumSum's first): never a
    divisor."""
    unit_axis: int | None = None
    """Elements are >= 0 and sum to exactly 1 along this (non-negative) axis (Softmax,
    Hardmax): a sum over it is a constant whatever the inputs."""
    integral: bool = False
    """Every element is an integer (Floor's results, any integer type): Asin of one can only
    be given a 0."""
    inexact: bool = field(default=False, compare=False)
    """Backends may round its elements differently (`same_bits` is false): an exact 0 in it
    sits on Floor's and Sign's jumps, where only same-bits operands may sit (an exclusive
    CumSum's first 0 under Ceil). Not compared: equal bounds are the same range to
    callers that test whether a rule narrowed anything."""
    zero_axis: int | None = None
    """Some index along this (non-negative) axis holds a slice of exact 0s (an exclusive
    CumSum's first): a reduction over other axes only has an exact 0 in its result."""

    @property
    def cap(self) -> float:
        return min(self.hi, self.low_cap)

    @property
    def all_zero(self) -> bool:
        """Every element is an exact 0."""
        return self.lo == self.hi == 0.0

    @property
    def point(self) -> bool:
        """One value whatever the inputs (Softmax over one element, Sub(t, t))."""
        return self.lo == self.hi


FULL = Range()
Rule = Callable[[OpSpec, list[Range]], Range]

_SLACK = 2.0**-10
"""Relative widening of computed bounds (a backend may round a float16 result by an ulp).
The limits at ±inf (Sigmoid's 0 and 1) are not widened: no rounding goes past them."""


def _mono(
    f: Callable[[float], float], lo_end: float = -INF, hi_end: float = INF, exact: bool = False, integral: bool = False
) -> Rule:
    """A nondecreasing elementwise op; `lo_end`/`hi_end` are its values at -inf/+inf (and
    past the edges of its domain). `exact`: every backend computes its results alike (Relu,
    Floor), so the bounds are not widened: Floor(Cos(x)) is at most 1, not 1 + 2^-10, which
    is Acosh's 1 + δ. `integral`: its results are integers."""
    slack = 0.0 if exact or integral else _SLACK

    def at(x: float, side: float) -> float:
        if x == -INF:
            return lo_end
        if x == INF:
            return hi_end
        try:
            y = f(x)
        except (OverflowError, ValueError):
            return hi_end if x > 0 else lo_end
        return min(max(y + side * slack * abs(y), lo_end), hi_end)

    def rule(op: OpSpec, ins: list[Range]) -> Range:
        a = ins[0]
        cap = at(a.low_cap, 1.0) if a.low_cap < a.hi else INF
        floor = at(a.high_floor, -1.0) if a.high_floor > a.lo else -INF
        zero = a.zero and at(0.0, 1.0) == 0.0
        return Range(
            at(a.lo, -1.0), at(a.hi, 1.0), cap, floor, zero, integral=integral, zero_axis=a.zero_axis if zero else None
        )

    return rule


def _const(lo: float, hi: float) -> Rule:
    return lambda op, ins: Range(lo, hi)


def _hull(rs: Sequence[Range]) -> Range:
    if not rs:
        return FULL
    return Range(min(r.lo for r in rs), max(r.hi for r in rs), max(r.cap for r in rs))


def _concat(op: OpSpec, ins: list[Range]) -> Range:
    """Every element of every input is kept: the smallest and largest of each, an exact 0."""
    r, cap, floor = _hull(ins), min(x.cap for x in ins), max(x.high_floor for x in ins)
    return Range(r.lo, r.hi, cap, floor, any(x.zero for x in ins), integral=all(x.integral for x in ins))


def _add(op: OpSpec, ins: list[Range]) -> Range:
    return Range(sum(r.lo for r in ins), sum(r.hi for r in ins)) if len(ins) >= 2 else FULL


def _sub(op: OpSpec, ins: list[Range]) -> Range:
    a, b = ins[0], ins[1]
    return Range(a.lo - b.hi, a.hi - b.lo)


def _products(a: Range, b: Range) -> Range:
    ps = [x * y if x and y else 0.0 for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    return FULL if any(math.isnan(p) for p in ps) else Range(min(ps), max(ps))


def _mul(op: OpSpec, ins: list[Range]) -> Range:
    """An exact 0 in either factor stays one (the values are finite)."""
    r = _products(ins[0], ins[1])
    return Range(r.lo, r.hi, zero=ins[0].zero or ins[1].zero) if ins[0].zero or ins[1].zero else r


def _inverse(b: Range) -> Range | None:
    """1/b for a divisor of one sign (a safe one is never 0, so an end at 0 gives ±inf); a
    correctly rounded division is monotone, so no slack. None where b may take either sign."""
    if b.lo < 0 < b.hi or b.all_zero:
        return None
    ends = sorted(1 / x if x not in (0.0, INF, -INF) else (0.0 if x != 0.0 else INF) for x in (b.lo, b.hi))
    if b.hi <= 0:
        ends = sorted(-INF if e == INF else e for e in ends)
    return Range(ends[0], ends[1])


def _div(op: OpSpec, ins: list[Range]) -> Range:
    inv = _inverse(ins[1])
    return FULL if inv is None else _products(ins[0], inv)


def _mod(op: OpSpec, ins: list[Range]) -> Range:
    """Smaller in magnitude than the divisor (a rounded float16 fmod reaches it at most), with
    the dividend's sign (fmod=1, and then no larger than it) or the divisor's (fmod=0):
    Mod(x, Ceil(Clip(x, 0.5, 1))) is in (-1, 1), never an Acosh operand. Of integers by
    Sign(y), it is 0."""
    a, b = ins[0], ins[1]
    m = max(abs(b.lo), abs(b.hi))
    if (not op.ins[0].dtype.is_float or (a.integral and b.integral)) and m <= 1.0:
        # A safe integer divisor of at most 1 in magnitude is ±1, dividing integers exactly.
        return Range(0.0, 0.0, integral=True)
    sign = b
    if getattr(op, "fmod", 1):
        m, sign = min(m, max(abs(a.lo), abs(a.hi))), a
    return Range(0.0 if sign.lo >= 0 else -m, 0.0 if sign.hi <= 0 else m)


def _abs(op: OpSpec, ins: list[Range]) -> Range:
    a = ins[0]
    if a.lo >= 0:
        return a
    if a.hi <= 0:
        return Range(-a.hi, -a.lo, zero=a.zero, integral=a.integral, zero_axis=a.zero_axis)
    return Range(0.0, max(-a.lo, a.hi), zero=a.zero, integral=a.integral, zero_axis=a.zero_axis)


def _neg(op: OpSpec, ins: list[Range]) -> Range:
    """Mirrored: the largest element's floor becomes the smallest one's cap (-LogSoftmax)."""
    a = ins[0]
    return Range(-a.hi, -a.lo, -a.high_floor, -a.low_cap, a.zero, integral=a.integral, zero_axis=a.zero_axis)


def _reciprocal(op: OpSpec, ins: list[Range]) -> Range:
    """1/x of a one-signed x: 1/ReduceProd(Softmax) is at least 1, never an Atanh operand."""
    inv = _inverse(ins[0])
    return FULL if inv is None else inv


def _acos(op: OpSpec, ins: list[Range]) -> Range:
    """Decreasing on [-1, 1]: Acos(0) is pi/2, not a point a jump could sit on."""
    a = ins[0]
    lo, hi = max(a.lo, -1.0), min(a.hi, 1.0)
    if lo > hi:
        return Range(0.0, math.pi)
    return Range(max(0.0, math.acos(hi) * (1 - _SLACK)), min(math.pi, math.acos(lo) * (1 + _SLACK)))


def _clip(op: OpSpec, ins: list[Range]) -> Range:
    """Clip's bounds are drawn with the op, from [-1, 1] (floats) or [-4, 4] (ints); it is
    exact (a min and a max), so Ceil(Clip(x, -1, -0.75)) is 0, never a divisor."""
    a, form = ins[0], getattr(op, "form", None)
    bounds = getattr(op, "value_bounds", None)
    if bounds is not None and form in ("both", "min", "max"):
        lo_b, hi_b = bounds()
        lo_b, hi_b = (lo_b if form != "max" else -INF), (hi_b if form != "min" else INF)
        lo, hi = min(max(a.lo, lo_b), hi_b), min(max(a.hi, lo_b), hi_b)
        return Range(lo, hi, integral=a.integral and all(math.isinf(v) or v.is_integer() for v in (lo_b, hi_b)))
    b = 1.0 if op.ins[0].dtype.is_float else 4.0
    if form == "both":
        return Range(-b, b)
    if form == "min":
        return Range(max(a.lo, -b), max(a.hi, b))
    if form == "max":
        return Range(min(a.lo, -b), min(a.hi, b))
    return a if form == "none" else FULL


def axis_len(op: OpSpec) -> int | None:
    """The length of the axis `op` works along (Softmax's, ArgMax's), where it is known."""
    axis = getattr(op, "axis", None)
    if axis is None or not op.inputs:
        return None
    n = op.inputs[0].shape[axis]
    return n if type(n) is int else None


def _unit_axis(op: OpSpec) -> int | None:
    axis = getattr(op, "axis", None)
    return None if axis is None or not op.inputs else axis % len(op.inputs[0].shape)


def _lp_normalization(op: OpSpec, ins: list[Range]) -> Range:
    """L1 over one element is x/|x|: exactly -1, 0 or 1 (Atanh of it can only be given 0s).
    (L2's sqrt(x*x) is |x| only without overflow, so it keeps the plain bounds.)"""
    one = axis_len(op) == 1 and getattr(op, "p", 2) == 1
    return Range(-1.0, 1.0, integral=one)


def _softmax(op: OpSpec, ins: list[Range]) -> Range:
    """Over one element, exactly 1: exp(x - max) is exp(0)."""
    n = axis_len(op)
    if n == 1:
        return Range(1.0, 1.0)
    return Range(0.0, 1.0, 1.0 / n if n else INF, unit_axis=_unit_axis(op))


def _hardmax(op: OpSpec, ins: list[Range]) -> Range:
    """One 1 per slice, the rest 0."""
    n = axis_len(op)
    if n == 1:
        return Range(1.0, 1.0)
    wide = n is not None and n >= 2
    return Range(0.0, 1.0, 0.0 if wide else INF, 1.0, wide, _unit_axis(op))


def _bounded_by(lower: Callable[[float], float], upper: Callable[[float], float]) -> Rule:
    """A nondecreasing op whose attributes are drawn later: `lower`/`upper` bound its value
    at x over every attribute it may get (both nondecreasing in x)."""

    def rule(op: OpSpec, ins: list[Range]) -> Range:
        a = ins[0]
        cap = upper(a.low_cap) if a.low_cap < a.hi else INF
        floor = lower(a.high_floor) if a.high_floor > a.lo else -INF
        return Range(lower(a.lo), upper(a.hi), cap, floor)

    return rule


def _exp_m1(x: float) -> float:
    return math.expm1(x) if x > -700 else -1.0


# Attribute ranges as generator/ops/elementwise.py draws them: LeakyRelu alpha in
# [0.01, 0.5], Elu alpha in [0.1, 2], Celu alpha in [0.2, 2], Selu alpha in [0.5, 2] and
# gamma in [0.5, 1.5]. Each is the identity (Selu: gamma times it) for x >= 0.
_LEAKY_RELU = _bounded_by(lambda x: x if x >= 0 else 0.5 * x, lambda x: x if x >= 0 else 0.01 * x)
_ELU = _bounded_by(lambda x: x if x >= 0 else 2.0 * _exp_m1(x), lambda x: x if x >= 0 else 0.1 * _exp_m1(x))
_CELU = _bounded_by(lambda x: x if x >= 0 else max(x, -2.0), lambda x: x if x >= 0 else 0.0)
_SELU = _bounded_by(lambda x: 0.5 * x if x >= 0 else 3.0 * _exp_m1(x), lambda x: 1.5 * x if x >= 0 else 0.0)


def _thresholded_relu(op: OpSpec, ins: list[Range]) -> Range:
    """x where x > alpha, else an exact 0; alpha is drawn in [-0.5, 1] (generator.ops.elementwise),
    so every element is 0 or an operand element of at least -0.5: ThresholdedRelu of a
    Hardmax is 0 or 1, never an Acosh operand."""
    a = ins[0]
    lo = 0.0 if a.hi <= -0.5 else min(0.0, max(a.lo, -0.5))
    floor = a.high_floor if a.high_floor > 1.0 else -INF
    return Range(lo, max(a.hi, 0.0), high_floor=floor, zero=a.zero, integral=a.integral)


def _cosh(op: OpSpec, ins: list[Range]) -> Range:
    """Even, increasing in |x|: Cosh of Ceil's exact 1s is cosh(1), not anything from 1 up."""
    near, far = _magnitudes(ins[0])

    def c(x: float) -> float:
        try:
            return math.cosh(x)
        except OverflowError:
            return INF

    return Range(max(1.0, c(near) * (1 - _SLACK)), c(far) * (1 + _SLACK) if far < INF else INF)


def _first(op: OpSpec, ins: list[Range]) -> Range:
    """Same elements; a layout change moves the axis a Softmax summed to 1 over."""
    a = ins[0]
    if op.op_type in ("Identity", "Dropout"):
        return a
    # Tiling repeats every slice in place: an all-0 one stays along its axis.
    keep = a.zero_axis if op.op_type == "Tile" else None
    return Range(a.lo, a.hi, a.low_cap, a.high_floor, a.zero, integral=a.integral, zero_axis=keep)


def _first_no_cap(op: OpSpec, ins: list[Range]) -> Range:
    """Selection ops keep bounds, but may drop the smallest element."""
    return Range(ins[0].lo, ins[0].hi, integral=ins[0].integral)


def _with_zero(op: OpSpec, ins: list[Range]) -> Range:
    a = ins[0]
    return Range(min(a.lo, 0.0), max(a.hi, 0.0), min(a.cap, 0.0))


def _pad(op: OpSpec, ins: list[Range]) -> Range:
    """Without its solution: the constant, if any, joins the bounds (a padded side may be 0)."""
    a = ins[0]
    if getattr(op, "mode", "constant") != "constant":
        return _first_no_cap(op, ins)
    v = _pad_constant(op)
    return FULL if v is None else Range(min(a.lo, v), max(a.hi, v), integral=a.integral and v.is_integer())


def _pad_constant(op: OpSpec) -> float | None:
    """The value a constant Pad writes (0 unless given; drawn with the op, generator.ops.shape)."""
    if not getattr(op, "value_input", False):
        return 0.0
    value = getattr(op, "value", None)
    return float(value) if value is not None else None


def _pad_solved(op: OpSpec, sol: Solution, ins: list[Range]) -> Range:
    """A constant Pad that grows some side holds its constant: Log(Pad(Exp(x), value -7))
    is refused. A crop may drop the input's extremes, so only the constant's are kept."""
    r = _pad(op, ins)
    v = _pad_constant(op)
    if getattr(op, "mode", "constant") != "constant" or v is None:
        return r
    sides = [(b, sb) for b, (sb, _) in zip(op.begin, op.signs, strict=True)]  # type: ignore[attr-defined]
    sides += [(e, se) for e, (_, se) in zip(op.end, op.signs, strict=True)]  # type: ignore[attr-defined]
    if not any(sign > 0 and sol.eval(pad) > 0 for pad, sign in sides):
        return _first_no_cap(op, ins)
    if any(sign < 0 and sol.eval(pad) > 0 for pad, sign in sides):
        return Range(r.lo, r.hi, v, v, v == 0.0, integral=r.integral)
    # Nothing cropped: the input's elements, an exact 0 too, are all kept.
    a = ins[0]
    zero = v == 0.0 or a.zero or a.all_zero
    return Range(r.lo, r.hi, min(v, a.cap), max(v, a.high_floor), zero, integral=r.integral)


def _conv_solved(op: OpSpec, sol: Solution, ins: list[Range]) -> Range:
    """A Conv without bias whose first or last window (along some spatial axis) lies wholly
    in the padding writes exact 0s there: Log(Conv(x, w, pads 138)) can never be safe."""
    if getattr(op, "bias", True) or getattr(op, "auto_pad", "NOTSET") != "NOTSET" or getattr(op, "ceil_mode", False):
        return FULL
    n, dims, pads = getattr(op, "n", 0), op.inputs[0].shape, getattr(op, "pads", [])
    for i in range(n):
        k, s, d = (sol.eval(getattr(op, f)[i]) for f in ("kernel", "strides", "dilations"))
        pb, pe, x = sol.eval(pads[i]), sol.eval(pads[i + n]), sol.eval(dims[2 + i])
        out = (x + pb + pe - d * (k - 1) - 1) // s + 1
        if d * (k - 1) < pb or (out - 1) * s > pb + x - 1:
            return Range(zero=True)
    return FULL


SolvedRule = Callable[[OpSpec, Solution, list[Range]], Range]
SOLVED_RULES: dict[str, SolvedRule] = {"Pad": _pad_solved, "Conv": _conv_solved}
"""Rules that read the op's solved attribute values (pads, kernels), from its node's solution."""


def _average_pool(op: OpSpec, ins: list[Range]) -> Range:
    """Every window holds a real cell (pads stay below the kernel); counting the padding
    scales an average toward 0, never past it, and never makes it 0 by itself."""
    a = ins[0]
    if not getattr(op, "count_include_pad", 1):
        return Range(a.lo, a.hi)
    return Range(min(a.lo, 0.0), max(a.hi, 0.0))


def _sign_of_sum(op: OpSpec, ins: list[Range]) -> Range:
    """Sums keep the sign of their terms."""
    a = ins[0]
    return Range(0.0 if a.lo >= 0 else -INF, 0.0 if a.hi <= 0 else INF)


def _cum_sum(op: OpSpec, ins: list[Range]) -> Range:
    """An exclusive CumSum starts each line with the empty sum, an exact 0: a whole slice
    along its axis is 0s."""
    r = _sign_of_sum(op, ins)
    if not getattr(op, "attrs", {}).get("exclusive"):
        return r
    axis, rank = getattr(op, "axis", None), len(op.inputs[0].shape) if op.inputs else 0
    zero_axis = axis % rank if type(axis) is int and rank else None
    return Range(min(r.lo, 0.0), max(r.hi, 0.0), min(r.cap, 0.0), zero=True, zero_axis=zero_axis)


def _zero_slice_kept(op: OpSpec, a: Range, r: Range) -> Range:
    """A reduction over axes that miss an all-0 slice's axis reduces part of that slice
    alone: its result there is an exact 0 (Sum, Max, Prod, norms of 0s are 0)."""
    if a.zero_axis is None or not op.inputs:
        return r
    rank = len(op.inputs[0].shape)
    axes = {x % rank for x in getattr(op, "axes", None) or []} if rank else set()
    if not axes or a.zero_axis in axes:
        return r
    keep = a.zero_axis if getattr(op, "keepdims", True) else a.zero_axis - sum(x < a.zero_axis for x in axes)
    lo, hi = min(r.lo, 0.0), max(r.hi, 0.0)
    return Range(lo, hi, min(r.low_cap, 0.0), max(r.high_floor, 0.0), True, integral=r.integral, zero_axis=keep)


def _zeroing(rule: Rule) -> Rule:
    """`rule` for a reduction that maps all-0 groups to 0."""
    return lambda op, ins: _zero_slice_kept(op, ins[0], rule(op, ins))


def _reduced(op: OpSpec) -> tuple[list[int], int | None]:
    """The axes a Reduce* op sums over (none for noop_with_empty_axes) and how many elements
    each output reads (None while a dim is symbolic)."""
    axes = list(getattr(op, "axes", None) or [])
    dims = [op.inputs[0].shape[a] for a in axes] if op.inputs else []
    return axes, math.prod(dims) if all(type(d) is int for d in dims) else None


def _scaled(r: Range, n: float) -> Range:
    return Range(r.lo * n if r.lo > -INF else -INF, r.hi * n if r.hi < INF else INF)


def _reduce_sum(op: OpSpec, ins: list[Range]) -> Range:
    """Sums of a Softmax or Hardmax over their axis are constants: every slice adds up to 1."""
    a = ins[0]
    axes, n = _reduced(op)
    if not axes or n == 1:
        return Range(a.lo, a.hi, a.low_cap, a.high_floor, a.zero)
    if n is not None and a.unit_axis in axes:
        n_axis = op.inputs[0].shape[a.unit_axis]
        assert type(n_axis) is int
        return Range(n / n_axis, n / n_axis)
    return _scaled(a, n) if n is not None else _sign_of_sum(op, ins)


def _reduce_mean(op: OpSpec, ins: list[Range]) -> Range:
    r = _reduce_sum(op, ins)
    _, n = _reduced(op)
    return r if n is None or n <= 1 else _scaled(r, 1.0 / n)


def _reduce_l1(op: OpSpec, ins: list[Range]) -> Range:
    """The sum itself for an input that is never negative."""
    return _reduce_sum(op, ins) if ins[0].lo >= 0 else Range(0.0, INF)


def _reduce_extreme(op: OpSpec, ins: list[Range]) -> Range:
    """ReduceMax's largest result is the input's largest element (its floor stays), ReduceMin's
    smallest the input's smallest (its cap stays): ReduceMax of a Hardmax has a 1."""
    axes, n = _reduced(op)
    a = ins[0]
    if not axes or n == 1:
        return Range(a.lo, a.hi, a.low_cap, a.high_floor, a.zero, integral=a.integral)
    if op.op_type == "ReduceMax":
        return Range(a.lo, a.hi, high_floor=a.high_floor, integral=a.integral)
    return Range(a.lo, a.hi, low_cap=a.low_cap, integral=a.integral)


def _log_sum_exp(op: OpSpec, ins: list[Range]) -> Range:
    """log(n) above the inputs' bounds at most and at least: n equal terms add exactly log(n),
    so Atanh(ReduceLogSumExp(Tanh(x))) over e.g. 195 elements can never see |x| < 1."""
    a = ins[0]
    _, n = _reduced(op)
    if n is None:
        return Range(a.lo, INF)
    shift = math.log(n) if n >= 1 else 0.0
    lo = a.lo + shift - _SLACK * (abs(a.lo + shift) + 1) if a.lo > -INF else -INF
    hi = a.hi + shift + _SLACK * (abs(a.hi + shift) + 1) if a.hi < INF else INF
    return Range(lo, hi)


def _one_hot(op: OpSpec, ins: list[Range]) -> Range:
    """Only the off and on values; with two classes or more every slice holds an off one."""
    off, on = getattr(op, "off_on", (-INF, INF))
    depth = getattr(op, "depth", None)
    if type(depth) is not int or depth < 2:
        return Range(min(off, on), max(off, on))
    return Range(min(off, on), max(off, on), off, off, off == 0.0)


def _trilu(op: OpSpec, ins: list[Range]) -> Range:
    """Masked elements are exact 0s; with every element masked, the output is all 0."""
    rows, cols = op.inputs[0].shape[-2:] if op.inputs else (None, None)
    k_of = getattr(op, "k", None)
    if type(rows) is not int or type(cols) is not int or k_of is None:
        return _with_zero(op, ins)
    k = k_of(rows, cols)
    upper = getattr(op, "upper", 1)
    # Offsets j - i run from 1 - rows to cols - 1; upper keeps those >= k, lower those <= k.
    none_kept = k > cols - 1 if upper else k < 1 - rows
    some_masked = k > 1 - rows if upper else k < cols - 1
    if none_kept:
        return Range(0.0, 0.0)
    if not some_masked:
        return _first(op, ins)
    r = _with_zero(op, ins)
    # Upper with k >= 1 masks all of column 0, lower with k <= -1 all of row 0.
    rank = len(op.inputs[0].shape)
    line = rank - 1 if upper and k >= 1 else rank - 2 if not upper and k <= -1 else None
    return Range(r.lo, r.hi, r.low_cap, zero=True, zero_axis=line)


def _eye_like(op: OpSpec, ins: list[Range]) -> Range:
    """A 2-D identity (shifted by k) has at most one 1 per row: any two elements include a 0;
    shifted past either edge it is all 0."""
    dims = op.inputs[0].shape if op.inputs else ()
    if len(dims) == 2 and all(type(d) is int for d in dims):
        rows, cols = dims
        if not -rows < getattr(op, "k", 0) < cols:
            return Range(0.0, 0.0)
    two = all(type(d) is int for d in dims) and math.prod(dims) >= 2
    return Range(0.0, 1.0, 0.0 if two else INF, zero=two)


def _arg_index(op: OpSpec, ins: list[Range]) -> Range:
    """An index along an axis of one element is 0."""
    return Range(0.0, 0.0) if axis_len(op) == 1 else Range(0.0, INF)


def _norm_of(op: OpSpec, ins: list[Range]) -> Range:
    """Lp norms and sums of squares: never negative, and 0 for an all-0 input."""
    a = ins[0]
    return Range(0.0, 0.0) if a.all_zero else Range(0.0, INF)


def _magnitudes(a: Range) -> tuple[float, float]:
    """The smallest and largest |x| over the range."""
    far = max(abs(a.lo), abs(a.hi))
    return (0.0 if a.lo <= 0.0 <= a.hi else min(abs(a.lo), abs(a.hi))), far


def _lp_pool(op: OpSpec, ins: list[Range]) -> Range:
    """Every window holds a real cell (pads stay below the kernel; not with ceil_mode, whose
    last window may lie in the padding), and a p-norm is at least its largest term: at
    least the smallest |x|. Asin(LpPool(Mean(1, cosh 1))) is never safe."""
    a = ins[0]
    if a.all_zero:
        return Range(0.0, 0.0)
    if getattr(op, "ceil_mode", False):
        return Range(0.0, INF)
    return Range(_magnitudes(a)[0] * (1 - _SLACK), INF)


def _global_lp_pool(op: OpSpec, ins: list[Range]) -> Range:
    """(sum over K cells of |x|^p)^(1/p): within K^(1/p) times the smallest and largest |x|."""
    a = ins[0]
    dims = _dims(op)
    if a.all_zero:
        return Range(0.0, 0.0)
    if dims is None or len(dims) < 3:
        return Range(0.0, INF)
    scale = math.prod(dims[2:]) ** (1.0 / getattr(op, "p", 2))
    m, big = _magnitudes(a)
    return Range(m * scale * (1 - _SLACK), big * scale * (1 + _SLACK) if big < INF else INF)


def _reduce_log_sum(op: OpSpec, ins: list[Range]) -> Range:
    r = _reduce_sum(op, ins)
    return Range(_log(r.lo), _log(r.hi) if r.hi < INF else INF) if r.lo >= 0 else FULL


def _reduce_prod(op: OpSpec, ins: list[Range]) -> Range:
    """Products of n factors in [lo, hi] with 0 <= lo: within [lo^n, hi^n]; over a Softmax's
    axis (elements summing to 1), at most m^-m for an axis of m, by AM-GM: a product that
    underflows in float32 for m of 26 or more. An exact 0 zeroes its group's product."""
    a = ins[0]
    axes, n = _reduced(op)
    if not axes or n == 1:
        return _reduce_extreme(op, ins)
    if n is None or a.lo < 0:
        # The product over the group holding an exact 0 is exactly 0; factors of at most 1
        # in magnitude (Sign's) keep it at most 1 (rounding never passes 1).
        small = max(-a.lo, a.hi) <= 1.0
        return Range(-1.0 if small else -INF, 1.0 if small else INF, zero=a.zero)
    hi = _power(a.hi, n)
    if a.unit_axis in axes:
        m = op.inputs[0].shape[a.unit_axis]
        assert type(m) is int
        hi = min(hi, _power(float(m), -m))
    return Range(_power(a.lo, n), hi, zero=a.zero)


def _power(x: float, n: int) -> float:
    try:
        return x**n
    except OverflowError:
        return INF


def _prelu(op: OpSpec, ins: list[Range]) -> Range:
    """The identity where x is never negative, whatever the slope."""
    return ins[0] if ins[0].lo >= 0 else FULL


def _dims(op: OpSpec) -> list[int] | None:
    dims = list(op.inputs[0].shape) if op.inputs else None
    return dims if dims is not None and all(type(d) is int for d in dims) else None


def _shape(op: OpSpec, ins: list[Range]) -> Range:
    """Static dims: bounded by the smallest and largest (whatever start/end select)."""
    dims = _dims(op)
    return Range(float(min(dims)), float(max(dims))) if dims else Range(0.0, INF)


def _size(op: OpSpec, ins: list[Range]) -> Range:
    dims = _dims(op)
    return Range(float(math.prod(dims)), float(math.prod(dims))) if dims is not None else Range(0.0, INF)


def _mvn(op: OpSpec, ins: list[Range]) -> Range:
    """Centred: each slice's smallest element is at most 0 and its largest at least 0, so no
    Log or Sqrt can take all of it."""
    return Range(-INF, INF, 0.0, 0.0)


def _log_softmax(op: OpSpec, ins: list[Range]) -> Range:
    """Each slice's largest element is at least -log(n) (its Softmax is at least 1/n), so
    -LogSoftmax over two elements has one at most log 2 < 1, never all Acosh operands."""
    n = axis_len(op)
    if n == 1:
        return Range(0.0, 0.0)
    floor = -math.log(n) * (1 + _SLACK) if n else -INF
    return Range(-INF, 0.0, high_floor=floor)


def _contraction(op: OpSpec, ins: list[Range]) -> Range:
    """MatMul and Einsum sum products with one factor from every operand: an all-0 operand
    (an EyeLike shifted off its matrix, Sub(t, t)) makes every result an exact 0."""
    return Range(0.0, 0.0) if any(r.all_zero for r in ins) else FULL


def _scatter(op: OpSpec, ins: list[Range]) -> Range:
    """Without a reduction every element is a data or an update element; the last update
    written to each index survives, so some update element is always there."""
    if getattr(op, "reduction", None) not in ("none", "max", "min") or len(ins) < 2:
        return FULL
    d, u = ins[0], ins[1]
    if getattr(op, "reduction", None) != "none":
        return Range(min(d.lo, u.lo), max(d.hi, u.hi))
    return Range(min(d.lo, u.lo), max(d.hi, u.hi), max(d.cap, u.cap), min(d.high_floor, u.high_floor))


def _nonneg(op: OpSpec, ins: list[Range]) -> Range:
    return Range(0.0, INF)


def _cast(op: OpSpec, ins: list[Range]) -> Range:
    """Float to int truncates toward zero (monotone); the dtype clamp does the rest."""
    a = ins[0]
    to = getattr(op, "to", None)
    if to is None or to is DType.bool:
        return FULL
    if to.is_float:
        return Range(a.lo, a.hi, a.low_cap, a.high_floor, a.zero, integral=a.integral, zero_axis=a.zero_axis)
    return Range(
        float(math.trunc(a.lo)) if math.isfinite(a.lo) else a.lo,
        float(math.trunc(a.hi)) if math.isfinite(a.hi) else a.hi,
        zero=a.zero,
        zero_axis=a.zero_axis,
    )


def _minmax(pick: Callable[..., float]) -> Rule:
    return lambda op, ins: Range(pick(r.lo for r in ins), pick(r.hi for r in ins))


def _mean(op: OpSpec, ins: list[Range]) -> Range:
    return Range(sum(r.lo for r in ins) / len(ins), sum(r.hi for r in ins) / len(ins))


def _where(op: OpSpec, ins: list[Range]) -> Range:
    return _hull(ins[1:3]) if len(ins) >= 3 else FULL


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -INF


def _sqrt(x: float) -> float:
    return math.sqrt(max(x, 0.0))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x > -700 else 0.0


RULES: dict[str, Rule] = {
    "Sigmoid": _mono(_sigmoid, 0.0, 1.0),
    "Tanh": _mono(math.tanh, -1.0, 1.0),
    "Atan": _mono(math.atan, -math.pi / 2, math.pi / 2),
    "Erf": _mono(math.erf, -1.0, 1.0),
    "Softsign": _mono(lambda x: x / (1 + abs(x)), -1.0, 1.0),
    "Exp": _mono(math.exp, 0.0, INF),
    "Softplus": _mono(lambda x: math.log1p(math.exp(x)) if x < 30 else x, 0.0, INF),
    "Sqrt": _mono(_sqrt, 0.0, INF),
    "Log": _mono(_log, -INF, INF),
    "Relu": _mono(lambda x: max(x, 0.0), 0.0, INF, exact=True),
    "Sign": _mono(lambda x: float((x > 0) - (x < 0)), -1.0, 1.0, integral=True),
    "Floor": _mono(math.floor, -INF, INF, integral=True),
    "Ceil": _mono(math.ceil, -INF, INF, integral=True),
    "Round": _mono(lambda x: float(round(x)), -INF, INF, integral=True),
    "Asinh": _mono(math.asinh, -INF, INF),
    "Sinh": _mono(math.sinh, -INF, INF),
    "Acosh": _const(0.0, INF),
    "Acos": _acos,
    "Asin": _mono(math.asin, -math.pi / 2, math.pi / 2),
    "Atanh": _mono(math.atanh, -INF, INF),
    "Sin": _const(-1.0, 1.0),
    "Cos": _const(-1.0, 1.0),
    "Cosh": _cosh,
    "ThresholdedRelu": _thresholded_relu,
    "HardSigmoid": _const(0.0, 1.0),
    "HardSwish": _const(-0.375, INF),
    "LpNormalization": _lp_normalization,
    "Softmax": _softmax,
    "LogSoftmax": _log_softmax,
    "Hardmax": _hardmax,
    "EyeLike": _eye_like,
    "LeakyRelu": _LEAKY_RELU,
    "Elu": _ELU,
    "Celu": _CELU,
    "Selu": _SELU,
    "Abs": _abs,
    "Neg": _neg,
    "Clip": _clip,
    "Cast": _cast,
    "Add": _add,
    "Sum": _add,
    "Sub": _sub,
    "Mul": _mul,
    "Div": _div,
    "Mod": _mod,
    "Max": _minmax(max),
    "Min": _minmax(min),
    "Mean": _mean,
    "Where": _where,
    "Concat": _concat,
    "Pad": _pad,
    "ReduceSum": _zeroing(_reduce_sum),
    "ReduceL1": _zeroing(_reduce_l1),
    "ReduceLogSumExp": _log_sum_exp,
    "ScatterND": _scatter,
    "MatMul": _contraction,
    "Einsum": _contraction,
    "OneHot": _one_hot,
    "ScatterElements": _scatter,
    "CastLike": _cast,
    "CumSum": _cum_sum,
    "ReduceMean": _zeroing(_reduce_mean),
    "ReduceMax": _zeroing(_reduce_extreme),
    "ReduceMin": _zeroing(_reduce_extreme),
    "ReduceSumSquare": _zeroing(_norm_of),
    "ReduceLogSum": _reduce_log_sum,
    "ReduceProd": _zeroing(_reduce_prod),
    "PRelu": _prelu,
    "ReduceL2": _zeroing(_norm_of),
    "GlobalLpPool": _global_lp_pool,
    "LpPool": _lp_pool,
    "ArgMax": _arg_index,
    "ArgMin": _arg_index,
    "Shape": _shape,
    "Reciprocal": _reciprocal,
    "Size": _size,
    "MeanVarianceNormalization": _mvn,
    "AveragePool": _average_pool,
    "GlobalAveragePool": _first_no_cap,
    "Trilu": _trilu,
    "CenterCropPad": _with_zero,
    **dict.fromkeys(
        ("Identity", "Dropout", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Tile"), _first
    ),
    **dict.fromkeys(
        ("Slice", "Gather", "GatherElements", "GatherND", "Split", "Compress", "MaxPool", "GlobalMaxPool"),
        _first_no_cap,
    ),
    # Permutations: every element stays (an exact 0 too).
    **dict.fromkeys(("DepthToSpace", "SpaceToDepth", "ReverseSequence"), _first),
    "TopK": _first_no_cap,
}
"""Output 0's range from the input ranges, per ONNX op_type; absent ops give FULL."""

SAME_FOR_ALL_OUTPUTS = frozenset({"Split"})

SAME_OPERANDS: dict[str, float] = {
    **dict.fromkeys(("Sub", "Mod", "Xor", "BitwiseXor", "Greater", "Less"), 0.0),
    **dict.fromkeys(("Div", "Equal", "GreaterOrEqual", "LessOrEqual"), 1.0),
}
"""The value of a binary op applied to one tensor twice (the grower may pick it for both
operands): Sub(t, t) is an exact 0 everywhere, whatever t is. (Div and Mod of a zero t are
the divisor's problem, refused on their own.)"""

ZERO_OF_SAME = frozenset({"Add", "Sum", "Mean", "Max", "Min", "Mul"})
"""Binary ops that map (0, 0) to 0: applied to one tensor twice they keep its exact 0
(Sum(t, t) of an exclusive CumSum t still holds its first 0)."""

_DTYPE_BOUNDS: dict[DType, Range] = {DType.bool: Range(0.0, 1.0), DType.uint8: Range(0.0, 255.0)}


def output_range(op: OpSpec, ins: list[Range], out_dtype: DType, index: int = 0, sol: Solution | None = None) -> Range:
    """The range of output `index` of `op` given its inputs' (clamped to the dtype's);
    `sol`, the op's solution, lets rules read its solved attributes."""
    r = _output_range(op, ins, out_dtype, index, sol)
    return _with_exactness(op, ins, r)


def _with_exactness(op: OpSpec, ins: list[Range], r: Range) -> Range:
    """Marks `r` inexact as the value search does: per tensor, by `same_bits`."""
    inexact = not same_bits(op.op_type, [not x.inexact for x in ins])
    return r if r.inexact == inexact else replace(r, inexact=inexact)


def _output_range(op: OpSpec, ins: list[Range], out_dtype: DType, index: int, sol: Solution | None) -> Range:
    rule = RULES.get(op.op_type)
    solved = SOLVED_RULES.get(op.op_type) if sol is not None else None
    r = FULL
    if solved is not None and sol is not None and ins and index == 0:
        r = _solved(solved, op, sol, ins)
    elif rule is not None and ins and (index == 0 or op.op_type in SAME_FOR_ALL_OUTPUTS):
        r = rule(op, ins)
    if not out_dtype.is_float and not r.integral:
        r = replace(r, integral=True)
    bound = _DTYPE_BOUNDS.get(out_dtype)
    if bound is None:
        return r
    lo, hi = max(r.lo, bound.lo), min(r.hi, bound.hi)
    return replace(r, lo=lo, hi=hi, integral=True) if lo <= hi else bound


def _solved(rule: SolvedRule, op: OpSpec, sol: Solution, ins: list[Range]) -> Range:
    """A solved rule, or the plain one where some term was never solved."""
    try:
        return rule(op, sol, ins)
    except (ValueError, AttributeError, TypeError):
        plain = RULES.get(op.op_type)
        return plain(op, ins) if plain is not None else FULL


def narrowed(op: OpSpec, slot: int, r: Range) -> Range:
    """The part of operand `slot`'s range the value search leaves it: inside the op's domain
    with its margin, off the op's jumps. An integer operand of Asin can then only be 0, and
    Asin of it only 0: Div(Asin(Round(x)), ...) is refused as a zero divisor.
    """
    lo, hi = r.lo, r.hi
    for need in needs(op.op_type, op.ins[0].dtype.value) if op.ins else ():
        if need.slot == slot and not need.nonzero:
            lo, hi = max(lo, need.lo), min(hi, need.hi)
    if r.integral:
        lo, hi = float(math.ceil(lo)) if math.isfinite(lo) else lo, float(math.floor(hi)) if math.isfinite(hi) else hi
    elif slot == 0 and op.op_type in ("Floor", "Ceil"):
        # Integer bounds cannot be reached: the operand keeps off integers.
        hi = math.nextafter(hi, -INF) if math.isfinite(hi) and hi == math.floor(hi) else hi
        lo = math.nextafter(lo, INF) if math.isfinite(lo) and lo == math.floor(lo) else lo
    if (lo, hi) == (r.lo, r.hi) or lo > hi:
        return r
    zero = r.zero and lo <= 0.0 <= hi
    keep = r.zero_axis if zero else None
    return Range(lo, hi, min(r.low_cap, hi), max(r.high_floor, lo), zero, r.unit_axis, r.integral, r.inexact, keep)


def tensor_ranges(graph: Graph) -> dict[int, Range]:
    """Every tensor's range (placeholders unbounded), in one pass over the nodes."""
    out: dict[int, Range] = {}
    for node in graph.topological():
        propagate(graph, node, out)
    return out


def propagate(graph: Graph, node: GNode, out: dict[int, Range]) -> None:
    """Set the ranges of `node`'s outputs in `out` from those of its inputs."""
    ins = [narrowed(node.op, k, out.get(i, FULL)) for k, i in enumerate(node.inputs)]
    same = len(node.inputs) >= 2 and len(set(node.inputs)) == 1
    for k, o in enumerate(node.outputs):
        fixed = SAME_OPERANDS.get(node.op.op_type) if same and k == 0 else None
        if fixed is not None:
            out[o] = _with_exactness(node.op, ins, Range(fixed, fixed))
        else:
            out[o] = output_range(node.op, ins, graph.tensors[o].dtype, k, node.solution)
        if same and k == 0 and ins[0].zero and node.op.op_type in ZERO_OF_SAME and not out[o].zero:
            out[o] = replace(out[o], zero=True)
