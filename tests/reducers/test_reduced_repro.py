"""A reduced bundle's repro judges as the campaign judged: the bounds of the reduced model's
own provenance (oracles.tolerances), at the campaign's tolerances. A Cast round trip is
judged exactly; a repro at float32's default bounds once hid a 2e-4 error there, and a
`fixed` label's repro exited 0 on base."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from backends.results import BackendInfo
from backends.spec import parse_backend
from bot.findings.bundle import Finding
from bot.reduce.candidates import write_reduced
from oracles.tolerances import ToleranceConfig
from oracles.verdict import Judgement, Verdict
from reducers.candidate import Candidate
from reducers.driver import ReductionResult
from reducers.tester import ReduceConfig


def _model(nodes: list[onnx.NodeProto]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


ROUND_TRIP = [
    helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
    helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT),
]
ARITHMETIC = [helper.make_node("Sin", ["x"], ["y"])]


def _repro_bounds(
    tmp_path: Path, nodes: list[onnx.NodeProto], tolerances: ToleranceConfig | None
) -> tuple[float, float]:
    model = _model(nodes)
    case = Candidate(model, {"x": np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)})
    info = BackendInfo(name="onnxruntime", level="all", version="1.31.1", commit="abc1234")
    finding = Finding(verdict=Verdict.wrong_result, backend=info)
    result = ReductionResult(config=ReduceConfig(), nodes_before=2, nodes_after=2, bytes_before=1, bytes_after=1)
    dest = write_reduced(
        tmp_path / "reduced",
        case,
        finding,
        Judgement(verdict=Verdict.wrong_result),
        parse_backend("onnxruntime"),
        result,
        None,
        tolerances,
    )
    found = re.search(r"'y': \(([^,]+), ([^)]+)\)", (dest / "repro.py").read_text())
    assert found is not None, "the repro names its bounds per output"
    return float(found.group(1)), float(found.group(2))


def test_a_reduced_cast_round_trip_is_judged_exactly_as_the_campaign_judged_it(tmp_path: Path) -> None:
    assert _repro_bounds(tmp_path / "cast", ROUND_TRIP, ToleranceConfig()) == (0.0, 0.0)


def test_a_reduced_repro_keeps_the_campaigns_own_tolerances(tmp_path: Path) -> None:
    mine = ToleranceConfig(dtypes={"float32": {"atol": 2e-6, "rtol": 3e-6}})
    assert _repro_bounds(tmp_path / "sin", ARITHMETIC, mine) == (2e-6, 3e-6)
