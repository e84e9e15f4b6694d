"""Where a reduced failure starts (bot.reduce.blame), on real onnxruntime builds: the first
wrong tensor upstream of a wrong output or of a crashing node, and the node a death
without a message happens at."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from backends.client import WorkerClient
from backends.reference import run_reference
from backends.results import BackendInfo
from backends.spec import parse_backend
from bot.findings.bundle import Bundle, Finding
from bot.reduce.blame import FUNCTION_BODY, blame
from bot.reduce.candidates import ClientPool
from oracles.judging import Judging
from oracles.verdict import Verdict, judge
from tests import release_cases as rc

pytestmark = [pytest.mark.worker, pytest.mark.release]

ORT = parse_backend("onnxruntime:all")


def _bundle(model: onnx.ModelProto, inputs: dict[str, np.ndarray], python: Path) -> tuple[Bundle, ClientPool]:
    """The case as a reduced bundle judged on the real build under `python`, and its pool."""
    pool = ClientPool(lambda: WorkerClient(ORT, str(python), 30.0), 1)
    with pool.lend() as client:
        result = client.run(model.SerializeToString(), inputs)
    j = judge(result, run_reference(model, inputs), "case")
    info = BackendInfo(name="onnxruntime", level="all", version="")
    return Bundle(Path("."), model, inputs, None, Finding(**j.model_dump(), backend=info)), pool


def _fused_matmul_then_reduce_sum() -> rc.Case:
    """MatMul -> Mul by a float64 constant -> ReduceSum: onnxruntime folds the Mul into a
    com.microsoft.FusedMatMul whose alpha it keeps as a float32, and the sum after it is
    the first wrong output."""
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Mul", ["m", "c"], ["s"]),
        helper.make_node("ReduceSum", ["s", "axes"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.ones((5, 2)), "w"),
        numpy_helper.from_array(np.array(0.35355339059327373), "c"),
        numpy_helper.from_array(np.array([1], np.int64), "axes"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3, 4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3, 1, 2])
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 18)], ir_version=8
    )
    return model, {"x": rng.uniform(-1, 1, (3, 4, 5))}


def test_a_wrong_output_is_blamed_on_the_fused_kernel_that_made_the_first_wrong_tensor() -> None:
    """The ReduceSum computed the wrong output, the FusedMatMul the first wrong tensor: the
    kept tensor exposed, the fusion still happens, and the report is the FusedMatMul's
    (two reports before: through the MatMul and through a Reciprocal after it)."""
    bundle, pool = _bundle(*_fused_matmul_then_reduce_sum(), rc.ort_python(rc.PAD_WRAP))
    try:
        assert bundle.finding is not None and bundle.finding.verdict is Verdict.wrong_result
        found = blame(bundle, pool, Judging.shipped())
    finally:
        pool.close()
    assert found is not None and found.name == "values at com.microsoft::FusedMatMul", found


def test_a_death_without_a_message_is_placed_at_the_first_node_it_happens_at() -> None:
    """onnxruntime 1.28.0 aborts on a bidirectional RNN given an alpha its activations do
    not read; the Relu before it runs right. Cutting the graph after each node in turn, the
    first cut that dies names the RNN. 1.31.1 runs the model right."""
    model, inputs = rc.relu_then_rnn_with_an_unread_alpha()
    bundle, pool = _bundle(model, inputs, rc.ort_python(rc.RNN_ALPHA_ABORT))
    try:
        assert bundle.finding is not None and bundle.finding.symptom == "signal SIGABRT", bundle.finding
        found = blame(bundle, pool, Judging.shipped())
    finally:
        pool.close()
    assert found is not None and found.kernel == "ai.onnx::RNN" and found.tensor == "y", found
    fixed, pool = _bundle(model, inputs, rc.ort_python("1.31.1"))
    try:
        assert fixed.finding is not None and fixed.finding.verdict is Verdict.pass_
    finally:
        pool.close()


def test_a_reduced_trigger_right_at_the_lowest_level_needs_the_optimizer(tmp_path: Path) -> None:
    """The original of a float64 FusedMatMul finding was wrong at `disable` too, through
    another part of it, and the finding said so; its reduced MatMul -> Mul -> ReduceSum is
    right at `disable`. Asked again, the reduced finding needs the optimizer, as the same
    FusedMatMul's other findings do: one report, not two. Real 1.28.0."""
    from bot.findings.bundle import write_bundle
    from bot.reduce.finding import relocalize
    from bot.reduce.reduced import Reduced
    from oracles.sides import Localization

    model, inputs = _fused_matmul_then_reduce_sum()
    bundle, pool = _bundle(model, inputs, rc.ort_python(rc.PAD_WRAP))
    pool.close()
    assert bundle.finding is not None and bundle.finding.verdict is Verdict.wrong_result
    stale = Localization(
        level="disable", verdict=Verdict.wrong_result, same_signature=True, depends_on_optimization=False
    )
    finding = bundle.finding.model_copy(update={"localization": stale})
    reduced = write_bundle(tmp_path / "reduced", model, inputs, None, finding)
    lowest = ClientPool(
        lambda: WorkerClient(parse_backend("onnxruntime:disable"), str(rc.ort_python(rc.PAD_WRAP)), 30.0), 1
    )
    try:
        local = relocalize(Reduced.load(reduced), lowest, Judging.shipped())
    finally:
        lowest.close()
    assert local is not None and local.depends_on_optimization and local.verdict is Verdict.pass_


