"""The computations a case is judged against, none of them the system under test.

In order of trust: the torch reference (fuzzbot's interpreter of the op registry), then
`onnx.reference` (an independent reading of the spec) where torch cannot compute a
model, then, in a two-build campaign, base as the reference for head (DeepDiffer's
oracle: head must not move away from base). Crashes, hangs and compile errors need none
of these. When the two references disagree on a wrong result, a third computation breaks
the tie: the torch reference re-run with every float tensor in float64, which neither
reference's rounding nor any backend's code shares; the reading closer to it wins.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from backends.reference import ReferenceError, run_reference, trace_reference
from oracles.provenance import tensor_dtypes


class Source(StrEnum):
    """Which computation judged a case's values."""

    torch = "torch"
    onnx_reference = "onnx.reference"
    base = "base"
    """No reference could compute the case: head was compared with base (two builds)."""
    none = "none"
    """Nothing could judge its values: only crashes, hangs and compile errors count."""


@dataclass(frozen=True)
class Reading:
    """A case's reference outputs and where they came from; `gap` says why the torch
    reference could not give them, and `gap_op` which op type it stopped at (counted per
    op type in summary.json, so the reference's holes show up)."""

    outputs: dict[str, np.ndarray] | None
    source: Source
    gap: str = ""
    gap_op: str = ""
    warnings: int = 0
    """Warnings onnx.reference raised computing it (numpy's overflow, invalid value)."""


def read_reference(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> Reading:
    """The torch reference, else onnx.reference, else nothing."""
    trace = trace_reference(model, inputs)
    if trace.error is None:
        return Reading({o.name: trace.env[o.name].numpy() for o in model.graph.output}, Source.torch)
    index = trace.failed_node
    op = model.graph.node[index].op_type if index is not None else "graph input"
    warned: Counter[str] = Counter()
    second, why = onnx_reference(model, inputs, warned)
    if second is not None:
        return Reading(second, Source.onnx_reference, str(trace.error), op, warned.total())
    return Reading(None, Source.none, f"{trace.error}; {why}", op, warned.total())


def onnx_reference(
    model: onnx.ModelProto, inputs: Mapping[str, np.ndarray], warned: Counter[str] | None = None
) -> tuple[dict[str, np.ndarray] | None, str]:
    """onnx.reference's outputs, or None and why it could not compute them (one line)."""
    try:
        with counted_warnings(warned):
            values = ReferenceEvaluator(model).run(None, dict(inputs))
    except Exception as e:  # noqa: BLE001 - any evaluator failure means "no reading"
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return None, f"onnx.reference failed: {type(e).__name__}: {first}"[:300]
    names = [o.name for o in model.graph.output]
    return {n: np.asarray(v) for n, v in zip(names, values, strict=True)}, ""


@contextmanager
def counted_warnings(warned: Counter[str] | None) -> Iterator[None]:
    """onnx.reference's numpy warnings (a division by zero on an undefined input) counted in
    `warned` by category, never printed: a log full of RuntimeWarnings reads as errors."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            if warned is not None:
                warned.update(w.category.__name__ for w in caught)


_WIDE = {t: TensorProto.DOUBLE for t in (TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.BFLOAT16)}
_DTYPE_ATTRS = ("to", "dtype")
"""Attributes that name an element type (Cast's `to`, EyeLike's and RandomX's `dtype`)."""


def as_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same graph with every float tensor, float constant and arithmetic in float64:
    what the computation means without the rounding of narrower types. An explicit Cast to
    a narrower float still rounds there (it is part of the model's meaning, not rounding
    noise): it becomes that Cast followed by a Cast back to float64."""
    narrow = {name: helper.np_dtype_to_tensor_dtype(np.dtype(d)) for name, d in tensor_dtypes(model).items()}
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    g = wide.graph
    for value in (*g.input, *g.output, *g.value_info):
        t = value.type.tensor_type
        t.elem_type = _WIDE.get(t.elem_type, t.elem_type)
    for init in g.initializer:
        _widen_tensor(init)
    nodes: list[onnx.NodeProto] = []
    for node in g.node:
        target = _narrowing_target(node, narrow)
        for attr in node.attribute:
            if attr.name in _DTYPE_ATTRS and attr.type == onnx.AttributeProto.INT and target is None:
                attr.i = _WIDE.get(attr.i, attr.i)
            elif attr.type == onnx.AttributeProto.TENSOR:
                _widen_tensor(attr.t)
        if target is None:
            nodes.append(node)
            continue
        rounded = f"{node.output[0]}__rounded"
        nodes.append(helper.make_node("Cast", [node.input[0]], [rounded], to=target, name=node.name))
        nodes.append(helper.make_node("Cast", [rounded], [node.output[0]], to=TensorProto.DOUBLE))
    del g.node[:]
    g.node.extend(nodes)
    return wide


def _narrowing_target(node: onnx.NodeProto, dtypes: Mapping[str, int]) -> int | None:
    """The narrower float type a Cast or CastLike rounds to, or None."""
    if node.op_type == "Cast":
        to = next((a.i for a in node.attribute if a.name == "to"), None)
    elif node.op_type == "CastLike" and len(node.input) > 1:
        to = dtypes.get(node.input[1])
    else:
        return None
    return to if to in _WIDE else None


def _widen_tensor(t: onnx.TensorProto) -> None:
    if t.data_type in _WIDE:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))


def float64_reference(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """The torch reference of the float64 version of the case, or None when it cannot run."""
    wide = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in inputs.items()}
    try:
        return run_reference(as_float64(model), wide)
    except ReferenceError:
        return None


def distance(a: np.ndarray, b: np.ndarray, where: np.ndarray | None = None) -> float:
    """How far two readings of one output are apart (summed over `where`, or everywhere):
    absolute difference for floats (NaN against a number counts as infinitely far),
    differing elements otherwise."""
    if a.shape != b.shape:
        return float("inf")
    mask = np.ones(a.shape, bool) if where is None else where
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        x, y = a.astype(np.float64)[mask], b.astype(np.float64)[mask]
        both_nan = np.isnan(x) & np.isnan(y)
        with np.errstate(invalid="ignore"):
            d = np.where(both_nan, 0.0, np.abs(x - y))
        return float(np.nan_to_num(d, nan=np.inf).sum())
    return float((a[mask] != b[mask]).sum())
