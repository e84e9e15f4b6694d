"""The quantization family (generator.ops.quant): the torch reference against the ONNX
spec's own worked example, against onnx.reference, and against onnxruntime with its
optimizer off, on every form the generator writes."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from backends.reference import run_reference
from generator.api import GenConfig, generate
from generator.dtypes import DType
from generator.ops import registry
from tests.generator.test_reference_parity import Instance, _evaluate

QUANT_OPS = sorted(n for n, s in registry().items() if s.__module__ == "generator.ops.quant")


def _unoptimized(model_bytes: bytes, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    return [np.asarray(v) for v in session.run(None, inputs)]


@pytest.mark.parametrize(("op", "dtype"), [(op, d) for op in QUANT_OPS for d in registry()[op].dtypes])
def test_every_generated_form_agrees_with_the_evaluator_and_unoptimized_onnxruntime(op: str, dtype: DType) -> None:
    checked = 0
    for seed in range(40):
        try:
            case = generate(seed, GenConfig(nodes=1, ops=[op], dtypes=[dtype, DType.float32]))
        except RuntimeError:
            continue
        if not any(n.op_type == op for n in case.model.graph.node):
            continue
        ours = run_reference(case.model, case.inputs)
        names = [o.name for o in case.model.graph.output]
        ran = _unoptimized(case.model.SerializeToString(), case.inputs)
        defective = Instance(op, dtype, 17, f"seed {seed}", case.model, case.inputs).defects
        evaluated = ran if defective else _evaluate(case.model, case.inputs)  # onnxruntime stands in
        for name, theirs, runtime in zip(names, evaluated, ran, strict=True):
            np.testing.assert_array_equal(ours[name], theirs, err_msg=f"{op} seed {seed}: onnx.reference")
            np.testing.assert_array_equal(ours[name], runtime, err_msg=f"{op} seed {seed}: onnxruntime")
        checked += 1
    assert checked >= 3, f"{op}/{dtype}: only {checked} models held the op"


def _quantize(x: list[float], scale: float, zero: int, elem: int) -> np.ndarray:
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [len(x)])],
        [helper.make_tensor_value_info("y", elem, [len(x)])],
        [helper.make_tensor("s", TensorProto.FLOAT, [], [scale]), helper.make_tensor("z", elem, [], [zero])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return run_reference(model, {"x": np.asarray(x, np.float32)})["y"]


def test_quantize_rounds_half_to_even_and_saturates() -> None:
    got = _quantize([0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0], 1.0, 0, TensorProto.UINT8)
    assert got.tolist() == [0, 2, 2, 0, 0, 255, 0]
    got = _quantize([0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0], 1.0, 0, TensorProto.INT8)
    assert got.tolist() == [0, 2, 2, 0, -2, 127, -128]


def test_dynamic_quantize_linear_gives_the_specs_worked_example() -> None:
    """The ONNX operator documentation's example for DynamicQuantizeLinear."""
    x = np.array([0, 2, -3, -2.5, 1.34, 0.5], np.float32)
    graph = helper.make_graph(
        [helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
        [
            helper.make_tensor_value_info("y", TensorProto.UINT8, [6]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("z", TensorProto.UINT8, []),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    out = run_reference(model, {"x": x})
    assert out["y"].tolist() == [153, 255, 0, 26, 221, 179]
    assert out["z"].item() == 153
    assert np.isclose(out["s"].item(), 0.019607844)


def test_a_per_axis_dequantization_scales_each_channel_by_its_own() -> None:
    graph = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=0)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        [
            numpy_helper.from_array(np.array([0.5, 2.0], np.float32), "s"),
            numpy_helper.from_array(np.array([1, -1], np.int8), "z"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    got = run_reference(model, {"x": np.array([[3, -1], [3, -1]], np.int8)})["y"]
    assert got.tolist() == [[1.0, -1.0], [8.0, 0.0]]
