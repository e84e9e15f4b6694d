"""The NN, normalization and reduction ops, for every dtype each declares.

A generated single-op model must pass onnx.checker's full check, run on onnxruntime (unless
onnxruntime lacks that kernel, which it must say), and the torch reference must agree with
onnxruntime and with onnx.reference.ReferenceEvaluator. Where one of those two is known to be
wrong, the case is listed below with the reason, and the other still has to agree.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import helper
from onnx.reference import ReferenceEvaluator
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented

from backends.reference import run_reference
from generator.api import GenConfig, generate
from generator.binning import BinChooser
from generator.dtypes import DType
from generator.emit import emit_model
from generator.grow import Grower
from generator.ops import registry
from generator.ops.base import OpSpec
from generator.symbolic import SymCtx, TType
from tests.op_family import as_float32, classic_dtypes

pytestmark = [pytest.mark.worker]

FAMILIES = tuple(f"generator.ops.{m}" for m in ("nn", "windows", "conv", "pool", "norm", "reduce"))
SPECS = {op: spec for op, spec in sorted(registry().items()) if spec.__module__ in FAMILIES}
CASES = [(op, dtype) for op, spec in SPECS.items() for dtype in classic_dtypes(spec)]

Inputs = dict[str, np.ndarray]
Known = Callable[[onnx.NodeProto, Inputs, int], bool]
"""(node, inputs, opset) -> whether a known defect applies."""


def _attr(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            value = helper.get_attribute_value(a)
            return value.decode() if isinstance(value, bytes) else value
    return default


def _strided_or_dilated(node: onnx.NodeProto) -> bool:
    return any(v != 1 for v in [*_attr(node, "strides", []), *_attr(node, "dilations", [])])


def _valid_dilated(node: onnx.NodeProto) -> bool:
    return _attr(node, "auto_pad", "NOTSET") == "VALID" and any(v != 1 for v in _attr(node, "dilations", []))


def _rank(inputs: Inputs) -> int:
    return int(next(iter(inputs.values())).ndim)


EVALUATOR_DEFECTS: dict[str, tuple[str, Known]] = {
    "MaxPool": (
        "ignores explicit pads when strides and dilations are 1, pads integer inputs with NaN on that"
        " path (a ValueError), sizes SAME_LOWER outputs with floor, and pads the ceil-mode overhang"
        " at the front too",
        lambda n, i, o: (
            _attr(n, "auto_pad", "NOTSET").startswith("SAME")
            or bool(_attr(n, "ceil_mode", 0))
            or any(_attr(n, "pads", []))
            or (next(iter(i.values())).dtype.kind in "iu" and not _strided_or_dilated(n))
        ),
    ),
    "AveragePool": (
        "pads the ceil-mode overhang at the front too, and sizes VALID outputs without the dilation",
        lambda n, i, o: bool(_attr(n, "ceil_mode", 0)) or _valid_dilated(n),
    ),
    "LpPool": (
        "pads the ceil-mode overhang at the front too, sizes VALID outputs without the dilation, and"
        " raises float16 to the p-th power in float16, where small values underflow to 0",
        lambda n, i, o: (
            bool(_attr(n, "ceil_mode", 0))
            or _valid_dilated(n)
            or (next(iter(i.values())).dtype == np.float16 and _attr(n, "p", 2) != 1)
        ),
    ),
    "ConvTranspose": (
        "slices grouped weights by output channel and writes one channel per group",
        lambda n, i, o: int(_attr(n, "group", 1)) > 1,
    ),
    "GlobalMaxPool": (
        "reduces axes [r-2, r) instead of [2, r), so only 4-D inputs come out right",
        lambda n, i, o: _rank(i) != 4,
    ),
    "GlobalLpPool": ("has no implementation", lambda n, i, o: True),
    "LpNormalization": (
        "takes sum(x) rather than sum(|x|) for p=1, and squares float16 in float16 (underflow)",
        lambda n, i, o: _attr(n, "p", 2) == 1 or next(iter(i.values())).dtype == np.float16,
    ),
    "BatchNormalization": (
        "before opset 14 fills in momentum's default and so always normalises by batch statistics",
        lambda n, i, o: o < 14,
    ),
    "ReduceSumSquare": ("returns int64 for int32 input", lambda n, i, o: next(iter(i.values())).dtype == np.int32),
    "LRN": ("loops over the batch dim where it means the channels", lambda n, i, o: True),
}
"""op -> (why onnx.reference.ReferenceEvaluator is wrong, which nodes it is wrong for).
Each was checked against onnxruntime, which agrees with the torch reference on them."""

ORT_DEFECTS: dict[str, tuple[str, Known]] = {
    "MeanVarianceNormalization": (
        "drops the spec's 1e-9 epsilon: a constant group (one element) gives 0/0 = NaN, not 0",
        lambda n, i, o: True,
    ),
}
"""op -> (how onnxruntime 1.31 departs from the ONNX spec, which nodes it does it for); those
elements are compared only where onnxruntime's output is not NaN."""


