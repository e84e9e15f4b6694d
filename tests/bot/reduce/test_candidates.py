"""The reducer's candidates judged by the campaign's own pipeline (oracles.judging), on the
real onnxruntime worker: the user's rules, and validity by the reference."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from backends.client import WorkerClient
from backends.reference import run_reference
from backends.spec import parse_backend
from bot.campaign.triage import Side, Triage
from bot.reduce.candidates import CandidateJudge, ClientPool, SameBug
from oracles.config import OracleConfig
from oracles.judging import Judging
from oracles.references import Source, Validity, invalid_by_reference, read_reference
from oracles.sides import CrossVerdict
from oracles.tolerances import ToleranceConfig
from oracles.verdict import MEMORY_FAULT, Judgement, Verdict, crash_kind, judge
from reducers.candidate import Candidate
from tests import release_cases as rc

pytestmark = [pytest.mark.worker, pytest.mark.release]

ORT = parse_backend("onnxruntime:all")
USER_RULE = """\
rules:
  - id: known-tanh-drift
    description: this team's own Tanh kernel drifts; tracked elsewhere
    reason: a known, tracked inaccuracy
    scope:
      backends: ["onnxruntime"]
      verdicts: [wrong_result]
      ops: [Tanh]
    match:
      message: ["beyond"]
"""


def _model(
    node: onnx.NodeProto,
    inputs: list[onnx.ValueInfoProto],
    out: onnx.ValueInfoProto,
    inits: Sequence[onnx.TensorProto] = (),
) -> onnx.ModelProto:
    graph = helper.make_graph([node], "g", inputs, [out], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@dataclass
class _Given:
    """A case as triage takes it (bot.campaign.triage.Case)."""

    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    model_bytes: bytes = b""
    reference: dict[str, np.ndarray] | None = None
    source: Source = Source.torch
    gap: str = ""

    def __post_init__(self) -> None:
        self.model_bytes = self.model.SerializeToString()
        self.reference = run_reference(self.model, self.inputs)


@pytest.fixture
def perturbing() -> Iterator[ClientPool]:
    pool = ClientPool(lambda: WorkerClient(ORT, sys.executable, 30, fault={"kind": "perturb", "every": 1}), 1)
    yield pool
    pool.close()


def test_a_user_rule_that_filters_a_case_in_a_campaign_filters_it_in_a_reduction(
    tmp_path: Path, perturbing: ClientPool
) -> None:
    """CandidateJudge once judged with the shipped rules only: a reduction kept candidates that
    the user's own rules set aside in the campaign."""
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(USER_RULE)
    cfg = OracleConfig(rules=rules_file)
    judging = Judging(cfg, ToleranceConfig())
    x = np.linspace(-2, 2, 8, dtype=np.float32)
    f32 = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])]
    model = _model(
        helper.make_node("Tanh", ["x"], ["y"]), f32, helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])
    )

    given = _Given(model, {"x": x})
    with WorkerClient(ORT, sys.executable, 30, fault={"kind": "perturb", "every": 1}) as client:
        result = client.run(given.model_bytes, given.inputs)
        cross = Triage(judging).triage(given, [Side("head", client)], [result])
    assert cross.verdict is CrossVerdict.filtered and cross.rule == "known-tanh-drift"
    assert CandidateJudge(perturbing, judging).judge(Candidate(model, {"x": x})) is None
    shipped = CandidateJudge(perturbing, Judging.shipped()).judge(Candidate(model, {"x": x}))
    assert shipped is not None and shipped.verdict is Verdict.wrong_result, "the shipped rules alone keep it"


