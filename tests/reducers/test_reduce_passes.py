"""Each ONNX reduction pass on a small hand-built model, and the driver to a fixpoint
on a generated model with a planted trigger; predicates run the real onnxruntime."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from bench.reduce import plant
from bot.reduce.candidates import reference_values
from generator.api import GenConfig, generate
from reducers import passes
from reducers.candidate import Candidate, onnx_reference_values
from reducers.driver import NotInteresting, reduce_case
from reducers.passes import Context
from reducers.tester import ReduceConfig
from reducers.tester import Tester as CandidateTester

F = TensorProto.FLOAT


def _model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, list[int]],
    outputs: dict[str, list[int]],
    inits: list[onnx.TensorProto] | None = None,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(k, F, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info(k, F, v) for k, v in outputs.items()],
        initializer=inits or [],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _runs(case: Candidate) -> bool:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    try:
        ort.InferenceSession(case.model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
            None, case.inputs
        )
    except Exception:  # noqa: BLE001 - any refusal means "does not run"
        return False
    return True


def _has(op: str) -> Callable[[Candidate], bool]:
    return lambda c: any(n.op_type == op for n in c.model.graph.node) and _runs(c)


def _ctx(pred: Callable[[Candidate], bool], values: bool = True) -> Context:
    return Context(CandidateTester(pred, Candidate.key, ReduceConfig()), onnx_reference_values if values else None)


def _x(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def _chain() -> Candidate:
    """x -> Relu -> Neg -> Abs -> y, and x -> Sigmoid -> z."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Neg", ["a"], ["b"], name="neg"),
        helper.make_node("Abs", ["b"], ["y"], name="abs"),
        helper.make_node("Sigmoid", ["x"], ["z"], name="sig"),
    ]
    return Candidate(_model(nodes, {"x": [2, 3]}, {"y": [2, 3], "z": [2, 3]}), {"x": _x(2, 3)})


def test_drop_outputs_keeps_only_what_the_failure_needs() -> None:
    out = passes.drop_outputs(_chain(), _ctx(_has("Neg")))
    assert out is not None
    assert [o.name for o in out.model.graph.output] == ["y"]
    assert "Sigmoid" not in {n.op_type for n in out.model.graph.node}


def test_drop_nodes_feeds_cut_tensors_their_recorded_values() -> None:
    case = _chain()
    ctx = _ctx(_has("Neg"))
    out = passes.drop_nodes(case, ctx)
    assert out is not None
    assert [n.op_type for n in out.model.graph.node] == ["Neg"]
    assert [i.name for i in out.model.graph.input] == ["a"]
    np.testing.assert_array_equal(out.inputs["a"], np.maximum(case.inputs["x"], 0))  # Relu(x), as computed
    assert [o.name for o in out.model.graph.output] == ["b"]  # promoted, so Neg is not dead code
    assert ctx.tester.stats.tests > 0


def test_bypass_replaces_a_node_by_its_same_typed_input() -> None:
    nodes = [helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
    case = Candidate(_model(nodes, {"x": [4]}, {"y": [4]}), {"x": _x(4)})
    out = passes.bypass_nodes(case, _ctx(_has("Relu")))
    assert out is not None
    assert [(n.op_type, list(n.input)) for n in out.model.graph.node] == [("Relu", ["x"])]


def test_initializers_become_zeros() -> None:
    w = numpy_helper.from_array(_x(3), "w")
    case = Candidate(_model([helper.make_node("Add", ["x", "w"], ["y"])], {"x": [3]}, {"y": [3]}, [w]), {"x": _x(3)})
    out = passes.simplify_initializers(case, _ctx(_has("Add")))
    assert out is not None
    (init,) = out.model.graph.initializer
    assert not numpy_helper.to_array(init).any()


def test_a_quantization_scale_is_never_polished_to_zero() -> None:
    """A reduced QLinearMatMul trigger once carried y_scale = 0: the reference computes it,
    but no maintainer takes a QuantizeLinear dividing by zero as a valid model."""
    scale = numpy_helper.from_array(np.array(0.25, np.float32), "s")
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [3])],
        [scale],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    out = passes.simplify_initializers(Candidate(model, {"x": _x(3)}), _ctx(_has("QuantizeLinear")))
    assert out is not None, "ones (or an input) is still a simplification"
    assert all(numpy_helper.to_array(t).all() for t in out.model.graph.initializer)


def test_an_empty_initializer_is_left_as_it_is_and_the_pass_ends_within_its_tests() -> None:
    """An empty `axes` initializer has no zeros or ones to become: the edit changed nothing,
    was taken as a success from the cache, and restarted the pass on the same case until the
    reduction's time ran out (a float64 ReduceSumSquare trigger: 66,389 cache answers, 60 s)."""
    axes = numpy_helper.from_array(np.zeros(0, np.int64), "axes")
    node = helper.make_node("ReduceSumSquare", ["x", "axes"], ["y"], keepdims=1)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", F, [2, 3])],
        [helper.make_tensor_value_info("y", F, [1, 1])],
        [axes],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    case = Candidate(model, {"x": _x(2, 3)})
    ctx = Context(CandidateTester(_has("ReduceSumSquare"), Candidate.key, ReduceConfig(budget_s=30)), None)
    assert passes.simplify_initializers(case, ctx) is None
    assert ctx.tester.stats.stopped is None and ctx.tester.stats.cache_hits < 10, ctx.tester.stats


