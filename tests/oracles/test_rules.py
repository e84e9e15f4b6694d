"""Known-false-positive rules on real runs: small models run on the real onnxruntime in a
worker, judged against the torch reference, then matched against the shipped rules.

The disagreements are real ones found by probing: onnxruntime's vectorised Sigmoid differs
from torch's by an ulp, which flips near-ties, comparisons and square roots of near-zero
differences, and its Clip ignores a NaN bound that torch propagates.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import oracles
from backends.client import WorkerClient
from backends.reference import run_reference
from backends.results import RunResult, Status
from backends.spec import parse_backend
from oracles.case import CaseEvidence
from oracles.intermediates import CaseValues, tie
from oracles.patterns import GraphView
from oracles.rules import SHIPPED_RULES, CaseView, RulesError, RuleSet, load_rules, read_rules_file
from oracles.verdict import Judgement, Verdict, judge

pytestmark = [pytest.mark.worker]

F32 = TensorProto.FLOAT
SIGMOID_FLIPS = (np.float32(-1.7805507), np.float32(-1.7805506))
"""a < b, and onnxruntime's Sigmoid(a) >= Sigmoid(b) although torch's is 1.5e-8 smaller."""


@pytest.fixture(scope="module")
def ort() -> Iterator[WorkerClient]:
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=30) as client:
        yield client


@pytest.fixture(scope="module")
def rules() -> RuleSet:
    return load_rules()


def model(
    nodes: list[onnx.NodeProto],
    inputs: Mapping[str, tuple[int, list[int]]],
    outputs: Mapping[str, tuple[int, list[int] | None]],
    initializers: list[onnx.TensorProto] | None = None,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "rules",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in outputs.items()],
        initializer=initializers or [],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def run_case(client: WorkerClient, m: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> CaseView:
    """What the rules see of one real run, judged as a campaign judges it."""
    result = client.run(m.SerializeToString(), inputs)
    evidence = CaseEvidence.compute(m, inputs)
    return evidence.view("onnxruntime", evidence.judge(result), result.outputs)


def counterfactual(case: CaseView, m: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> CaseView:
    """The same judgement and backend outputs on another model or other inputs: what a rule
    that read only the op types, and not the values, would still match."""
    return replace(case, model=m, inputs=inputs, reference=run_reference(m, inputs))


def sigmoid_argmax() -> onnx.ModelProto:
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("ArgMax", ["s"], ["y"], axis=1, name="am")]
    return model(nodes, {"x": (F32, [1, 2])}, {"y": (TensorProto.INT64, [1, 1])})


def sigmoid_less(a: str, b: str, out: str, tag: str) -> list[onnx.NodeProto]:
    return [
        helper.make_node("Sigmoid", [a], [f"s{a}"]),
        helper.make_node("Sigmoid", [b], [f"s{b}"]),
        helper.make_node("Less", [f"s{a}", f"s{b}"], [out], name=tag),
    ]


def test_shipped_rules_are_package_data_with_reasons(rules: RuleSet) -> None:
    assert SHIPPED_RULES.parent == Path(oracles.__file__).resolve().parent
    pyproject = tomllib.loads((Path(oracles.__file__).resolve().parent.parent / "pyproject.toml").read_text())
    assert SHIPPED_RULES.name in pyproject["tool"]["setuptools"]["package-data"]["oracles"]
    want = {"unstable-margin", "rounding-discontinuity", "float-comparison", "arg-ties", "nan-max-min-clip"}
    assert want | {"resource-exhaustion"} <= set(rules.ids)
    assert rules.ids[-1] == "unstable-margin", "the catch-all margin rule must come after the specific ones"
    assert all(len(r.reason) > 40 for r in rules.rules)
    assert rules.rules[0].count_key == f"filtered:{rules.ids[0]}"


def test_argmax_near_tie_is_filtered_and_clear_winner_is_not(ort: WorkerClient, rules: RuleSet) -> None:
    m = sigmoid_argmax()
    tied = run_case(ort, m, {"x": np.array([SIGMOID_FLIPS], np.float32)})
    assert tied.judgement.verdict is Verdict.wrong_result, tied.judgement
    hit = rules.match(tied)
    assert hit is not None and hit.rule_id == "arg-ties", hit
    assert hit.count_key == "filtered:arg-ties"
    assert "'am'" in hit.explanation and "near-tie" in hit.explanation
    clear = run_case(ort, m, {"x": np.array([[0.0, 2.0]], np.float32)})
    assert clear.judgement.verdict is Verdict.pass_
    assert rules.match(clear) is None
    # The same wrong verdict on values with a clear winner: the rule reads the values.
    assert rules.match(counterfactual(tied, m, clear.inputs)) is None


def test_a_tie_explains_only_the_slice_it_is_in(ort: WorkerClient, rules: RuleSet) -> None:
    """Row 0 holds the near-tie onnxruntime breaks the other way, row 1 a clear winner. The
    real mismatch (row 0) is filtered and its slice named; the same tie does not explain a
    wrong index in row 1."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("ArgMax", ["s"], ["y"], axis=1, name="am")]
    m = model(nodes, {"x": (F32, [2, 2])}, {"y": (TensorProto.INT64, [2, 1])})
    x = {"x": np.array([SIGMOID_FLIPS, [0.0, 2.0]], np.float32)}
    real = run_case(ort, m, x)
    assert real.judgement.comparison is not None and real.judgement.comparison.outputs[0].bad_elements == 1
    hit = rules.match(real)
    assert hit is not None and hit.rule_id == "arg-ties" and "in slice 0" in hit.explanation, hit
    assert real.reference is not None
    other_row = replace(real, outputs={"y": np.array([[real.reference["y"][0, 0]], [0]], np.int64)})
    assert rules.match(other_row) is None


