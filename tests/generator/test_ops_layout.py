"""Layout and indexing ops, one dtype at a time: every generated single-op model passes
the full checker, runs on onnxruntime unless it reports the kernel missing, and our
torch reference agrees with ONNX's own ReferenceEvaluator and with onnxruntime."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from backends.reference import run_reference
from generator.api import GenConfig, GeneratedCase, generate
from generator.dtypes import DType
from generator.emit import NEWEST_OPSET
from generator.ops import registry
from generator.ops.base import OpSpec
from generator.ops.selection import OneHot
from generator.symbolic import SymCtx, TType
from tests.op_family import classic_dtypes

FAMILY = tuple(f"generator.ops.{m}" for m in ("shape", "joining", "padding", "resize", "indexing", "selection"))
SPECS = {name: spec for name, spec in sorted(registry().items()) if spec.__module__ in FAMILY}
OPSETS = (17, 13, 18, 15, 19, 21, 16, 14)
CASES = 3
"""Checked models wanted per (op, dtype); a seed whose first tensor cannot host the op is skipped."""
SEEDS = 16

# The evaluator computes uint8/int8 one-hot and scatter products in wrapping numpy arithmetic.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


def _node(model: onnx.ModelProto, op_type: str) -> onnx.NodeProto:
    found: onnx.NodeProto = next(n for n in model.graph.node if n.op_type == op_type)
    return found


def _attr(node: onnx.NodeProto, name: str) -> object:
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), None)


def _init(model: onnx.ModelProto, name: str) -> np.ndarray | None:
    found = [numpy_helper.to_array(i) for i in model.graph.initializer if i.name == name]
    return found[0] if found else None


def _negative_pads(m: onnx.ModelProto) -> bool:
    pads = _init(m, _node(m, "Pad").input[1])
    return pads is not None and bool((pads < 0).any())


def _negative_resize_axes(m: onnx.ModelProto) -> bool:
    axes = _attr(_node(m, "Resize"), "axes")
    return isinstance(axes, list) and any(a < 0 for a in axes)


def _normalize_resize_axes(m: onnx.ModelProto) -> onnx.ModelProto:
    copy = _copy(m)
    node = _node(copy, "Resize")
    rank = len(copy.graph.input[0].type.tensor_type.shape.dim)
    for a in node.attribute:
        if a.name == "axes":
            a.ints[:] = [i % rank for i in a.ints]
    return copy


def _narrower_indices(m: onnx.ModelProto) -> bool:
    node = _node(m, "GatherElements")
    idx = _init(m, node.input[1])
    data = next(v for v in [*m.graph.input, *m.graph.initializer] if v.name == node.input[0])
    dims = list(data.dims) if isinstance(data, TensorProto) else [d.dim_value for d in data.type.tensor_type.shape.dim]
    axis = int(_attr(node, "axis") or 0) % len(dims)  # type: ignore[call-overload]
    return idx is not None and any(i != d for k, (i, d) in enumerate(zip(idx.shape, dims, strict=True)) if k != axis)


def _rank1_depth(m: onnx.ModelProto) -> bool:
    depth = _init(m, _node(m, "OneHot").input[1])
    return depth is not None and depth.ndim == 1


def _scalar_depth(m: onnx.ModelProto) -> onnx.ModelProto:
    copy = _copy(m)
    name = _node(copy, "OneHot").input[1]
    for i, t in enumerate(copy.graph.initializer):
        if t.name == name:
            copy.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).reshape(()), name))
    return copy


def _float_indices(m: onnx.ModelProto) -> bool:
    name = _node(m, "OneHot").input[0]
    floats = (TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE)
    return any(v.name == name and v.type.tensor_type.elem_type in floats for v in m.graph.input)


def _indices_cast_to_int64(m: onnx.ModelProto) -> onnx.ModelProto:
    """The spec's reading made explicit: OneHot's float indices go through Cast(to=int64)."""
    copy = _copy(m)
    node = _node(copy, "OneHot")
    cast = helper.make_node("Cast", [node.input[0]], ["indices_int64"], to=TensorProto.INT64)
    node.input[0] = "indices_int64"
    copy.graph.node.insert(list(copy.graph.node).index(node), cast)
    return copy


def _float16_indices(m: onnx.ModelProto) -> bool:
    name = _node(m, "OneHot").input[0]
    return any(v.name == name and v.type.tensor_type.elem_type == TensorProto.FLOAT16 for v in m.graph.input)


Repair = Callable[[onnx.ModelProto], onnx.ModelProto] | None

EVALUATOR_DEFECTS: dict[str, list[tuple[str, Callable[[onnx.ModelProto], bool], Repair]]] = {
    "Pad": [("np.pad rejects negative pad widths; onnxruntime crops", _negative_pads, None)],
    "Resize": [("its `axes` path transposes by the raw negative axes", _negative_resize_axes, _normalize_resize_axes)],
    "GatherElements": [
        ("it requires indices to match data on non-axis dims; the spec does not", _narrower_indices, None)
    ],
    "OneHot": [
        ("np.arange rejects the 1-element rank-1 depth the spec allows", _rank1_depth, _scalar_depth),
        (
            "it compares float indices uncast (onnxruntime before 1.32.0 too); the spec casts them to int64",
            _float_indices,
            _indices_cast_to_int64,
        ),
        ("it wraps negative float16 indices in float16, rounding fractions onto classes", _float16_indices, None),
    ],
}
"""Where onnx.reference.ReferenceEvaluator itself is wrong: such a model is checked on an
equivalent rewrite the evaluator gets right, or, with no rewrite, against onnxruntime."""

UINT8_PROXY = {"Resize", "OneHot"}
"""Ops the evaluator cannot run on bool (Resize routes data through float, OneHot
computes off + hot * (on - off)); both only move values, so uint8 is an exact proxy."""


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def _tolerance(dtype: np.dtype) -> tuple[float, float]:
    """(rtol, atol): float16 sums round at every step in some implementations, not in others."""
    if dtype == np.float16:
        return 1e-2, 2e-2
    if dtype.kind == "f":
        return 1e-4, 1e-5
    return 0.0, 0.0


def _assert_same(ours: dict[str, np.ndarray], names: list[str], theirs: list[np.ndarray], what: str) -> None:
    for name, value in zip(names, theirs, strict=True):
        got, want = ours[name], np.asarray(value)
        assert got.shape == want.shape and got.dtype == want.dtype, (what, name, got.shape, want.shape, want.dtype)
        rtol, atol = _tolerance(got.dtype)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol, atol, err_msg=what)


def _run_ort(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """onnxruntime's outputs, or None where it reports the kernel missing (any other failure raises)."""
    try:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own untyped exceptions
        # Status 9 is NOT_IMPLEMENTED: "Could not find an implementation" or "Failed to find kernel".
        assert ": 9 : NOT_IMPLEMENTED" in str(e), str(e)
        return None
    return [np.asarray(v) for v in session.run(None, inputs)]


