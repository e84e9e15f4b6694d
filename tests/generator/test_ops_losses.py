"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (generator.ops.losses), for every
dtype each declares.

Every generated single-op model must pass onnx.checker's full check and strict shape inference,
and the torch reference must agree with onnxruntime 1.31.1 (which runs both by expanding their
function bodies; optimizations off, and at their default) and with
onnx.reference.ReferenceEvaluator, except where EVALUATOR_DEFECTS shows the evaluator wrong.
Every reduction, weight, ignore_index and target form the specs draw must be drawn, and
hand-worked answers check the references on their own. TVM 0.27's Relax frontend converts
neither op, so it has no test here.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from backends.reference import run_reference
from generator.api import GenConfig, GeneratedCase, generate
from generator.dtypes import DType
from generator.ops import registry
from generator.ops.base import OUTPUTS
from tests.generator.test_ops_signal import Known, attr, check_model, check_valid, close, elem_type, evaluate, run_ort
from tests.op_family import classic_dtypes

FAMILY = "generator.ops.losses"
SPECS = {op: spec for op, spec in sorted(registry().items()) if spec.__module__ == FAMILY}
CASES = [(op, dtype) for op, spec in SPECS.items() for dtype in classic_dtypes(spec)]
OPSETS = (12, 17, 22)
"""The first version of both, a middle one, and NegativeLogLikelihoodLoss-22."""
SEEDS = 12
FORM_SEEDS = 40


def _mean_ignoring_minus_one_unweighted(model: onnx.ModelProto, node: onnx.NodeProto) -> bool:
    weighted = len(node.input) > 2 and bool(node.input[2])
    return attr(node, "ignore_index") == -1 and attr(node, "reduction", "mean") == "mean" and not weighted


EVALUATOR_DEFECTS: dict[str, tuple[str, Known]] = {
    "NegativeLogLikelihoodLoss": (
        "counts targets equal to ignore_index=-1 in an unweighted mean's divisor (it skips the"
        " ignore mask for -1 alone); onnxruntime divides by the kept targets, as the spec and the"
        " hand-worked test_nll_by_hand do",
        _mean_ignoring_minus_one_unweighted,
    ),
}
"""op -> (why onnx.reference is wrong, which nodes); test_listed_evaluator_defect_still_shows pins it."""


@functools.cache
def cases(op: str, dtype: DType, seeds: int = SEEDS) -> tuple[GeneratedCase, ...]:
    found = []
    for seed in range(seeds):
        cfg = GenConfig(
            wide_types=0.0, nodes=1, ops=[op], dtypes=[dtype], opset=OPSETS[seed % 3], values="none", max_elements=1024
        )
        found.append(generate(seed, cfg))
    return tuple(found)


@pytest.mark.parametrize(("op", "dtype"), CASES, ids=[f"{op}-{d}" for op, d in CASES])
def test_op_is_valid_runs_and_matches_both_oracles(op: str, dtype: DType) -> None:
    compared = sum(check_model(op, c.model, c.inputs, {}, EVALUATOR_DEFECTS, {}) for c in cases(op, dtype))
    assert compared >= 2 * SEEDS, f"{op} {dtype}: only {compared} comparisons"


def test_family_is_the_two_losses() -> None:
    assert set(SPECS) == {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}
    assert all(spec.since_opset == 12 and not spec.exists_at(11) for spec in SPECS.values())


def form_of(op: str, case: GeneratedCase) -> set[str]:
    model = case.model
    node = next(n for n in model.graph.node if n.op_type == op)
    reduction = attr(node, "reduction")
    written = attr(node, "ignore_index")
    ignore = None if written is None else int(str(written))
    target = node.input[1]
    forms = {f"reduction={reduction}" if reduction else "no reduction"}
    forms.add("weight" if len(node.input) > 2 and node.input[2] else "no weight")
    if ignore is None:
        forms.add("no ignore_index")
    else:
        values = case.inputs.get(target, None)
        if values is None:
            values = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == target))
        forms.add("ignore_index=-1" if ignore == -1 else "ignore_index<0" if ignore < 0 else "ignore a class")
        if bool((values == ignore).any()):
            forms.add("some target ignored")
    where = "runtime" if any(v.name == target for v in model.graph.input) else "const"
    forms.add(f"{where} target {elem_type(model, target)}")
    forms.add(f"{len(node.output)} outputs")
    return forms


EXPECTED_FORMS = {
    "reduction=none", "reduction=sum", "reduction=mean", "no reduction", "weight", "no weight",
    "no ignore_index", "ignore_index=-1", "ignore_index<0", "ignore a class", "some target ignored",
    "runtime target 7", "const target 7", "runtime target 6", "const target 6", "1 outputs",
}  # fmt: skip


@pytest.mark.parametrize("op", sorted(SPECS))
def test_every_drawn_form_is_emitted(op: str) -> None:
    seen: set[str] = set()
    for dtype in classic_dtypes(SPECS[op]):
        for case in cases(op, dtype, FORM_SEEDS):
            seen |= form_of(op, case)
    expected = EXPECTED_FORMS | ({"2 outputs"} if op == "SoftmaxCrossEntropyLoss" else set())
    assert expected <= seen, f"{op}: never emitted {sorted(expected - seen)}"