def test_a_computed_tie_between_copies_is_broken_group_by_group(ort: WorkerClient, rules: RuleSet) -> None:
    """Found by a campaign of onnxruntime 1.30.0 against 1.31.1: LayerNormalization of two
    one-hot rows gives the same values in a different order, so each column of the four
    concatenated copies has a computed tie between the rows' values, of which onnxruntime
    and torch pick different ones; select_last_index then picks the last copy. Breaking
    the tie one way must move every copy of the winning value together, or no alternative
    gives the backend's index (the last copy of the other row)."""
    f64 = TensorProto.DOUBLE
    inits = [helper.make_tensor("w", f64, [13], [1.0] * 13), helper.make_tensor("b", f64, [13], [0.0] * 13)]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "w", "b"], ["n"]),
        helper.make_node("Concat", ["n", "n", "n", "n"], ["c"], axis=0),
        helper.make_node("ArgMin", ["c"], ["y"], select_last_index=1, name="am"),
    ]
    m = model(nodes, {"x": (f64, [2, 13])}, {"y": (TensorProto.INT64, [1, 13])}, inits)
    x = np.zeros((2, 13))
    x[0, 4] = x[1, 5] = 1.0
    case = run_case(ort, m, {"x": x})
    assert case.judgement.verdict is Verdict.wrong_result, case.judgement
    hit = rules.match(case)
    assert hit is not None and hit.rule_id == "arg-ties", hit


def test_computed_values_closer_than_an_epsilon_are_a_tie_whatever_their_ratio(
    ort: WorkerClient, rules: RuleSet
) -> None:
    """A campaign of onnxruntime 1.22.1 against 1.23.2 reported a TopK over Sigmoid outputs:
    onnxruntime's Sigmoid is 0 at -50 and at -70, torch's is 2e-22 and 4e-31, both right to
    far within any tolerance, and TopK then picks other winners. Their ratio is 1e9, so no
    relative width calls them tied; the absolute floor (float32's epsilon) does."""
    k = helper.make_tensor("k", TensorProto.INT64, [1], [3])
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("TopK", ["s", "k"], ["v", "i"], name="tk")]
    m = model(nodes, {"x": (F32, [6])}, {"v": (F32, [3]), "i": (TensorProto.INT64, [3])}, [k])
    tiny = run_case(ort, m, {"x": np.array([-70, -50, -90, -88, -60, -100], np.float32)})
    assert tiny.judgement.verdict is Verdict.wrong_result, tiny.judgement
    hit = rules.match(tiny)
    assert hit is not None and hit.rule_id == "arg-ties", hit
    assert "'tk'" in hit.explanation and "near-tie" in hit.explanation
    # The real bug the floor must not hide: winners apart by more than it, picked wrong.
    apart = {"x": np.array([-7, -5, -9, -8, -6, -10], np.float32)}
    clear = run_case(ort, m, apart)
    assert clear.judgement.verdict is Verdict.pass_
    assert rules.match(counterfactual(tiny, m, apart)) is None


