"""The region ops (RoiAlign, MaxRoiPool) for every dtype each declares.

A generated single-op model must pass onnx.checker's full check and strict shape inference,
and the torch reference must agree with onnxruntime (optimizations off and on) and with
onnx.reference.ReferenceEvaluator; one test also runs TVM. Where one of them is known to be
wrong, the form is listed below with the reason and an independent witness, and the others
still have to agree. Hand-worked cases pin the reference to numbers computed without torch,
and every attribute form drawn is asserted seen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest
import torch
from onnx import helper, numpy_helper

from backends.client import WorkerClient
from backends.results import Status
from backends.spec import parse_backend
from generator.api import GenConfig, generate
from generator.dtypes import DType
from generator.ops import registry
from generator.ops.base import Attrs
from generator.ops.regions import roi_align_unsafe, roi_pool_unsafe
from tests.op_family import (
    Inputs,
    Known,
    attr,
    check_model,
    classic_dtypes,
    evaluate,
    opset_for,
    run_ort,
    tvm_agreement,
)

pytestmark = [pytest.mark.worker]

SPECS = {op: spec for op, spec in sorted(registry().items()) if spec.__module__ == "generator.ops.regions"}
CASES = [(op, dtype) for op, spec in SPECS.items() for dtype in classic_dtypes(spec)]
SEEDS = range(12)


EVALUATOR_DEFECTS: dict[str, tuple[str, Known]] = {
    "RoiAlign": (
        "reads RoiAlign-10 as RoiAlign-16's default half_pixel (boxes shifted by half a cell, no"
        " one-cell floor on their sizes), where RoiAlign-10 has no such mode and onnxruntime reads it"
        " as output_half_pixel (see test_roi_align_10_is_output_half_pixel)",
        lambda n, m, o: o < 16,
    ),
    "DeformConv": (
        "normalizes sampling positions by dividing by (length - 1): NaN on a one-cell spatial axis"
        " (ValueError: cannot convert float NaN to integer), where onnxruntime samples it as any other"
        " (see test_deform_conv_one_cell_axis); and samples float16 inputs in float16 arithmetic (off by"
        " up to ~1e-2 on values near 0.1), where onnxruntime agrees with the float32-computed reference"
        " to ~5e-4",
        lambda n, m, o: (
            1 in [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim][2:]
            or m.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
        ),
    ),
    "MaxRoiPool": (
        "has no MaxRoiPool kernel (RuntimeError: no registered implementation for operator"
        " 'MaxRoiPool'); onnxruntime and TVM still have to agree",
        lambda n, m, o: True,
    ),
}
"""op -> (why onnx.reference.ReferenceEvaluator is wrong, which nodes it is wrong for)."""

ORT_DEFECTS: dict[str, tuple[str, Known]] = {}
"""op -> (how onnxruntime 1.31 departs from the spec, which nodes it does it for)."""


ELEMENTS = {"DeformConv": 384}
"""Smaller tensors for ops the evaluator computes in Python loops per output cell and channel pair."""


def _generate(op: str, dtype: DType, opset: int, seed: int) -> tuple[onnx.ModelProto, Inputs]:
    cfg = GenConfig(
        wide_types=0.0,
        nodes=1,
        ops=[op],
        dtypes=[dtype],
        opset=opset,
        values="none",
        max_elements=ELEMENTS.get(op, 2048),
    )
    case = generate(seed, cfg)
    return case.model, case.inputs


@pytest.mark.parametrize(("op", "dtype"), CASES, ids=[f"{op}-{d}" for op, d in CASES])
def test_op_is_valid_runs_and_matches_the_oracles(op: str, dtype: DType) -> None:
    agreed = 0
    for seed in SEEDS:
        opset = opset_for(SPECS[op], seed)
        model, inputs = _generate(op, dtype, opset, seed)
        agreed += check_model(op, opset, seed, model, inputs, ORT_DEFECTS, EVALUATOR_DEFECTS)
    assert agreed >= len(SEEDS), f"{op} {dtype}: too few oracle checks ({agreed})"


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def _initializer(model: onnx.ModelProto, name: str) -> np.ndarray:
    return next(numpy_helper.to_array(i) for i in model.graph.initializer if i.name == name)


def _roi_align_forms(node: onnx.NodeProto, model: onnx.ModelProto) -> set[str]:
    """Each attribute as written (value class) or left to its default, and where the boxes lie."""
    forms: set[str] = set()
    for name in ("mode", "coordinate_transformation_mode"):
        forms.add(f"{name}={attr(node, name, 'default')}")
    for name in ("output_height", "output_width", "sampling_ratio"):
        v = attr(node, name)
        forms.add(f"{name}={'default' if v is None else min(int(v), 2)}")
    scale = attr(node, "spatial_scale")
    forms.add(f"spatial_scale={'default' if scale is None else 'unit' if scale == 1.0 else 'other'}")
    x = model.graph.input[0].type.tensor_type.shape.dim
    h, w = x[2].dim_value, x[3].dim_value
    boxes = _initializer(model, node.input[1]).astype(np.float64) * float(scale or 1.0)
    outside = (boxes[:, :2] < 0).any() or (boxes[:, 2] > w).any() or (boxes[:, 3] > h).any()
    forms.add("boxes=past an edge" if outside else "boxes=inside")
    batch = _initializer(model, node.input[2])
    forms.add("batch=mixed" if len(set(batch.tolist())) > 1 else "batch=one")
    return forms


def _seen(op: str, opset: int, seeds: range, forms: Callable[[onnx.NodeProto, onnx.ModelProto], set[str]]) -> set[str]:
    seen: set[str] = set()
    for seed in seeds:
        cfg = GenConfig(
            wide_types=0.0, nodes=1, ops=[op], dtypes=[DType.float32], opset=opset, values="none", max_elements=2048
        )
        model = generate(seed, cfg).model
        seen |= forms(next(n for n in model.graph.node if n.op_type == op), model)
    return seen


def test_roi_align_forms_are_emitted_at_the_opsets_that_have_them() -> None:
    common = {"mode=default", "mode=avg", "boxes=past an edge", "boxes=inside", "batch=mixed", "batch=one"}
    common |= {f"{a}={v}" for a in ("output_height", "output_width", "sampling_ratio") for v in ("default", 1, 2)}
    common |= {"sampling_ratio=0"} | {f"spatial_scale={v}" for v in ("default", "unit", "other")}
    old = _seen("RoiAlign", 13, range(40), _roi_align_forms)
    assert common | {"coordinate_transformation_mode=default"} <= old, sorted(common - old)
    assert not any(f.startswith("coordinate_transformation_mode=") and "default" not in f for f in old)
    assert "mode=max" not in old
    new = _seen("RoiAlign", 21, range(40), _roi_align_forms)
    modes = {f"coordinate_transformation_mode={m}" for m in ("default", "half_pixel", "output_half_pixel")}
    assert common | modes <= new, sorted((common | modes) - new)


def _roi_align(x: np.ndarray, boxes: list[list[float]], version: int = 16, **attrs: Any) -> np.ndarray:
    spec = SPECS["RoiAlign"]
    rois = _tensor(np.asarray(boxes, dtype=x.dtype))
    batch = torch.zeros(len(boxes), dtype=torch.int64)
    (y,) = spec.reference_at(version)(attrs, [_tensor(x), rois, batch])
    return y.numpy()


RAMP = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
"""X[y, x] = 4y + x: bilinear in both axes, so a sample's value is 4y + x at its clamped position."""


