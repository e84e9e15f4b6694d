"""Edge values and the op families that share them, as data in one place.

An edge value one op's spec draws (a negative index, an empty axes list, a zero divisor) is
worth drawing for every sibling op whose spec defines the same edge, or leaves it undefined:
a kernel that mishandles it in one op mishandles it in the others, and a spec that draws it
for one op alone leaves the siblings' regressions unseen. Each entry says what the ONNX spec
says of the edge for that op; the specs (generator.ops.indexing, generator.ops.reduce,
generator.ops.shape), the templates (generator.patterns) and the edge-input aims
(generator.edges) read their family from here rather than naming ops of their own.
"""

from __future__ import annotations

NEGATIVE_SHARE = 0.3
"""The share of the indices of a NEGATIVE_INDEX op written in their from-the-end form."""

NEGATIVE_INDEX: dict[str, str] = {
    "Gather": "indices in [-s, s-1] along the axis (Gather-11 on); a negative one counts from the back",
    "GatherElements": "indices in [-s, s-1] along the axis (GatherElements-11 on)",
    "GatherND": "every index within [-s, s-1] along the axis it indexes (GatherND-11 on)",
    "ScatterElements": "indices in [-s, s-1] along the axis (ScatterElements-11 on)",
    "ScatterND": "index values may be negative, counting backwards from the end, within the valid range"
    " (ScatterND-11 on)",
    "OneHot": "indices in [-depth, depth-1] (OneHot-11 on); outside it a row of off values. Its indices are"
    " graph values, negative wherever the graph's are",
}
"""Ops whose spec defines negative index values (from the end). Not in it: TensorScatter's
write_indices (positions in the cache, zero when absent), NonMaxSuppression's and RoiAlign's
batch indices, MaxUnpool's indices: the specs give them no negative form."""

EMPTY_AXES: dict[str, str] = {
    **{
        op: "axes empty, either not provided or explicitly empty: every axis reduced, or none with"
        " noop_with_empty_axes=1 (the reduction still applies its elementwise steps)"
        for op in (
            "ReduceSum",
            "ReduceMean",
            "ReduceMax",
            "ReduceMin",
            "ReduceProd",
            "ReduceL1",
            "ReduceL2",
            "ReduceLogSum",
            "ReduceLogSumExp",
            "ReduceSumSquare",
        )
    },
    "Squeeze": "axes not provided: every dim of size 1 removed. An explicitly empty list the spec leaves"
    " unstated (onnx's reference and shape inference squeeze nothing, onnxruntime 1.31 every unit dim), so"
    " only the absent form is written",
}
"""Ops whose axes may be empty, and what the spec makes of it. Reduce* take axes as an input
from ReduceSum-13 and the others' -18; before that only the absent form exists."""

ZERO_DIVISOR: dict[str, tuple[int, str]] = {
    "Div": (1, "integer division by zero: the spec gives no result (float: IEEE inf or nan, kept off by the values)"),
    "Mod": (
        1,
        "integer modulo by zero, under fmod=0 (the divisor's sign) and fmod=1 (C fmod) alike: no result given",
    ),
}
"""Ops whose divisor operand (the slot given) the spec leaves undefined at zero for integers.
Not in it: Reciprocal, Pow (float only here), Range's delta (a shape operand: a zero would
make the model invalid, not its values undefined), QuantizeLinear's scale (a constant)."""


def negative_share(op_type: str) -> float:
    """How often an index of `op_type` is written from the end: NEGATIVE_SHARE for the
    family, 0 for an op whose spec gives negative indices no meaning."""
    return NEGATIVE_SHARE if op_type in NEGATIVE_INDEX else 0.0