def test_a_candidate_the_reference_cannot_compute_is_no_candidate(perturbing: ClientPool) -> None:
    """A Slice with a computed step of 0 passes the checker and strict shape inference, and onnxruntime
    raises on it: a reduction chasing a crash once landed on such invalid models (TVM: 8 of
    31 reduced bundles). The reference refuses it, and so does the candidate judge."""
    ints = [
        helper.make_tensor(name, TensorProto.INT64, [1], [v]) for name, v in (("starts", 0), ("ends", 4), ("axes", 0))
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    steps = helper.make_tensor_value_info("steps", TensorProto.INT64, [1])
    model = _model(
        helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"]),
        [x, steps],
        helper.make_tensor_value_info("y", TensorProto.FLOAT, [4]),
        ints,
    )
    onnx.checker.check_model(onnx.shape_inference.infer_shapes(model, strict_mode=True), full_check=True)
    case = Candidate(model, {"x": np.arange(4, dtype=np.float32), "steps": np.zeros(1, np.int64)})
    assert invalid_by_reference(model, read_reference(model, case.inputs).outputs) is not None
    assert CandidateJudge(perturbing, Judging.shipped(), Validity(computed=True)).judge(case) is None
    judged = CandidateJudge(perturbing, Judging.shipped()).judge(case)
    assert judged is not None and judged.verdict is Verdict.crash, "onnxruntime itself raises on it"


def _resize(channels: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Resize by 0.75 on the channel dim: TVM 0.25 and 0.26 leave that dim as it is."""
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1.0, 0.75, 0.75, 1.0])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels * 3 // 4, 1, 1])
    model = _model(
        helper.make_node("Resize", ["x", "", "scales"], ["y"]),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, 2, 1])],
        out,
        [scales],
    )
    return model, {"x": np.linspace(0.1, 1.0, channels * 2, dtype=np.float32).reshape(1, channels, 2, 1)}


def test_a_candidate_with_an_empty_output_the_original_lacked_is_no_candidate(perturbing: ClientPool) -> None:
    """A TVM 0.25 to 0.26 campaign reduced a Resize whose channel scale TVM ignores (7 channels
    to 5) onto 1 channel to 0: the same wrong shape, on an output of no elements."""
    original, x = _resize(7)
    validity = Validity.of(original, read_reference(original, x).outputs)
    assert validity.computed and not validity.empty_ok
    empty, ex = _resize(1)
    reading = read_reference(empty, ex).outputs
    assert reading is not None and reading["y"].size == 0 and invalid_by_reference(empty, reading) is None
    assert validity.refuses(empty, reading) == "output 'y' is empty, and the original's outputs were not"
    assert CandidateJudge(perturbing, Judging.shipped(), validity).judge(Candidate(empty, ex)) is None
    # The same shape of candidate with elements stays one; an original with an empty output
    # allows empty candidates.
    three, tx = _resize(4)
    assert validity.refuses(three, read_reference(three, tx).outputs) is None
    assert Validity.of(empty, reading).refuses(empty, reading) is None


def test_an_index_outside_its_dim_is_refused_by_the_reference() -> None:
    """A reduction shrank a GatherND's data from 16 to 8 under its index -9; torch wrapped it
    to the last element, so TVM's answer read as wrong. ONNX defines no result there."""
    data = helper.make_tensor_value_info("x", TensorProto.UINT8, [8, 1, 1])
    idx = helper.make_tensor_value_info("i", TensorProto.INT64, [1, 1])
    model = _model(
        helper.make_node("GatherND", ["x", "i"], ["y"]),
        [data, idx],
        helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 1, 1]),
        [],
    )
    x = np.arange(8, dtype=np.uint8).reshape(8, 1, 1)
    outside = read_reference(model, {"x": x, "i": np.array([[-9]], np.int64)})
    assert outside.outputs is None and "outside [-dim, dim - 1]" in outside.gap
    inside = read_reference(model, {"x": x, "i": np.array([[-8]], np.int64)})
    assert inside.outputs is not None and int(inside.outputs["y"].reshape(-1)[0]) == 0


def _death(python: str, model: onnx.ModelProto, inputs: dict[str, np.ndarray], fault: str | None) -> Judgement:
    client = WorkerClient(ORT, python, 30.0, fault={"kind": fault} if fault else None)
    try:
        result = client.run(model.SerializeToString(), inputs)
    finally:
        client.close()
    return judge(result, {}, "")


def test_a_memory_fault_is_one_symptom_whatever_the_signal_and_an_abort_is_another() -> None:
    """A reduction keeps a candidate that dies of the same memory corruption under another
    signal: onnxruntime 1.25.1's stack smash while optimizing a Shape -> Gather is a SIGSEGV
    after glibc's "stack smashing detected" in the worker, and a SIGABRT in a plain
    interpreter (its campaign reported it once as each). An abort that is not memory
    corruption (an uncaught exception, a plain abort) stays another bug. Real deaths: the
    1.25.1 worker, and the segv and abort test faults."""
    model, inputs = rc.shape_gather_after_cast()
    smash = _death(str(rc.ort_python(rc.STACK_SMASH)), model, inputs, None)
    # in the worker it is a SIGSEGV after glibc's words, in a plain interpreter a SIGABRT
    assert smash.symptom.startswith("signal SIG") and "stack smashing detected" in smash.message, smash.message
    segv = _death(sys.executable, model, inputs, "segv")
    abort = _death(sys.executable, model, inputs, "abort")
    assert segv.symptom == "signal SIGSEGV" and abort.symptom == "signal SIGABRT"
    assert crash_kind(smash) == crash_kind(segv) == MEMORY_FAULT != crash_kind(abort)
    assert crash_kind(smash.model_copy(update={"symptom": "signal SIGABRT"})) == MEMORY_FAULT
    pool = ClientPool(lambda: WorkerClient(ORT), 1)
    judging = Judging.shipped()
    assert SameBug(segv, pool, judging).matches(smash) and SameBug(smash, pool, judging).matches(segv)
    assert not SameBug(segv, pool, judging).matches(abort) and not SameBug(abort, pool, judging).matches(smash)
    pool.close()
