"""The real onnxruntime in a worker process: results, real crashes, real hangs, recovery."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import backends
from backends import faults
from backends.client import BackendUnavailable, WorkerClient
from backends.protocol import PROTOCOL_VERSION, encode, read_message
from backends.reference import run_reference
from backends.results import Stage, Status
from backends.spec import BackendSpec, BackendSpecError, parse_backend
from generator.api import GenConfig, Support, generate
from generator.ops import registry
from generator.values import NoValidValues
from oracles.margin import is_unstable
from oracles.tolerances import ToleranceConfig
from oracles.verdict import Verdict, judge
from tests.cases import stable_cases
from tests.conftest import NEWER_OPSET, NEWEST_OPSET
from tests.paths import ROOT

pytestmark = [pytest.mark.worker]

HANG_EVERY_7: faults.FaultSpec = {"kind": "hang", "every": 7}


@pytest.fixture(scope="module")
def ort() -> Iterator[WorkerClient]:
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=30) as client:
        yield client


def test_handshake_reports_the_build(ort: WorkerClient) -> None:
    assert ort.info is not None
    assert ort.info.name == "onnxruntime"
    assert ort.info.version.count(".") >= 2
    assert ort.info.level == "all"


ORT_DEFECTS = {
    "MeanVarianceNormalization": "onnxruntime drops the spec's epsilon: NaN where a group is constant",
    "ReduceProd": "chained integer products overflow: onnxruntime saturates, the reference wraps (undefined)",
    "Shrink": "onnxruntime computes float64, int32 and int64 in float32 (off by up to 6e-8 relative)",
    **dict.fromkeys(
        ("HannWindow", "HammingWindow", "BlackmanWindow"),
        "onnxruntime computes a float64 window in float32 (off by up to 3e-8)",
    ),
    "OneHot": "onnxruntime before 1.32.0 compares float indices uncast (tests/backends/test_two_ort.py pins it)",
    "Range": "GatherToSliceFusion turns a Gather over a Range with negative bounds into a Slice that reads"
    " otherwise (tests/generator/test_ops_dynamic.py pins it)",
}
"""Known onnxruntime divergences: a spec deviation fuzzbot reports, or undefined behaviour
the value search does not yet rule out."""


@pytest.mark.parametrize("op_type", sorted(registry()))
def test_each_op_agrees_with_onnxruntime(
    ort: WorkerClient, ort_support: Support, ort_support_newer: Support, ort_support_newest: Support, op_type: str
) -> None:
    """Small models of one op, drawn from what onnxruntime supports, with searched values:
    every run that is not refused as unsupported agrees with the reference. An op added
    after opset 17 is drawn at NEWER_OPSET, one added after NEWER_OPSET at NEWEST_OPSET."""
    tiers = [(17, ort_support), (NEWER_OPSET, ort_support_newer), (NEWEST_OPSET, ort_support_newest)]
    opset, support = next(((o, s) for o, s in tiers if op_type in s), tiers[-1])
    if op_type not in support:
        pytest.skip(
            f"{op_type}: not generated at opset 17, {NEWER_OPSET} or {NEWEST_OPSET}, or onnxruntime runs it"
            " with no fuzzbot dtype"
        )
    passed = 0
    for seed in range(8):
        try:
            case = generate(seed, GenConfig(nodes=2, ops=[op_type], opset=opset), support=support)
        except (NoValidValues, RuntimeError):
            continue
        result = ort.run(case.model.SerializeToString(), case.inputs)
        # At the bounds a campaign uses, from where rounding happens: a float64 GroupNormalization
        # computes its statistics in float32 (stash_type), as the spec allows.
        bounds = ToleranceConfig().for_outputs(case.model, "onnxruntime")
        j = judge(result, run_reference(case.model, case.inputs), op_type, per_output=bounds)
        if j.verdict is Verdict.wrong_result and (op_type in ORT_DEFECTS or is_unstable(case.model, case.inputs)):
            continue
        assert j.verdict in (Verdict.pass_, Verdict.unsupported), (seed, j.verdict, j.message)
        passed += j.verdict is Verdict.pass_
    assert passed >= 2


def test_errors_are_tagged_with_their_stage(ort: WorkerClient) -> None:
    result = ort.run(b"definitely not onnx", {})
    assert result.status is Status.error
    assert result.stage is Stage.compile
    assert "InvalidProtobuf" in result.message or "Fail" in result.message
    (case,) = stable_cases(1, start=1)
    result = ort.run(case.model.SerializeToString(), {})  # inputs missing: fails when run
    assert result.status is Status.error
    assert result.stage is Stage.run


def _faulty(kind: str, timeout_s: float = 30) -> WorkerClient:
    return WorkerClient(parse_backend("onnxruntime:all"), timeout_s=timeout_s, fault={"kind": kind, "every": 1})


@pytest.mark.parametrize(("kind", "signal"), [("segv", "SIGSEGV"), ("abort", "SIGABRT")])
def test_real_crash_is_a_result_and_the_worker_restarts(kind: str, signal: str) -> None:
    (case,) = stable_cases(1, start=2)
    with _faulty(kind) as client:
        first = client.run(case.model.SerializeToString(), case.inputs)
        assert first.status is Status.crash
        assert first.signal == signal
        assert first.stage is Stage.compile
        assert "Fatal Python error" in first.stderr_tail
        again = client.run(case.model.SerializeToString(), case.inputs)
        assert again.status is Status.crash
        assert client.restarts == 1


def test_a_restart_after_a_crash_takes_the_spare_and_each_tail_is_its_own_process() -> None:
    """Once a worker has died, a spare imports in the background; the next restart takes it,
    and a crash's stderr tail is that process's, not the spare's or a dead one's."""
    segv: faults.FaultSpec = {"kind": "segv", "every": 3}
    cases = stable_cases(24)
    crash = [c for c in cases if faults.triggered(segv, c.model.SerializeToString())]
    fine = [c for c in cases if not faults.triggered(segv, c.model.SerializeToString())]
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=30, fault=segv) as client:
        assert client.run(fine[0].model.SerializeToString(), fine[0].inputs).status is Status.ok
        assert client._spare is None  # no death yet: no second process
        first_pid = client.handshake["pid"]
        assert client.run(crash[0].model.SerializeToString(), crash[0].inputs).status is Status.crash
        assert client.run(fine[1].model.SerializeToString(), fine[1].inputs).status is Status.ok
        assert client.restarts == 1 and client.handshake["pid"] != first_pid
        assert client._spare is not None and client._spare[0].poll() is None  # importing, or ready
        spare_pid = client._spare[0].pid
        again = client.run(crash[1].model.SerializeToString(), crash[1].inputs)
        assert again.status is Status.crash and again.signal == "SIGSEGV"
        assert again.stderr_tail.count("Fatal Python error") == 1
        assert client.run(fine[2].model.SerializeToString(), fine[2].inputs).status is Status.ok
        assert client.handshake["pid"] == spare_pid  # the second restart took the spare
        spare = client._spare
    assert spare is not None and spare[0].poll() is not None  # closing ends the spare too


def test_a_run_while_a_case_is_in_flight_keeps_that_answer_for_collect(ort: WorkerClient) -> None:
    """A campaign lane sends the next case before it judges this one; a re-run in between
    must neither take that case's answer nor lose it."""
    ahead, rerun = ((c.model.SerializeToString(), c.inputs) for c in stable_cases(2, start=5))
    alone = {"ahead": ort.run(*ahead), "rerun": ort.run(*rerun)}
    ort.submit(*ahead)
    between = ort.run(*rerun)
    with pytest.raises(RuntimeError, match="not collected"):
        ort.submit(*rerun)
    held = ort.collect()
    for got, want in ((held, alone["ahead"]), (between, alone["rerun"])):
        assert got.status is Status.ok and set(got.outputs) == set(want.outputs)
        for name, value in want.outputs.items():
            np.testing.assert_array_equal(got.outputs[name], value)
    assert set(alone["ahead"].outputs) != set(alone["rerun"].outputs) or any(
        not np.array_equal(alone["ahead"].outputs[k], alone["rerun"].outputs[k]) for k in alone["ahead"].outputs
    )  # two cases told apart by their answers