def test_a_tie_inside_the_k_chosen_orders_them_and_is_explained(ort: WorkerClient, rules: RuleSet) -> None:
    """onnxruntime's vectorized Atan gives the last element of a tensor (its scalar tail) an
    ulp less than the same input elsewhere: three equal inputs of one slice become two equal
    values and one an ulp apart, and TopK, rightly by its own values, puts that one first.
    The three are all inside the k = 3 chosen, so only a tie-break within them explains the
    order; breaking only the pair at the boundary of the k, the rule left it reported (a
    1.27.0 to 1.28.0 campaign). TopK straight on those inputs, an exact tie of input values,
    is still the first-index rule's, and onnxruntime follows it."""
    x = np.random.default_rng(7).uniform(-1.5, 1.5, (1, 21, 6, 5)).astype(np.float32)
    x[0, 20, :, 4] = np.array([1.0488089, -1.0488089, -1.0488089, 1.2747549, 0.95346254, -1.0488089], np.float32)
    k = helper.make_tensor("k", TensorProto.INT64, [1], [3])
    nodes = [
        helper.make_node("Atan", ["x"], ["a"]),
        helper.make_node("TopK", ["a", "k"], ["v", "i"], axis=-2, largest=0, name="tk"),
    ]
    m = model(nodes, {"x": (F32, list(x.shape))}, {"i": (TensorProto.INT64, [1, 21, 3, 5])}, [k])
    case = run_case(ort, m, {"x": x})
    assert case.judgement.verdict is Verdict.wrong_result, case.judgement
    assert case.outputs is not None and case.outputs["i"][0, 20, :, 4].tolist() == [5, 1, 2]
    hit = rules.match(case)
    assert hit is not None and hit.rule_id == "arg-ties" and "fed by Atan" in hit.explanation, hit
    assert "in slice 104: positions 1 and 5" in hit.explanation, hit.explanation  # the reference's 1, the build's 5
    direct = model(nodes[1:], {"a": (F32, list(x.shape))}, {"i": (TensorProto.INT64, [1, 21, 3, 5])}, [k])
    assert run_case(ort, direct, {"a": np.arctan(x)}).judgement.verdict is Verdict.pass_


def test_a_tie_the_build_breaks_by_putting_one_behind_is_explained(ort: WorkerClient, rules: RuleSet) -> None:
    """Three float64 means of exactly 4/28 each, which onnxruntime sums in another order
    than torch: its TopK gives 0, 2, 1 (1.18.0 gave 1, 2, 0 on a campaign's case), where
    the reference's first-index rule gives 0, 1, 2. No winner put an ulp ahead gives that
    order, one loser put an ulp behind does."""
    x = np.random.default_rng(0).uniform(0, 0.3, (1, 3, 4, 1, 7))
    for c in range(3):
        flat = x[0, c].reshape(-1)
        flat[-1] = 4.0 - flat[:-1].sum()
        x[0, c] = flat.reshape(4, 1, 7)
    k = helper.make_tensor("k", TensorProto.INT64, [1], [3])
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[0, 2, 4], keepdims=0),
        helper.make_node("TopK", ["m", "k"], ["v", "i"], axis=-2, name="tk"),
    ]
    m = model(nodes, {"x": (TensorProto.DOUBLE, [1, 3, 4, 1, 7])}, {"i": (TensorProto.INT64, [3, 1])}, [k])
    case = run_case(ort, m, {"x": x})
    assert case.judgement.verdict is Verdict.wrong_result, case.judgement
    assert case.outputs is not None and case.outputs["i"].ravel().tolist() == [0, 2, 1]
    hit = rules.match(case)
    assert hit is not None and hit.rule_id == "arg-ties" and "fed by ReduceMean" in hit.explanation, hit


def test_a_tie_reaching_past_the_k_plus_one_deciding_values_is_explained(ort: WorkerClient, rules: RuleSet) -> None:
    """onnxruntime's LRN gives the last of three equal batch rows an ulp more, and TopK with
    k = 1 along the batch rightly picks it. The three tie in the reference, but only the
    best k + 1 = 2 were tried as winners, so the rule left it reported (a 1.29.0 to 1.30.0
    campaign). A run of ties that reaches the deciding ones now goes on through every value
    tied with them. TopK straight on the equal values still follows the first-index rule."""
    k = helper.make_tensor("k", TensorProto.INT64, [1], [1])
    nodes = [
        helper.make_node("LRN", ["x"], ["l"], alpha=0.05, size=3),
        helper.make_node("TopK", ["l", "k"], ["v", "i"], axis=0, name="tk"),
    ]
    m = model(nodes, {"x": (F32, [3, 2, 1, 1])}, {"i": (TensorProto.INT64, [1, 2, 1, 1])}, [k])
    case = run_case(ort, m, {"x": np.full((3, 2, 1, 1), 0.25, np.float32)})
    assert case.judgement.verdict is Verdict.wrong_result, case.judgement
    assert case.outputs is not None and case.outputs["i"].reshape(-1).tolist() == [2, 2]
    hit = rules.match(case)
    assert hit is not None and hit.rule_id == "arg-ties", hit
    # the pair the build decided the other way, not the first tied pair (0 and 1)
    assert "positions 0 and 2" in hit.explanation, hit.explanation
    direct = model(nodes[1:], {"l": (F32, [3, 2, 1, 1])}, {"i": (TensorProto.INT64, [1, 2, 1, 1])}, [k])
    assert run_case(ort, direct, {"l": np.full((3, 2, 1, 1), 0.25, np.float32)}).judgement.verdict is Verdict.pass_


