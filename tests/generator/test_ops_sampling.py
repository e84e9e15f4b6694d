"""The sampling ops (GridSample, AffineGrid, MaxUnpool, Col2Im) for every dtype each declares.

A generated single-op model must pass onnx.checker's full check and strict shape inference,
and the torch reference must agree with onnxruntime (optimizations off and on) and with
onnx.reference.ReferenceEvaluator; one test also runs TVM on the ops its ONNX frontend
converts. Where one of them is known to be wrong, the form is listed below with the reason
and an independent witness, and the others still have to agree. Hand-worked cases pin the
reference to numbers computed without torch, and every attribute form drawn is asserted seen.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
import torch
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from backends.client import WorkerClient
from backends.spec import parse_backend
from generator.api import GenConfig, generate
from generator.dtypes import DType
from generator.ops import registry
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

SPECS = {op: spec for op, spec in sorted(registry().items()) if spec.__module__ == "generator.ops.sampling"}
CASES = [(op, dtype) for op, spec in SPECS.items() for dtype in classic_dtypes(spec)]
SEEDS = range(12)


def _out_type(model: onnx.ModelProto) -> tuple[int, list[int]]:
    t = model.graph.output[0].type.tensor_type
    return int(t.elem_type), [d.dim_value for d in t.shape.dim]


EVALUATOR_DEFECTS: dict[str, tuple[str, Known]] = {
    "AffineGrid": (
        "returns the grid as float32 whatever theta's type (onnxruntime returns theta's type, as"
        " the schema's single type parameter T1 requires; see test_affine_grid_keeps_theta_type)",
        lambda n, m, o: _out_type(m)[0] != onnx.TensorProto.FLOAT,
    ),
    "GridSample": (
        "under bicubic border padding clamps an out-of-bounds sampling position itself, dim by dim,"
        " before reading its taps, where onnxruntime and torch.nn.functional.grid_sample (which the"
        " spec names) clamp each tap only (see test_bicubic_border_clamps_taps_not_positions); and it"
        " raises on GridSample-16's mode names bilinear and bicubic (the default included), which that"
        " version's schema lists and onnxruntime runs; and it unnormalizes float64 positions into"
        " float32 (off by ~1e-5) and interpolates float16 in float16 (off by up to ~0.1), where"
        " onnxruntime agrees with the reference to 1e-13 and 2e-4",
        lambda n, m, o: (
            (o < 20 and attr(n, "mode", "bilinear") != "nearest")
            or (attr(n, "mode", "") == "cubic" and attr(n, "padding_mode", "zeros") == "border")
            or _out_type(m)[0] != onnx.TensorProto.FLOAT
        ),
    ),
    "MaxUnpool": (
        "given output_shape, reads the indices as flat positions in the smaller tensor the windows"
        " imply and pads that, where MaxPool's indices (and onnxruntime) count positions in the"
        " output_shape tensor itself (see test_max_unpool_indices_count_in_output_shape)",
        lambda n, m, o: len(n.input) > 2 and bool(n.input[2]),
    ),
}
"""op -> (why onnx.reference.ReferenceEvaluator is wrong, which nodes it is wrong for)."""

ORT_DEFECTS: dict[str, tuple[str, Known]] = {
    "AffineGrid": (
        "float16 2-D grids (theta [N, 2, 3]) fail at run time inside the function body it expands"
        " (Split: axis 1 is not in valid range [-1,0]); float and double, and float16 3-D, run",
        lambda n, m, o: _out_type(m)[0] == onnx.TensorProto.FLOAT16 and _out_type(m)[1][-1] == 2,
    ),
    "Col2Im": (
        "with a dilation above 1 and more than one channel, sums blocks into the wrong cells (or"
        " leaves zeros), the first channel included at times; one channel comes out right. The"
        " evaluator and a hand-worked case agree with the reference (see"
        " test_col2im_dilated_channels_in_onnxruntime). Every dilated node is left out, since the"
        " channel count is not in the model's declared shapes",
        lambda n, m, o: any(d > 1 for d in attr(n, "dilations", [])),
    ),
}
"""op -> (how onnxruntime 1.31 departs from the spec, which nodes it does it for)."""


def _generate(op: str, dtype: DType, opset: int, seed: int) -> tuple[onnx.ModelProto, Inputs]:
    case = generate(
        seed,
        GenConfig(wide_types=0.0, nodes=1, ops=[op], dtypes=[dtype], opset=opset, values="none", max_elements=2048),
    )
    return case.model, case.inputs


@pytest.mark.parametrize(("op", "dtype"), CASES, ids=[f"{op}-{d}" for op, d in CASES])
def test_op_is_valid_runs_and_matches_the_oracles(op: str, dtype: DType) -> None:
    agreed = 0
    for seed in SEEDS:
        opset = opset_for(SPECS[op], seed)
        model, inputs = _generate(op, dtype, opset, seed)
        agreed += check_model(op, opset, seed, model, inputs, ORT_DEFECTS, EVALUATOR_DEFECTS)
    assert agreed >= len(SEEDS) // 2, f"{op} {dtype}: too few oracle checks ({agreed})"


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def _forms(op: str, node: onnx.NodeProto, model: onnx.ModelProto) -> set[str]:
    """The attribute forms a node shows: each attribute as written or left to its default."""
    forms = {f"{a.name}={helper.get_attribute_value(a)!r}" for a in node.attribute}
    names = ("mode", "padding_mode", "align_corners") if op == "GridSample" else ("align_corners",)
    forms |= {f"{name}=default" for name in names if attr(node, name) is None}
    forms.add(f"rank={len(_out_type(model)[1])}")
    if op == "GridSample":
        forms.add("grid=AffineGrid" if any(n.op_type == "AffineGrid" for n in model.graph.node) else "grid=constant")
    return forms


def _seen_forms(op: str, opset: int, seeds: range) -> set[str]:
    seen: set[str] = set()
    for seed in seeds:
        cfg = GenConfig(
            wide_types=0.0, nodes=1, ops=[op], dtypes=[DType.float32], opset=opset, values="none", max_elements=2048
        )
        case = generate(seed, cfg)
        node = next(n for n in case.model.graph.node if n.op_type == op)
        seen |= {f"{op}:{f}" for f in _forms(op, node, case.model)}
    return seen


def test_every_form_is_emitted_at_the_opsets_that_have_it() -> None:
    old = _seen_forms("GridSample", 16, range(40))
    modes16 = {f"GridSample:mode={m!r}" for m in (b"bilinear", b"nearest", b"bicubic")}
    padding = {f"GridSample:padding_mode={m!r}" for m in (b"zeros", b"border", b"reflection")}
    common = {f"GridSample:{f}" for f in ("mode=default", "padding_mode=default", "align_corners=default")}
    common |= {"GridSample:align_corners=0", "GridSample:align_corners=1", "GridSample:grid=constant"}
    assert modes16 | padding | common | {"GridSample:rank=4"} <= old, sorted(old)
    assert not any("rank=5" in f or "AffineGrid" in f or "'linear'" in f for f in old), sorted(old)
    new = _seen_forms("GridSample", 20, range(40))
    modes20 = {f"GridSample:mode={m!r}" for m in (b"linear", b"nearest", b"cubic")}
    wanted = modes20 | padding | common | {"GridSample:rank=4", "GridSample:rank=5", "GridSample:grid=AffineGrid"}
    assert wanted <= new, sorted(wanted - new)
    affine = _seen_forms("AffineGrid", 20, range(40))
    forms = {"align_corners=0", "align_corners=1", "align_corners=default", "rank=4", "rank=5"}
    assert {f"AffineGrid:{f}" for f in forms} <= affine, sorted(affine)


def _grid_sample(x: np.ndarray, grid: list[float], **attrs: Any) -> np.ndarray:
    g = _tensor(np.asarray(grid, dtype=np.float32).reshape(1, 1, -1, 2))
    (y,) = SPECS["GridSample"].reference(attrs, [_tensor(x), g])
    return y.numpy().reshape(-1)


def test_grid_sample_by_hand() -> None:
    x = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32).reshape(1, 1, 2, 2)
    # align_corners=1: -1 and 1 are the corner centres, 0 the middle of all four.
    got = _grid_sample(x, [0, 0, -1, -1, 1, -1, 0.5, 0], mode="linear", align_corners=1)
    np.testing.assert_allclose(got, [2.5, 1.0, 2.0, 2.75], rtol=1e-6)
    # align_corners=0: (-1, -1) is the outer corner, position (-0.5, -0.5): a quarter of X[0, 0]
    # under zeros, all of it under border; (-1.5, 0) is x = -1, mirrored at -0.5 to 0.
    assert _grid_sample(x, [-1, -1], mode="linear")[0] == pytest.approx(0.25)
    assert _grid_sample(x, [-1, -1], mode="linear", padding_mode="border")[0] == pytest.approx(1.0)
    assert _grid_sample(x, [-1.5, 0], mode="linear", padding_mode="reflection")[0] == pytest.approx(2.0)
    # nearest: (-0.2, 0.6) is at x = 0.3, y = 1.1; -1.1 is x = -0.6, rounded to -1 (outside: 0)
    assert _grid_sample(x, [-0.2, 0.6, -1.1, 0], mode="nearest").tolist() == [3.0, 0.0]
    # GridSample-16's name for linear: (x, y) = (0.4, 1.6) over corner centres
    assert _grid_sample(x, [-0.2, 0.6], mode="bilinear", align_corners=1)[0] == pytest.approx(3.0)


def test_bicubic_taps_by_hand() -> None:
    """Keys' a = -0.75 weights at fraction 0.5 are (-3/32, 19/32, 19/32, -3/32); on the row
    1, 2, 3, 4 at x = 0.5 (align_corners=1) the tap at -1 reads 0 (zeros), 1 (border: clamped)
    or 2 (reflection: mirrored at 0)."""
    x = np.tile(np.arange(1.0, 5.0, dtype=np.float32), (4, 1)).reshape(1, 1, 4, 4)
    g = [2 * 0.5 / 3 - 1, 0.0]
    expect = {"zeros": 1.5, "border": 1.40625, "reflection": 1.3125}
    for padding, want in expect.items():
        got = _grid_sample(x, g, mode="cubic", padding_mode=padding, align_corners=1)[0]
        assert got == pytest.approx(want, abs=1e-6), padding
    assert _grid_sample(x, [0.0, 0.0], mode="bicubic", align_corners=1)[0] == pytest.approx(2.5)


def test_bicubic_border_clamps_taps_not_positions() -> None:
    """The witness for the evaluator's GridSample entry: at x = -0.5 cells (outside the
    corner-centre bounds) torch.nn.functional.grid_sample and onnxruntime read the taps -2..1
    clamped (1, 1, 1, 11 on this row: 1 - 3/32 * 10), while the evaluator first moves the
    position to 0 and reads 1."""
    x = np.tile(np.arange(1.0, 40.0, 10.0, dtype=np.float32), (4, 1)).reshape(1, 1, 4, 4)
    grid = np.array([2 * -0.5 / 3 - 1, 0.0], dtype=np.float32).reshape(1, 1, 1, 2)
    ours = _grid_sample(x, grid.reshape(-1).tolist(), mode="cubic", padding_mode="border", align_corners=1)
    torch_y = torch.nn.functional.grid_sample(
        _tensor(x), _tensor(grid), mode="bicubic", padding_mode="border", align_corners=True
    )
    model = _single_node("GridSample", {"x": x, "g": grid}, mode="cubic", padding_mode="border", align_corners=1)
    ort_y = run_ort(model, {"x": x, "g": grid}, optimize=False)[0]
    evaluator_y = evaluate(model, {"x": x, "g": grid})[0]
    np.testing.assert_allclose(ours, torch_y.numpy().reshape(-1), atol=1e-6)
    np.testing.assert_allclose(ours, ort_y.reshape(-1), atol=1e-6)
    assert ours[0] == pytest.approx(0.0625, abs=1e-5)
    assert evaluator_y.reshape(-1)[0] == pytest.approx(1.0)


def _single_node(op: str, inputs: Inputs, **attrs: Any) -> onnx.ModelProto:
    infos = [
        helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()
    ]
    out = helper.make_tensor_value_info("y", infos[0].type.tensor_type.elem_type, None)
    graph = helper.make_graph([helper.make_node(op, list(inputs), ["y"], **attrs)], "g", infos, [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def test_affine_grid_by_hand() -> None:
    theta = np.array([[[2.0, 0.0, 0.5], [0.0, 1.0, 0.0]]], dtype=np.float32)
    size = np.array([1, 1, 2, 3], dtype=np.int64)
    ref = SPECS["AffineGrid"].reference
    (centres,) = ref({}, [_tensor(theta), _tensor(size)])
    # align_corners=0: x at -2/3, 0, 2/3 (then 2x + 0.5), y at -1/2, 1/2.
    xs, ys = [2 * v + 0.5 for v in (-2 / 3, 0, 2 / 3)], [-0.5, 0.5]
    np.testing.assert_allclose(centres.numpy()[0], [[[x, y] for x in xs] for y in ys], rtol=1e-6)
    (corners,) = ref({"align_corners": 1}, [_tensor(theta), _tensor(size)])
    np.testing.assert_allclose(corners.numpy()[0], [[[2 * x + 0.5, y] for x in (-1, 0, 1)] for y in (-1, 1)])
    theta3 = np.concatenate([np.eye(3), np.ones((3, 1))], axis=1)[None].astype(np.float64)
    (grid3,) = ref({"align_corners": 1}, [_tensor(theta3), _tensor(np.array([1, 1, 2, 2, 2], dtype=np.int64))])
    assert grid3.dtype == torch.float64 and grid3.shape == (1, 2, 2, 2, 3)
    assert grid3[0, 1, 0, 1].tolist() == [2.0, 0.0, 2.0]  # (x, y, z) = (1, -1, 1), each plus 1


def test_affine_grid_keeps_theta_type() -> None:
    """The witness for the evaluator's AffineGrid entry: onnxruntime returns double for double."""
    theta = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], dtype=np.float64)
    size = np.array([1, 1, 2, 2], dtype=np.int64)
    model = _single_node("AffineGrid", {"t": theta, "s": size})
    got = run_ort(model, {"t": theta, "s": size}, optimize=False)[0]
    assert got.dtype == np.float64
    assert evaluate(model, {"t": theta, "s": size})[0].dtype == np.float32


