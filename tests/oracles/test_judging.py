"""Judging one run: exactness, the float16 envelope, a reference that is never a gate,
and time limits that tell a slow compile from a hang; on real backends where they exist."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from backends.client import WorkerClient
from backends.results import RunResult, Stage, Status
from backends.spec import parse_backend
from bot.campaign.triage import Side, Triage
from oracles.case import CaseEvidence
from oracles.compare import compare
from oracles.config import OracleConfig
from oracles.judging import Judging
from oracles.references import read_reference
from oracles.rules import load_rules
from oracles.sides import CrossVerdict
from oracles.tolerances import EXACT, ToleranceConfig
from oracles.verdict import Verdict

pytestmark = [pytest.mark.worker]

F16, F32 = TensorProto.FLOAT16, TensorProto.FLOAT


def _model(
    nodes: list[onnx.NodeProto], inputs: dict[str, tuple[int, list[int]]], out: tuple[str, int, list[int]]
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(out[0], out[1], out[2])],
    )
    model: onnx.ModelProto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model


@pytest.fixture(scope="module")
def ort() -> Iterator[WorkerClient]:
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=30) as client:
        yield client


# --- exactness -------------------------------------------------------------------------


def _round_trip() -> onnx.ModelProto:
    """float32 -> float16 -> float32 of an input: only correctly rounded conversions."""
    nodes = [
        helper.make_node("Cast", ["x"], ["h"], to=F16),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Cast", ["r"], ["y"], to=F32),
    ]
    return _model(nodes, {"x": (F32, [2])}, ("y", F32, [2]))


def test_a_result_exact_in_the_reference_must_be_exact_on_the_backend(ort: WorkerClient) -> None:
    """2049 does not survive float16 (2048 does). onnxruntime 1.31.1 has no float16 Relu
    kernel, wraps it in Cast pairs of its own, and then drops the model's Cast pair with
    them, at every level: it returns the unrounded 2049, one float16 ulp off. No inexact
    op computes the output, so no tolerance covers it, though float16 sits in the cone."""
    model, inputs = _round_trip(), {"x": np.array([2049.0, 3.0], np.float32)}
    ev = CaseEvidence.compute(model, inputs)
    assert ev.bounds("onnxruntime") == {"y": EXACT}
    assert ev.reference is not None and ev.reference["y"].tolist() == [2048.0, 3.0]
    real = ort.run(model.SerializeToString(), inputs)
    assert real.outputs["y"].tolist() == [2049.0, 3.0]
    j = ev.judge(real)
    assert j.verdict is Verdict.wrong_result and "beyond exact" in j.message
    rounded = RunResult(status=Status.ok, outputs={"y": np.array([2048.0, 3.0], np.float32)})
    assert ev.judge(rounded).verdict is Verdict.pass_


def test_inexact_arithmetic_keeps_its_width_and_the_relative_error_stays_sane() -> None:
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=F16), helper.make_node("Exp", ["h"], ["y"])]
    model = _model(nodes, {"x": (F32, [2])}, ("y", F16, [2]))
    assert ToleranceConfig().for_outputs(model, None)["y"].atol == 1e-2
    diff = compare({"y": np.array([0.0, 1.0], np.float32)}, {"y": np.array([1.0, 1.0], np.float32)})
    assert diff.max_rel == 1.0  # against the larger magnitude: never 1e299 for an expected 0


# --- the float16 envelope ----------------------------------------------------------------


def _f16_normalization() -> onnx.ModelProto:
    """x - mean(x), over its standard deviation, in float16: ill-conditioned on values a few
    ulps apart, where keeping intermediates in float32 moves the result a long way."""
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1], keepdims=1),
        helper.make_node("Sub", ["x", "m"], ["d"]),
        helper.make_node("Mul", ["d", "d"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["v"], axes=[-1], keepdims=1),
        helper.make_node("Sqrt", ["v"], ["s"]),
        helper.make_node("Div", ["d", "s"], ["y"]),
    ]
    return _model(nodes, {"x": (F16, [1, 8])}, ("y", F16, [1, 8]))


def test_float16_intermediates_kept_wider_are_inside_the_envelope(ort: WorkerClient) -> None:
    model = _f16_normalization()
    inputs = {"x": (1.0 + np.arange(8) / 1000).astype(np.float16).reshape(1, 8)}
    ev = CaseEvidence.compute(model, inputs)
    real = ort.run(model.SerializeToString(), inputs)
    assert ev.reference is not None
    assert not compare(ev.reference, real.outputs, per_output=ev.bounds("onnxruntime")).ok, "far from rounded"
    assert ev.judge(real).verdict is Verdict.pass_
    outside = dict(real.outputs)
    outside["y"] = outside["y"] + np.float16(0.25)
    assert ev.judge(RunResult(status=Status.ok, outputs=outside)).verdict is Verdict.wrong_result


# --- no reference ------------------------------------------------------------------------


def _gelu_contrib() -> onnx.ModelProto:
    """onnxruntime's own com.microsoft Gelu: neither the torch reference nor onnx.reference
    can compute it."""
    node = helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", F32, [4])], [helper.make_tensor_value_info("y", F32, [4])]
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model: onnx.ModelProto = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    return model


class _Case:
    def __init__(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> None:
        self.model, self.inputs, self.model_bytes = model, inputs, model.SerializeToString()
        reading = read_reference(model, inputs)
        self.reference, self.source, self.gap = reading.outputs, reading.source, reading.gap


def test_with_no_reference_base_judges_head_and_nothing_is_persistent() -> None:
    case = _Case(_gelu_contrib(), {"x": np.linspace(-2, 2, 4, dtype=np.float32)})
    assert case.reference is None and case.source.value == "none" and "Gelu" in case.gap
    triage = Triage(Judging(OracleConfig(), ToleranceConfig(), load_rules()))
    sides = [
        Side("base", WorkerClient(parse_backend("onnxruntime"), timeout_s=30)),
        Side("head", WorkerClient(parse_backend("onnxruntime"), timeout_s=30, fault={"kind": "perturb", "every": 1})),
    ]
    try:
        same = triage.triage(case, sides[:1] * 2, [sides[0].client.run(case.model_bytes, case.inputs)] * 2)
        assert same.verdict is CrossVerdict.pass_
        first = [s.client.run(case.model_bytes, case.inputs) for s in sides]
        moved = triage.triage(case, sides, first)
        assert moved.verdict is CrossVerdict.new_regression and "judged against base only" in moved.note
        assert moved.head.first.judged_by == "base"
        alone = triage.triage(case, sides[1:], first[1:])
        assert alone.verdict is CrossVerdict.pass_  # one build, nothing to judge its values by
    finally:
        for s in sides:
            s.client.close()


# --- time limits -------------------------------------------------------------------------

SLOW_COMPILER = textwrap.dedent(
    """
    import time

    import numpy as np


    class SlowAdapter:
        name = "slow"
        levels = ("default",)
        default_level = "default"

        def __init__(self, options):
            pass

        def info(self):
            return {"name": self.name, "version": "1", "commit": None}

        def compile(self, model, level):
            time.sleep(1.5)  # a JIT: slow, not hung
            return model

        def run(self, compiled, inputs):
            return {"y": np.asarray(inputs["x"])}
    """
)


def test_a_slow_compile_is_not_a_hang(tmp_path: Path) -> None:
    plugin = tmp_path / "slow_compiler.py"
    plugin.write_text(SLOW_COMPILER)
    spec = parse_backend(f"{plugin}:SlowAdapter")
    model = _model([helper.make_node("Identity", ["x"], ["y"])], {"x": (F32, [2])}, ("y", F32, [2]))
    inputs = {"x": np.ones(2, np.float32)}
    with WorkerClient(spec, sys.executable, timeout_s=1.0) as client:
        assert client.run(model.SerializeToString(), inputs).status is Status.ok
    with WorkerClient(spec, sys.executable, timeout_s=1.0, compile_timeout_s=1.0) as client:
        hung = client.run(model.SerializeToString(), inputs)
    assert hung.status is Status.timeout and hung.stage is Stage.compile
    assert "compile stage" in hung.message


def test_a_zero_dimensional_input_stays_zero_dimensional_on_tvm() -> None:
    model = _model([helper.make_node("Neg", ["x"], ["y"])], {"x": (F32, [])}, ("y", F32, []))
    inputs = {"x": np.array(2.5, np.float32)}
    with WorkerClient(parse_backend("tvm:O0"), timeout_s=120) as client:
        result = client.run(model.SerializeToString(), inputs)
    assert result.status is Status.ok, result.message
    assert result.outputs["y"].shape == () and float(result.outputs["y"]) == -2.5
