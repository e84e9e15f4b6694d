"""Every false-positive rule against a real bug it must not hide.

The bug: onnxruntime's LayerNormFusion matches `Sub(mean, x)` as if it were `Sub(x, mean)`
and fuses the nine nodes into one LayerNormalization with the opposite sign (wrong at
`all` in every release from 1.15.1 to 1.31.1; tests/release_cases.py). Each test puts one
rule's op family next to that miscompile, on values where the rule's condition really
holds somewhere (a tie, a NaN, a near-equal comparison, an operand near a step or an
edge, a negative Pow base) but not where the output is wrong. Matching the op, or the
condition anywhere, would filter the bug; matching the evidence must not. The false
positives each rule exists for are tests/oracles/test_rules.py's, on the same real onnxruntime.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from backends.client import WorkerClient
from backends.spec import parse_backend
from oracles.case import CaseEvidence
from oracles.matchers import CaseFacts, in_scope, match_margin, match_ops
from oracles.rules import Rule, RuleSet, load_rules
from oracles.verdict import Judgement, Verdict

pytestmark = [pytest.mark.worker, pytest.mark.release]

F32 = TensorProto.FLOAT
X = np.array([[1.0, 1.0, 3.0, 5.0], [0.75, -1.5, 1.0, -0.5], [1.5, 0.25, -2.0, 0.5]], np.float32)
"""Row 0 has two equal elements below the mean, so -LayerNorm(x) ties at its maximum
there; every row has elements on both sides of its mean, so the Pow base is negative."""


def _layernorm_swapped() -> list[onnx.NodeProto]:
    """`y = (mean - x) / sqrt(mean((mean - x)**2) + eps)`: the miscompiled subgraph."""
    return [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1], keepdims=1),
        helper.make_node("Sub", ["mean", "x"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1], keepdims=1),
        helper.make_node("Add", ["var", "eps"], ["vare"]),
        helper.make_node("Sqrt", ["vare"], ["std"]),
        helper.make_node("Div", ["d", "std"], ["n"]),
        helper.make_node("Mul", ["n", "scale"], ["s"]),
        helper.make_node("Add", ["s", "bias"], ["y"]),
    ]


def _model(
    tail: list[onnx.NodeProto],
    out: tuple[str, int, list[int]],
    extra_inputs: dict[str, list[int]] | None = None,
    extra_inits: list[onnx.TensorProto] | None = None,
) -> onnx.ModelProto:
    inits = [
        helper.make_tensor("two", F32, [], [2.0]),
        helper.make_tensor("eps", F32, [], [1e-5]),
        helper.make_tensor("scale", F32, [4], [1.0] * 4),
        helper.make_tensor("bias", F32, [4], [0.0] * 4),
        *(extra_inits or []),
    ]
    inputs = [helper.make_tensor_value_info("x", F32, [3, 4])]
    inputs += [helper.make_tensor_value_info(n, F32, s) for n, s in (extra_inputs or {}).items()]
    name, elem, shape = out
    graph = helper.make_graph(
        [*_layernorm_swapped(), *tail], "g", inputs, [helper.make_tensor_value_info(name, elem, shape)], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _lost_mean_x() -> np.ndarray:
    """The reference's y for X, to place conditions on its values."""
    d = X.mean(axis=-1, keepdims=True) - X
    y: np.ndarray = (d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5)).astype(np.float32)
    return y


def _wrong() -> Judgement:
    return Judgement(verdict=Verdict.wrong_result)


@pytest.fixture(scope="module")
def ort() -> Iterator[WorkerClient]:
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=30) as client:
        yield client


@pytest.fixture(scope="module")
def rules() -> RuleSet:
    return load_rules()


def _judged(
    ort: WorkerClient, model: onnx.ModelProto, inputs: dict[str, np.ndarray], rules: RuleSet, condition: str | None
) -> str | None:
    """The rule that takes this real wrong result off the report, or None (it is reported),
    after checking that rule `condition`'s run-time condition does hold in the case: only
    its evidence can keep it from matching."""
    result = ort.run(model.SerializeToString(), inputs)
    ev = CaseEvidence.compute(model, inputs)
    j = ev.judge(result)
    assert j.verdict is Verdict.wrong_result, j
    view = ev.view("onnxruntime", j, result.outputs)
    if condition is not None:
        assert _condition_holds(next(r for r in rules.rules if r.id == condition), CaseFacts(view)), condition
    hit = rules.match(view)
    return hit.rule_id if hit else None


def _condition_holds(rule: Rule, facts: CaseFacts) -> bool:
    """Scope, op patterns with their value conditions, and the margin, without evidence."""
    anchors = [a for _, a in match_ops(rule.match.ops, facts)] if rule.match.ops else None
    if anchors is not None and not anchors:
        return False
    return in_scope(rule, facts) and (not rule.match.margin or bool(match_margin(facts, anchors)))