def test_a_pass_never_takes_a_case_it_already_took() -> None:
    """Whatever a pass's edits are, one that gives back a case already accepted (here: the
    case itself) is not taken again: the pass ends instead of circling."""
    case = _chain()
    ctx = _ctx(_has("Neg"))
    assert passes._first_of(ctx, case, lambda c: iter([c, c])) is None
    assert ctx.tester.stats.tests == 0 and ctx.tester.stats.stopped is None


def test_optional_attributes_go_back_to_their_defaults_required_ones_stay() -> None:
    nodes = [
        helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.3),
        helper.make_node("Concat", ["a", "a"], ["y"], axis=0),
    ]
    case = Candidate(_model(nodes, {"x": [2]}, {"y": [4]}), {"x": _x(2)})
    ctx = _ctx(lambda c: _has("LeakyRelu")(c) and _has("Concat")(c))
    out = passes.default_attributes(case, ctx)
    assert out is not None
    leaky, concat = out.model.graph.node
    assert not leaky.attribute
    assert [a.name for a in concat.attribute] == ["axis"]


def test_polish_at_once_is_one_test_when_the_bug_ignores_attributes_shapes_and_names() -> None:
    nodes = [helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.3), helper.make_node("Neg", ["a"], ["y"])]
    case = Candidate(_model(nodes, {"x": [4, 6]}, {"y": [4, 6]}), {"x": _x(4, 6)})
    ctx = _ctx(_has("LeakyRelu"))
    out = passes.polish_at_once(case, ctx)
    assert out is not None and ctx.tester.stats.tests == 1
    assert not out.model.graph.node[0].attribute and [v.shape for v in out.inputs.values()] == [(1, 1)]
    # A bug that needs alpha: the second candidate of the same batch keeps the attributes.
    needs_alpha = _ctx(lambda c: bool(c.model.graph.node[0].attribute) and _runs(c))
    kept = passes.polish_at_once(case, needs_alpha)
    assert kept is not None and needs_alpha.tester.stats.tests == 2
    assert kept.model.graph.node[0].attribute[0].f == pytest.approx(0.3)
    assert [v.shape for v in kept.inputs.values()] == [(1, 1)]


def test_input_shapes_shrink_and_outputs_follow() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    case = Candidate(_model(nodes, {"x": [4, 6]}, {"y": [4, 6]}), {"x": _x(4, 6)})
    out = passes.shrink_shapes(case, _ctx(_has("Relu")))
    assert out is not None
    dims = [d.dim_value for d in out.model.graph.output[0].type.tensor_type.shape.dim]
    assert dims == [1, 1] and out.inputs["x"].shape == (1, 1)


def test_shapes_stay_when_the_checker_would_refuse_the_smaller_model() -> None:
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    w = numpy_helper.from_array(_x(4), "w")
    case = Candidate(_model(nodes, {"x": [4]}, {"y": [4]}, [w]), {"x": _x(4)})
    ctx = _ctx(_has("Add"))
    out = passes.shrink_shapes(case, ctx)
    # [1] broadcasts against w[4] but changes the output shape: valid, so it is tested
    assert out is None or out.model.graph.input[0].type.tensor_type.shape.dim[0].dim_value < 4


