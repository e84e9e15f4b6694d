"""The schema's unenforced constraints (generator.spec_constraints): each one reports its
violating one-node model and stays quiet on a control that differs only in the violation,
symbolic dims are "cannot tell", the reducer refuses a candidate that introduces an undefined
form the original lacked, and the generator draws none."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from generator.api import GenConfig, generate
from generator.spec_constraints import CONSTRAINTS, undefined_forms, undefined_keys
from generator.values import NoValidValues
from oracles.references import Validity

F, I64, I8, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT8, TensorProto.BOOL
Shape = Sequence[int | str] | None


def one_node(
    op: str,
    inputs: list[tuple[str, int, Shape]],
    opset: int,
    consts: dict[str, np.ndarray] | None = None,
    outputs: int = 1,
    **attrs: Any,
) -> onnx.ModelProto:
    """A model of one node named 'n0': `inputs` are graph inputs, `consts` initializers, in
    the order the node reads them ("" skips an optional input)."""
    consts = consts or {}
    graph_inputs = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs if n]
    node_inputs = [n for n, _, _ in inputs] + list(consts)
    outs = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, node_inputs, outs, name="n0", **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        graph_inputs,
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs],
        initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def i64(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def conv(w: Shape, b: Shape = None, x: Shape = None, **attrs: Any) -> onnx.ModelProto:
    inputs: list[tuple[str, int, Shape]] = [("x", F, x or [1, 4, 8, 8]), ("w", F, w)]
    if b is not None:
        inputs.append(("b", F, b))
    return one_node("Conv", inputs, 17, **attrs)


def affine(theta: Shape, size: np.ndarray) -> onnx.ModelProto:
    return one_node("AffineGrid", [("theta", F, theta)], 20, {"size": size})


def stft(signal: Shape, step: np.ndarray, **attrs: Any) -> onnx.ModelProto:
    consts = {"step": step, "window": np.ones(8, np.float32)}
    return one_node("STFT", [("s", F, signal)], 17, consts, **attrs)


def scatter(op: str, data: Shape, indices: Shape, updates: Shape) -> onnx.ModelProto:
    return one_node(op, [("d", F, data), ("i", I64, indices), ("u", F, updates)], 18)


def quant(op: str, opset: int, x: int, zero_point: Shape) -> onnx.ModelProto:
    zero = I8 if op == "QuantizeLinear" else x
    return one_node(op, [("x", x, [4]), ("s", F, []), ("z", zero, zero_point)], opset)


def blocked(op: str, scale: Shape, block_size: int, x: Shape = None) -> onnx.ModelProto:
    """A 4x6 input blocked along its last axis."""
    x_type = F if op == "QuantizeLinear" else I8
    return one_node(op, [("x", x_type, x or [4, 6]), ("s", F, scale)], 21, axis=-1, block_size=block_size)


def grid(x: Shape, g: Shape, opset: int, **attrs: Any) -> onnx.ModelProto:
    return one_node("GridSample", [("x", F, x), ("g", F, g)], opset, **attrs)


def unary(op: str, opset: int, x: Shape = None, **attrs: Any) -> onnx.ModelProto:
    return one_node(op, [("x", F, x or [2, 3])], opset, **attrs)


def with_operand(op: str, opset: int, x: Shape, second: Shape, kind: int = I64, **attrs: Any) -> onnx.ModelProto:
    return one_node(op, [("x", F, x), ("k", kind, second)], opset, **attrs)


def lstm(direction: str) -> onnx.ModelProto:
    ins: list[tuple[str, int, Shape]] = [("x", F, [2, 1, 3]), ("w", F, [1, 16, 3]), ("r", F, [1, 16, 4])]
    return one_node("LSTM", ins, 14, hidden_size=4, direction=direction)


def roi_align(**attrs: Any) -> onnx.ModelProto:
    ins: list[tuple[str, int, Shape]] = [("x", F, [1, 1, 4, 4]), ("r", F, [2, 4]), ("i", I64, [2])]
    return one_node("RoiAlign", ins, 16, **attrs)


def nms(boxes: Shape, **attrs: Any) -> onnx.ModelProto:
    return one_node("NonMaxSuppression", [("b", F, boxes), ("s", F, [1, 1, 5])], 11, **attrs)


def reverse(lengths: Shape, **attrs: Any) -> onnx.ModelProto:
    return one_node("ReverseSequence", [("x", F, [4, 3, 2]), ("l", I64, lengths)], 10, **attrs)


def deform(x: Shape, w: Shape, **attrs: Any) -> onnx.ModelProto:
    ins: list[tuple[str, int, Shape]] = [("x", F, x), ("w", F, w), ("o", F, [1, 8, 2, 2])]
    return one_node("DeformConv", ins, 19, **attrs)


def einsum(equation: str) -> onnx.ModelProto:
    return one_node("Einsum", [("a", F, [2, 3, 4]), ("b", F, [2, 4, 5])], 12, equation=equation)


@dataclass(frozen=True)
class Case:
    statement: str
    violating: onnx.ModelProto
    control: onnx.ModelProto


SIZE4, SIZE5 = i64(2, 3, 8, 8), i64(2, 3, 4, 8, 8)
CASES = {
    "affine_2d": Case("(N, 2, 3) for a 4-element size", affine([2, 3, 4], SIZE4), affine([2, 2, 3], SIZE4)),
    "affine_3d": Case("(N, 3, 4) for a 5-element size", affine([2, 2, 3], SIZE5), affine([2, 3, 4], SIZE5)),
    "affine_n": Case("size's N must equal theta's N", affine([3, 2, 3], SIZE4), affine([2, 2, 3], SIZE4)),
    "dft_17": Case(
        "last dim must be 1 (real) or 2",
        one_node("DFT", [("x", F, [1, 8, 3])], 17),
        one_node("DFT", [("x", F, [1, 8, 2])], 17),
    ),
    "dft_20": Case(
        "last dim must be 1 (real) or 2",
        one_node("DFT", [("x", F, [1, 8, 3])], 20),
        one_node("DFT", [("x", F, [1, 8, 2])], 20),
    ),
    "stft_onesided": Case("onesided=1", stft([1, 16, 2], i64(4)[0]), stft([1, 16, 2], i64(4)[0], onesided=0)),
    "stft_rank": Case("rank 3", stft([16, 1], i64(4)[0]), stft([1, 16, 1], i64(4)[0])),
    "stft_step": Case("frame_step must be a scalar", stft([1, 16, 1], i64(4)), stft([1, 16, 1], i64(4)[0])),
    "conv_channels": Case("X.shape[1] must equal", conv([2, 3, 3, 3]), conv([2, 4, 3, 3])),
    "conv_group": Case("W.shape[0] must divide", conv([3, 2, 3, 3], group=2), conv([4, 2, 3, 3], group=2)),
    "conv_bias": Case("B must have W.shape[0]", conv([2, 4, 3, 3], b=[3]), conv([2, 4, 3, 3], b=[2])),
    "conv_kernel": Case(
        "kernel_shape must equal", conv([2, 4, 3, 3], kernel_shape=[2, 2]), conv([2, 4, 3, 3], kernel_shape=[3, 3])
    ),
    "conv_auto_pad": Case(
        "auto_pad must be", conv([2, 4, 3, 3], auto_pad="SAME"), conv([2, 4, 3, 3], auto_pad="VALID")
    ),
    "conv_pads": Case(
        "pads must not be given",
        conv([2, 4, 3, 3], pads=[1, 1, 1, 1], auto_pad="SAME_UPPER"),
        conv([2, 4, 3, 3], pads=[1, 1, 1, 1], auto_pad="NOTSET"),
    ),
    "convtranspose_padding": Case(
        "output_padding must be less",
        one_node(
            "ConvTranspose", [("x", F, [1, 4, 4, 4]), ("w", F, [4, 2, 3, 3])], 17, strides=[2, 2], output_padding=[2, 2]
        ),
        one_node(
            "ConvTranspose", [("x", F, [1, 4, 4, 4]), ("w", F, [4, 2, 3, 3])], 17, strides=[2, 2], output_padding=[1, 1]
        ),
    ),
    "convtranspose_channels": Case(
        "W.shape[0] must equal X.shape[1]",
        one_node("ConvTranspose", [("x", F, [1, 4, 4, 4]), ("w", F, [3, 2, 3, 3])], 17),
        one_node("ConvTranspose", [("x", F, [1, 4, 4, 4]), ("w", F, [4, 2, 3, 3])], 17),
    ),
    "scatter_elements_shape": Case(
        "updates must have the shape of indices",
        scatter("ScatterElements", [4, 5], [2, 5], [2, 4]),
        scatter("ScatterElements", [4, 5], [2, 5], [2, 5]),
    ),
    "scatter_elements_rank": Case(
        "indices must have the rank of data",
        scatter("ScatterElements", [4, 5], [2], [2]),
        scatter("ScatterElements", [4], [2], [2]),
    ),
    "scatter_nd_updates": Case(
        "updates.shape must equal",
        scatter("ScatterND", [4, 5], [2, 1], [2, 4]),
        scatter("ScatterND", [4, 5], [2, 1], [2, 5]),
    ),
    "scatter_nd_depth": Case(
        "at most the rank of data", scatter("ScatterND", [4, 5], [2, 3], [2]), scatter("ScatterND", [4, 5], [2, 2], [2])
    ),
    "gather_elements": Case(
        "indices must have the rank of data",
        one_node("GatherElements", [("d", F, [4, 5]), ("i", I64, [2])], 13),
        one_node("GatherElements", [("d", F, [4, 5]), ("i", I64, [2, 5])], 13),
    ),
    "depth_to_space": Case(
        "C must divide",
        unary("DepthToSpace", 13, [1, 6, 2, 2], blocksize=2),
        unary("DepthToSpace", 13, [1, 8, 2, 2], blocksize=2),
    ),
    "depth_to_space_mode": Case(
        "mode must be DCR or CRD",
        unary("DepthToSpace", 13, [1, 8, 2, 2], blocksize=2, mode="RCD"),
        unary("DepthToSpace", 13, [1, 8, 2, 2], blocksize=2, mode="CRD"),
    ),
    "space_to_depth": Case(
        "H and W must divide",
        unary("SpaceToDepth", 13, [1, 1, 3, 4], blocksize=2),
        unary("SpaceToDepth", 13, [1, 1, 4, 4], blocksize=2),
    ),
    "group_norm_groups": Case(
        "C must divide by num_groups",
        one_node("GroupNormalization", [("x", F, [1, 6, 4]), ("s", F, [6]), ("b", F, [6])], 21, num_groups=4),
        one_node("GroupNormalization", [("x", F, [1, 6, 4]), ("s", F, [6]), ("b", F, [6])], 21, num_groups=3),
    ),
    "group_norm_scale": Case(
        "scale and bias must have C",
        one_node("GroupNormalization", [("x", F, [1, 6, 4]), ("s", F, [3]), ("b", F, [6])], 21, num_groups=3),
        one_node("GroupNormalization", [("x", F, [1, 6, 4]), ("s", F, [6]), ("b", F, [6])], 21, num_groups=3),
    ),
    "instance_norm": Case(
        "scale and B must have C",
        one_node("InstanceNormalization", [("x", F, [1, 3, 4, 4]), ("s", F, [4]), ("b", F, [3])], 17),
        one_node("InstanceNormalization", [("x", F, [1, 3, 4, 4]), ("s", F, [3]), ("b", F, [3])], 17),
    ),
    "gemm": Case(
        "C must broadcast to (M, N)",
        one_node("Gemm", [("a", F, [2, 3]), ("b", F, [4, 3]), ("c", F, [3])], 13, transB=1),
        one_node("Gemm", [("a", F, [2, 3]), ("b", F, [4, 3]), ("c", F, [4])], 13, transB=1),
    ),
    "split": Case(
        "num_outputs must equal",
        one_node("Split", [("x", F, [4, 4])], 18, outputs=2, num_outputs=3),
        one_node("Split", [("x", F, [4, 4])], 18, outputs=2, num_outputs=2),
    ),
    "quantize_blocks": Case(
        "block_size fits its number of blocks",
        blocked("QuantizeLinear", [4, 2], 2),  # 6 in blocks of 2 is 3 blocks
        blocked("QuantizeLinear", [4, 2], 3),
    ),
    "dequantize_blocked_rank": Case(
        "a blocked x_scale has x's shape",
        blocked("DequantizeLinear", [3, 3], 2),
        blocked("DequantizeLinear", [4, 3], 2),
    ),
    "quantize_rank_one": Case(
        "quantized per tensor, with no block_size",
        blocked("QuantizeLinear", [1], 8, x=[6]),
        blocked("QuantizeLinear", [2], 4, x=[6]),
    ),
    "quantize": Case("y_zero_point must have", quant("QuantizeLinear", 21, F, [1]), quant("QuantizeLinear", 21, F, [])),
    "dequantize": Case(
        "x_zero_point must have", quant("DequantizeLinear", 13, I8, [1]), quant("DequantizeLinear", 13, I8, [])
    ),
    "maxpool_pads": Case(
        "pads must not be given",
        unary("MaxPool", 17, [1, 1, 4, 4], kernel_shape=[2, 2], pads=[1, 1, 1, 1], auto_pad="VALID"),
        unary("MaxPool", 17, [1, 1, 4, 4], kernel_shape=[2, 2], pads=[1, 1, 1, 1]),
    ),
    "maxpool_storage": Case(
        "storage_order must be",
        unary("MaxPool", 17, [1, 1, 4, 4], kernel_shape=[2, 2], storage_order=2),
        unary("MaxPool", 17, [1, 1, 4, 4], kernel_shape=[2, 2], storage_order=1),
    ),
    "grid_sample_4d": Case(
        "X must be 4-D", grid([1, 1, 2, 4, 4], [1, 2, 4, 4, 3], 16), grid([1, 1, 4, 4], [1, 4, 4, 2], 16)
    ),
    "grid_sample_mode": Case(
        "mode must be linear",
        grid([1, 1, 4, 4], [1, 4, 4, 2], 20, mode="bilinear"),
        grid([1, 1, 4, 4], [1, 4, 4, 2], 20, mode="linear"),
    ),
    "grid_sample_padding": Case(
        "padding_mode must be",
        grid([1, 1, 4, 4], [1, 4, 4, 2], 16, padding_mode="wrap"),
        grid([1, 1, 4, 4], [1, 4, 4, 2], 16, padding_mode="border"),
    ),
    "pad_mode": Case(
        "mode must be constant",
        one_node("Pad", [("x", F, [2, 3])], 19, {"p": i64(1, 1, 1, 1)}, mode="mirror"),
        one_node("Pad", [("x", F, [2, 3])], 19, {"p": i64(1, 1, 1, 1)}, mode="wrap"),
    ),
    "resize_mode": Case(
        "mode must be nearest",
        one_node("Resize", [("x", F, [1, 1, 2, 2]), ("", F, None)], 18, {"s": np.full(4, 2, np.float32)}, mode="area"),
        one_node(
            "Resize", [("x", F, [1, 1, 2, 2]), ("", F, None)], 18, {"s": np.full(4, 2, np.float32)}, mode="linear"
        ),
    ),
    "resize_nearest": Case(
        "nearest_mode must be",
        one_node(
            "Resize", [("x", F, [1, 1, 2, 2]), ("", F, None)], 18, {"s": np.full(4, 2, np.float32)}, nearest_mode="up"
        ),
        one_node(
            "Resize", [("x", F, [1, 1, 2, 2]), ("", F, None)], 18, {"s": np.full(4, 2, np.float32)}, nearest_mode="ceil"
        ),
    ),
    "bitshift": Case(
        "direction must be RIGHT or LEFT",
        with_operand("BitShift", 11, [3], [3], TensorProto.UINT8, direction="UP"),
        with_operand("BitShift", 11, [3], [3], TensorProto.UINT8, direction="LEFT"),
    ),
    "lstm": Case("direction must be forward", lstm("both"), lstm("reverse")),
    "unique": Case("sorted must be 0 or 1", unary("Unique", 11, sorted=2), unary("Unique", 11, sorted=0)),
    "lp_norm": Case("p must be 1 or 2", unary("LpNormalization", 13, p=3), unary("LpNormalization", 13, p=1)),
    "layer_norm": Case(
        "axis must be in [-r, r)",
        with_operand("LayerNormalization", 17, [2, 3], [3], F, axis=2),
        with_operand("LayerNormalization", 17, [2, 3], [3], F, axis=1),
    ),
    "mod_float": Case(
        "a float input needs fmod=1", with_operand("Mod", 13, [3], [3], F), with_operand("Mod", 13, [3], [3], F, fmod=1)
    ),
    "mod_fmod": Case(
        "fmod must be 0 or 1",
        with_operand("Mod", 13, [3], [3], F, fmod=2),
        with_operand("Mod", 13, [3], [3], F, fmod=1),
    ),
    "mod_28": Case(
        "fmod must be 0 or 1", with_operand("Mod", 28, [3], [3], F, fmod=2), with_operand("Mod", 28, [3], [3], F)
    ),
    "trilu": Case("k must be 0-D", with_operand("Trilu", 14, [3, 3], [1]), with_operand("Trilu", 14, [3, 3], [])),
    "cumsum": Case("axis must be 0-D", with_operand("CumSum", 14, [3, 3], [1]), with_operand("CumSum", 14, [3, 3], [])),
    "clip": Case(
        "min and max must be scalars", with_operand("Clip", 13, [3], [1], F), with_operand("Clip", 13, [3], [], F)
    ),
    "compress": Case(
        "condition must be 1-D", with_operand("Compress", 11, [4], [1, 4], B), with_operand("Compress", 11, [4], [4], B)
    ),
    "tile": Case(
        "repeats must have one element", with_operand("Tile", 13, [2, 3], [3]), with_operand("Tile", 13, [2, 3], [2])
    ),
    "max_unpool": Case(
        "I must have the shape of X",
        with_operand("MaxUnpool", 11, [1, 1, 2, 2], [1, 1, 2, 3], kernel_shape=[2, 2]),
        with_operand("MaxUnpool", 11, [1, 1, 2, 2], [1, 1, 2, 2], kernel_shape=[2, 2]),
    ),
    "roi_align_mode": Case("mode must be avg or max", roi_align(mode="min"), roi_align(mode="max")),
    "roi_align_ctm": Case(
        "coordinate_transformation_mode must be",
        roi_align(coordinate_transformation_mode="asymmetric"),
        roi_align(coordinate_transformation_mode="output_half_pixel"),
    ),
    "nms_center": Case(
        "center_point_box must be 0 or 1", nms([1, 5, 4], center_point_box=2), nms([1, 5, 4], center_point_box=1)
    ),
    "nms_boxes": Case("boxes' last dim must be 4", nms([1, 5, 5]), nms([1, 5, 4])),
    "reverse_batch": Case(
        "batch_axis must be 0 or 1", reverse([4], batch_axis=2, time_axis=1), reverse([4], batch_axis=0, time_axis=1)
    ),
    "reverse_time": Case("time_axis must be 0 or 1", reverse([3], time_axis=1), reverse([3], time_axis=0)),
    "reverse_lengths": Case("sequence_lens must have", reverse([4]), reverse([3])),
    "col2im": Case(
        "pads must not be negative",
        one_node("Col2Im", [("x", F, [1, 4, 9])], 18, {"im": i64(4, 4), "bl": i64(2, 2)}, pads=[-1, 0, 0, 0]),
        one_node("Col2Im", [("x", F, [1, 4, 9])], 18, {"im": i64(4, 4), "bl": i64(2, 2)}, pads=[0, 0, 0, 0]),
    ),
    "constant_of_shape": Case(
        "value must hold one element",
        one_node(
            "ConstantOfShape", [], 21, {"shape": i64(2, 3)}, value=numpy_helper.from_array(np.ones(2, np.float32))
        ),
        one_node(
            "ConstantOfShape", [], 21, {"shape": i64(2, 3)}, value=numpy_helper.from_array(np.ones(1, np.float32))
        ),
    ),
    "deform_offset_group": Case(
        "C must divide by offset_group",
        deform([1, 3, 4, 4], [2, 3, 3, 3], offset_group=2),
        deform([1, 4, 4, 4], [2, 4, 3, 3], offset_group=2),
    ),
    "deform_group": Case(
        "C and oC must divide by group",
        deform([1, 4, 4, 4], [3, 2, 3, 3], group=2),
        deform([1, 4, 4, 4], [2, 2, 3, 3], group=2),
    ),
    "lp_norm_axis": Case(
        "axis must be in [-r, r)", unary("LpNormalization", 13, axis=2), unary("LpNormalization", 13, axis=-2)
    ),
    "einsum": Case("at most one ellipsis", einsum("...ij,...jk->......ik"), einsum("...ij,...jk->...ik")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_violating_model_is_reported_and_its_control_is_not(name: str) -> None:
    case = CASES[name]
    found = undefined_forms(case.violating)
    assert len(found) == 1 and case.statement in found[0], found
    op = case.violating.graph.node[0].op_type
    assert found[0].startswith(f"{op} node 'n0': ") and "(schema: '" in found[0], found
    assert undefined_forms(case.control) == []


def test_every_constraint_has_a_case() -> None:
    """A constraint no case exercises could fire on nothing, or on everything."""
    covered = {k for case in CASES.values() for k in undefined_keys(case.violating)}
    assert {c.key for c in CONSTRAINTS} == covered


def test_each_sentence_is_in_the_schema_text_of_its_first_version() -> None:
    def words(s: str) -> str:
        return " ".join(s.split())

    for c in CONSTRAINTS:
        schema = onnx.defs.get_schema(c.op_type, c.first, "")
        text = [schema.doc or "", *(a.description for a in schema.attributes.values())]
        text += [p.description for p in [*schema.inputs, *schema.outputs]]
        assert words(c.sentence) in words(" ".join(text)), c.key


def test_a_constraint_applies_only_within_its_versions() -> None:
    """Mod-13's fmod=0 with floats is undefined; Mod-28 defines it (floor semantics)."""
    float_mod = with_operand("Mod", 13, [3], [3], F)
    assert any("a float input needs fmod=1" in line for line in undefined_forms(float_mod))
    float_mod.opset_import[0].version = 28
    assert undefined_forms(float_mod) == []