def test_roi_align_by_hand() -> None:
    # output_half_pixel, box (1, 1)-(2, 2), one sample at its centre (1.5, 1.5): 4 * 1.5 + 1.5.
    one: dict[str, Any] = {"sampling_ratio": 1, "coordinate_transformation_mode": "output_half_pixel"}
    assert _roi_align(RAMP, [[1, 1, 2, 2]], **one).item() == pytest.approx(7.5)
    # half_pixel shifts the box to (0.5, 0.5)-(1.5, 1.5): the sample is at (1, 1).
    assert _roi_align(RAMP, [[1, 1, 2, 2]], sampling_ratio=1).item() == pytest.approx(5.0)
    # spatial_scale 0.5 halves the box first (then the shift): the same two answers.
    assert _roi_align(RAMP, [[2, 2, 4, 4]], spatial_scale=0.5, **one).item() == pytest.approx(7.5)
    assert _roi_align(RAMP, [[2, 2, 4, 4]], spatial_scale=0.5, sampling_ratio=1).item() == pytest.approx(5.0)
    # Adaptive: a 4-cell box over 2 bins takes ceil(4 / 2) = 2 samples per bin and axis, at 0.5
    # and 1.5 (bin 0) and 2.5 and 3.5 (bin 1); 3.5 reads as row 3, so bin 1's mean row is 2.75.
    grid = _roi_align(RAMP, [[0, 0, 4, 4]], 10, output_height=2, output_width=2)
    np.testing.assert_allclose(grid[0, 0], [[5.0, 5 * 1 + 1.75], [4 * 2.75 + 1, 5 * 2.75]], rtol=1e-6)
    # A sample at x = -2 lies outside [-1, W] and reads 0; one at x = -1 reads column 0.
    assert _roi_align(RAMP, [[-2.5, 0, -1.5, 1]], **one).item() == 0.0
    assert _roi_align(RAMP, [[-1.5, 0, -0.5, 1]], **one).item() == pytest.approx(2.0)
    # output_half_pixel floors a box's size at one cell: a point box at (1, 1) samples (1.5, 1.5).
    assert _roi_align(RAMP, [[1, 1, 1, 1]], **one).item() == pytest.approx(7.5)
    # mode=max: the largest sample of the bin, two samples per axis at 0.5 and 1.5.
    assert _roi_align(RAMP, [[0, 0, 2, 2]], 10, mode="max", sampling_ratio=2).item() == pytest.approx(7.5)