def test_exact_tie_of_input_values_is_not_filtered(ort: WorkerClient, rules: RuleSet) -> None:
    """ONNX fixes the tie-break (first index; last with select_last_index) and onnxruntime
    follows it, so a wrong index on a tie of exact input values, even duplicated by Tile,
    would be a real bug: the rule only covers computed operands."""
    repeats = helper.make_tensor("repeats", TensorProto.INT64, [2], [1, 2])
    nodes = [
        helper.make_node("Tile", ["x", "repeats"], ["t"]),
        helper.make_node("ArgMax", ["t"], ["y"], axis=1, select_last_index=1, name="am"),
    ]
    m = model(nodes, {"x": (F32, [1, 2])}, {"y": (TensorProto.INT64, [1, 1])}, [repeats])
    x = {"x": np.array([[5.0, 5.0]], np.float32)}
    assert run_case(ort, m, x).judgement.verdict is Verdict.pass_
    tied = run_case(ort, sigmoid_argmax(), {"x": np.array([SIGMOID_FLIPS], np.float32)})
    assert tied.judgement.verdict is Verdict.wrong_result
    assert rules.match(counterfactual(tied, m, x)) is None
    computed = [helper.make_node("Sigmoid", ["x"], ["s"]), *nodes]
    computed[1].input[0] = "s"
    m2 = model(computed, {"x": (F32, [1, 2])}, {"y": (TensorProto.INT64, [1, 1])}, [repeats])
    wrong = counterfactual(tied, m2, x)
    assert wrong.reference is not None and wrong.outputs is not None
    assert int(wrong.reference["y"][0, 0]) == 3  # select_last_index: the last of the four copies
    wrong = replace(wrong, outputs={"y": np.zeros((1, 1), np.int64)})  # the first: another rounding's winner
    hit = rules.match(wrong)
    assert hit is not None and hit.rule_id == "arg-ties", hit
    assert "exact tie" in hit.explanation and "fed by Sigmoid" in hit.explanation


@pytest.mark.parametrize(
    ("dtype", "tied"), [(np.float16, True), (np.float32, False)], ids=["float16-2^-5", "float32-2^-10"]
)
def test_tie_width_follows_the_dtype(dtype: type[np.floating], tied: bool) -> None:
    """1.0 against 1.02 is 2^-5.6 apart: a tie in float16, a clear winner in float32."""
    t = TensorProto.FLOAT16 if dtype is np.float16 else F32
    m = model([helper.make_node("ArgMax", ["x"], ["y"], axis=1)], {"x": (t, [1, 3])}, {"y": (TensorProto.INT64, None)})
    values = CaseValues(m, {"x": np.array([[1.0, 1.02, -3.0]], dtype)})
    found = tie(GraphView(m).nodes[0], values)
    assert (found is not None) == tied, found
    exact = CaseValues(m, {"x": np.array([[-3.0, 5.0, 5.0]], dtype)})
    assert "exact tie" in (tie(GraphView(m).nodes[0], exact) or "") and "positions 1 and 2" in (
        tie(GraphView(m).nodes[0], exact) or ""
    )