def test_real_hang_times_out_and_the_next_request_is_served() -> None:
    cases = stable_cases(40)
    hangs = [c for c in cases if faults.triggered(HANG_EVERY_7, c.model.SerializeToString())]
    fine = [c for c in cases if not faults.triggered(HANG_EVERY_7, c.model.SerializeToString())]
    assert hangs and fine
    with WorkerClient(parse_backend("onnxruntime"), timeout_s=1.0, fault=HANG_EVERY_7) as client:
        result = client.run(hangs[0].model.SerializeToString(), hangs[0].inputs)
        assert result.status is Status.timeout
        assert result.stage is Stage.run  # a hung kernel: the run stage's limit applies
        assert 1.0 <= result.wall_s < 10
        assert client.run(fine[0].model.SerializeToString(), fine[0].inputs).status is Status.ok


def test_unimportable_adapter_is_unavailable_with_a_reason() -> None:
    spec = BackendSpec("nothing", "all", "no_such_module_anywhere:Adapter")
    with pytest.raises(BackendUnavailable, match="no_such_module_anywhere"):
        WorkerClient(spec).start()


def test_missing_interpreter_is_unavailable() -> None:
    with pytest.raises(BackendUnavailable, match="cannot start"):
        WorkerClient(parse_backend("onnxruntime"), python="/no/such/python").start()