def _opset_for(spec: type[OpSpec], dtype: DType) -> int:
    opset = max(17, spec.since_opset)
    if dtype is DType.bool:
        opset = max(opset, int(getattr(spec, "bool_since", opset)))
    return opset


def _assert_close(ours: np.ndarray, theirs: np.ndarray, what: str) -> None:
    theirs = np.asarray(theirs)
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} != {theirs.shape}"
    assert ours.dtype == theirs.dtype, f"{what}: dtype {ours.dtype} != {theirs.dtype}"
    if ours.dtype.kind in "iub":
        np.testing.assert_array_equal(ours, theirs, err_msg=what)
        return
    rtol = 1e-2 if ours.dtype == np.float16 else 1e-4 if ours.dtype == np.float32 else 1e-5
    finite = np.abs(theirs[np.isfinite(theirs)])
    atol = rtol * max(1.0, float(finite.max()) if finite.size else 1.0)
    np.testing.assert_allclose(ours.astype(np.float64), theirs.astype(np.float64), rtol=rtol, atol=atol, err_msg=what)


def _run_ort(model: onnx.ModelProto, inputs: Inputs) -> list[np.ndarray] | None:
    """onnxruntime's outputs, or None when it has no kernel for the node (and says so)."""
    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except OrtNotImplemented as e:
        msg = str(e)
        assert "NOT_IMPLEMENTED" in msg or "Could not find an implementation" in msg, msg
        return None
    return [np.asarray(v) for v in session.run(None, inputs)]


def _check_case(op: str, dtype: DType, opset: int, seed: int) -> int:
    """Generate one model and compare; returns how many (output, oracle) pairs agreed."""
    case = generate(
        seed,
        GenConfig(wide_types=0.0, nodes=1, ops=[op], dtypes=[dtype], opset=opset, values="none", max_elements=1024),
    )
    return _check_model(op, dtype, opset, seed, case.model, case.inputs)


def _check_model(op: str, dtype: DType, opset: int, seed: int, model: onnx.ModelProto, inputs: Inputs) -> int:
    onnx.checker.check_model(model, full_check=True)
    node = next(n for n in model.graph.node if n.op_type == op)
    names = [o.name for o in model.graph.output]
    ours = run_reference(model, inputs)
    agreed = 0
    got = _run_ort(model, inputs)
    if got is None and dtype is DType.float64:
        got = [v.astype(np.float64) for v in _run_ort(*as_float32(model, inputs)) or []]
    ort_defect = ORT_DEFECTS.get(op)
    for name, value in zip(names, got or [], strict=False):
        if ort_defect is not None and ort_defect[1](node, inputs, opset):
            keep = ~np.isnan(value.astype(np.float64))
            value, mine = value[keep], ours[name][keep]
        else:
            mine = ours[name]
        _assert_close(mine, value, f"{op} {dtype} seed {seed} {name} vs onnxruntime")
        agreed += 1
    ev_defect = EVALUATOR_DEFECTS.get(op)
    if ev_defect is None or not ev_defect[1](node, inputs, opset):
        for name, value in zip(names, ReferenceEvaluator(model).run(None, inputs), strict=True):
            _assert_close(ours[name], value, f"{op} {dtype} seed {seed} {name} vs ReferenceEvaluator")
            agreed += 1
    return agreed


