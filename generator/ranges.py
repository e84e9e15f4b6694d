"""Interval (range) propagation over a growing graph, so infeasible compositions are never built.

The value search can only make an unsafe op safe when its operand *can* reach the op's
valid domain with a margin; Acosh (x >= 1 + δ) after Sigmoid (<= 1), Asin after Cosh
(>= 1), Reciprocal of a wide float16 Softmax (its smallest output is at most 1/N) cannot,
whatever the inputs. The grower asks `feasible` before accepting an insertion and refuses
those, instead of generating models the search must then drop.

Each tensor gets a `Range`: bounds every element lies within, and `low_cap`, a bound the
*smallest* element never exceeds (1/N for a Softmax over N), which is what decides whether
every element can clear a lower bound at once. Rules are conservative: an op or attribute
not modelled gives (-inf, inf), so a range can only make the generator refuse what is
truly impossible. Placeholders (inputs and weights) are unbounded: the search moves them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from generator.dtypes import DType
from generator.graph import GNode, Graph
from generator.ops.base import OpSpec
from generator.values.unsafe import NEEDS_OPS, Need, needs

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

    @property
    def cap(self) -> float:
        return min(self.hi, self.low_cap)


FULL = Range()
Rule = Callable[[OpSpec, list[Range]], Range]

_SLACK = 2.0**-10
"""Relative widening of computed bounds (a backend may round a float16 result by an ulp).
The limits at ±inf (Sigmoid's 0 and 1) are not widened: no rounding goes past them."""


def _mono(f: Callable[[float], float], lo_end: float = -INF, hi_end: float = INF) -> Rule:
    """A nondecreasing elementwise op; `lo_end`/`hi_end` are its values at -inf/+inf."""

    def at(x: float, side: float) -> float:
        if x == -INF:
            return lo_end
        if x == INF:
            return hi_end
        try:
            y = f(x)
        except OverflowError:
            return hi_end if x > 0 else lo_end
        return min(max(y + side * _SLACK * abs(y), lo_end), hi_end)

    def rule(op: OpSpec, ins: list[Range]) -> Range:
        a = ins[0]
        cap = at(a.low_cap, 1.0) if a.low_cap < a.hi else INF
        floor = at(a.high_floor, -1.0) if a.high_floor > a.lo else -INF
        return Range(at(a.lo, -1.0), at(a.hi, 1.0), cap, floor, a.zero and at(0.0, 1.0) == 0.0)

    return rule


def _const(lo: float, hi: float) -> Rule:
    return lambda op, ins: Range(lo, hi)


def _hull(rs: Sequence[Range]) -> Range:
    if not rs:
        return FULL
    return Range(min(r.lo for r in rs), max(r.hi for r in rs), max(r.cap for r in rs))


def _add(op: OpSpec, ins: list[Range]) -> Range:
    return Range(sum(r.lo for r in ins), sum(r.hi for r in ins)) if len(ins) >= 2 else FULL


def _sub(op: OpSpec, ins: list[Range]) -> Range:
    a, b = ins[0], ins[1]
    return Range(a.lo - b.hi, a.hi - b.lo)


def _products(a: Range, b: Range) -> Range:
    ps = [x * y if x and y else 0.0 for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    return FULL if any(math.isnan(p) for p in ps) else Range(min(ps), max(ps))


def _mul(op: OpSpec, ins: list[Range]) -> Range:
    return _products(ins[0], ins[1])


def _div(op: OpSpec, ins: list[Range]) -> Range:
    b = ins[1]
    if b.lo <= 0 <= b.hi:
        return FULL
    inv = Range(1 / b.hi if b.hi != INF else 0.0, 1 / b.lo if b.lo != -INF else 0.0)
    return _products(ins[0], Range(min(inv.lo, inv.hi), max(inv.lo, inv.hi)))


def _abs(op: OpSpec, ins: list[Range]) -> Range:
    a = ins[0]
    if a.lo >= 0:
        return a
    if a.hi <= 0:
        return Range(-a.hi, -a.lo, zero=a.zero)
    return Range(0.0, max(-a.lo, a.hi), zero=a.zero)


def _neg(op: OpSpec, ins: list[Range]) -> Range:
    return Range(-ins[0].hi, -ins[0].lo, zero=ins[0].zero)


def _clip(op: OpSpec, ins: list[Range]) -> Range:
    """Clip's bounds are drawn at emission from [-1, 1] (floats) or [-4, 4] (ints)."""
    a, form = ins[0], getattr(op, "form", None)
    b = 1.0 if op.ins[0].dtype.is_float else 4.0
    if form == "both":
        return Range(-b, b)
    if form == "min":
        return Range(max(a.lo, -b), max(a.hi, b))
    if form == "max":
        return Range(min(a.lo, -b), min(a.hi, b))
    return a if form == "none" else FULL


def _axis_len(op: OpSpec) -> int | None:
    axis = getattr(op, "axis", None)
    if axis is None or not op.inputs:
        return None
    n = op.inputs[0].shape[axis]
    return n if type(n) is int else None


def _softmax(op: OpSpec, ins: list[Range]) -> Range:
    n = _axis_len(op)
    return Range(0.0, 1.0, 1.0 / n if n else INF)


def _hardmax(op: OpSpec, ins: list[Range]) -> Range:
    """One 1 per slice, the rest 0."""
    n = _axis_len(op)
    wide = n is not None and n >= 2
    return Range(0.0, 1.0, 0.0 if wide else INF, 1.0, wide)


def _eye_like(op: OpSpec, ins: list[Range]) -> Range:
    """A 2-D identity (shifted by k) has at most one 1 per row: any two elements include a 0."""
    dims = op.inputs[0].shape if op.inputs else ()
    two = all(type(d) is int for d in dims) and math.prod(dims) >= 2
    return Range(0.0, 1.0, 0.0 if two else INF, zero=two)


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


def _first(op: OpSpec, ins: list[Range]) -> Range:
    return ins[0]


def _first_no_cap(op: OpSpec, ins: list[Range]) -> Range:
    """Selection ops keep bounds, but may drop the smallest element."""
    return Range(ins[0].lo, ins[0].hi)


def _with_zero(op: OpSpec, ins: list[Range]) -> Range:
    a = ins[0]
    return Range(min(a.lo, 0.0), max(a.hi, 0.0), min(a.cap, 0.0))


def _pad(op: OpSpec, ins: list[Range]) -> Range:
    if getattr(op, "mode", "constant") != "constant":
        return _first_no_cap(op, ins)
    return FULL if getattr(op, "value_input", True) else _with_zero(op, ins)


def _sign_of_sum(op: OpSpec, ins: list[Range]) -> Range:
    """Sums keep the sign of their terms."""
    a = ins[0]
    return Range(0.0 if a.lo >= 0 else -INF, 0.0 if a.hi <= 0 else INF)


def _cum_sum(op: OpSpec, ins: list[Range]) -> Range:
    """An exclusive CumSum starts each line with the empty sum, an exact 0."""
    r = _sign_of_sum(op, ins)
    if not getattr(op, "attrs", {}).get("exclusive"):
        return r
    return Range(min(r.lo, 0.0), max(r.hi, 0.0), min(r.cap, 0.0), zero=True)


def _nonneg(op: OpSpec, ins: list[Range]) -> Range:
    return Range(0.0, INF)


def _cast(op: OpSpec, ins: list[Range]) -> Range:
    """Float to int truncates toward zero (monotone); the dtype clamp does the rest."""
    a = ins[0]
    to = getattr(op, "to", None)
    if to is None or to is DType.bool:
        return FULL
    if to.is_float:
        return a
    return Range(
        float(math.trunc(a.lo)) if math.isfinite(a.lo) else a.lo,
        float(math.trunc(a.hi)) if math.isfinite(a.hi) else a.hi,
        zero=a.zero,
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
    "Relu": _mono(lambda x: max(x, 0.0), 0.0, INF),
    "Sign": _mono(lambda x: float((x > 0) - (x < 0)), -1.0, 1.0),
    "Floor": _mono(math.floor, -INF, INF),
    "Ceil": _mono(math.ceil, -INF, INF),
    "Round": _mono(lambda x: float(round(x)), -INF, INF),
    "Asinh": _mono(math.asinh, -INF, INF),
    "Sinh": _mono(math.sinh, -INF, INF),
    "Acosh": _const(0.0, INF),
    "Acos": _const(0.0, math.pi),
    "Asin": _const(-math.pi / 2, math.pi / 2),
    "Sin": _const(-1.0, 1.0),
    "Cos": _const(-1.0, 1.0),
    "Cosh": _const(1.0, INF),
    "HardSigmoid": _const(0.0, 1.0),
    "HardSwish": _const(-0.375, INF),
    "LpNormalization": _const(-1.0, 1.0),
    "Softmax": _softmax,
    "LogSoftmax": _const(-INF, 0.0),
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
    "Max": _minmax(max),
    "Min": _minmax(min),
    "Mean": _mean,
    "Where": _where,
    "Concat": lambda op, ins: _hull(ins),
    "Pad": _pad,
    "ReduceSum": _sign_of_sum,
    "CumSum": _cum_sum,
    "ReduceMean": _first_no_cap,
    "ReduceMax": _first_no_cap,
    "ReduceMin": _first_no_cap,
    "ReduceSumSquare": _nonneg,
    "ReduceL1": _nonneg,
    "ReduceL2": _nonneg,
    "GlobalLpPool": _nonneg,
    "LpPool": _nonneg,
    "ArgMax": _nonneg,
    "ArgMin": _nonneg,
    "Shape": _nonneg,
    "Size": _nonneg,
    "AveragePool": _with_zero,
    "GlobalAveragePool": _first_no_cap,
    "Trilu": _with_zero,
    "CenterCropPad": _with_zero,
    **dict.fromkeys(("Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Tile"), _first),
    **dict.fromkeys(
        ("Slice", "Gather", "GatherElements", "GatherND", "Split", "Compress", "Dropout", "MaxPool", "GlobalMaxPool"),
        _first_no_cap,
    ),
    **dict.fromkeys(("DepthToSpace", "SpaceToDepth", "ReverseSequence", "TopK"), _first_no_cap),
}
"""Output 0's range from the input ranges, per ONNX op_type; absent ops give FULL."""

SAME_FOR_ALL_OUTPUTS = frozenset({"Split"})

_DTYPE_BOUNDS: dict[DType, Range] = {DType.bool: Range(0.0, 1.0), DType.uint8: Range(0.0, 255.0)}


def output_range(op: OpSpec, ins: list[Range], out_dtype: DType, index: int = 0) -> Range:
    """The range of output `index` of `op` given its inputs' (clamped to the dtype's)."""
    rule = RULES.get(op.op_type)
    r = FULL
    if rule is not None and ins and (index == 0 or op.op_type in SAME_FOR_ALL_OUTPUTS):
        r = rule(op, ins)
    bound = _DTYPE_BOUNDS.get(out_dtype)
    if bound is None:
        return r
    lo, hi = max(r.lo, bound.lo), min(r.hi, bound.hi)
    return Range(lo, hi, r.low_cap, r.high_floor, r.zero) if lo <= hi else bound


def tensor_ranges(graph: Graph) -> dict[int, Range]:
    """Every tensor's range (placeholders unbounded), in one pass over the nodes."""
    out: dict[int, Range] = {}
    for node in graph.topological():
        _propagate(graph, node, out)
    return out


def _propagate(graph: Graph, node: GNode, out: dict[int, Range]) -> None:
    ins = [out.get(i, FULL) for i in node.inputs]
    for k, o in enumerate(node.outputs):
        out[o] = output_range(node.op, ins, graph.tensors[o].dtype, k)


def _meets(op: OpSpec, operands: Sequence[Range]) -> bool:
    """Whether operands in these ranges can all clear `op`'s domain with its margin."""
    return all(
        need.slot >= len(operands) or _need_met(need, operands[need.slot])
        for need in needs(op.op_type, op.ins[0].dtype.value)
    )


def _need_met(need: Need, r: Range) -> bool:
    """Whether an operand in range `r` can meet `need` (an exact 0 is an element like any)."""
    if need.nonzero:
        return not (r.zero or (r.hi <= need.lo and r.lo >= -need.lo) or (r.lo >= 0 and r.cap < need.lo))
    if r.hi < need.lo or r.lo > need.hi:
        return False
    if not need.every:
        return True
    return not (r.cap < need.lo or r.high_floor > need.hi or (r.zero and not need.lo <= 0.0 <= need.hi))


@dataclass
class Feasibility:
    """The grower's `feasible` hook: ranges cached per graph state, recomputed after a
    backward insertion changes what a placeholder is."""

    key: tuple[int, ...] = ()
    ranges: dict[int, Range] | None = None
    order: list[GNode] | None = None
    """The graph's nodes in topological order, for the same state as `ranges`."""

    def _ranges(self, graph: Graph) -> dict[int, Range]:
        key = (len(graph.nodes), *graph.placeholders)
        if self.ranges is None or key != self.key:
            self.order = graph.topological()
            self.ranges, self.key = {}, key
            for node in self.order:
                _propagate(graph, node, self.ranges)
        return self.ranges

    def __call__(self, graph: Graph, op: OpSpec, inputs: Sequence[int], target: int | None) -> bool:
        """Forward (`target` None): can `op`'s operands `inputs` meet its domain? Backward:
        can `op`'s output, from fresh unbounded inputs, meet the domains of `target`'s consumers?"""
        if target is None:
            if op.op_type not in NEEDS_OPS:
                return True
            ranges = self._ranges(graph)
            return _meets(op, [ranges.get(i, FULL) for i in inputs])
        if not any(n.op.op_type in NEEDS_OPS for n in graph.nodes):
            return True
        made = output_range(op, [FULL] * max(1, len(op.ins)), graph.tensors[target].dtype)
        if made == FULL:
            return True
        ranges = self._ranges(graph)
        assert self.order is not None
        return _downstream_meets(graph, self.order, target, made, ranges)


def _downstream_meets(graph: Graph, order: list[GNode], target: int, made: Range, ranges: dict[int, Range]) -> bool:
    """Whether every unsafe op downstream of `target` can still meet its domain once `target`
    has range `made`: not only its direct consumers, since Acosh(Mean(x)) with Sign inserted
    backward as x is as infeasible as Acosh(Sign(x))."""
    env = dict(ranges)
    env[target] = made
    changed = {target}
    for node in order:
        if not changed.intersection(node.inputs):
            continue
        if node.op.op_type in NEEDS_OPS and not _meets(node.op, [env.get(i, FULL) for i in node.inputs]):
            return False
        _propagate(graph, node, env)
        changed.update(o for o in node.outputs if env[o] != ranges.get(o, FULL))
    return True