def _shrink_int32(shape: list[int]) -> onnx.ModelProto:
    node = helper.make_node("Shrink", ["x"], ["y"], bias=0.248)
    io = [helper.make_tensor_value_info(n, TensorProto.INT32, shape) for n in "xy"]
    graph = helper.make_graph([node], "g", io[:1], io[1:])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _shrink_is_wrong(case: Candidate) -> bool:
    """onnxruntime's Shrink on int32 computes x - bias in float32, so a large x rounds up
    (4816896 - 0.248 gives 4816896, not 4816895): a real wrong result, in one element."""
    onnx.checker.check_model(case.model, full_check=True)  # every tested candidate is valid ONNX
    x = case.inputs["x"]
    session = ort.InferenceSession(case.model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = np.where(x > 0.5, x - 0.248, np.where(x < -0.5, x + 0.248, 0.0)).astype(np.int32)
    return bool((session.run(None, {"x": x})[0] != want).any())


def test_input_shapes_shrink_to_the_element_the_bug_lives_in() -> None:
    """A reduced one-node model used to keep its [14, 15, 1, 10] input: every smaller shape
    kept only the leading elements, and the one element the wrong result needs was not
    among them. Halves from either side find it."""
    x = np.zeros((14, 15, 1, 10), np.int32)
    x[9, 11, 0, 7] = 4816896
    x[2, 3, 0, 4] = 100  # right on every build: a value that is not the bug
    case = Candidate(_shrink_int32([14, 15, 1, 10]), {"x": x})
    assert _shrink_is_wrong(case)
    ctx = _ctx(_shrink_is_wrong, values=False)
    out = passes.shrink_shapes(case, ctx)
    assert out is not None and out.inputs["x"].shape == (1, 1, 1, 1) and out.inputs["x"].item() == 4816896
    assert [d.dim_value for d in out.model.graph.output[0].type.tensor_type.shape.dim] == [1, 1, 1, 1]
    assert ctx.tester.stats.tests < 60


def test_inputs_that_broadcast_together_shrink_together() -> None:
    """Add of two [6, 8] inputs whose failure needs one element of each at the same place:
    cutting one input alone no longer broadcasts, so both are cut alike."""
    x, y = np.zeros((6, 8), np.float32), np.zeros((6, 8), np.float32)
    x[4, 5], y[4, 5] = 7000.0, 777.0
    case = Candidate(
        _model([helper.make_node("Add", ["x", "y"], ["s"])], {"x": [6, 8], "y": [6, 8]}, {"s": [6, 8]}),
        {"x": x, "y": y},
    )

    def sums_to_7777(c: Candidate) -> bool:
        onnx.checker.check_model(c.model, full_check=True)
        session = ort.InferenceSession(c.model.SerializeToString(), providers=["CPUExecutionProvider"])
        return bool((session.run(None, c.inputs)[0] == 7777.0).any())

    out = passes.shrink_shapes(case, _ctx(sums_to_7777, values=False))
    assert out is not None and {k: v.shape for k, v in out.inputs.items()} == {"x": (1, 1), "y": (1, 1)}


def test_a_value_dependent_output_shape_does_not_block_shrinking() -> None:
    """Resize whose sizes arrive as a graph input (as after a cut): the output's shape cannot
    be inferred from the input's, which used to refuse every smaller input."""
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest")
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", F, [6, 10]),
            helper.make_tensor_value_info("sizes", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", F, [3, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    case = Candidate(model, {"x": _x(6, 10), "sizes": np.array([3, 4], np.int64)})
    out = passes.shrink_shapes(case, _ctx(_has("Resize")))
    assert out is not None and out.inputs["x"].shape == (1, 1)
    np.testing.assert_array_equal(out.inputs["sizes"], [3, 4])


def test_tidy_gives_short_names() -> None:
    out = passes.tidy(_chain(), _ctx(_has("Neg")))
    assert out is not None
    assert [n.name for n in out.model.graph.node] == ["n0", "n1", "n2", "n3"]
    assert list(out.inputs) == ["x0"]


def test_invalid_candidates_are_not_tests() -> None:
    calls: list[Candidate] = []

    def pred(c: Candidate) -> bool:
        calls.append(c)
        onnx.checker.check_model(c.model, full_check=True)  # every tested candidate is valid
        return _has("Neg")(c)

    ctx = _ctx(pred, values=False)  # no values: cut tensors still get typed inputs
    passes.drop_nodes(_chain(), ctx)
    assert ctx.tester.stats.tests == len(calls)


def _planted(seed: int, nodes: int) -> Candidate:
    for s in range(seed, seed + 50):
        case = generate(s, GenConfig(nodes=nodes, values="none"))
        planted = plant(case.model, "pair")
        if planted is not None and _trigger(Candidate(planted, case.inputs)):
            return Candidate(planted, case.inputs)
    raise AssertionError("no generated model took the trigger")


def _trigger(c: Candidate) -> bool:
    made = {o: n.op_type for n in c.model.graph.node for o in n.output}
    edge = any(n.op_type == "Softsign" and made.get(i) == "Sigmoid" for n in c.model.graph.node for i in n.input)
    return edge and _runs(c)


def test_driver_reaches_the_planted_pair_and_is_deterministic() -> None:
    case = _planted(19, 20)
    small1, r1 = reduce_case(case, _trigger, ReduceConfig(jobs=1), reference_values)
    small2, _ = reduce_case(case, _trigger, ReduceConfig(jobs=2), reference_values)
    assert [n.op_type for n in small1.model.graph.node] == ["Sigmoid", "Softsign"]
    assert small1.key() == small2.key()
    assert r1.nodes_before == case.size and r1.nodes_after == 2
    assert r1.steps and r1.steps[0].pass_name == "drop_nodes" and r1.stats.tests < 40
    assert _trigger(small1)
    # reduction.json says where the tests went, per pass, and adds up
    assert list(r1.passes)[:3] == ["drop_nodes", "drop_outputs", "bypass_nodes"]
    assert r1.passes["drop_nodes"].successes >= 1 and r1.passes["drop_nodes"].runs >= 2
    assert sum(p.nodes_removed for p in r1.passes.values()) == r1.nodes_before - r1.nodes_after
    assert sum(p.successes for p in r1.passes.values()) == len(r1.steps)
    assert 0 < sum(p.tests for p in r1.passes.values()) <= r1.stats.tests


def test_driver_refuses_a_case_that_does_not_fail() -> None:
    with pytest.raises(NotInteresting):
        reduce_case(_chain(), _has("Softsign"))
