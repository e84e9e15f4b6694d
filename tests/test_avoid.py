"""Known triggers kept out of generated graphs (generator.avoid), on real generation."""

from __future__ import annotations

import onnx

from generator.api import GenConfig, generate
from generator.avoid import Avoid, PatternNode, Trigger

CFG = GenConfig(nodes=8, ops=["Add", "Mul", "Sub", "Relu", "Neg"], dtypes=["float32", "int32"], values="none")
MUL_SUB = Trigger((PatternNode("Mul"), PatternNode("Sub")), ((0, 1),), "mulsub")


def _has_pair(model: onnx.ModelProto, producer: str, consumer: str, dtype: int | None = None) -> bool:
    model = onnx.shape_inference.infer_shapes(model)
    made = {o: n.op_type for n in model.graph.node for o in n.output}
    types = {v.name: v.type.tensor_type.elem_type for v in model.graph.value_info}
    types.update({v.name: v.type.tensor_type.elem_type for v in [*model.graph.input, *model.graph.output]})
    types.update({i.name: i.data_type for i in model.graph.initializer})
    return any(
        n.op_type == consumer
        and any(made.get(i) == producer for i in n.input)
        and (dtype is None or types.get(n.input[0]) == dtype)
        for n in model.graph.node
    )


def test_knowing_no_bug_changes_no_model() -> None:
    for seed in range(20):
        plain = generate(seed, CFG).model.SerializeToString()
        assert generate(seed, CFG, avoid=Avoid([], 1.0)).model.SerializeToString() == plain


def test_a_known_trigger_is_never_completed_at_full_strength() -> None:
    plain = [generate(seed, CFG).model for seed in range(60)]
    assert sum(_has_pair(m, "Mul", "Sub") for m in plain) >= 10, "the pair is common without steering"
    avoid = Avoid([MUL_SUB], 1.0)
    steered = [generate(seed, CFG, avoid=avoid).model for seed in range(60)]
    assert not any(_has_pair(m, "Mul", "Sub") for m in steered)
    assert avoid.steered["mulsub"] > 0
    again = Avoid([MUL_SUB], 1.0)
    assert all(
        generate(seed, CFG, avoid=again).model.SerializeToString() == m.SerializeToString()
        for seed, m in enumerate(steered[:10])
    ), "the same seed and known triggers give the same model"


def test_a_trigger_bound_to_a_dtype_leaves_the_others() -> None:
    int_only = Trigger((PatternNode("Mul", frozenset({"int32"})), PatternNode("Sub", frozenset({"int32"}))), ((0, 1),))
    models = [generate(seed, CFG, avoid=Avoid([int_only], 1.0)).model for seed in range(80)]
    assert not any(_has_pair(m, "Mul", "Sub", onnx.TensorProto.INT32) for m in models)
    assert any(_has_pair(m, "Mul", "Sub", onnx.TensorProto.FLOAT) for m in models)


def test_a_trigger_a_template_writes_is_steered_away_from_too() -> None:
    """QuickGelu's template writes Mul -> Sigmoid -> Mul as one insertion: a known
    Sigmoid -> Mul trigger inside it, or completed by it, is refused like any other."""
    cfg = GenConfig(nodes=8, ops=["Mul", "Sigmoid", "Relu"], dtypes=["float32"], patterns=1.0)
    sigmoid_mul = Trigger((PatternNode("Sigmoid"), PatternNode("Mul")), ((0, 1),), "sigmoidmul")
    plain = [generate(s, cfg).model for s in range(30)]
    assert sum(_has_pair(m, "Sigmoid", "Mul") for m in plain) >= 10
    avoid = Avoid([sigmoid_mul], strength=1.0)
    steered = [generate(s, cfg, avoid=avoid).model for s in range(30)]
    assert not any(_has_pair(m, "Sigmoid", "Mul") for m in steered)
    assert avoid.steered["sigmoidmul"] > 0