def test_nan_bound_of_clip_is_filtered(ort: WorkerClient, rules: RuleSet) -> None:
    """onnxruntime ignores a NaN bound of Clip, torch propagates it: ONNX leaves it open."""
    x = np.array([-2.0, 0.25, 0.5, 3.0], np.float32)

    def clip(lo: float) -> onnx.ModelProto:
        bounds = [helper.make_tensor("lo", F32, [], [lo]), helper.make_tensor("hi", F32, [], [1.0])]
        node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")
        return model([node], {"x": (F32, [4])}, {"y": (F32, [4])}, bounds)

    nan = run_case(ort, clip(float("nan")), {"x": x})
    assert nan.judgement.verdict is Verdict.wrong_result
    assert nan.judgement.comparison is not None and "nonfinite" in nan.judgement.message
    hit = rules.match(nan)
    assert hit is not None and hit.rule_id == "nan-max-min-clip", hit
    assert "input 1 ('lo') holds NaN" in hit.explanation
    assert run_case(ort, clip(0.0), {"x": x}).judgement.verdict is Verdict.pass_


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_min_propagate_nan_in_both_runtimes(ort: WorkerClient, op: str) -> None:
    """Recorded behaviour: onnxruntime's CPU Max/Min propagate NaN like torch, so the NaN
    rule has nothing to hide for them on this backend (it does for Clip)."""
    m = model([helper.make_node(op, ["a", "b"], ["y"])], {"a": (F32, [3]), "b": (F32, [3])}, {"y": (F32, [3])})
    nan = np.float32("nan")
    case = run_case(ort, m, {"a": np.array([nan, 1, nan], np.float32), "b": np.array([0, nan, nan], np.float32)})
    assert case.judgement.verdict is Verdict.pass_


def test_less_on_computed_floats_is_filtered(ort: WorkerClient, rules: RuleSet) -> None:
    m = model(sigmoid_less("a", "b", "y", "lt"), {"a": (F32, [1]), "b": (F32, [1])}, {"y": (TensorProto.BOOL, [1])})
    a, b = SIGMOID_FLIPS
    case = run_case(ort, m, {"a": np.array([a], np.float32), "b": np.array([b], np.float32)})
    assert case.judgement.verdict is Verdict.wrong_result
    hit = rules.match(case)
    assert hit is not None and hit.rule_id == "float-comparison", hit
    assert "Less node 'lt' compares near-equal operands" in hit.explanation and "fed by Sigmoid" in hit.explanation
    assert "flipped explains all 1 mismatching element" in hit.explanation


def test_a_comparison_with_a_computed_near_zero_is_filtered(ort: WorkerClient, rules: RuleSet) -> None:
    """-0.0 (a special value's) against Sigmoid(a) - Sigmoid(b): -1.5e-8 in torch, not below
    zero in onnxruntime. The operands are no relative near-tie, but closer than float32's
    epsilon, where either answer is the rounding's: a campaign's false report of Greater. The
    rule reads values: a real flip of operands a unit apart stays a report (the test above
    shows a clear comparison agrees)."""
    nodes = [
        helper.make_node("Sigmoid", ["a"], ["sa"]),
        helper.make_node("Sigmoid", ["b"], ["sb"]),
        helper.make_node("Sub", ["sa", "sb"], ["d"]),
        helper.make_node("Greater", ["z", "d"], ["y"], name="gt"),
    ]
    m = model(nodes, {"a": (F32, [1]), "b": (F32, [1]), "z": (F32, [1])}, {"y": (TensorProto.BOOL, [1])})
    a, b = SIGMOID_FLIPS
    inputs = {"a": np.array([a], np.float32), "b": np.array([b], np.float32), "z": np.array([-0.0], np.float32)}
    case = run_case(ort, m, inputs)
    assert case.judgement.verdict is Verdict.wrong_result, case.judgement
    hit = rules.match(case)
    assert hit is not None and hit.rule_id == "float-comparison", hit
    assert rules.match(counterfactual(case, m, {**inputs, "z": np.array([-1.0], np.float32)})) is None


def test_pattern_on_a_matching_output_does_not_hide_another_output(ort: WorkerClient, rules: RuleSet) -> None:
    """Two outputs: a Less whose operands are far apart (agrees) and an ArgMax on a
    near-tie (mismatches). The Less lies outside the mismatching output's cone."""
    nodes = [
        *sigmoid_less("a", "b", "lt_out", "lt"),
        helper.make_node("Sigmoid", ["x"], ["s"]),
        helper.make_node("ArgMax", ["s"], ["am_out"], axis=1, name="am"),
    ]
    ins = {"a": (F32, [1]), "b": (F32, [1]), "x": (F32, [1, 2])}
    m = model(nodes, ins, {"lt_out": (TensorProto.BOOL, [1]), "am_out": (TensorProto.INT64, [1, 1])})
    inputs = {"a": np.array([-3.0], np.float32), "b": np.array([3.0], np.float32)}
    case = run_case(ort, m, {**inputs, "x": np.array([SIGMOID_FLIPS], np.float32)})
    assert case.judgement.comparison is not None
    assert [o.name for o in case.judgement.comparison.outputs if o.mismatch] == ["am_out"]
    comparison_only = RuleSet([r for r in rules.rules if r.id == "float-comparison"])
    assert comparison_only.match(case) is None
    hit = rules.match(case)
    assert hit is not None and hit.rule_id == "arg-ties"