def _roi_model(opset: int, x: np.ndarray, boxes: np.ndarray, **attrs: Any) -> tuple[onnx.ModelProto, Inputs]:
    feeds = {"x": x, "rois": boxes, "batch": np.zeros(len(boxes), dtype=np.int64)}
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    infos = [
        helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()
    ]
    out = helper.make_tensor_value_info("y", elem, None)
    graph = helper.make_graph([helper.make_node("RoiAlign", list(feeds), ["y"], **attrs)], "g", infos, [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8), feeds


def test_roi_align_10_is_output_half_pixel() -> None:
    """The witness for the evaluator's RoiAlign entry: RoiAlign-10 samples box (1, 1)-(2, 2)
    at (1.5, 1.5), as onnxruntime and RoiAlign-16's output_half_pixel do; the evaluator samples (1, 1)."""
    boxes = np.array([[1, 1, 2, 2]], dtype=np.float32)
    model, feeds = _roi_model(10, RAMP, boxes, sampling_ratio=1)
    assert run_ort(model, feeds, optimize=False)[0].item() == pytest.approx(7.5)
    assert _roi_align(RAMP, boxes.tolist(), 10, sampling_ratio=1).item() == pytest.approx(7.5)
    assert evaluate(model, feeds)[0].item() == pytest.approx(5.0)


def test_roi_align_max_is_the_max_of_samples_where_onnxruntime_is_not() -> None:
    """Why the generator writes no mode=max: on all-ones X every bilinear sample is 1, so the
    spec's max (the largest sample) is 1; onnxruntime (and the evaluator) take the largest of
    each sample's weighted corners, 0.81 for RoiAlign-10 and 0.36 for 16."""
    ones = np.ones((1, 1, 4, 4), dtype=np.float32)
    boxes = np.array([[0.3, 0.3, 2.7, 2.7]], dtype=np.float32)
    for version, theirs in ((10, 0.81), (16, 0.36)):
        assert _roi_align(ones, boxes.tolist(), version, mode="max", sampling_ratio=2).item() == pytest.approx(1.0)
        model, feeds = _roi_model(version, ones, boxes, mode="max", sampling_ratio=2)
        assert run_ort(model, feeds, optimize=False)[0].item() == pytest.approx(theirs, abs=1e-5)
    assert evaluate(model, feeds)[0].item() == pytest.approx(0.36, abs=1e-5)


def test_roi_align_boxes_near_a_jump_are_unsafe() -> None:
    """A sample at x = -1 (where reading the border stops) or an adaptive bin of a whole number
    of cells (where the sample count steps) is refused; a box clear of both is not."""
    one: Attrs = {"sampling_ratio": 1, "coordinate_transformation_mode": "output_half_pixel"}
    assert roi_align_unsafe([-1.5, 0, -0.5, 1], one, (1, 1), (4, 4))
    assert not roi_align_unsafe([-1.3, 0.2, -0.4, 1], one, (1, 1), (4, 4))
    assert roi_align_unsafe([0, 0, 3.01, 2.5], {}, (1, 1), (4, 4))  # 3.01 - 0.5 - (-0.5): 3.01 cells
    assert not roi_align_unsafe([0, 0, 2.5, 2.5], {}, (1, 1), (4, 4))


def _max_roi_pool(x: np.ndarray, boxes: list[list[float]], pooled: list[int], **attrs: Any) -> np.ndarray:
    rois = _tensor(np.asarray(boxes, dtype=x.dtype))
    (y,) = SPECS["MaxRoiPool"].reference({"pooled_shape": pooled, **attrs}, [_tensor(x), rois])
    return y.numpy()


def _pool_forms(node: onnx.NodeProto, model: onnx.ModelProto) -> set[str]:
    scale = attr(node, "spatial_scale")
    forms = {f"spatial_scale={'default' if scale is None else 'unit' if scale == 1.0 else 'other'}"}
    forms |= {f"pooled={'one' if p == 1 else 'more'}" for p in attr(node, "pooled_shape")}
    x = model.graph.input[0].type.tensor_type.shape.dim
    n, h, w = x[0].dim_value, x[2].dim_value, x[3].dim_value
    boxes = _initializer(model, node.input[1]).astype(np.float64)
    corners = np.round(boxes[:, 1:] * float(scale or 1.0))
    outside = (corners[:, :2] < 0).any() or (corners[:, 2] >= w).any() or (corners[:, 3] >= h).any()
    forms.add("boxes=past an edge" if outside else "boxes=inside")
    forms.add("batch=mixed" if len(set(boxes[:, 0].tolist())) > 1 else "batch=one" if n == 1 else "batch=same")
    return forms


def test_max_roi_pool_forms_are_emitted() -> None:
    seen = _seen("MaxRoiPool", 13, range(40), _pool_forms)
    wanted = {f"spatial_scale={v}" for v in ("default", "unit", "other")} | {"pooled=one", "pooled=more"}
    wanted |= {"boxes=past an edge", "boxes=inside", "batch=mixed", "batch=one"}
    assert wanted <= seen, sorted(wanted - seen)


def test_max_roi_pool_by_hand() -> None:
    """RAMP's largest cell in a bin is its bottom-right one (4y + x grows with both)."""
    # Box (0, 0)-(3, 3): four rows and columns, 2x2 bins of two each: bottom-right cells 5, 7, 13, 15.
    np.testing.assert_array_equal(_max_roi_pool(RAMP, [[0, 0, 0, 3, 3]], [2, 2])[0, 0], [[5, 7], [13, 15]])
    # Corners round once scaled: (2.2, 0.6, 5.4, 3.8) * 0.5 is (1.1, 0.3, 2.7, 1.9): (1, 0)-(3, 2).
    # Three columns over two bins cut at floor(3/2) = 1 and ceil(3/2) = 2: columns 1-2 and 2-3.
    got = _max_roi_pool(RAMP, [[0, 2.2, 0.6, 5.4, 3.8]], [1, 2], spatial_scale=0.5)
    np.testing.assert_array_equal(got[0, 0], [[4 * 2 + 2, 4 * 2 + 3]])
    # A box reaching past the image keeps the cells inside: (-2, -2)-(1, 1) in 2x2 bins has
    # bins (-2..-1) and (0..1) per axis; the first ones read nothing (0), the last reads cell (1, 1).
    np.testing.assert_array_equal(_max_roi_pool(RAMP, [[0, -2, -2, 1, 1]], [2, 2])[0, 0], [[0, 0], [0, 5]])
    # A reversed box counts as one cell; the batch index picks the image.
    two = np.stack([RAMP[0], -RAMP[0]])
    assert _max_roi_pool(two, [[1, 2, 2, 1, 1]], [1, 1]).item() == -10.0


def test_max_roi_pool_boxes_near_a_jump_are_unsafe() -> None:
    """A corner within ROUND_GAP of a tie, a bin left empty, or a cut at a whole cell that a float
    division could move (size 1 in 3 bins: 1/3 is inexact) is refused; a clear box is not."""
    assert roi_pool_unsafe([0.45, 0, 3, 3], 1.0, [2, 2], (4, 4))
    assert roi_pool_unsafe([-2, -2, 1, 1], 1.0, [2, 2], (4, 4))
    assert roi_pool_unsafe([1, 1, 1, 1], 1.0, [1, 3], (4, 4))  # 3 * (1/3) may ceil to 2 cells
    assert not roi_pool_unsafe([0, 0, 2, 2], 1.0, [3, 3], (4, 4))  # 3 / 3 is exact
    assert not roi_pool_unsafe([0, 0, 3, 3], 1.0, [2, 2], (4, 4))


def _deform_conv(
    x: np.ndarray, w: np.ndarray, offset: np.ndarray, *extra: np.ndarray | None, **attrs: Any
) -> np.ndarray:
    operands = [_tensor(x), _tensor(w), _tensor(offset), *(None if e is None else _tensor(e) for e in extra)]
    (y,) = SPECS["DeformConv"].reference(attrs, operands)  # type: ignore[arg-type]
    return y.numpy()


def test_deform_conv_by_hand() -> None:
    """A 1x1 kernel of one reads X at (y + dy, x + dx): on RAMP (4y + x) that is 4 (y + dy) + x + dx
    inside, and the taps past the last row or column read zeros."""
    one = np.ones((1, 1, 1, 1), dtype=np.float32)
    shift = np.stack([np.full((4, 4), 0.5), np.full((4, 4), 0.25)]).reshape(1, 2, 4, 4).astype(np.float32)
    y = _deform_conv(RAMP, one, shift)[0, 0]
    assert y[0, 0] == pytest.approx(2.25) and y[1, 2] == pytest.approx(8.25)
    assert y[3, 0] == pytest.approx(0.5 * 12.25)  # rows 3 and 4 (zero) half each
    assert y[3, 3] == pytest.approx(0.5 * 0.75 * 15)  # and columns 3 and 4 at 0.75 and 0.25
    mask = np.full((1, 1, 4, 4), 0.5, dtype=np.float32)
    assert _deform_conv(RAMP, one, shift, None, mask)[0, 0, 0, 0] == pytest.approx(1.125)
    # Zero offsets make it a convolution: a 2x2 kernel keeping its bottom-right tap, dilation 2,
    # reads X[y + 2, x + 2]; pads 1 at the start shift the window up and left by one.
    corner = np.array([0, 0, 0, 1], dtype=np.float32).reshape(1, 1, 2, 2)
    still = np.zeros((1, 8, 2, 2), dtype=np.float32)
    np.testing.assert_array_equal(_deform_conv(RAMP, corner, still, dilations=[2, 2])[0, 0], [[10, 11], [14, 15]])
    padded = _deform_conv(RAMP, corner, np.zeros((1, 8, 3, 3), np.float32), pads=[1, 1, 0, 0], dilations=[2, 2])
    np.testing.assert_array_equal(padded[0, 0], [[5, 6, 7], [9, 10, 11], [13, 14, 15]])
    # Two groups and two offset groups: channel 1 (tens) is read one row up, so row 0 reads zeros;
    # the bias adds 1 to it.
    x = np.concatenate([RAMP, np.full_like(RAMP, 10)], axis=1)
    offsets = np.zeros((1, 4, 4, 4), dtype=np.float32)
    offsets[0, 2] = -1.0
    both = _deform_conv(
        x, np.ones((2, 1, 1, 1), np.float32), offsets, np.array([0, 1], np.float32), group=2, offset_group=2
    )
    np.testing.assert_array_equal(both[0, 0], RAMP[0, 0])
    np.testing.assert_array_equal(both[0, 1], [[1] * 4, *[[11] * 4] * 3])


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_deform_conv_one_cell_axis() -> None:
    """The witness for the evaluator's DeformConv entry: a 1x3 image, a 1x1 kernel of one and
    offsets (0, -0.5) read X[0, x - 0.5]; onnxruntime does so, the evaluator fails."""
    x = np.array([[[[2.0, 4.0, 8.0]]]], dtype=np.float32)
    offset = np.stack([np.zeros((1, 3)), np.full((1, 3), -0.5)]).reshape(1, 2, 1, 3).astype(np.float32)
    feeds = {"x": x, "w": np.ones((1, 1, 1, 1), np.float32), "offset": offset}
    infos = [helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, v.shape) for k, v in feeds.items()]
    node = helper.make_node("DeformConv", list(feeds), ["y"])
    graph = helper.make_graph([node], "g", infos, [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    want = [1.0, 3.0, 6.0]
    assert _deform_conv(*feeds.values()).reshape(-1).tolist() == want
    assert run_ort(model, feeds, optimize=False)[0].reshape(-1).tolist() == want
    with pytest.raises(ValueError, match="NaN"):
        evaluate(model, feeds)


def _deform_forms(node: onnx.NodeProto, model: onnx.ModelProto) -> set[str]:
    forms = {f"inputs={len(node.input)}"}
    forms.add("offset=Conv" if any(n.op_type == "Conv" for n in model.graph.node) else "offset=constant")
    forms.add("bias=absent" if len(node.input) < 4 or not node.input[3] else "bias=present")
    for name, unit in (("strides", 1), ("dilations", 1), ("pads", 0), ("group", 1), ("offset_group", 1)):
        value = attr(node, name)
        values = value if isinstance(value, list) else [value]
        forms.add(f"{name}=default" if value is None else f"{name}={'unit' if set(values) == {unit} else 'other'}")
    forms.add("kernel_shape=default" if attr(node, "kernel_shape") is None else "kernel_shape=explicit")
    return forms


def test_deform_conv_forms_are_emitted() -> None:
    seen = _seen("DeformConv", 19, range(60), _deform_forms)
    wanted = {"inputs=3", "inputs=4", "inputs=5", "offset=Conv", "offset=constant", "bias=absent", "bias=present"}
    wanted |= {
        f"{a}={b}"
        for a in ("strides", "dilations", "pads", "group", "offset_group")
        for b in ("default", "unit", "other")
    }
    wanted |= {"kernel_shape=default", "kernel_shape=explicit"}
    assert wanted <= seen, sorted(wanted - seen)


TVM_CASES = [("RoiAlign", 13), ("RoiAlign", 21), ("MaxRoiPool", 13)]
"""Ops TVM 0.27's Relax ONNX frontend converts, at the opsets whose forms differ."""

TVM_DEFECTS: dict[str, tuple[str, Known]] = {
    "RoiAlign": (
        "under half_pixel (RoiAlign-16's default) shifts the boxes by half a cell before spatial_scale"
        " rather than after it ((x - 0.5) * scale, not x * scale - 0.5), so any scale but 1 samples"
        " elsewhere (see the hand-built cases in test_tvm_agrees_with_the_reference)",
        lambda n, m, o: (
            o >= 16
            and attr(n, "coordinate_transformation_mode", "half_pixel") == "half_pixel"
            and attr(n, "spatial_scale", 1.0) != 1.0
        ),
    ),
}
"""op -> (how TVM 0.27 departs from the spec on a form, which nodes); those models are not compared."""


def test_tvm_agrees_with_the_reference() -> None:
    with WorkerClient(parse_backend("tvm:default"), timeout_s=120, compile_timeout_s=300) as tvm:
        compared = tvm_agreement(tvm, TVM_CASES, _generate, TVM_DEFECTS)
        # TVM takes the spec's max (the largest sample: 1 on all-ones X, where onnxruntime gives
        # 0.36), and shifts half_pixel boxes before scaling: (2 - 0.5) * 0.5 = 0.75, so box
        # (2, 2)-(4, 4) at scale 0.5 samples (1.25, 1.25) and reads 6.25, not (1, 1) and 5.
        ones, box = np.ones((1, 1, 4, 4), dtype=np.float32), np.array([[0.3, 0.3, 2.7, 2.7]], dtype=np.float32)
        for x, boxes, attrs, expected in (
            (ones, box, {"mode": "max", "sampling_ratio": 2}, 1.0),
            (RAMP, np.array([[2, 2, 4, 4]], dtype=np.float32), {"sampling_ratio": 1, "spatial_scale": 0.5}, 6.25),
        ):
            hand, feeds = _roi_model(16, x, boxes, **attrs)
            result = tvm.run(hand.SerializeToString(), feeds)
            assert result.status is Status.ok and next(iter(result.outputs.values())).item() == pytest.approx(expected)
        assert _roi_align(RAMP, [[2, 2, 4, 4]], sampling_ratio=1, spatial_scale=0.5).item() == pytest.approx(5.0)
        assert run_ort(hand, feeds, optimize=False)[0].item() == pytest.approx(5.0)
    assert compared >= 4 * len(TVM_CASES)


def _computed_boxes_model(op: str, x: np.ndarray, boxes: np.ndarray, **attrs: Any) -> tuple[onnx.ModelProto, Inputs]:
    """`op` over boxes that a graph computes (an Add of zeros, which makes them inexact), as a
    detector computes its proposals."""
    feeds = {"x": x, "r": boxes}
    inits = [numpy_helper.from_array(np.zeros_like(boxes), "zero")]
    extra = ["batch"] if op == "RoiAlign" else []
    inits += [numpy_helper.from_array(np.zeros(len(boxes), dtype=np.int64), "batch")] if extra else []
    nodes = [
        helper.make_node("Add", ["r", "zero"], ["boxes"]),
        helper.make_node(op, ["x", "boxes", *extra], ["y"], **attrs),
    ]
    infos = [helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, v.shape) for k, v in feeds.items()]
    graph = helper.make_graph(
        nodes, "g", infos, [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8), feeds


def test_computed_boxes_at_a_jump_are_unsafe() -> None:
    """A computed box whose sample sits at x = -1 (RoiAlign) or whose scaled corner is a
    half-integer (MaxRoiPool) is refused by the unsafe table; one clear of it is not."""
    from generator.values import margin_hits

    def hits(op: str, boxes: list[list[float]], **attrs: Any) -> list[str]:
        model, feeds = _computed_boxes_model(op, RAMP, np.array(boxes, dtype=np.float32), **attrs)
        return [h.op_type for h in margin_hits(model, feeds)]

    edge = {"sampling_ratio": 1, "coordinate_transformation_mode": "output_half_pixel"}
    assert hits("RoiAlign", [[-1.5, 0.2, -0.5, 1.2]], **edge) == ["RoiAlign"]  # x sample at -1
    assert hits("RoiAlign", [[-1.3, 0.2, -0.3, 1.2]], **edge) == []
    assert hits("RoiAlign", [[0.0, 0.2, 3.0, 1.2]]) == ["RoiAlign"]  # an adaptive bin of 3 cells
    assert hits("MaxRoiPool", [[0, 1.25, 0, 3, 3]], pooled_shape=[2, 2], spatial_scale=2.0) == ["MaxRoiPool"]
    assert hits("MaxRoiPool", [[0, 1.1, 0, 3, 3]], pooled_shape=[2, 2], spatial_scale=2.0) == []
