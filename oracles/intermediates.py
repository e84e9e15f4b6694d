"""Every intermediate tensor of one case, and the value conditions the rules ask about.

The values come from the value search's own interpreter (generator.values.interp) run
once with the reference semantics; the same walk yields the margin check's unsafe ops, so
a case that needs both (a tie, then the margin) costs one evaluation. The reference decides
the values because it is the side every backend is compared with: a near-tie there is what
lets two correct backends pick different winners.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx
import torch

from generator.ops.base import node_attrs
from generator.values import MARGIN, UnsupportedModel
from generator.values.interp import Failure, Program
from oracles.patterns import TIE_OPS, NodeRef

TIE_WIDTH = {np.dtype(str(t).removeprefix("torch.")): rel for t, rel in MARGIN.items()}
"""Relative tie width per float type: δ of the margin check (2^-10 float32, 2^-5 float16,
2^-20 float64). Values that close are a few roundings apart upstream, so which of them
wins depends on the backend's rounding, not on its semantics."""


def _tie_floor(dtype: np.dtype) -> float:
    """Absolute tie width: the dtype's epsilon, one rounding of a value of magnitude 1.
    Computed values smaller apart than that are a tie whatever their ratio: onnxruntime's
    Sigmoid gives 0 at -50 and at -70, where torch gives 2e-22 and 4e-31, both right to far
    better than any tolerance, so a TopK over them picks another winner on each."""
    return float(np.finfo(dtype).eps) if dtype.kind == "f" else 0.0


def _close(x: np.ndarray, y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Where two computed values are a tie or near-tie at `dtype`."""
    rel = TIE_WIDTH.get(dtype, 0.0)
    close: np.ndarray = np.abs(x - y) <= np.maximum(rel * np.maximum(np.abs(x), np.abs(y)), _tie_floor(dtype))
    return close


@dataclass(frozen=True)
class MarginFailure:
    """One unsafe op of the case (see oracles.margin), identified by node index, with what
    moving its operand by the margin needs: which operand, where, and by how much."""

    index: int
    text: str
    op_type: str = ""
    slot: int | None = None
    """The operand within the margin; None for a non-finite output or a reference error."""
    within: torch.Tensor | None = None
    """Its elements within the margin, where that mask has the operand's shape."""
    margin: float = 0.0


class CaseValues:
    """One evaluation of a case: the tensors it computed, or why there are none."""

    def __init__(self, model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> None:
        self.env: dict[str, np.ndarray] = {}
        self.failures: list[MarginFailure] = []
        self.error: str | None = None
        try:
            program = Program(model, inputs, free=())
        except UnsupportedModel as e:
            self.error = str(e)
            return
        env = program.env({})
        with torch.no_grad():
            self.failures = [_failure(f) for f in program.walk(env, every=True)]
        self.env = {name: _numpy(t) for name, t in env.items()}

    def value(self, tensor: str) -> np.ndarray | None:
        return self.env.get(tensor) if tensor else None


def _numpy(t: torch.Tensor) -> np.ndarray:
    """numpy has no bfloat16: widening to float32 keeps every value and every tie."""
    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def _failure(f: Failure) -> MarginFailure:
    what = f.error or (f.predicate.name if f.predicate else "non-finite output")
    name = repr(f.node.name) if f.node.name else f"#{f.node.index}"
    text = f"{f.node.op_type} node {name}: {what}"
    if f.predicate is None or f.bad is None:
        return MarginFailure(f.node.index, text, f.node.op_type)
    slot = f.predicate.slots[0]
    operand = f.operands[slot]
    within = f.bad.detach() if operand is not None and f.bad.shape == operand.shape else None
    return MarginFailure(f.node.index, text, f.node.op_type, slot, within, f.margin)


def nan_inputs(ref: NodeRef, values: CaseValues) -> str | None:
    """Which input of the node holds NaN at run time, described; None if none does."""
    for slot, name in enumerate(ref.node.input):
        x = values.value(name)
        if x is not None and x.dtype.kind == "f" and bool(np.isnan(x).any()):
            count = int(np.isnan(x).sum())
            return f"{ref.label} input {slot} ({name!r}) holds NaN in {count} of {x.size} elements"
    return None


def near(ref: NodeRef, values: CaseValues) -> str | None:
    """The first pair of a comparison's float operands within TIE_WIDTH, described."""
    a, b = (values.value(x) for x in ref.node.input[:2])
    if a is None or b is None or a.dtype.kind != "f":
        return None
    x, y = np.broadcast_arrays(a.astype(np.float64), b.astype(np.float64))
    close = np.argwhere(_close(x, y, a.dtype))
    if close.size == 0:
        return None
    at = tuple(int(i) for i in close[0])
    return f"{ref.label} compares near-equal operands at {list(at)} ({x[at]:.9g} vs {y[at]:.9g})"


def tie(ref: NodeRef, values: CaseValues, slices: set[int] | None = None) -> str | None:
    """The first slice along the reduced axis whose winners tie, described; None if none.
    With `slices` (those whose result mismatched, when the node's result is itself an
    output), a tied slice among them is the one described.

    A tie: two of the deciding elements (the best two for ArgMax/ArgMin/Hardmax, the best
    k + 1 for TopK) are equal, or within the relative width of TIE_WIDTH, or both closer
    than the dtype's absolute floor."""
    op = ref.node.op_type
    x = values.value(ref.node.input[0]) if ref.node.input else None
    if op not in TIE_OPS or x is None or x.ndim == 0:
        return None
    attrs = node_attrs(ref.node)
    default_axis, largest = TIE_OPS[op]
    axis = int(attrs.get("axis", default_axis)) % x.ndim
    largest = bool(attrs.get("largest", 1)) if op == "TopK" else largest
    count = 2
    if op == "TopK":
        k = values.value(ref.node.input[1]) if len(ref.node.input) > 1 else None
        if k is None or k.size == 0:
            return None
        count = int(k.reshape(-1)[0]) + 1
    rows = np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis]).astype(np.float64)
    count = min(count, rows.shape[1])
    if count < 2:
        return None
    order = np.argsort(-rows if largest else rows, axis=1, kind="stable")[:, :count]
    best = np.take_along_axis(rows, order, axis=1)
    tied = _close(best[:, :-1], best[:, 1:], x.dtype)
    hits = np.argwhere(tied)
    if hits.size == 0:
        return None
    chosen = [h for h in hits if slices is not None and int(h[0]) in slices] or list(hits)
    row, j = (int(v) for v in chosen[0])
    a, b = int(order[row, j]), int(order[row, j + 1])
    kind = "an exact tie" if best[row, j] == best[row, j + 1] else "a near-tie"
    return (
        f"{ref.label} input has {kind} along axis {axis} in slice {row}: "
        f"positions {a} and {b} ({best[row, j]:.9g} vs {best[row, j + 1]:.9g})"
    )