def test_margin_rule_sqrt_near_zero(ort: WorkerClient, rules: RuleSet) -> None:
    """sqrt(sigmoid(b) - sigmoid(a)): 1.5e-8 under torch, below zero (NaN) in onnxruntime."""
    nodes = [
        helper.make_node("Sigmoid", ["a"], ["sa"]),
        helper.make_node("Sigmoid", ["b"], ["sb"]),
        helper.make_node("Sub", ["sb", "sa"], ["d"]),
        helper.make_node("Sqrt", ["d"], ["y"], name="root"),
    ]
    m = model(nodes, {"a": (F32, [1]), "b": (F32, [1])}, {"y": (F32, [1])})
    a, b = SIGMOID_FLIPS
    near = run_case(ort, m, {"a": np.array([a], np.float32), "b": np.array([b], np.float32)})
    assert near.judgement.verdict is Verdict.wrong_result
    hit = rules.match(near)
    assert hit is not None and hit.rule_id == "unstable-margin", hit
    assert "'root'" in hit.explanation or "root (Sqrt)" in hit.explanation
    far = {"a": np.array([-3.0], np.float32), "b": np.array([3.0], np.float32)}  # sqrt(0.9)
    assert run_case(ort, m, far).judgement.verdict is Verdict.pass_
    assert rules.match(counterfactual(near, m, far)) is None


