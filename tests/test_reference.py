"""The torch reference agrees with onnx.reference.ReferenceEvaluator, op by op."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from backends.reference import ReferenceError, run_reference
from generator.api import GenConfig, generate
from generator.ops import registry

# ReferenceEvaluator sizes padded MaxPool outputs wrongly (it ignores the pads);
# MaxPool is checked against onnxruntime in test_worker instead.
EVALUATOR_DEFECTS = {"MaxPool"}


@pytest.mark.parametrize("op_type", sorted(set(registry()) - EVALUATOR_DEFECTS))
def test_op_reference_matches_onnx_reference_evaluator(op_type: str) -> None:
    checked = 0
    for seed in range(80):
        if checked >= 8:
            break
        case = generate(seed, GenConfig(nodes=2, ops=[op_type]))
        ours = run_reference(case.model, case.inputs)
        theirs = ReferenceEvaluator(case.model).run(None, case.inputs)
        names = [o.name for o in case.model.graph.output]
        for name, value in zip(names, theirs, strict=True):
            got = ours[name]
            assert got.shape == np.asarray(value).shape, (seed, name)
            np.testing.assert_allclose(got, value, rtol=1e-4, atol=1e-5, err_msg=f"{op_type} seed {seed}")
            checked += 1
    assert checked >= 8


def _tiny_graph(op_type: str, **attrs: str) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node(op_type, ["x", "w"], ["y"], **attrs)
    w = numpy_helper.from_array(np.full((2, 3), 0.5, dtype=np.float32), "w")
    return helper.make_model(helper.make_graph([node], "g", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 17)])


def test_hand_built_graph_runs_on_the_reference() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = run_reference(_tiny_graph("Sub"), {"x": x})
    np.testing.assert_array_equal(out["y"], x - 0.5)


def test_unregistered_op_is_a_reference_error() -> None:
    with pytest.raises(ReferenceError, match="BitShift"):
        run_reference(_tiny_graph("BitShift", direction="LEFT"), {"x": np.zeros((2, 3), np.float32)})