@pytest.mark.filterwarnings("ignore:invalid value encountered in log:RuntimeWarning")  # NaN is agreement too
@pytest.mark.parametrize(("op", "dtype"), CASES, ids=[f"{op}-{d}" for op, d in CASES])
def test_op_is_valid_runs_and_matches_both_oracles(op: str, dtype: DType) -> None:
    opset = _opset_for(SPECS[op], dtype)
    agreed = sum(_check_case(op, dtype, opset, seed) for seed in range(3))
    assert agreed >= 1, f"{op} {dtype}: no oracle could check any of the models"


VOLUMETRIC = [("Conv", DType.float32), ("ConvTranspose", DType.float32), ("ConvInteger", DType.uint8)]
VOLUMETRIC += [
    (op, DType.float32) for op in ("MaxPool", "AveragePool", "LpPool", "GlobalMaxPool", "InstanceNormalization")
]


@pytest.mark.parametrize(("op", "dtype"), VOLUMETRIC)
def test_three_spatial_dims(op: str, dtype: DType) -> None:
    """Rank-5 inputs (3-D windows), which single-op models grown from rank 1-4 seeds never reach."""
    agreed = 0
    for seed in range(2):
        sc = SymCtx(random.Random(seed), max_elements=256, opset=17)
        grower = Grower(sc, [TType(dtype, 5)], lambda spec, sig: True, BinChooser(7, sc.rng))
        graph = grower.grow(1, 60, choose=lambda: SPECS[op])
        model, inputs = emit_model(graph, 17, np.random.default_rng(seed), set())
        assert any(len(v.type.tensor_type.shape.dim) == 5 for v in model.graph.input)
        agreed += _check_model(op, dtype, 17, seed, model, inputs)
    assert agreed >= 1


def test_family_covers_at_least_36_op_types() -> None:
    assert len(SPECS) >= 36, sorted(SPECS)


OPSET_SENSITIVE = ["ReduceSum", "ReduceMean", "ReduceProd", "AveragePool", "LpPool", "BatchNormalization"]


@pytest.mark.parametrize("opset", [13, 18, 19, 21])
@pytest.mark.parametrize("op", OPSET_SENSITIVE)
def test_opset_dependent_forms_are_valid_at_each_opset(op: str, opset: int) -> None:
    """Reductions take `axes` as an input from 18 (ReduceSum from 13), AveragePool gains
    dilations at 19, LpPool ceil_mode and dilations at 18, BatchNormalization training_mode at 14."""
    agreed = sum(_check_case(op, DType.float32, opset, seed) for seed in range(2))
    assert agreed >= 1


def test_ops_missing_from_an_opset_are_never_drawn() -> None:
    assert not SPECS["LayerNormalization"].exists_at(16)
    assert not SPECS["GroupNormalization"].exists_at(20)
    with pytest.raises(ValueError, match="no operator"):
        generate(0, GenConfig(wide_types=0.0, nodes=1, ops=["GroupNormalization"], opset=18, values="none"))


def test_topk_ties_go_to_the_lower_index_and_argmax_can_pick_the_last() -> None:
    x = np.array([[3, 1, 3, 2, 3]], dtype=np.int32)
    topk = registry()["TopK"].reference
    values, indices = topk({"axis": -1, "largest": 1}, [_tensor(x), _tensor(np.array([2], dtype=np.int64))])
    assert indices.tolist() == [[0, 2]] and values.tolist() == [[3, 3]]
    argmax = registry()["ArgMax"].reference
    assert argmax({"axis": 1, "select_last_index": 1}, [_tensor(x)])[0].tolist() == [[4]]
    assert argmax({"axis": 1}, [_tensor(x)])[0].tolist() == [[0]]


def test_integer_mean_truncates_toward_zero() -> None:
    mean = registry()["ReduceMean"].reference
    x = np.array([[-3, -4], [3, 4]], dtype=np.int32)
    assert mean({"axes": [1], "keepdims": 0}, [_tensor(x)])[0].tolist() == [-3, 3]


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(a)
