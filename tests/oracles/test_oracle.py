"""Comparison rules and verdicts, on concrete arrays and results."""

from __future__ import annotations

import threading
import warnings
from collections import Counter

import numpy as np
import pytest
from onnx import TensorProto, helper

from backends.results import BackendInfo, RunResult, Stage, Status
from oracles.compare import Mismatch, compare
from oracles.references import onnx_reference
from oracles.signature import normalize
from oracles.tolerances import Tolerance, tolerance_for
from oracles.verdict import Verdict, judge

INFO = BackendInfo(name="onnxruntime", level="all", version="1.31.1")


def _ok(**outputs: np.ndarray) -> RunResult:
    return RunResult(status=Status.ok, outputs=outputs, backend=INFO)


def test_element_fails_only_when_both_bounds_are_exceeded() -> None:
    want = np.array([1000.0, 0.001], dtype=np.float32)
    # 0.5 off on 1000 is within rtol 1e-3; 5e-4 off on 0.001 is within atol 1e-3.
    assert compare({"y": want}, {"y": want + np.array([0.5, 5e-4], np.float32)}).ok
    got = want + np.array([2.0, 0.0], np.float32)
    c = compare({"y": want}, {"y": got})
    assert not c.ok
    assert c.outputs[0].mismatch is Mismatch.values
    assert c.outputs[0].first_bad_index == [0]


def test_dtype_defaults_are_ordered_and_ints_are_exact() -> None:
    f16, f32, f64 = (tolerance_for(np.dtype(d)) for d in ("float16", "float32", "float64"))
    assert f16.atol > f32.atol > f64.atol and f16.rtol > f32.rtol > f64.rtol
    assert tolerance_for(np.dtype("int64")) == Tolerance(atol=0, rtol=0)
    c = compare({"i": np.array([1, 2], np.int64)}, {"i": np.array([1, 3], np.int64)})
    assert c.outputs[0].mismatch is Mismatch.values


def test_nan_and_inf_must_sit_at_the_same_positions() -> None:
    want = np.array([np.nan, np.inf, 1.0], np.float32)
    assert compare({"y": want}, {"y": want.copy()}).ok
    moved = np.array([1.0, np.inf, np.nan], np.float32)
    assert compare({"y": want}, {"y": moved}).outputs[0].mismatch is Mismatch.nonfinite
    flipped = np.array([np.nan, -np.inf, 1.0], np.float32)
    assert compare({"y": want}, {"y": flipped}).outputs[0].mismatch is Mismatch.nonfinite


def test_shape_dtype_and_missing_outputs_fail() -> None:
    want = {"y": np.zeros((2, 3), np.float32)}
    assert compare(want, {"y": np.zeros((3, 2), np.float32)}).outputs[0].mismatch is Mismatch.shape
    assert compare(want, {"y": np.zeros((2, 3), np.float64)}).outputs[0].mismatch is Mismatch.dtype
    assert compare(want, {}).outputs[0].mismatch is Mismatch.missing


def test_overrides_loosen_a_dtype() -> None:
    want, got = np.array([1.0], np.float32), np.array([1.01], np.float32)
    assert not compare({"y": want}, {"y": got}).ok
    assert compare({"y": want}, {"y": got}, {"float32": Tolerance(atol=0.1, rtol=0.1)}).ok


def test_verdicts_for_each_kind_of_result() -> None:
    want = {"y": np.ones(3, np.float32)}
    assert judge(_ok(y=np.ones(3, np.float32)), want, "Relu").verdict is Verdict.pass_
    wrong = judge(_ok(y=np.zeros(3, np.float32)), want, "Relu")
    assert wrong.verdict is Verdict.wrong_result and wrong.fingerprint
    err = RunResult(status=Status.error, stage=Stage.compile, message="Fail: node n3_Conv bad at 0x7ffd", backend=INFO)
    crash = RunResult(status=Status.crash, stage=Stage.run, signal="SIGSEGV", backend=INFO)
    hang = RunResult(status=Status.timeout, stage=Stage.compile, backend=INFO)
    assert judge(err, want, "Conv").verdict is Verdict.crash
    assert judge(crash, want, "Conv").verdict is Verdict.crash
    assert judge(hang, want, "Conv").verdict is Verdict.timeout
    assert judge(err, want, "Conv").stage == "compile"


def test_same_bug_same_fingerprint_different_bug_different_fingerprint() -> None:
    want = {"y": np.ones(3, np.float32)}

    def err(msg: str) -> RunResult:
        return RunResult(status=Status.error, stage=Stage.compile, message=msg, backend=INFO)

    a = judge(err("Fail: Node (n3_Conv) input 't7' shape [1,3,8,8] at /tmp/x/a.cc:120"), want, "Conv")
    b = judge(err("Fail: Node (n9_Conv) input 't2' shape [4,6,2,2] at /tmp/y/a.cc:121"), want, "Conv")
    c = judge(err("NOT_IMPLEMENTED: could not find a kernel for Foo"), want, "Conv")
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint != c.fingerprint


