"""Fresh runs forked from the worker's zygote (backends.fresh): a process no earlier case
ran in, with the used worker kept, on real onnxruntime and TVM workers."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from backends import faults
from backends.client import WorkerClient
from backends.results import Status
from backends.spec import parse_backend
from tests.cases import stable_cases

pytestmark = [pytest.mark.worker]


@pytest.mark.parametrize("backend", ["onnxruntime:all", "tvm"])
def test_a_fresh_run_is_a_process_no_earlier_case_ran_in_and_the_used_worker_stays(backend: str) -> None:
    """The `poison` fault leaves a worker failing every case after the one that sets it, as
    a TVM case once did. The fresh run answers right; the used worker is still the
    poisoned one (no restart), so the next run on it still fails."""
    (case,) = stable_cases(1, start=3)
    model, inputs = case.model.SerializeToString(), case.inputs
    with WorkerClient(parse_backend(backend), timeout_s=60, fault={"kind": "poison"}) as client:
        pid = client.handshake["pid"]
        assert client.handshake["fresh"] is True
        assert client.run(model, inputs).status is Status.ok  # sets the poison, runs right
        used = client.run(model, inputs)
        assert used.status is Status.error and "Check not null" in used.message
        fresh = client.run_fresh(model, inputs)
        assert fresh.status is Status.ok and fresh.earlier_requests == 0
        for name, value in client.run_fresh(model, inputs).outputs.items():  # each fork as fresh
            np.testing.assert_array_equal(fresh.outputs[name], value)
        after = client.run(model, inputs)
        assert after.status is Status.error and after.earlier_requests == 2
        assert client.handshake["pid"] == pid and client.restarts == 0 and client.forks == 2


def test_a_fresh_child_that_dies_is_named_as_the_worker_would_be_and_the_worker_lives() -> None:
    """A SIGSEGV in the fresh child: the same crash, signal and message a worker's own death
    gives for the case, with the stderr tail of the death; the worker answers the next case
    without a restart."""
    segv: faults.FaultSpec = {"kind": "segv", "every": 3}
    cases = stable_cases(24)
    crash = next(c for c in cases if faults.triggered(segv, c.model.SerializeToString()))
    fine = next(c for c in cases if not faults.triggered(segv, c.model.SerializeToString()))
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=30, fault=segv) as client:
        assert client.run(fine.model.SerializeToString(), fine.inputs).status is Status.ok
        died = client.run_fresh(crash.model.SerializeToString(), crash.inputs)
        assert died.status is Status.crash and died.signal == "SIGSEGV"
        assert "Fatal Python error" in died.stderr_tail
        alive = client.run(fine.model.SerializeToString(), fine.inputs)
        assert alive.status is Status.ok and alive.earlier_requests == 1 and client.restarts == 0
        own = client.run(crash.model.SerializeToString(), crash.inputs)  # the worker's own death
        assert own.status is Status.crash and client.restarts == 0
        assert (own.message, own.stage, own.signal) == (died.message, died.stage, died.signal)


def test_a_case_sent_ahead_keeps_its_answer_across_a_fresh_run() -> None:
    """A lane sends the next case before it judges this one, whose fresh run comes between."""
    ahead, other = stable_cases(2, start=5)
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=30) as client:
        alone = client.run(ahead.model.SerializeToString(), ahead.inputs)
        client.submit(ahead.model.SerializeToString(), ahead.inputs)
        fresh = client.run_fresh(other.model.SerializeToString(), other.inputs)
        held = client.collect()
    assert fresh.status is held.status is Status.ok and set(held.outputs) == set(alone.outputs)
    for name, value in alone.outputs.items():
        np.testing.assert_array_equal(held.outputs[name], value)


DECLINING_PLUGIN = """
import numpy as np


class Declining:
    name = "declining"
    levels = ("default",)
    default_level = "default"
    fresh_by_fork = False

    def __init__(self, options):
        pass

    def info(self):
        return {"name": self.name, "version": "1", "commit": None}

    def compile(self, model, level):
        return model

    def run(self, compiled, inputs):
        return {"y": np.maximum(inputs["x"], 0)}
"""


def test_an_adapter_that_declines_forking_gets_a_restart_instead(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    (tmp_path / "declining.py").write_text(DECLINING_PLUGIN)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [x])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    inputs = {"x": np.array([-1.0, 2.0], np.float32)}
    with WorkerClient(parse_backend(f"{tmp_path / 'declining.py'}:Declining")) as client:
        pid = client.handshake["pid"]
        assert client.handshake["fresh"] is False
        client.run(model, inputs)
        fresh = client.run_fresh(model, inputs)
        assert fresh.status is Status.ok and fresh.earlier_requests == 0
        assert client.restarts == 1 and client.forks == 0 and client.handshake["pid"] != pid


def test_a_worker_whose_zygote_is_gone_says_so_and_the_fresh_run_restarts_it() -> None:
    """The zygote killed from outside (the kernel's OOM killer could): the worker answers the
    fresh run with `fresh_unavailable`, and the client restarts it for a process no earlier
    case ran in, as a worker without a zygote gets."""
    (case,) = stable_cases(1, start=3)
    model, inputs = case.model.SerializeToString(), case.inputs
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=30) as client:
        pid = client.handshake["pid"]
        assert client.run(model, inputs).status is Status.ok
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        assert len(children) == 1  # the zygote, forked at the handshake
        os.kill(int(children[0]), signal.SIGKILL)
        fresh = client.run_fresh(model, inputs)
        assert fresh.status is Status.ok and fresh.earlier_requests == 0
        assert client.restarts == 1 and client.forks == 0 and client.handshake["pid"] != pid
        assert client.handshake["fresh"] is True  # the new worker has a zygote of its own
        assert client.run_fresh(model, inputs).status is Status.ok and client.forks == 1