def test_a_reduced_trigger_the_campaign_never_localized_is_asked_at_the_lowest_level(tmp_path: Path) -> None:
    """A finding whose campaign recorded no lowest-level run had no `optimizer:` part in its
    name, beside one that had: two reports of one complex STFT defect on 1.18.0. Given the
    lowest level, the reduced trigger is asked there. Real 1.28.0, the FusedMatMul case."""
    from bot.findings.bundle import write_bundle
    from bot.reduce.finding import relocalize
    from bot.reduce.reduced import Reduced

    model, inputs = _fused_matmul_then_reduce_sum()
    bundle, pool = _bundle(model, inputs, rc.ort_python(rc.PAD_WRAP))
    pool.close()
    assert bundle.finding is not None and bundle.finding.localization is None
    reduced = Reduced.load(write_bundle(tmp_path / "reduced", model, inputs, None, bundle.finding))
    lowest = ClientPool(
        lambda: WorkerClient(parse_backend("onnxruntime:disable"), str(rc.ort_python(rc.PAD_WRAP)), 30.0), 1
    )
    try:
        assert relocalize(reduced, lowest, Judging.shipped()) is None  # no level: nothing to ask at
        local = relocalize(reduced, lowest, Judging.shipped(), "disable")
    finally:
        lowest.close()
    assert local is not None and local.level == "disable" and local.depends_on_optimization, local


@pytest.mark.parametrize("consumer", rc.SQUEEZE_CONSUMERS)
def test_a_wrong_static_shape_is_one_bug_whichever_consumer_shows_it(consumer: str) -> None:
    """onnxruntime 1.18.0 infers a Squeeze without axes, on an input of unknown shape, as a
    scalar. Its values are right; a Shape of it comes out empty, an Unsqueeze of it is
    refused at load naming the node, a Gather of its Shape is refused by the folding naming
    none, a OneHot of its Shape kills the optimizer. Each is blamed on the Squeeze's static
    shape, one name for them all (ten reports in one campaign before, and a death beside
    them). 1.17.3 runs each right: the probe's Shapes are not wrong there."""
    model, inputs = rc.squeeze_of_unknown_shape_then(consumer)
    base, head = rc.SQUEEZE_AS_SCALAR
    bundle, pool = _bundle(model, inputs, rc.ort_python(head))
    try:
        assert bundle.finding is not None
        assert bundle.finding.verdict is (Verdict.wrong_result if consumer == "shape" else Verdict.crash)
        found = blame(bundle, pool, Judging.shipped())
    finally:
        pool.close()
    assert found is not None and found.name == "static shape at ai.onnx::Squeeze" and found.tensor == "s", found
    right, pool = _bundle(model, inputs, rc.ort_python(base))
    pool.close()
    assert right.finding is not None and right.finding.verdict is Verdict.pass_


@pytest.mark.parametrize("op", rc.BODY_OPS)
def test_a_wrong_function_body_is_one_bug_whichever_op_it_expands(op: str) -> None:
    """onnxruntime 1.17.3 runs these ops at float64 as their function bodies and loses
    `noop_with_empty_axes` in them. The wrong output is made by each body's last node (a
    Log, a ReduceSum, a Cast), which named three bugs, one of them a ReduceSum's. The bodies
    as the spec writes them run right on it, so the build's expansion is the bug: one name."""
    bundle, pool = _bundle(*rc.reduce_over_no_axes(op), rc.ort_python(rc.BODY_LOSES_NOOP))
    try:
        assert bundle.finding is not None and bundle.finding.verdict is Verdict.wrong_result, bundle.finding
        found = blame(bundle, pool, Judging.shipped())
    finally:
        pool.close()
    assert found is not None and found.kernel == FUNCTION_BODY and found.tensor == "y", found
