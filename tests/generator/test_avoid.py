"""Known triggers kept out of generated graphs (generator.avoid), on real generation."""

from __future__ import annotations

from collections import Counter

import numpy as np
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


PAD_CFG = GenConfig(nodes=6, ops=["Pad", "Relu", "Add"], dtypes=["float32"], opset=19, patterns=0.0)


def _pad_modes(models: list[onnx.ModelProto]) -> Counter[str]:
    modes: Counter[str] = Counter()
    for m in models:
        for n in m.graph.node:
            if n.op_type == "Pad":
                mode = next((a.s.decode() for a in n.attribute if a.name == "mode"), "constant")
                modes[mode] += 1
    return modes


def test_avoiding_one_attribute_form_keeps_every_other_form_of_the_op() -> None:
    """A persistent defect of Pad's "wrap" mode, known as "Pad, any attributes", once kept every
    Pad out of a campaign. Known by the attribute its reduced trigger writes, only that form
    goes, and the other modes are drawn as often as before."""
    seeds = range(150)
    plain = _pad_modes([generate(s, PAD_CFG).model for s in seeds])
    assert plain["wrap"] >= 5 and plain["constant"] >= 5, plain
    wrap = Trigger((PatternNode("Pad", attrs=frozenset({("mode", "wrap")})),), (), "wrap")
    narrow = Avoid([wrap], 1.0)
    steered = _pad_modes([generate(s, PAD_CFG, avoid=narrow).model for s in seeds])
    assert steered["wrap"] == 0 and narrow.steered["wrap"] > 0
    others = sum(n for mode, n in plain.items() if mode != "wrap")
    assert sum(steered.values()) >= 0.8 * others, (plain, steered)
    coarse = _pad_modes([generate(s, PAD_CFG, avoid=Avoid([Trigger((PatternNode("Pad"),))], 1.0)).model for s in seeds])
    assert sum(coarse.values()) == 0, "without attributes the trigger is every Pad"


def test_a_known_bug_keeps_the_attributes_its_reduced_trigger_writes() -> None:
    from onnx import TensorProto, helper

    from bot.findings.bundle import Finding
    from bot.findings.known_bugs import KnownBug, known_bug

    pad = helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap")
    graph = helper.make_graph(
        [pad],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
        [onnx.numpy_helper.from_array(np.array([0, 1, 0, 1], dtype=np.int64), "p")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    finding = Finding.model_validate(
        {
            "verdict": "crash",
            "fingerprint": "f",
            "signature": "s",
            "backend": {"name": "b", "level": "l", "version": "1"},
        }
    )
    bug = known_bug(model, finding)
    assert bug is not None and bug.nodes[0].attrs == {"mode": "wrap"}
    again = KnownBug.model_validate_json(bug.model_dump_json())
    assert again.trigger().nodes[0].attrs == frozenset({("mode", "wrap")})
    legacy = KnownBug.model_validate({"fingerprint": "f", "nodes": [{"op_type": "Pad"}]})
    assert legacy.trigger().nodes[0].attrs is None, "a known-bugs.json from before attributes avoids any form"