def test_nearest_ties_on_a_computed_grid_are_unsafe() -> None:
    """A computed grid (AffineGrid's) that puts a nearest-mode position on a half-integer is
    refused by the unsafe table, one a few cells off it is not."""
    from generator.values import margin_hits

    def hits(shift: float) -> list[str]:
        # x = ((g + 1) * 4 - 1) / 2 over a 4-wide input: a shift of 0.25 moves g by it and x by 0.5.
        theta = np.array([[[1.0, 0.0, shift], [0.0, 1.0, 0.0]]], dtype=np.float32)
        x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
        nodes = [
            helper.make_node("AffineGrid", ["t", "s"], ["g"]),
            helper.make_node("GridSample", ["x", "g"], ["y"], mode="nearest"),
        ]
        infos = [helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, v.shape) for k, v in (("x", x), ("t", theta))]
        inits = [numpy_helper.from_array(np.array([1, 1, 4, 4], dtype=np.int64), "s")]
        out = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
        graph = helper.make_graph(nodes, "g", infos, [out], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
        return [h.op_type for h in margin_hits(model, {"x": x, "t": theta})]

    assert hits(0.25) == ["GridSample"]  # every position lands on a tie: x = k + 0.5
    assert hits(0.1) == []


TVM_CASES = [("GridSample", 16), ("GridSample", 20), ("AffineGrid", 20), ("MaxUnpool", 13)]
"""Ops TVM 0.27's Relax ONNX frontend converts, at the opsets whose forms differ."""

TVM_DEFECTS: dict[str, tuple[str, Known]] = {
    "MaxUnpool": (
        "fails to import a node with the output_shape input (a constant): AttributeError:"
        " 'GenericConst' object has no attribute 'tolist'",
        lambda n, m, o: len(n.input) > 2 and bool(n.input[2]),
    ),
}
"""op -> (how TVM 0.27 fails on a form, which nodes); those models are not compared."""


def test_tvm_agrees_with_the_reference() -> None:
    with WorkerClient(parse_backend("tvm:default"), timeout_s=120, compile_timeout_s=300) as tvm:
        compared = tvm_agreement(tvm, TVM_CASES, _generate, TVM_DEFECTS)
    assert compared >= 6 * len(TVM_CASES)


def test_max_unpool_forms_are_emitted() -> None:
    seen: set[str] = set()
    for seed in range(40):
        cfg = GenConfig(
            wide_types=0.0,
            nodes=1,
            ops=["MaxUnpool"],
            dtypes=[DType.float32],
            opset=13,
            values="none",
            max_elements=2048,
        )
        case = generate(seed, cfg)
        node = next(n for n in case.model.graph.node if n.op_type == "MaxUnpool")
        seen.add(f"rank={len(_out_type(case.model)[1])}")
        seen.add("output_shape" if len(node.input) > 2 else "inferred shape")
        for name, unit in (("strides", 1), ("pads", 0)):
            value = attr(node, name)
            seen.add(f"{name}=default" if value is None else f"{name}={'unit' if set(value) == {unit} else 'other'}")
        kernel, strides = attr(node, "kernel_shape"), attr(node, "strides") or [1] * len(attr(node, "kernel_shape"))
        seen.add("overlapping" if any(s < k for s, k in zip(strides, kernel, strict=True)) else "disjoint")
    wanted = {"rank=3", "rank=4", "rank=5", "output_shape", "inferred shape", "overlapping", "disjoint"}
    wanted |= {f"{a}={b}" for a in ("strides", "pads") for b in ("default", "unit", "other")}
    assert wanted <= seen, sorted(wanted - seen)


def test_max_unpool_by_hand() -> None:
    """A 2x2 pool of a 4x4 plane unpooled: each value back at its flat index, zeros elsewhere;
    with output_shape 5x5 the same indices count in the 5-wide rows."""
    x = np.array([[[[5.0, 6.0], [7.0, 8.0]]]], dtype=np.float32)
    index = np.array([[[[1, 7], [8, 14]]]], dtype=np.int64)
    unpool = SPECS["MaxUnpool"].reference
    (y,) = unpool({"kernel_shape": [2, 2], "strides": [2, 2]}, [_tensor(x), _tensor(index)])
    want = np.zeros(16, dtype=np.float32)
    want[[1, 7, 8, 14]] = [5, 6, 7, 8]
    np.testing.assert_array_equal(y.numpy(), want.reshape(1, 1, 4, 4))
    shape = np.array([1, 1, 5, 5], dtype=np.int64)
    (y5,) = unpool({"kernel_shape": [2, 2], "strides": [2, 2]}, [_tensor(x), _tensor(index), _tensor(shape)])
    assert y5.shape == (1, 1, 5, 5) and y5[0, 0, 1, 2] == 6 and y5[0, 0, 1, 3] == 7 and float(y5.sum()) == 26
    # pads shrink the implied output: (2 - 1) * 2 + 2 - 1 - 0 = 3 per dim
    corners = np.array([[[[0, 2], [6, 8]]]], dtype=np.int64)
    (y3,) = unpool({"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 0, 0]}, [_tensor(x), _tensor(corners)])
    assert y3.reshape(-1).tolist() == [5, 0, 6, 0, 0, 0, 7, 0, 8]


def test_max_unpool_indices_count_in_output_shape() -> None:
    """The witness for the evaluator's MaxUnpool entry: MaxPool of a 5x5 plane (2x2, stride 2)
    names flat positions in that plane, and onnxruntime puts them back there when output_shape
    says 5x5; the evaluator counts them in a 4x4 plane."""
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    pool = _single_node("MaxPool", {"x": x}, kernel_shape=[2, 2], strides=[2, 2])
    pool.graph.output.append(helper.make_tensor_value_info("i", onnx.TensorProto.INT64, None))
    pool.graph.node[0].output.append("i")
    pooled, index = run_ort(pool, {"x": x}, optimize=False)
    assert index.reshape(-1).tolist() == [6, 8, 16, 18]
    feeds = {"p": pooled, "i": index, "s": np.array([1, 1, 5, 5], dtype=np.int64)}
    model = _single_node("MaxUnpool", feeds, kernel_shape=[2, 2], strides=[2, 2])
    want = np.where(np.isin(np.arange(25), [6, 8, 16, 18]), np.arange(25), 0).astype(np.float32).reshape(1, 1, 5, 5)
    np.testing.assert_array_equal(run_ort(model, feeds, optimize=False)[0], want)
    (ours,) = SPECS["MaxUnpool"].reference(
        {"kernel_shape": [2, 2], "strides": [2, 2]}, [_tensor(v) for v in feeds.values()]
    )
    np.testing.assert_array_equal(ours.numpy(), want)
    with pytest.raises(IndexError):  # index 16 and up lie outside its 4x4 plane
        ReferenceEvaluator(model).run(None, feeds)


def test_col2im_forms_are_emitted() -> None:
    seen: set[str] = set()
    for seed in range(40):
        cfg = GenConfig(
            wide_types=0.0, nodes=1, ops=["Col2Im"], dtypes=[DType.float32], opset=18, values="none", max_elements=2048
        )
        model = generate(seed, cfg).model
        node = next(n for n in model.graph.node if n.op_type == "Col2Im")
        seen.add(f"rank={len(_out_type(model)[1])}")
        for name, unit in (("strides", 1), ("dilations", 1), ("pads", 0)):
            value = attr(node, name)
            seen.add(f"{name}=default" if value is None else f"{name}={'unit' if set(value) == {unit} else 'other'}")
    wanted = {"rank=3", "rank=4"} | {
        f"{a}={b}" for a in ("strides", "dilations", "pads") for b in ("default", "unit", "other")
    }
    assert wanted <= seen, sorted(wanted - seen)


def _col2im(x: np.ndarray, image: list[int], block: list[int], **attrs: Any) -> np.ndarray:
    shapes = [_tensor(np.array(v, dtype=np.int64)) for v in (image, block)]
    (y,) = SPECS["Col2Im"].reference(attrs, [_tensor(x.astype(np.float32)), *shapes])
    return y.numpy()


def test_col2im_by_hand() -> None:
    """Each column's entries are added at its block's cells: 2x2 blocks of ones over a 3x3
    image count how many blocks cover each cell; in 1-D, block offset k of column l lands
    at l * stride + k * dilation - pad."""
    ones = _col2im(np.ones((1, 4, 4)), [3, 3], [2, 2])
    np.testing.assert_array_equal(ones[0, 0], [[1, 2, 1], [2, 4, 2], [1, 2, 1]])
    cols = np.array([[[1, 2, 3], [10, 20, 30]]])
    assert _col2im(cols, [4], [2]).reshape(-1).tolist() == [1, 12, 23, 30]
    assert _col2im(cols, [5], [2], dilations=[2]).reshape(-1).tolist() == [1, 2, 13, 20, 30]
    assert _col2im(cols, [2], [2], pads=[1, 1]).reshape(-1).tolist() == [12, 23]
    assert _col2im(cols[:, :, :2], [4], [2], strides=[2]).reshape(-1).tolist() == [1, 10, 2, 20]
    two = _col2im(np.arange(8).reshape(1, 8, 1), [2], [2])  # 4 channels of one 2-cell block each
    assert two.shape == (1, 4, 2) and two[:, 3].tolist() == [[6, 7]]


def test_col2im_dilated_channels_in_onnxruntime() -> None:
    """The witness for onnxruntime's Col2Im entry: two channels of one 2-cell block, dilation 2.
    Over a one-cell image with pads (2, 1) each channel's image is its block's second cell of the
    first column (3 and 7); over four cells with pads (2, 0), block cell 0 of column l lands at
    l - 2 and cell 1 at l. onnxruntime gets both wrong; one channel alone it gets right."""

    def both(x: np.ndarray, image: int, pads: list[int]) -> tuple[list[float], list[float]]:
        feeds = {"x": x, "image": np.array([image], dtype=np.int64), "block": np.array([2], dtype=np.int64)}
        model = _single_node("Col2Im", feeds, dilations=[2], pads=pads)
        assert evaluate(model, feeds)[0].tolist() == _col2im(x, [image], [2], dilations=[2], pads=pads).tolist()
        return _col2im(x, [image], [2], dilations=[2], pads=pads).reshape(-1).tolist(), run_ort(
            model, feeds, optimize=False
        )[0].reshape(-1).tolist()

    assert both(np.arange(1, 9, dtype=np.float32).reshape(1, 4, 2), 1, [2, 1]) == ([3, 7], [3, 0])
    ours, theirs = both(np.arange(1, 17, dtype=np.float32).reshape(1, 4, 4), 4, [2, 0])
    assert ours == [3 + 5, 4 + 6, 7, 8, 11 + 13, 12 + 14, 15, 16] and theirs[:4] != ours[:4]
    one_channel = np.arange(1, 9, dtype=np.float32).reshape(1, 2, 4)
    assert both(one_channel, 4, [2, 0]) == ([8, 10, 7, 8], [8, 10, 7, 8])