def test_no_generated_mean_ignores_every_target() -> None:
    """A mean over no kept target divides by zero; emission always keeps one."""
    for op in SPECS:
        for dtype in classic_dtypes(SPECS[op]):
            for case in cases(op, dtype, FORM_SEEDS):
                node = next(n for n in case.model.graph.node if n.op_type == op)
                out = run_reference(case.model, case.inputs)[case.model.graph.output[0].name]
                assert np.isfinite(out.astype(np.float64)).all(), f"{op} {attr(node, 'reduction')}"


# --- hand-worked answers -------------------------------------------------------------------

LOG_PROB = np.asarray([[-1.0, -2.0, -3.0], [-4.0, -5.0, -6.0]])
TARGET = np.asarray([0, 2], dtype=np.int64)


def _ref(op: str, attrs: dict[str, object], *inputs: np.ndarray) -> list[np.ndarray]:
    args = [torch.from_numpy(np.asarray(a)) for a in inputs]
    return [t.numpy() for t in SPECS[op].reference({OUTPUTS: 2, **attrs}, args)]


@pytest.mark.parametrize(
    ("attrs", "weight", "expected"),
    [
        ({"reduction": "none"}, None, [1.0, 6.0]),
        ({"reduction": "sum"}, None, 7.0),
        ({}, None, 3.5),
        ({"reduction": "none"}, [1.0, 1.0, 2.0], [1.0, 12.0]),
        ({"reduction": "mean"}, [1.0, 1.0, 2.0], 13.0 / 3.0),
        ({"reduction": "none", "ignore_index": 2}, None, [1.0, 0.0]),
        ({"reduction": "mean", "ignore_index": 2}, None, 1.0),
        ({"reduction": "mean", "ignore_index": 2}, [0.5, 1.0, 2.0], 1.0),
    ],
)
def test_nll_by_hand(attrs: dict[str, object], weight: list[float] | None, expected: float | list[float]) -> None:
    """-log_prob[n, target[n]] * weight[target[n]]; a mean divides by the kept targets' weights."""
    extra = [np.asarray(weight)] if weight is not None else []
    (loss,) = _ref("NegativeLogLikelihoodLoss", attrs, LOG_PROB, TARGET, *extra)
    np.testing.assert_allclose(loss, expected, atol=1e-12)


def test_nll_ignores_minus_one_out_of_range_and_refuses_other_negatives() -> None:
    target = np.asarray([0, -1], dtype=np.int32)
    (mean,) = _ref("NegativeLogLikelihoodLoss", {"ignore_index": -1}, LOG_PROB, target)
    assert mean == 1.0  # one kept target, of -log_prob 1
    with pytest.raises(IndexError):
        _ref("NegativeLogLikelihoodLoss", {}, LOG_PROB, target)


def test_nll_over_spatial_dims_by_hand() -> None:
    """[N=1, C=2, d=3]: targets [1, 0, 1] pick -(-2), -(-3), -(-6)."""
    x = np.asarray([[[-1.0, -3.0, -5.0], [-2.0, -4.0, -6.0]]])
    (loss,) = _ref("NegativeLogLikelihoodLoss", {"reduction": "none"}, x, np.asarray([[1, 0, 1]]))
    np.testing.assert_allclose(loss, [[2.0, 3.0, 6.0]], atol=1e-12)


def test_softmax_cross_entropy_by_hand() -> None:
    """Equal scores over 4 classes: every log-probability is -log 4, so is the mean loss's
    negation; scores [0, ln 3] give log-probabilities [-ln 4, ln 3 - ln 4]."""
    scores = np.zeros((2, 4))
    loss, log_prob = _ref("SoftmaxCrossEntropyLoss", {}, scores, np.asarray([1, 3]))
    np.testing.assert_allclose(log_prob, np.full((2, 4), -math.log(4)), atol=1e-12)
    np.testing.assert_allclose(loss, math.log(4), atol=1e-12)
    skewed = np.asarray([[0.0, math.log(3)]])
    loss, log_prob = _ref("SoftmaxCrossEntropyLoss", {"reduction": "sum"}, skewed, np.asarray([1]))
    np.testing.assert_allclose(log_prob, [[-math.log(4), math.log(3) - math.log(4)]], atol=1e-12)
    np.testing.assert_allclose(loss, math.log(4) - math.log(3), atol=1e-12)
    (alone,) = SPECS["SoftmaxCrossEntropyLoss"].reference({OUTPUTS: 1}, [torch.from_numpy(skewed), torch.tensor([1])])
    assert alone.dim() == 0


def test_listed_evaluator_defect_still_shows() -> None:
    """ignore_index=-1, unweighted mean: targets [0, -1] over LOG_PROB give 1 (one kept target of
    loss 1); the evaluator says 0.5, onnxruntime and torch 1."""
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], ignore_index=-1)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(np.asarray([0, -1], dtype=np.int64), "t")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    check_valid(model)
    assert EVALUATOR_DEFECTS["NegativeLogLikelihoodLoss"][1](model, node)
    feeds = {"x": LOG_PROB.astype(np.float32)}
    ours = run_reference(model, feeds)["y"]
    assert float(ours) == 1.0 and float(evaluate(model, feeds)[0]) == 0.5
    for optimize in (False, True):
        got = run_ort(model, feeds, optimize)
        assert got is not None
        close(ours, got[0], "NegativeLogLikelihoodLoss vs onnxruntime")