def test_a_relative_interpreter_path_is_taken_from_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--python .venv/bin/python` names the venv under the folder the user is in, not
    under the worker's scratch folder; the venv's own interpreter (a symlink) is kept."""
    monkeypatch.chdir(tmp_path)
    relative = os.path.relpath(sys.executable, tmp_path)
    assert not os.path.isabs(relative)
    with WorkerClient(parse_backend("onnxruntime"), python=relative) as client:
        assert client.handshake["executable"] == os.path.abspath(sys.executable)
        (case,) = stable_cases(1)
        assert client.run(case.model.SerializeToString(), case.inputs).status is Status.ok


def test_spec_strings() -> None:
    assert str(parse_backend("onnxruntime")) == "onnxruntime:all"
    assert parse_backend("onnxruntime:DISABLE").level == "disable"
    with pytest.raises(BackendSpecError, match="valid backends: onnxruntime"):
        parse_backend("tensorflow")
    with pytest.raises(BackendSpecError, match="valid levels: disable, basic, extended, all"):
        parse_backend("onnxruntime:O3")


def test_echo_round_trips_every_dtype_and_layout(ort: WorkerClient) -> None:
    arrays: dict[str, np.ndarray] = {
        "f16": np.arange(6, dtype=np.float16).reshape(2, 3),
        "f64_t": np.arange(12, dtype=np.float64).reshape(3, 4).T,  # not C-contiguous
        "i8": np.array([-128, 0, 127], dtype=np.int8),
        "b": np.array([True, False]),
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.int64),
    }
    result = ort.echo(arrays)
    assert result.status is Status.ok
    assert set(result.outputs) == set(arrays)
    for k, v in arrays.items():
        assert result.outputs[k].dtype == v.dtype and result.outputs[k].shape == v.shape
        np.testing.assert_array_equal(result.outputs[k], v)


def test_a_reply_to_another_request_is_a_desync_and_the_worker_is_replaced() -> None:
    (case,) = stable_cases(1)
    model = case.model.SerializeToString()
    with WorkerClient(parse_backend("onnxruntime"), timeout_s=30) as client:
        client.submit(model, case.inputs)
        client._send(encode({"op": "echo", "id": 999}))  # a stray request: its reply answers nobody
        assert client.collect().status is Status.ok
        desync = client.run(model, case.inputs)
        assert desync.status is Status.crash
        assert "reply for request 999 while waiting for 2" in desync.message
        assert client.run(model, case.inputs).status is Status.ok
        assert client.restarts == 1


def test_worker_refuses_another_protocol_version(tmp_path: Path) -> None:
    (tmp_path / "backends").symlink_to(Path(backends.__file__).parent)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "backends.worker"],
        input=encode({"protocol": PROTOCOL_VERSION - 1, "adapter": "backends.adapters.ort:OrtAdapter"}),
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 1
    reply, _, _ = read_message(io.BytesIO(proc.stdout))
    assert reply["ok"] is False and reply["protocol"] == PROTOCOL_VERSION
    assert f"the bot {PROTOCOL_VERSION - 1}" in reply["message"]


def test_memory_blow_up_is_a_result_and_the_worker_restarts() -> None:
    oom_every_5: faults.FaultSpec = {"kind": "oom", "every": 5}
    cases = stable_cases(30)
    blows = [c for c in cases if faults.triggered(oom_every_5, c.model.SerializeToString())]
    fine = [c for c in cases if not faults.triggered(oom_every_5, c.model.SerializeToString())]
    assert blows and fine
    with WorkerClient(parse_backend("onnxruntime"), timeout_s=60, fault=oom_every_5, memory_mb=256) as client:
        assert client.handshake["memory_cap_mb"] > 256
        result = client.run(blows[0].model.SerializeToString(), blows[0].inputs)
        assert result.status is Status.error and result.stage is Stage.compile
        assert result.message.startswith("out of memory (address space capped at")
        assert "MemoryError" in result.message
        again = client.run(fine[0].model.SerializeToString(), fine[0].inputs)
        assert again.status is Status.ok, again.message
        assert client.restarts == 1


def test_oom_fault_without_a_memory_limit_is_refused() -> None:
    with pytest.raises(BackendUnavailable, match="needs a worker memory limit"):
        WorkerClient(parse_backend("onnxruntime"), fault={"kind": "oom", "every": 1}).start()


def test_crash_in_a_plugin_worker_reports_signal_and_stderr() -> None:
    (case,) = stable_cases(1)
    spec = parse_backend("examples/plugin_backend.py:OnnxReferenceAdapter")
    with WorkerClient(spec, timeout_s=30, fault={"kind": "segv", "every": 1}) as client:
        result = client.run(case.model.SerializeToString(), case.inputs)
        assert result.status is Status.crash and result.signal == "SIGSEGV"
        assert result.stage is Stage.compile
        assert "Segmentation fault" in result.stderr_tail
        assert result.backend is not None and result.backend.name == "onnx-reference"


REFUSING_PLUGIN = """
import numpy as np


class Refusing:
    name = "refusing"
    levels = ("default",)
    default_level = "default"
    how = "said"

    def __init__(self, options):
        pass

    def info(self):
        return {"name": self.name, "version": "1", "commit": None}

    def compile(self, model, level):
        if self.how == "said":
            raise NotImplementedError("Converter is not implemented (Relu, 14)")
        raise NotImplementedError

    def run(self, compiled, inputs):
        return {}


class Bare(Refusing):
    how = "bare"


class Strict(Refusing):
    not_implemented_is_limit = False
"""


def test_a_not_implemented_error_that_says_what_is_a_declared_limit(tmp_path: Path) -> None:
    """Python's convention for "not supported", with no pattern listed: a plugin's own
    message makes it a limit; a bare one is an adapter method nobody wrote; a plugin whose
    system raises it for bugs turns the default off."""
    from onnx import TensorProto, helper

    from backends.client import WorkerClient
    from backends.results import Status
    from backends.spec import parse_backend

    (tmp_path / "refusing.py").write_text(REFUSING_PLUGIN)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [x])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    got = {}
    for cls in ("Refusing", "Bare", "Strict"):
        with WorkerClient(parse_backend(f"{tmp_path / 'refusing.py'}:{cls}")) as client:
            got[cls] = client.run(model, {"x": np.zeros(2, np.float32)}).status
    assert got == {"Refusing": Status.unsupported, "Bare": Status.error, "Strict": Status.error}


def test_the_onnx2torch_plugin_declares_onnx2torchs_refusals_and_not_torchs() -> None:
    """onnx2torch refuses an element type torch lacks with its own ValueError, a declared
    limit; torch's "non-positive stride is not supported" came from a converter that passed
    a Conv without strides a stride of 0, a bug a campaign had read as head declining Conv."""
    import importlib.util

    from backends.adapters.base import is_unsupported

    spec = importlib.util.spec_from_file_location("onnx2torch_plugin", ROOT / "examples" / "onnx2torch_backend.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    patterns = module.Onnx2TorchAdapter.unsupported
    assert is_unsupported(patterns, "ValueError: dtype=12 is not supported")
    assert is_unsupported(patterns, "NotImplementedError: Converter is not implemented (Trilu, 14)")
    assert not is_unsupported(patterns, "RuntimeError: non-positive stride is not supported")