def test_the_miscompiled_normalization_with_pow_of_a_negative_base_is_reported(
    ort: WorkerClient, rules: RuleSet
) -> None:
    """`Pow(d, 2)` of a negative d is exact and defined: no margin explains the fused
    LayerNormalization's wrong sign (the Pow rule asked for a positive base before)."""
    model = _model([], ("y", F32, [3, 4]))
    assert _judged(ort, model, {"x": X}, rules, None) is None
    facts = CaseFacts(CaseEvidence.compute(model, {"x": X}).view("onnxruntime", _wrong(), None))
    assert not [f for f in facts.values.failures if "Pow" in f.text], "a negative base under an integer exponent"
    half = _model([], ("y", F32, [3, 4]))
    half.graph.initializer[0].CopyFrom(helper.make_tensor("two", F32, [], [2.5]))
    facts = CaseFacts(CaseEvidence.compute(half, {"x": X}).view("onnxruntime", _wrong(), None))
    assert [f for f in facts.values.failures if "Pow" in f.text], "x**2.5 of a negative x is NaN: still unsafe"


def test_a_tie_in_another_slice_does_not_hide_the_miscompile(ort: WorkerClient, rules: RuleSet) -> None:
    """ArgMax over rows of which row 0 holds an exact tie of computed values: breaking it
    either way moves row 0 only, and the backend's answers elsewhere are still wrong."""
    tail = [helper.make_node("ArgMax", ["y"], ["am"], axis=-1, keepdims=1)]
    model = _model(tail, ("am", TensorProto.INT64, [3, 1]))
    y = _lost_mean_x()
    assert y[0, 0] == y[0, 1] == y[0].max()
    assert _judged(ort, model, {"x": X}, rules, "arg-ties") is None


def test_a_nan_reaching_max_elsewhere_does_not_hide_the_miscompile(ort: WorkerClient, rules: RuleSet) -> None:
    tail = [helper.make_node("Max", ["y", "z"], ["m"])]
    model = _model(tail, ("m", F32, [3, 4]), extra_inputs={"z": [3, 4]})
    z = np.full((3, 4), -10.0, np.float32)
    z[2, 3] = np.nan
    assert _judged(ort, model, {"x": X, "z": z}, rules, "nan-max-min-clip") is None


def test_a_near_equal_comparison_elsewhere_does_not_hide_the_miscompile(ort: WorkerClient, rules: RuleSet) -> None:
    """Less(y, c) with c equal to y at one element (the old rule matched the op alone)."""
    c = np.full((3, 4), 0.05, np.float32)
    c[1, 2] = _lost_mean_x()[1, 2]
    tail = [helper.make_node("Less", ["y", "c"], ["lt"])]
    model = _model(tail, ("lt", TensorProto.BOOL, [3, 4]), extra_inits=[onnx.numpy_helper.from_array(c, "c")])
    assert _judged(ort, model, {"x": X}, rules, "float-comparison") is None


def test_a_value_at_a_floor_step_elsewhere_does_not_hide_the_miscompile(ort: WorkerClient, rules: RuleSet) -> None:
    """Floor(y * k) with k chosen so that one element sits on an integer."""
    y = _lost_mean_x()
    k = np.full((3, 4), 1.7, np.float32)
    k[0, 2] = np.float32(2.0) / y[0, 2]
    tail = [helper.make_node("Mul", ["y", "k"], ["yk"]), helper.make_node("Floor", ["yk"], ["f"])]
    model = _model(tail, ("f", F32, [3, 4]), extra_inits=[onnx.numpy_helper.from_array(k, "k")])
    assert _judged(ort, model, {"x": X}, rules, "rounding-discontinuity") is None


def test_a_value_at_a_quantization_step_elsewhere_does_not_hide_the_miscompile(
    ort: WorkerClient, rules: RuleSet
) -> None:
    """QuantizeLinear(y * k) by 1/16 with k chosen so that one element sits on the
    half-integer 2.5 quanta."""
    y = _lost_mean_x()
    k = np.full((3, 4), 1.7, np.float32)
    k[0, 2] = np.float32(2.5 / 16) / y[0, 2]
    quant = [helper.make_tensor("qs", F32, [], [1 / 16]), helper.make_tensor("qz", TensorProto.UINT8, [], [128])]
    tail = [helper.make_node("Mul", ["y", "k"], ["yk"]), helper.make_node("QuantizeLinear", ["yk", "qs", "qz"], ["q"])]
    model = _model(tail, ("q", TensorProto.UINT8, [3, 4]), extra_inits=[onnx.numpy_helper.from_array(k, "k"), *quant])
    assert _judged(ort, model, {"x": X}, rules, "rounding-discontinuity") is None


def test_an_operand_near_an_edge_elsewhere_does_not_hide_the_miscompile(ort: WorkerClient, rules: RuleSet) -> None:
    """y + Sqrt(y - c) where c makes one element's root operand a hair above zero."""
    y = _lost_mean_x()
    c = np.full((3, 4), -5.0, np.float32)
    c[2, 1] = y[2, 1] - np.float32(1e-6)
    tail = [
        helper.make_node("Sub", ["y", "c"], ["gap"]),
        helper.make_node("Sqrt", ["gap"], ["root"]),
        helper.make_node("Add", ["y", "root"], ["out"]),
    ]
    model = _model(tail, ("out", F32, [3, 4]), extra_inits=[onnx.numpy_helper.from_array(c, "c")])
    assert _judged(ort, model, {"x": X}, rules, "unstable-margin") is None