@pytest.mark.parametrize("step", ["Floor", "Cast", "QuantizeLinear"])
def test_sigmoid_near_the_step_through_a_reshape(ort: WorkerClient, rules: RuleSet, step: str) -> None:
    """Sigmoid saturates onto 1.0 in one runtime and stays at 0.99999994 in the other; the
    Reshape between them copies the rounding, so the pattern looks through it. Quantized by
    a scale of 2/3, 1.0 is the half-integer 1.5 (rounded to 2) and 0.99999994 rounds to 1."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [16, 16])
    quant = [helper.make_tensor("qs", F32, [], [2 / 3]), helper.make_tensor("qz", TensorProto.UINT8, [], [0])]
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"]),
        helper.make_node("Reshape", ["s", "shape"], ["r"]),
        helper.make_node(step, ["r", "qs", "qz"] if step == "QuantizeLinear" else ["r"], ["y"], name="step"),
    ]
    if step == "Cast":
        nodes[-1].attribute.append(helper.make_attribute("to", TensorProto.INT32))
    out = {"Cast": TensorProto.INT32, "QuantizeLinear": TensorProto.UINT8}.get(step, F32)
    m = model(nodes, {"x": (F32, [256])}, {"y": (out, [16, 16])}, [shape, *(quant if step == "QuantizeLinear" else [])])
    case = run_case(ort, m, {"x": np.linspace(16.0, 16.5, 256, dtype=np.float32)})
    assert case.judgement.verdict is Verdict.wrong_result
    hit = rules.match(case)
    assert hit is not None and hit.rule_id == "rounding-discontinuity", hit
    assert f"{step} node 'step'" in hit.explanation and "fed by Sigmoid" in hit.explanation
    assert "numeric margin" in hit.explanation


def huge_expand() -> onnx.ModelProto:
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [100_000, 100_000])
    return model([helper.make_node("Expand", ["x", "shape"], ["y"])], {"x": (F32, [1])}, {"y": (F32, None)}, [shape])


def bad_reshape() -> onnx.ModelProto:
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [7])
    return model([helper.make_node("Reshape", ["x", "shape"], ["y"])], {"x": (F32, [4])}, {"y": (F32, None)}, [shape])


def test_crash_messages_by_regex(rules: RuleSet, tmp_path: Path) -> None:
    """A real allocation failure under the worker's memory cap is filtered; a real shape
    error is not, until a user rule names its message."""
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=30, memory_mb=2000) as capped:
        oom = run_case(capped, huge_expand(), {"x": np.ones(1, np.float32)})
        reshape = run_case(capped, bad_reshape(), {"x": np.ones(4, np.float32)})
    assert oom.judgement.verdict is Verdict.crash and "Failed to allocate memory" in oom.judgement.message
    hit = rules.match(oom)
    assert hit is not None and hit.rule_id == "resource-exhaustion"
    assert reshape.judgement.verdict is Verdict.crash
    assert rules.match(reshape) is None
    user = tmp_path / "mine.yml"
    user.write_text(
        "rules:\n"
        "  - id: reshape-size\n"
        "    description: a Reshape to a size the input does not have\n"
        "    reason: our generator's known bad shapes\n"
        "    scope: {backends: [onnxruntime], verdicts: [crash], ops: [Reshape]}\n"
        "    match: {message: ['[Rr]eshape']}\n"
    )
    extended = load_rules(user)
    assert extended.ids == [*rules.ids, "reshape-size"]
    found = extended.match(reshape)
    assert found is not None and found.count_key == "filtered:reshape-size"
    on_tvm = replace(reshape, backend="tvm")
    assert extended.match(on_tvm) is None, "scoped to onnxruntime"


def override_file(tmp_path: Path, overrides: bool, rule_id: str = "unstable-margin") -> Path:
    path = tmp_path / "override.yml"
    flag = "    overrides: true\n" if overrides else ""
    path.write_text(
        f"rules:\n  - id: {rule_id}\n    description: margin, for tvm only\n    reason: we trust the others\n"
        f"{flag}    scope: {{backends: [tvm], verdicts: [wrong_result]}}\n    match: {{margin: true}}\n"
    )
    return path


def test_user_rule_overrides_a_shipped_one_only_when_it_says_so(tmp_path: Path, rules: RuleSet) -> None:
    replaced = load_rules(override_file(tmp_path, overrides=True))
    assert replaced.ids == rules.ids
    assert replaced.rules[-1].scope.backends == ["tvm"]
    with pytest.raises(RulesError, match=r"override\.yml: rule 'unstable-margin' \(#0\): id already used"):
        load_rules(override_file(tmp_path, overrides=False))
    with pytest.raises(RulesError, match="no shipped rule has this id"):
        load_rules(override_file(tmp_path, overrides=True, rule_id="no-such-rule"))


RULE = "  - id: {id}\n    description: d\n    reason: r\n    scope: {{verdicts: [crash]}}\n    match: {match}\n"
BROKEN = {
    "yaml": ("rules: [\n  - id: x\n", "invalid YAML at line"),
    "unknown-key": (
        RULE.format(id="a", match="{message: [x]}") + "    colour: red\n",
        "rule 'a' (#0): unknown key 'colour'",
    ),
    "bad-regex": (RULE.format(id="b", match="{message: ['(unclosed']}"), "rule 'b' (#0): match.message: bad regex"),
    "unknown-matcher": (RULE.format(id="c", match="{stack: [x]}"), "rule 'c' (#0): match: unknown key 'stack'"),
    "no-matcher": (RULE.format(id="d", match="{}"), "rule 'd' (#0): match: a rule needs at least one matcher"),
    "unknown-op": (RULE.format(id="e", match="{ops: [{op: [Argmax]}]}"), "unknown ONNX op type 'Argmax'"),
    "ties-on-add": (RULE.format(id="f", match="{ops: [{op: [Add], values: ties}]}"), "values: ties applies to"),
    "duplicate": (RULE.format(id="g", match="{margin: true}") * 2, "rule 'g' (#1): duplicate id"),
    "no-id": ("rules:\n  - description: d\n", "rule #0: id: Field required"),
    "unknown-backend": (
        RULE.format(id="h", match="{margin: true}").replace(
            "{verdicts: [crash]}", "{backends: [ort], verdicts: [crash]}"
        ),
        "rule 'h' (#0): scope.backends: unknown backend 'ort'",
    ),
    "bad-verdict": (
        RULE.format(id="i", match="{margin: true}").replace("crash", "pass"),
        "rule 'i' (#0): scope.verdicts.0",
    ),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_broken_rules_file_is_one_line_error(tmp_path: Path, kind: str) -> None:
    text, expected = BROKEN[kind]
    path = tmp_path / f"{kind}.yml"
    path.write_text(text if text.startswith("rules:") else "rules:\n" + text)
    with pytest.raises(RulesError) as info:
        read_rules_file(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert expected in message, message


def test_missing_user_file_is_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(RulesError, match=r"missing\.yml: cannot read: No such file"):
        load_rules(tmp_path / "missing.yml")


def test_passes_are_never_filtered(rules: RuleSet) -> None:
    m = sigmoid_argmax()
    judgement = Judgement(verdict=Verdict.pass_)
    assert rules.match(CaseView("onnxruntime", m, {"x": np.ones((1, 2), np.float32)}, judgement)) is None


def test_a_tie_explains_a_wrong_topk_index_but_not_wrong_topk_values(rules: RuleSet) -> None:
    """Near-tied elements swap places, so TopK's indices may legitimately differ; its values
    output then differs by the tie's gap, far below tolerance, so a wrong value is no tie."""
    k = helper.make_tensor("k", TensorProto.INT64, [1], [1])
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("TopK", ["s", "k"], ["v", "i"], axis=1)]
    m = model(nodes, {"x": (F32, [1, 2])}, {"v": (F32, [1, 1]), "i": (TensorProto.INT64, [1, 1])}, [k])
    x = {"x": np.array([SIGMOID_FLIPS], np.float32)}
    expected = run_reference(m, x)
    for bad, explained in (("i", True), ("v", False)):
        outputs = dict(expected)
        outputs[bad] = 1 - expected[bad] if bad == "i" else expected[bad] + np.float32(0.5)
        j = judge(RunResult(status=Status.ok, outputs=outputs), expected, "Sigmoid+TopK")
        assert j.verdict is Verdict.wrong_result, j
        hit = rules.match(CaseView("onnxruntime", m, x, j, outputs, expected))
        assert (hit is not None and hit.rule_id == "arg-ties") is explained, (bad, hit)