def test_normalize_keeps_the_meaningful_first_line() -> None:
    text = "Traceback (most recent call last):\n  File x\nRuntimeError: shape (1, 2) at 0xdeadbeef in '/tmp/a'"
    # A shape of any rank is one placeholder: the same bug shows up at rank 2 and rank 4.
    assert normalize(text) == "RuntimeError: shape (<n>) at <addr> in <name>"
    assert normalize(text.replace("(1, 2)", "(4, 3, 2, 1)").replace("/tmp/a", "/tmp/b")) == normalize(text)


def test_normalize_skips_source_locations_and_keeps_the_exception_type() -> None:
    ov = (
        "RuntimeError: Exception from src/inference/src/cpp/core.cpp:112:\n"
        "Exception from src/plugins/intel_cpu/src/node.cpp:{line}:\n"
        "[CPU] Reduce node with name {name} has unsupported rank {rank}"
    )
    a = normalize(ov.format(line=401, name="'n7'", rank=0))
    b = normalize(ov.format(line=433, name="'n12'", rank=5))
    assert a == b == "RuntimeError: [CPU] Reduce node with name <name> has unsupported rank <n>"
    ort = "Fail: [ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Add node. Name:'n3'"
    assert normalize(ort) != normalize(ort.replace("Add node", "Mul node"))
    # onnxruntime's status class and code change between releases; the message does not.
    assert normalize(ort).startswith("ONNXRuntimeError: Non-zero status code")


def test_an_integer_difference_has_its_size_and_the_elements_that_differ() -> None:
    """An integer output that wraps instead of saturating: a person needs the values and the
    error, not `max_abs 0.0`."""
    from oracles.compare import compare_output

    expected = np.array([[7, 2147483647], [0, -3]], np.int32)
    actual = np.array([[7, -2147483648], [0, -3]], np.int32)
    diff = compare_output("y", expected, actual, Tolerance(atol=0.0, rtol=0.0))
    assert diff.mismatch is Mismatch.values and diff.bad_elements == 1
    assert diff.max_abs == 4294967295.0 and diff.max_rel == 4294967295.0 / 2147483648.0
    assert [(s.index, s.expected, s.actual) for s in diff.samples] == [([0, 1], "2147483647", "-2147483648")]
    big = compare_output("y", np.array([2**60 + 1], np.int64), np.array([2**60], np.int64), Tolerance(atol=0, rtol=0))
    assert big.max_abs == 1.0  # exact, where float64 would see 2**60 on both sides


def test_onnx_reference_warnings_are_counted_not_printed(capfd: pytest.CaptureFixture[str]) -> None:
    """Log(0) and 0/0 make numpy warn inside onnx.reference; a user reading `make fuzz`'s
    output takes a RuntimeWarning for an error, so the count goes to summary.json instead."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    graph = helper.make_graph(
        [helper.make_node("Log", ["x"], ["l"]), helper.make_node("Div", ["x", "x"], ["d"])],
        "g",
        [x],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ("l", "d")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    warned: Counter[str] = Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning that escaped would fail here
        values, why = onnx_reference(model, {"x": np.array([0.0, 1.0, 2.0], np.float32)}, warned)
    assert values is not None and not why
    assert np.isneginf(values["l"][0]) and np.isnan(values["d"][0])
    assert warned["RuntimeWarning"] >= 2
    captured = capfd.readouterr()
    assert "Warning" not in captured.err + captured.out


def test_counting_reference_warnings_in_two_threads_leaves_the_process_filters_alone() -> None:
    """Triage runs onnx.reference on several threads at once. Counting by swapping the
    process's warning filters left "always" in front of them once two threads overlapped,
    and every later warning of the campaign was printed; each thread now counts its own."""
    from oracles.references import counted_warnings

    before = list(warnings.filters)
    counts = [Counter[str](), Counter[str]()]
    inside = threading.Barrier(2)

    def judge(i: int) -> None:
        with counted_warnings(counts[i]):
            inside.wait(timeout=10)
            for _ in range(i + 1):
                np.array([1.0]) / np.array([0.0])
            inside.wait(timeout=10)

    threads = [threading.Thread(target=judge, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert warnings.filters == before
    assert counts == [Counter({"RuntimeWarning": 1}), Counter({"RuntimeWarning": 2})]


def test_an_error_past_float64s_range_in_ulps_is_infinite_and_warns_nothing() -> None:
    """A wrong result of 1e308 at a scale of 1e-30 is more ULPs than float64 holds: inf, not
    a RuntimeWarning from the campaign's own comparison (a library caller sees those)."""
    from oracles.compare import compare_output

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        diff = compare_output("y", np.array([1e-30, 0.0]), np.array([1e-30, 1e308]), Tolerance(atol=1e-3, rtol=1e-3))
    assert diff.bad_elements == 1 and diff.ulps == float("inf")
    assert diff.bound_ulps is not None and diff.bound_ulps < float("inf")
