"""Det (generator.ops.linalg), and worked examples for the other ops added beside the
families they joined: CumProd, TensorScatter, BitCast, QLinearMatMul and QLinearConv.

The generated Det models are checked against onnxruntime and onnx.reference as the other
families are; the conditioning predicate that keeps a determinant away from cancellation is
checked on matrices whose answer is known."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from backends.reference import run_reference
from generator.api import GenConfig, generate
from generator.dtypes import DType
from generator.ops import registry
from generator.values.predicate import det_conditioning
from generator.values.unsafe import predicates
from tests.generator.test_ops_attention import check_against_both_oracles, single_op_cases


def test_det_is_valid_and_matches_onnxruntime_and_the_evaluator() -> None:
    cases = single_op_cases(registry()["Det"], DType.float32, seeds=60)
    assert len(cases) >= 10
    for case in cases:
        check_against_both_oracles(case, f"Det seed {case.seed}")
        x = next(iter(case.inputs.values()))
        assert float(det_conditioning([torch.from_numpy(x)], {}).max()) <= 0, "the values search kept it safe"


def _one_node(
    op: str, x: np.ndarray, consts: dict[str, np.ndarray], out: int, opset: int, **attrs: Any
) -> onnx.ModelProto:
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    node = helper.make_node(op, ["x", *consts], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", elem, x.shape)],
        [helper.make_tensor_value_info("y", out, None)],
        [numpy_helper.from_array(v, k) for k, v in consts.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _run(op: str, x: np.ndarray, consts: dict[str, np.ndarray], out: int, opset: int, **attrs: Any) -> np.ndarray:
    return run_reference(_one_node(op, x, consts, out, opset, **attrs), {"x": x})["y"]


def test_det_by_hand_and_its_conditioning() -> None:
    x = np.array([[[2.0, 0.0], [0.0, 3.0]], [[1.0, 2.0], [3.0, 4.0]]], np.float32)
    assert _run("Det", x, {}, TensorProto.FLOAT, 17).tolist() == [6.0, -2.0]
    nearly_singular = torch.tensor([[[1.0, 1.0], [1.0, 1.001]]])
    assert float(det_conditioning([nearly_singular], {}).max()) > 0
    assert float(det_conditioning([torch.from_numpy(x)], {}).max()) < 0
    assert [p.name for p in predicates("Det")] == ["det not small next to its rows"]


def test_cumprod_by_hand() -> None:
    x, axis = np.array([1, 2, 3, 4], np.int64), {"a": np.array(0, np.int64)}
    assert _run("CumProd", x, axis, TensorProto.INT64, 26).tolist() == [1, 2, 6, 24]
    assert _run("CumProd", x, axis, TensorProto.INT64, 26, exclusive=1).tolist() == [1, 1, 2, 6]
    assert _run("CumProd", x, axis, TensorProto.INT64, 26, reverse=1).tolist() == [24, 24, 12, 4]
    overflow = next(p for p in predicates("CumProd") if "fits" in p.name)
    big = torch.tensor([1 << 22, 1 << 22, 1 << 22], dtype=torch.int64)
    assert float(overflow.f([big, torch.tensor(0)], {}).max()) > 0  # 2^66 leaves int64, 2^44 does not
    assert float(overflow.f([big[:2], torch.tensor(0)], {}).max()) < 0


def test_tensor_scatter_by_hand() -> None:
    """Linear mode writes from each row's index on; circular mode wraps past the end."""
    cache = np.zeros((2, 4, 1), np.float32)
    update = np.array([[[1.0], [2.0]], [[3.0], [4.0]]], np.float32)
    at: dict[str, np.ndarray] = {"u": update, "i": np.array([1, 2], np.int64)}
    linear = _run("TensorScatter", cache, at, TensorProto.FLOAT, 24, axis=1)
    assert linear[..., 0].tolist() == [[0, 1, 2, 0], [0, 0, 3, 4]]
    wrapped = _run(
        "TensorScatter",
        cache,
        {"u": update, "i": np.array([3, 0], np.int64)},
        TensorProto.FLOAT,
        24,
        axis=1,
        mode="circular",
    )
    assert wrapped[..., 0].tolist() == [[2, 0, 0, 1], [3, 4, 0, 0]]