def test_a_binary_rules_file_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "rules.yml"
    path.write_bytes(b"rules:\n\xff\xfe\x00binary")
    with pytest.raises(RulesError, match=r"rules\.yml: not a text file \(byte 7 is not UTF-8\)$"):
        read_rules_file(path)


def test_a_decided_output_whose_input_values_do_not_fit_it_decides_nothing() -> None:
    """A campaign met an ArgMin whose traced input was [62, 24, 1, 2] while its result was
    [13, 1, 2]: reading a winner out of values that are not the output's input raised and
    ended the whole campaign. Such values decide nothing; fitting ones still do."""
    from types import SimpleNamespace

    from oracles.matchers import _decided
    from oracles.patterns import NodeRef

    node = helper.make_node("ArgMin", ["x"], ["y"], axis=0, keepdims=0)
    ref = NodeRef(0, node)
    want, got = np.zeros((13, 1, 2), np.int64), np.ones((13, 1, 2), np.int64)

    def facts(x: np.ndarray) -> SimpleNamespace:
        values = SimpleNamespace(value=lambda name: x if name == "x" else None)
        return SimpleNamespace(expected={"y": want}, case=SimpleNamespace(outputs={"y": got}), values=values)

    assert _decided(ref, facts(np.zeros((62, 24, 1, 2), np.float32))) is None  # type: ignore[arg-type]
    assert _decided(ref, facts(np.zeros((5, 13, 1, 2), np.float32))) == (0, 0, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("op", ["Hardmax", "TopK"])
def test_a_tie_of_many_is_explained_by_the_winner_the_build_chose_among_them(rules: RuleSet, op: str) -> None:
    """Fifteen equal computed rows and a smaller sixteenth: a build's rounding picks any of the
    fifteen per column (onnxruntime's TopK over the zero imaginary parts of 24 STFT frames
    took frame 19 in one slice and 2 in another; its Hardmax over 16 InstanceNormalization
    rows took 0, 5, 4, 7 or 14), past the four picks tried from each end. Winners among
    the tied rows are explained; the sixteenth, which ties nothing, is a wrong answer."""
    x = {"x": np.tile(np.linspace(0.5, 2.0, 6, dtype=np.float32), (16, 1))}
    x["x"][15] -= 1.0
    k = helper.make_tensor("k", TensorProto.INT64, [1], [1])
    decide = (
        helper.make_node("Hardmax", ["s"], ["y"], axis=0)
        if op == "Hardmax"
        else helper.make_node("TopK", ["s", "k"], ["v", "y"], axis=0)
    )
    nodes = [helper.make_node("Relu", ["x"], ["s"]), decide]
    out = (F32, [16, 6]) if op == "Hardmax" else (TensorProto.INT64, [1, 6])
    m = model(nodes, {"x": (F32, [16, 6])}, {"y": out}, [k] if op == "TopK" else [])
    expected = run_reference(m, x)
    for winners, explained in (([5, 6, 7, 8, 9, 10], True), ([15, 6, 7, 8, 9, 10], False)):
        if op == "Hardmax":
            y = np.zeros((16, 6), np.float32)
            y[winners, range(6)] = 1.0
        else:
            y = np.array([winners], np.int64)
        j = judge(RunResult(status=Status.ok, outputs={"y": y}), expected, f"Relu+{op}")
        assert j.verdict is Verdict.wrong_result, j
        hit = rules.match(CaseView("onnxruntime", m, x, j, {"y": y}, expected))
        assert (hit is not None and hit.rule_id == "arg-ties") is explained, (winners, hit)
