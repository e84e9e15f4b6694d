"""Divergence between two builds (oracles.divergence): each kind from real onnxruntime runs
where one can be had, and the keys that let divergences of many cases add up."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from backends.results import RunResult, Stage, Status
from oracles.divergence import DivergenceKind, divergences
from oracles.verdict import Verdict

PASS = (Verdict.pass_, Verdict.pass_)


def _ok(outputs: dict[str, np.ndarray], rewrites: dict[str, int] | None = None, compile_s: float = 0.01) -> RunResult:
    return RunResult(status=Status.ok, outputs=outputs, rewrites=rewrites or {}, compile_s=compile_s)


def _softmax_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_outputs_that_differ_in_bits_within_tolerance_are_a_bits_divergence() -> None:
    """onnxruntime's Softmax against numpy's: both right, and not always the same bits."""
    model = _softmax_model()
    x = np.random.default_rng(3).normal(size=(2, 8)).astype(np.float32)
    (got,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    other = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
    assert np.allclose(got, other, atol=1e-6) and got.tobytes() != other.tobytes()
    found = divergences(_ok({"y": other}), _ok({"y": got}), PASS, {"y": "Softmax"})
    assert [(d.kind, d.key) for d in found] == [(DivergenceKind.bits, "Softmax output (float32)")]
    same = divergences(_ok({"y": got}), _ok({"y": got.copy()}), PASS, {"y": "Softmax"})
    assert same == []


def test_a_rewrite_one_build_performs_and_counts_that_differ() -> None:
    y = {"y": np.zeros(2, np.float32)}
    base = _ok(y, {"-ai.onnx::Pad": 1, "+com.microsoft::FusedConv": 2})
    head = _ok(y, {"+com.microsoft::FusedConv": 3, "+com.microsoft::FusedMatMul": 1})
    found = {(d.kind, d.key) for d in divergences(base, head, PASS, {})}
    assert found == {
        (DivergenceKind.rewrite, "-ai.onnx::Pad only in base"),
        (DivergenceKind.rewrite, "+com.microsoft::FusedMatMul only in head"),
        (DivergenceKind.rewrite_count, "+com.microsoft::FusedConv more times in head"),
    }


def test_support_names_the_declined_op_and_outweighs_everything_else() -> None:
    declined = RunResult(status=Status.unsupported, message="NotImplementedError: narrowcc: op Max not supported")
    found = divergences(declined, _ok({"y": np.ones(1, np.float32)}), (Verdict.unsupported, Verdict.pass_), {}, {"Max"})
    assert [(d.kind, d.key) for d in found] == [(DivergenceKind.support, "only base declines Max")]
    both = divergences(declined, declined, (Verdict.unsupported, Verdict.unsupported), {}, {"Max"})
    assert both == []


def test_a_build_that_fails_where_the_other_runs_is_an_outcome_divergence() -> None:
    dies = RunResult(status=Status.crash, stage=Stage.run, signal="SIGSEGV")
    found = divergences(_ok({}), dies, (Verdict.pass_, Verdict.crash), {})
    assert [(d.kind, d.key) for d in found] == [(DivergenceKind.outcome, "only head dies at run")]


def test_a_verdict_divergence_says_which_side_is_wrong() -> None:
    y = {"y": np.zeros(2, np.float32)}
    found = divergences(_ok(y), _ok({"y": np.ones(2, np.float32)}), (Verdict.pass_, Verdict.wrong_result), {"y": "Add"})
    assert [(d.kind, d.key) for d in found] == [(DivergenceKind.verdict, "only head is wrong_result")]


def test_compile_time_diverges_beyond_noise_and_is_never_fed_to_generation() -> None:
    y = {"y": np.zeros(2, np.float32)}
    slow = divergences(_ok(y, compile_s=0.02), _ok(y, compile_s=0.5), PASS, {})
    assert [(d.kind, d.key) for d in slow] == [(DivergenceKind.compile_time, "head compiles slower")]
    assert not slow[0].kind.fed and all(k.fed for k in DivergenceKind if k is not DivergenceKind.compile_time)
    assert divergences(_ok(y, compile_s=0.001), _ok(y, compile_s=0.02), PASS, {}) == []  # below the floor
    assert divergences(_ok(y, compile_s=0.2), _ok(y, compile_s=0.4), PASS, {}) == []  # within 3x
