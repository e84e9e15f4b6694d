"""A node replaced by its op's function body (bot.reduce.function_body): the expansion
computes what the node computes, at the model's opset, with the node's attributes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from backends.reference import run_reference
from bot.reduce.function_body import body_ops, expand


def _model(node: onnx.NodeProto, inputs: list[onnx.ValueInfoProto], opset: int) -> onnx.ModelProto:
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "g", inputs, [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
XS = np.linspace(-2.0, 2.5, 6, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize(
    ("node", "extra", "opset"),
    [
        # attributes the body refers to, taken from the node: no axes means no reduction
        (
            helper.make_node("ReduceL1", ["x", "axes"], ["y"], noop_with_empty_axes=1),
            {"axes": np.zeros(0, np.int64)},
            18,
        ),
        (helper.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], keepdims=0), {"axes": np.array([1])}, 18),
        # a body written at opset 18 expanded into an opset-21 model
        (helper.make_node("HardSigmoid", ["x"], ["y"], alpha=0.3, beta=0.4), {}, 21),
        # a context-dependent body, made for the input types
        (helper.make_node("Clip", ["x", "lo", ""], ["y"]), {"lo": np.array(-0.5, np.float32)}, 13),
    ],
)
def test_the_expansion_computes_what_the_node_computes(
    node: onnx.NodeProto, extra: dict[str, np.ndarray], opset: int
) -> None:
    inputs = [
        X,
        *(
            helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for k, v in extra.items()
        ),
    ]
    model = _model(node, inputs, opset)
    feeds = {"x": XS, **extra}
    types = {k: helper.np_dtype_to_tensor_dtype(v.dtype) for k, v in feeds.items()}
    expanded = expand(model, 0, types)
    assert expanded is not None
    assert node.op_type not in {n.op_type for n in expanded.graph.node}
    assert {o.domain for o in expanded.opset_import} == {""} and not expanded.functions
    want, got = run_reference(model, feeds), run_reference(expanded, feeds)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)


def test_an_op_without_a_body_at_the_models_opset_is_not_expanded() -> None:
    """HardSigmoid has a body from opset 18 on; Add has none."""
    for node, opset in (
        (helper.make_node("HardSigmoid", ["x"], ["y"]), 17),
        (helper.make_node("Add", ["x", "x"], ["y"]), 21),
    ):
        model = _model(node, [X], opset)
        assert expand(model, 0, {"x": TensorProto.FLOAT}) is None
        assert body_ops(model, node, {"x": TensorProto.FLOAT}) is None
