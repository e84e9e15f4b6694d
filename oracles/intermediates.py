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
from generator.ops.narrow import as_numpy
from generator.values import UnsupportedModel
from generator.values.interp import Failure, Program
from oracles.evidence import within_tie
from oracles.patterns import TIE_OPS, NodeRef


def _torch(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))


def _dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype)).dtype


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
    """numpy has no bfloat16: widening to float32 keeps every value and every tie. int4 and
    float8 become their ml_dtypes arrays (generator.ops.narrow)."""
    t = t.detach()
    return as_numpy(t.float() if t.dtype == torch.bfloat16 else t)


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
    """The first pair of a comparison's float operands near-equal (oracles.evidence), described."""
    a, b = (values.value(x) for x in ref.node.input[:2])
    if a is None or b is None or a.dtype.kind != "f":
        return None
    x, y = np.broadcast_arrays(a.astype(np.float64), b.astype(np.float64))
    close = np.argwhere(within_tie(_torch(x), _torch(y), _dtype(a.dtype)).numpy())
    if close.size == 0:
        return None
    at = tuple(int(i) for i in close[0])
    return f"{ref.label} compares near-equal operands at {list(at)} ({x[at]:.9g} vs {y[at]:.9g})"


def tie(
    ref: NodeRef, values: CaseValues, slices: set[int] | None = None, decided: tuple[int, int, int] | None = None
) -> str | None:
    """The first slice along the reduced axis whose winners tie, described; None if none.
    With `slices` (those whose result mismatched, when the node's result is itself an
    output), a tied slice among them is the one described. With `decided` (a slice, the
    position the reference chose there and the one the build chose), that pair is the one
    described when it ties: a slice can hold several tied pairs, and the first of them is
    not always the one the build decided the other way (one named positions 1 and 4 where
    the build had taken 21 over 2).

    A tie: two of the deciding elements (the best two for ArgMax/ArgMin/Hardmax, the best
    k + 1 for TopK) are equal, or within oracles.evidence's tie width (relative, with the
    dtype's epsilon as its floor)."""
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
    tied = within_tie(_torch(best[:, :-1]), _torch(best[:, 1:]), _dtype(x.dtype)).numpy()
    hits = np.argwhere(tied)
    if hits.size == 0:
        return None
    if decided is not None and _pair_ties(rows, decided, x.dtype):
        row, a, b = decided
    else:
        chosen = [h for h in hits if slices is not None and int(h[0]) in slices] or list(hits)
        row, j = (int(v) for v in chosen[0])
        a, b = int(order[row, j]), int(order[row, j + 1])
    kind = "an exact tie" if rows[row, a] == rows[row, b] else "a near-tie"
    return (
        f"{ref.label} input has {kind} along axis {axis} in slice {row}: "
        f"positions {a} and {b} ({rows[row, a]:.9g} vs {rows[row, b]:.9g})"
    )


def _pair_ties(rows: np.ndarray, decided: tuple[int, int, int], dtype: np.dtype) -> bool:
    row, a, b = decided
    if not (0 <= row < rows.shape[0] and 0 <= a < rows.shape[1] and 0 <= b < rows.shape[1]) or a == b:
        return False
    pair = rows[row, [a]], rows[row, [b]]
    return bool(within_tie(_torch(pair[0]), _torch(pair[1]), _dtype(dtype)).all())