def test_bitcast_by_hand() -> None:
    x = np.array([1.0, -0.0, -2.5], np.float32)
    got = _run("BitCast", x, {}, TensorProto.INT32, 26, to=TensorProto.INT32)
    assert got.tolist() == [0x3F800000, -(1 << 31), np.array(-2.5, np.float32).view(np.int32).item()]
    signed = _run("BitCast", np.array([-1, 127, -128], np.int8), {}, TensorProto.UINT8, 26, to=TensorProto.UINT8)
    assert signed.tolist() == [255, 127, 128]
    [rule] = predicates("BitCast")
    assert rule.inexact_only  # a computed float is unsafe before it, a graph input's bits are not
    assert (
        float(rule.f([torch.ones(3)], {}).min()) > 0 and float(rule.f([torch.ones(3, dtype=torch.int8)], {}).max()) < 0
    )


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_matmul_by_hand(dtype: type) -> None:
    """(a - 1) @ b is [1, 5] and [-1, 3]; times 1/3 that rounds to 0, 2, 0, 1; the output zero
    point 2 is added, and the large entry saturates."""
    a: np.ndarray = np.array([[1, 2], [3, 4], [0, 0]], dtype)
    b: np.ndarray = np.array([[1], [1]], dtype)
    one: np.ndarray = np.array(1.0, np.float32)
    zero: np.ndarray = np.array(0, dtype)
    consts: dict[str, np.ndarray] = {
        "as": one, "az": np.array(1, dtype), "b": b, "bs": one, "bz": zero,
        "ys": np.array(3.0, np.float32), "yz": np.array(2, dtype),
    }  # fmt: skip
    got = _run("QLinearMatMul", a, consts, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), 17)
    assert got.reshape(-1).tolist() == [2, 4, 1]  # 0.33 -> 0, 1.67 -> 2, -0.67 -> -1; plus 2
    consts["ys"] = np.array(1 / 64, np.float32)
    top = np.iinfo(dtype).max
    assert _run("QLinearMatMul", a, consts, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), 17)[1, 0] == top


def test_qlinear_conv_by_hand() -> None:
    """A 1x1 kernel of weight 2 with bias 1 over (x - 1): (2 * 2 + 1) / 3 rounds to 2."""
    x = np.array([[[[3, 1]]]], np.uint8)
    consts: dict[str, np.ndarray] = {
        "xs": np.array(1.0, np.float32), "xz": np.array(1, np.uint8),
        "w": np.array([[[[2]]]], np.uint8), "ws": np.array([1.0], np.float32), "wz": np.array([0], np.uint8),
        "ys": np.array(3.0, np.float32), "yz": np.array(0, np.uint8), "b": np.array([1], np.int32),
    }  # fmt: skip
    assert _run("QLinearConv", x, consts, TensorProto.UINT8, 17).reshape(-1).tolist() == [2, 0]


def test_tensor_scatter_never_writes_along_the_batch_axis() -> None:
    """Axis 0 is the batch (onnxruntime: "axis 0 is out of range"), and the default -2 is 0 for a
    rank-2 cache: such a cache must name its axis. A campaign's first TensorScatter crash was this."""
    seen = 0
    for seed in range(80):
        try:
            case = generate(
                seed, GenConfig(wide_types=0.0, nodes=1, ops=["TensorScatter"], dtypes=[DType.float32], opset=24)
            )
        except RuntimeError:
            continue
        node = next(n for n in case.model.graph.node if n.op_type == "TensorScatter")
        rank = len(case.model.graph.input[0].type.tensor_type.shape.dim)
        axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), -2)
        assert axis % rank != 0, (seed, rank, axis)
        seen += rank == 2
    assert seen >= 3
