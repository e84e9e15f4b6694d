"""The real onnxruntime in a worker process: results, real crashes, real hangs, recovery."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import numpy as np
import pytest

from backends import faults
from backends.client import BackendUnavailable, WorkerClient
from backends.reference import run_reference
from backends.results import Stage, Status
from backends.spec import BackendSpec, BackendSpecError, parse_backend
from generator.api import GenConfig, generate
from generator.ops import registry
from oracles.verdict import Verdict, judge

HANG_EVERY_7 = {"kind": "hang", "every": 7}


@pytest.fixture(scope="module")
def ort() -> Iterator[WorkerClient]:
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=30) as client:
        yield client


def test_handshake_reports_the_build(ort: WorkerClient) -> None:
    assert ort.info is not None
    assert ort.info.name == "onnxruntime"
    assert ort.info.version.count(".") >= 2
    assert ort.info.level == "all"


@pytest.mark.parametrize("op_type", sorted(registry()))
def test_each_op_agrees_with_onnxruntime(ort: WorkerClient, op_type: str) -> None:
    for seed in range(4):
        case = generate(seed, GenConfig(nodes=3, ops=[op_type]))
        result = ort.run(case.model.SerializeToString(), case.inputs)
        assert result.status is Status.ok, result.message
        j = judge(result, run_reference(case.model, case.inputs), op_type)
        assert j.verdict is Verdict.pass_, (seed, j.message)


def test_errors_are_tagged_with_their_stage(ort: WorkerClient) -> None:
    result = ort.run(b"definitely not onnx", {})
    assert result.status is Status.error
    assert result.stage is Stage.compile
    assert "InvalidProtobuf" in result.message or "Fail" in result.message
    case = generate(1)
    result = ort.run(case.model.SerializeToString(), {})  # inputs missing: fails when run
    assert result.status is Status.error
    assert result.stage is Stage.run


def _faulty(kind: str, timeout_s: float = 30) -> WorkerClient:
    return WorkerClient(parse_backend("onnxruntime:all"), timeout_s=timeout_s, fault={"kind": kind, "every": 1})


@pytest.mark.parametrize(("kind", "signal"), [("segv", "SIGSEGV"), ("abort", "SIGABRT")])
def test_real_crash_is_a_result_and_the_worker_restarts(kind: str, signal: str) -> None:
    case = generate(2)
    with _faulty(kind) as client:
        first = client.run(case.model.SerializeToString(), case.inputs)
        assert first.status is Status.crash
        assert first.signal == signal
        assert first.stage is Stage.compile
        assert "Fatal Python error" in first.stderr_tail
        again = client.run(case.model.SerializeToString(), case.inputs)
        assert again.status is Status.crash
        assert client.restarts == 1


def test_real_hang_times_out_and_the_next_request_is_served() -> None:
    cases = [generate(s) for s in range(40)]
    hangs = [c for c in cases if faults.triggered(HANG_EVERY_7, c.model.SerializeToString())]
    fine = [c for c in cases if not faults.triggered(HANG_EVERY_7, c.model.SerializeToString())]
    assert hangs and fine
    with WorkerClient(parse_backend("onnxruntime"), timeout_s=1.0, fault=HANG_EVERY_7) as client:
        result = client.run(hangs[0].model.SerializeToString(), hangs[0].inputs)
        assert result.status is Status.timeout
        assert result.stage is Stage.compile
        assert 1.0 <= result.wall_s < 10
        assert client.run(fine[0].model.SerializeToString(), fine[0].inputs).status is Status.ok


def test_unimportable_adapter_is_unavailable_with_a_reason() -> None:
    spec = BackendSpec("nothing", "all", "no_such_module_anywhere:Adapter")
    with pytest.raises(BackendUnavailable, match="no_such_module_anywhere"):
        WorkerClient(spec).start()


def test_missing_interpreter_is_unavailable() -> None:
    with pytest.raises(BackendUnavailable, match="cannot start"):
        WorkerClient(parse_backend("onnxruntime"), python="/no/such/python").start()


def test_spec_strings() -> None:
    assert str(parse_backend("onnxruntime")) == "onnxruntime:all"
    assert parse_backend("onnxruntime:DISABLE").level == "disable"
    with pytest.raises(BackendSpecError, match="valid backends: onnxruntime"):
        parse_backend("tensorflow")
    with pytest.raises(BackendSpecError, match="valid levels: disable, basic, extended, all"):
        parse_backend("onnxruntime:O3")


def test_bot_process_never_imports_onnxruntime() -> None:
    assert "onnxruntime" not in sys.modules
    assert np.__name__ == "numpy"