def test_symbolic_dims_are_cannot_tell_never_a_violation() -> None:
    assert undefined_forms(conv([2, 3, 3, 3])) != []
    assert undefined_forms(conv([2, "c", 3, 3])) == []
    assert undefined_forms(conv([2, 3, 3, 3], x=[1, "c", 8, 8])) == []
    assert undefined_forms(affine(["n", "a", "b"], SIZE4)) == []
    assert undefined_forms(one_node("DFT", [("x", F, [1, 8, "c"])], 20)) == []
    assert undefined_forms(scatter("ScatterND", [4, 5], [2, "k"], [2, 4])) == []


def test_the_reducer_refuses_a_candidate_that_introduces_an_undefined_form() -> None:
    original = affine([2, 2, 3], SIZE4)
    candidate = affine([2, 3, 4], SIZE4)
    why = Validity.of(original, None).refuses(candidate, None)
    assert why is not None and "AffineGrid" in why and "(N, 2, 3)" in why


def test_the_reducer_keeps_a_candidate_that_holds_the_originals_own_undefined_form() -> None:
    original = affine([2, 3, 4], SIZE4)
    candidate = affine([2, 3, 4], SIZE4)
    candidate.graph.node[0].name = "renamed"
    validity = Validity.of(original, None)
    assert validity.undefined == undefined_keys(original) != frozenset()
    assert validity.refuses(candidate, None) is None


def test_generated_models_hold_no_undefined_form() -> None:
    generated, held = 0, {}
    for seed in range(200):
        try:
            case = generate(seed, GenConfig())
        except (NoValidValues, RuntimeError):
            continue
        generated += 1
        forms = undefined_forms(case.model)
        if forms:
            held[seed] = forms
    assert generated >= 150 and held == {}, held