def _evaluate(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    outputs = ReferenceEvaluator(model).run(None, inputs)
    assert isinstance(outputs, list)
    return [np.asarray(v) for v in outputs]


def _retyped(model: onnx.ModelProto, old: int, new: int) -> onnx.ModelProto:
    """Every tensor of element type `old` made `new`: a proxy for a data-movement op, whose
    result does not depend on the type, where a checker has no kernel for `old`."""
    copy = _copy(model)
    for v in [*copy.graph.input, *copy.graph.output, *copy.graph.value_info]:
        if v.type.tensor_type.elem_type == old:
            v.type.tensor_type.elem_type = new
    to = helper.tensor_dtype_to_np_dtype(new)
    for i, t in enumerate(copy.graph.initializer):
        if t.data_type == old:
            copy.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(to), t.name))
    return copy


def _bool_as_uint8(model: onnx.ModelProto) -> onnx.ModelProto:
    return _retyped(model, TensorProto.BOOL, TensorProto.UINT8)


WIDER = {TensorProto.INT16: TensorProto.INT32, TensorProto.UINT16: TensorProto.UINT32}
"""A type onnxruntime has few data-movement kernels for, and the wider one it computes it at."""


def _ort_via_wider(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """onnxruntime's outputs for an int16 or uint16 model, computed at int32 or uint32 (it has
    no 16-bit kernel for most data movement) and cast back."""
    kinds = [o.type.tensor_type.elem_type for o in model.graph.output]
    for narrow, wide in WIDER.items():
        if narrow not in kinds and not any(v.dtype == helper.tensor_dtype_to_np_dtype(narrow) for v in inputs.values()):
            continue
        narrow_np, wide_np = helper.tensor_dtype_to_np_dtype(narrow), helper.tensor_dtype_to_np_dtype(wide)
        widened = {k: v.astype(wide_np) if v.dtype == narrow_np else v for k, v in inputs.items()}
        out = _run_ort(_retyped(model, narrow, wide), widened)
        if out is None:
            return None
        return [v.astype(narrow_np) if k == narrow else v for v, k in zip(out, kinds, strict=True)]
    return None


def _evaluator_check(
    op_type: str, case: GeneratedCase, ours: dict[str, np.ndarray], ort_out: list[np.ndarray] | None
) -> str:
    """Compare with the evaluator, or with a stand-in where it is known wrong; returns which."""
    names = [o.name for o in case.model.graph.output]
    model, inputs, how = case.model, case.inputs, "evaluator"
    for why, applies, repair in EVALUATOR_DEFECTS.get(op_type, []):
        if not applies(model):
            continue
        if repair is None:
            ort_out = ort_out if ort_out is not None else _ort_via_wider(model, inputs)
            assert ort_out is not None, f"{op_type}: evaluator defect ({why}) and no onnxruntime kernel to check with"
            _assert_same(ours, names, ort_out, f"{op_type} vs onnxruntime ({why})")
            return "onnxruntime"
        model, how = repair(model), "evaluator on a rewrite"
    is_bool = any(v.type.tensor_type.elem_type == TensorProto.BOOL for v in [*model.graph.input, *model.graph.output])
    if op_type in UINT8_PROXY and is_bool:
        inputs = {k: v.astype(np.uint8) if v.dtype == np.bool_ else v for k, v in inputs.items()}
        theirs = _evaluate(_bool_as_uint8(model), inputs)
        _assert_same(ours, names, [np.asarray(t).astype(np.bool_) for t in theirs], f"{op_type} vs evaluator via uint8")
        return "evaluator via uint8"
    _assert_same(ours, names, _evaluate(model, inputs), f"{op_type} vs {how}")
    return how


def _params() -> list[tuple[str, DType]]:
    return [(name, dtype) for name, spec in SPECS.items() for dtype in classic_dtypes(spec)]


def _cases(spec: type[OpSpec], dtype: DType) -> list[GeneratedCase]:
    found: list[GeneratedCase] = []
    # An op newer than 21 (TensorScatter, CumProd) is checked at its first opset and the newest.
    opsets = [o for o in OPSETS if spec.exists_at(o)] or [spec.since_opset, NEWEST_OPSET]
    for seed in range(SEEDS):
        if len(found) >= CASES:
            break
        cfg = GenConfig(
            wide_types=0.0,
            constant_twins=0.0,  # one node per model: the evaluator's repairs rewrite the op's first node
            nodes=1,
            ops=[spec.op_type],
            dtypes=[dtype],
            opset=opsets[seed % len(opsets)],
        )
        try:
            case = generate(seed, cfg)
        except RuntimeError as e:
            assert "could be inserted" in str(e), str(e)
            continue
        if any(n.op_type == spec.op_type for n in case.model.graph.node):
            found.append(case)
    return found


def test_family_delivers_the_layout_and_indexing_ops() -> None:
    assert len(SPECS) >= 27
    # CumProd multiplies, and its float16 running products round at every step in a build:
    # it takes the four types onnxruntime 1.31 runs it at that fuzzbot writes.
    assert all(len(spec.dtypes) >= 5 for spec in SPECS.values() if spec.op_type != "CumProd")


@pytest.mark.parametrize(("op_type", "dtype"), _params(), ids=[f"{o}-{d}" for o, d in _params()])
def test_generated_models_are_valid_runnable_and_agree(op_type: str, dtype: DType) -> None:
    cases = _cases(SPECS[op_type], dtype)
    assert len(cases) >= CASES, f"only {len(cases)} {op_type}/{dtype} models generated"
    for case in cases:
        onnx.checker.check_model(case.model, full_check=True)
        ours = run_reference(case.model, case.inputs)
        # onnxruntime before 1.32.0 compares OneHot's float indices uncast; with the spec's Cast
        # written out it computes what the spec means (tests/backends/test_two_ort.py pins both).
        model = _indices_cast_to_int64(case.model) if op_type == "OneHot" and _float_indices(case.model) else case.model
        ort_out = _run_ort(model, case.inputs)
        if ort_out is not None:
            _assert_same(ours, [o.name for o in case.model.graph.output], ort_out, f"{op_type} vs onnxruntime")
        _evaluator_check(op_type, case, ours, ort_out)


def test_one_hot_depth_must_fit_its_depth_type() -> None:
    """The depth constant is written in the depth type: 300 classes cannot be a uint8 depth
    (the emitter would fail), nor 2049 a float16 one (it would round to another depth)."""
    op = OneHot(SymCtx(random.Random(0)), [TType(DType.int32, 2)])
    for depth_type, fits, too_big in ((DType.uint8, 255, 256), (DType.int8, 127, 128), (DType.float16, 2048, 2049)):
        op.types = (depth_type, DType.float32)
        for depth, ok in ((fits, True), (too_big, False)):
            op.depth = depth
            assert all(c is True for c in op.requires([])) is ok, (depth_type, depth)
    op.types = (DType.int64, DType.float32)
    op.depth = 4096
    assert all(c is True for c in op.requires([]))
