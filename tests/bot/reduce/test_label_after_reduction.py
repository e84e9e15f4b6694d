"""The label a provisional finding earns once reduced (bot.reduce.finding.across_after_reduction):
base is asked about the reduced trigger as the campaign asks a side, k runs, on real
onnxruntime workers whose answers a test fault makes wrong, right, or wrong every other run."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from backends.client import WorkerClient
from backends.faults import FaultSpec
from backends.spec import parse_backend
from bot.findings.bundle import Finding, write_bundle
from bot.reduce.finding import across_after_reduction
from bot.reduce.reduced import Reduced
from bot.reduce.workers import SidePools, SideRun
from oracles.judging import Judging
from oracles.sides import CrossVerdict
from oracles.verdict import Verdict

pytestmark = [pytest.mark.worker]

SPEC = "onnxruntime:all"


def _model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])],
        "trigger",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _reduced(tmp: Path, judging: Judging) -> Reduced:
    """A reduced trigger that head gets wrong (a fault shifts one output), as a campaign records it."""
    model, inputs = _model(), {"x": np.array([1.0, -2.0, 3.0, 0.5], np.float32)}
    ev = judging.compute(model, inputs)
    with WorkerClient(parse_backend(SPEC), sys.executable, 60, fault=FaultSpec(kind="perturb")) as client:
        result = client.run(model.SerializeToString(), inputs)
    j = judging.judge(ev, result)
    assert j.verdict is Verdict.wrong_result, j
    assert result.backend is not None
    finding = Finding(**dict(j), backend=result.backend, side="head", spec=SPEC, seed=1, across="new_in_head")
    write_bundle(tmp / "reduced", model, inputs, ev.reference or {}, finding)
    return Reduced.load(tmp / "reduced")


@pytest.mark.parametrize(
    ("base_fault", "label"),
    [
        (None, CrossVerdict.new_regression),
        ("perturb", CrossVerdict.persistent),
        ("flaky", CrossVerdict.new_in_head),
        ("raise", CrossVerdict.new_in_head),
    ],
)
def test_base_is_asked_k_times_and_only_runs_that_agree_change_the_label(
    tmp_path: Path, base_fault: str | None, label: CrossVerdict
) -> None:
    """Right on every run: a regression. The same wrong values on every run: a bug both
    builds share. Wrong, right, wrong (a base that reads stray memory): the label stays the
    provisional one; asked once, the first run alone made it `persistent`, and a base right
    on its first run would have made a shared bug a regression. A base that raises gave no
    answer to be wrong with: head's wrong values stay new in head."""
    judging = Judging.shipped()
    reduced = _reduced(tmp_path, judging)
    fault = FaultSpec(kind=base_fault) if base_fault else None
    runs = {"base": SideRun(SPEC, sys.executable, 60, fault), "head": SideRun(SPEC, sys.executable, 60)}
    pools = SidePools(runs, judging)
    try:
        assert across_after_reduction(reduced, "base", pools, otherwise=CrossVerdict.new_in_head) is label
    finally:
        pools.close()


def test_a_base_that_raises_where_head_is_wrong_makes_no_shared_bug(tmp_path: Path) -> None:
    """A campaign's `persistent` for a wrong result base failed another way on (onnxruntime
    1.17.3 refuses a complex STFT that 1.18.0 computes wrong) is head's bug alone: base's
    repro could only say it cannot tell."""
    judging = Judging.shipped()
    reduced = _reduced(tmp_path, judging)
    runs = {
        "base": SideRun(SPEC, sys.executable, 60, FaultSpec(kind="raise")),
        "head": SideRun(SPEC, sys.executable, 60),
    }
    pools = SidePools(runs, judging)
    try:
        assert (
            across_after_reduction(reduced, "base", pools, otherwise=CrossVerdict.persistent)
            is CrossVerdict.new_in_head
        )
    finally:
        pools.close()
