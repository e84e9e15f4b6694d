"""Whether an insertion leaves every unsafe op solvable, from the tensors' ranges.

The value search can only make an unsafe op safe when its operand *can* reach the op's
valid domain with a margin, and a discontinuity safe when its operand is not pinned to the
jump: Acosh (x >= 1 + δ) after Sigmoid (<= 1), Asin after Cosh (>= 1), Reciprocal of a wide
float16 Softmax (its smallest output is at most 1/N), Ceil of a Softmax over one element
(exactly 1) cannot be, whatever the inputs. The grower asks `Feasibility` before accepting
an insertion and refuses those, instead of generating models the search must then drop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from generator.binning import Solution
from generator.dtypes import DType
from generator.graph import GNode, Graph
from generator.ops.base import OpSpec
from generator.ranges import FULL, RULES, Range, axis_len, output_range, propagate
from generator.values.unsafe import NEEDS_OPS, Need, needs

PINNED = 2.0**-8
"""Relative width under which a range is one value (a point widened by the rules' slack)."""


def _pinned_near(r: Range, jumps: Callable[[float], float]) -> bool:
    """Whether `r` is one value sitting on a jump (`jumps(x)` is the nearest jump to x)."""
    if not (math.isfinite(r.lo) and math.isfinite(r.hi)):
        return False
    tol = PINNED * max(1.0, abs(r.lo))
    return r.hi - r.lo <= tol and abs(jumps(0.5 * (r.lo + r.hi)) - 0.5 * (r.lo + r.hi)) <= tol


def _pinned(r: Range) -> bool:
    return _pinned_near(r, lambda x: x)


def _ties(op: OpSpec) -> bool:
    """Whether a constant slice along the op's axis holds two or more (tied) elements."""
    return (axis_len(op) or 0) >= 2


def _cast_jumps(op: OpSpec) -> Callable[[float], float] | None:
    to = getattr(op, "to", None)
    if to is DType.bool:
        return lambda x: 0.0
    # A truncation is continuous at 0: its jumps are the nonzero integers.
    return None if to is None or to.is_float else lambda x: float(round(x)) or math.copysign(1.0, x)


JUMPS: dict[str, Callable[[OpSpec, Range], bool]] = {
    **dict.fromkeys(("Floor", "Ceil"), lambda op, r: not _pinned_near(r, lambda x: float(round(x)))),
    "Round": lambda op, r: not _pinned_near(r, lambda x: math.floor(x) + 0.5),
    "Sign": lambda op, r: not _pinned_near(r, lambda x: 0.0),
    **dict.fromkeys(("ArgMax", "ArgMin", "Hardmax", "TopK"), lambda op, r: not (_pinned(r) and _ties(op))),
}
"""Per discontinuous op: whether its operand can stay off the jump (a value pinned to an
integer cannot be moved off it; a constant slice is all ties)."""


ZERO_JUMPS = frozenset({"Floor", "Ceil", "Sign"})
"""Ops with a jump at 0: an exact 0 in an inexact operand sits on it (a backend may give
-1e-9), however the other elements move."""


INT_JUMPS = frozenset({"Floor", "Ceil"})
"""Ops with a jump at every integer: an inexact operand whose elements are all integers
(x/|x| of an L1 normalization over one element) sits on one wherever it is."""


def _jump_free(op: OpSpec, operands: Sequence[Range]) -> bool:
    if not operands or not op.ins[0].dtype.is_float:
        return True
    a = operands[0]
    if a.zero and a.inexact and (op.op_type in ZERO_JUMPS or getattr(op, "to", None) is DType.bool):
        return False
    if a.integral and a.inexact and op.op_type in INT_JUMPS:
        return False
    if op.op_type in ("Cast", "CastLike"):
        jumps = _cast_jumps(op)
        return jumps is None or not _pinned_near(operands[0], jumps)
    check = JUMPS.get(op.op_type)
    return check is None or check(op, operands[0])


CHECKED_OPS = NEEDS_OPS | JUMPS.keys() | {"Cast", "CastLike"}
"""Ops whose insertion depends on their operands' ranges."""


def _meets(op: OpSpec, operands: Sequence[Range]) -> bool:
    """Whether operands in these ranges can all clear `op`'s domain with its margin, and
    stay off its jumps."""
    return (
        _jump_free(op, operands)
        and _sums_positive(op, operands)
        and all(
            need.slot >= len(operands) or _need_met(need, operands[need.slot])
            for need in needs(op.op_type, op.ins[0].dtype.value)
        )
    )


def _sums_positive(op: OpSpec, operands: Sequence[Range]) -> bool:
    """ReduceLogSum needs every group's sum positive: not one that is an exact 0 (a reduction
    over axes that miss an exclusive CumSum's all-0 slice)."""
    if op.op_type != "ReduceLogSum" or not operands:
        return True
    return not RULES["ReduceSum"](op, [operands[0]]).zero


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
                propagate(graph, node, self.ranges)
        return self.ranges

    def __call__(
        self, graph: Graph, op: OpSpec, inputs: Sequence[int], target: int | None, sol: Solution | None = None
    ) -> bool:
        """Forward (`target` None): can `op`'s operands `inputs` meet its domain? Backward:
        can `op`'s output, from fresh unbounded inputs, meet the domains of `target`'s consumers?
        `sol`: the op's solution, where the solver placed it (its pads decide a Conv's 0s)."""
        if target is None:
            if op.op_type not in CHECKED_OPS:
                return True
            ranges = self._ranges(graph)
            return _meets(op, [ranges.get(i, FULL) for i in inputs])
        if not any(n.op.op_type in CHECKED_OPS for n in graph.nodes):
            return True
        # A concretely placed op's attributes are plain ints: Solution(None) reads them.
        made = output_range(op, [FULL] * max(1, len(op.ins)), graph.tensors[target].dtype, sol=sol or Solution(None))
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
        if node.op.op_type in CHECKED_OPS and not _meets(node.op, [env.get(i, FULL) for i in node.inputs]):
            return False
        propagate(graph, node, env)
        changed.update(o for o in node.outputs if env[o] != ranges.get(o, FULL))
    return True
