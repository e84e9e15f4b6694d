"""The facts each case in tests/oracle_cases.py states, checked on the real systems.

Every run goes through a WorkerClient, as in a campaign, and is judged by the current
oracles.verdict.judge against the torch reference. One worker per backend, level and
interpreter serves the whole module; TVM and OpenVINO tests skip when their worker
cannot start (the package is missing from the main env).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

from backends.client import BackendUnavailable, WorkerClient
from backends.reference import run_reference
from backends.results import RunResult, Status
from backends.spec import parse_backend
from oracles.signature import op_signature
from oracles.verdict import Judgement, Verdict, judge
from tests import oracle_cases as oc
from tests import release_cases as rc

pytestmark = [pytest.mark.worker, pytest.mark.release]

MAIN = sys.executable
CaseFn = Callable[[], oc.Case]


class Workers:
    """Lazily started workers keyed by (backend spec, interpreter), closed together."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], WorkerClient] = {}
        self._unavailable: dict[tuple[str, str], str] = {}

    def client(self, spec: str, python: str) -> WorkerClient:
        key = (spec, python)
        if key in self._unavailable:
            pytest.skip(self._unavailable[key])
        if key not in self._clients:
            client = WorkerClient(parse_backend(spec), python, timeout_s=60)
            try:
                client.start()
            except BackendUnavailable as e:
                self._unavailable[key] = str(e)
                pytest.skip(str(e))
            self._clients[key] = client
        return self._clients[key]

    def run(self, spec: str, python: str, case: CaseFn) -> tuple[RunResult, Judgement]:
        model, inputs = case()
        result = self.client(spec, python).run(model.SerializeToString(), inputs)
        expected = run_reference(model, inputs) if result.status is Status.ok else {}
        return result, judge(result, expected, op_signature(model))

    def close(self) -> None:
        for client in self._clients.values():
            client.close()


@pytest.fixture(scope="module")
def workers() -> Iterator[Workers]:
    pool = Workers()
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def old() -> str:
    return str(oc.old_ort_python())


def _version(workers: Workers, spec: str, python: str) -> str:
    info = workers.client(spec, python).info
    assert info is not None
    return info.version


def test_the_onnxruntime_builds_are_the_ones_the_cases_describe(workers: Workers, old: str) -> None:
    assert _version(workers, "onnxruntime:all", MAIN) == oc.ORT_NEW
    assert _version(workers, "onnxruntime:all", old) == oc.ORT_OLD


@pytest.mark.parametrize(("spec", "version"), [("tvm:O0", oc.TVM_VERSION), ("openvino", oc.OPENVINO_VERSION)])
def test_the_compiler_builds_are_the_ones_the_cases_describe(workers: Workers, spec: str, version: str) -> None:
    assert _version(workers, spec, MAIN) == version


def test_every_case_is_valid_onnx_with_inputs_for_every_graph_input() -> None:
    cases = [f for name, f in vars(oc).items() if callable(f) and name.islower() and not name.startswith("_")]
    cases = [f for f in cases if f.__module__ == oc.__name__ and f is not oc.old_ort_python]
    assert len(cases) >= 20
    for case in cases:
        model, inputs = case()
        assert {i.name for i in model.graph.input} == set(inputs), case.__name__
        assert len(model.graph.node) <= 3, case.__name__


# (a) two releases


@pytest.mark.parametrize(
    ("case", "verdict", "needle"),
    [
        (oc.ort_pad_averagepool_fusion, Verdict.wrong_result, "values"),
        (oc.ort_convinteger_omitted_x_zero_point, Verdict.crash, "worker killed by SIGSEGV"),
        (oc.ort_reducesum_noop_empty_axes_float, Verdict.crash, "Reduction on all axes, output size should be 1"),
        (oc.ort_reducesum_noop_empty_axes_int32, Verdict.crash, "Reduction on all axes, output size should be 1"),
        (
            oc.ort_einsum_transpose_reduce,
            Verdict.crash,
            "Einsum op: The candidate output does not match the actual output's shape",
        ),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_the_old_release_is_wrong_where_the_new_one_is_right(
    workers: Workers, old: str, case: CaseFn, verdict: Verdict, needle: str
) -> None:
    _, bad = workers.run("onnxruntime:all", old, case)
    assert bad.verdict is verdict, bad.message
    assert needle in (bad.symptom if verdict is Verdict.wrong_result else bad.message)
    _, good = workers.run("onnxruntime:all", MAIN, case)
    assert good.verdict is Verdict.pass_, good.message


@pytest.mark.parametrize("level", ["all", "disable"])
def test_the_new_release_refuses_shape_unsqueeze_add_that_the_old_one_runs(
    workers: Workers, old: str, level: str
) -> None:
    result, bad = workers.run(f"onnxruntime:{level}", MAIN, oc.ort_shape_unsqueeze_add)
    assert bad.verdict is Verdict.crash and result.stage is not None and result.stage.value == "compile"
    assert "[ShapeInferenceError] Invalid rank for Add broadcasting: (2) vs (3)." in bad.message
    result, good = workers.run(f"onnxruntime:{level}", old, oc.ort_shape_unsqueeze_add)
    assert good.verdict is Verdict.pass_ and result.outputs["y"].tolist() == [[6, 9], [9, 12]]


def test_the_old_release_segfaults_on_convinteger_by_signal(workers: Workers, old: str) -> None:
    result, j = workers.run("onnxruntime:disable", old, oc.ort_convinteger_omitted_x_zero_point)
    assert result.status is Status.crash and result.signal == "SIGSEGV"
    assert (j.verdict, j.symptom, j.message) == (Verdict.crash, "signal SIGSEGV", "worker killed by SIGSEGV")


def test_the_old_release_is_right_on_pad_averagepool_without_graph_rewrites(workers: Workers, old: str) -> None:
    _, j = workers.run("onnxruntime:disable", old, oc.ort_pad_averagepool_fusion)
    assert j.verdict is Verdict.pass_
    _, fused = workers.run("onnxruntime:all", old, oc.ort_pad_averagepool_fusion)
    assert fused.comparison is not None and fused.comparison.max_abs > 3.8  # far beyond rounding


# (b) bugs of the main env


@pytest.mark.parametrize(("case", "code"), [(oc.ort_relu_clip_fusion_int8, 3), (oc.ort_relu_clip_fusion_int32, 6)])
def test_relu_clip_fusion_crashes_both_releases_on_integer_clip(
    workers: Workers, old: str, case: CaseFn, code: int
) -> None:
    for python, line in ((MAIN, 83), (old, 77)):
        result, j = workers.run("onnxruntime:all", python, case)
        assert j.verdict is Verdict.crash and result.stage is not None and result.stage.value == "compile"
        assert f"relu_clip_fusion.cc:{line}" in j.message
        assert f"Unexpected data type for Clip 'min' input of {code}" in j.message
    _, plain = workers.run("onnxruntime:disable", MAIN, case)
    assert plain.verdict is Verdict.pass_


def test_pad_maxpool_fusion_is_wrong_on_both_releases(workers: Workers, old: str) -> None:
    for python in (MAIN, old):
        _, j = workers.run("onnxruntime:all", python, oc.ort_pad_maxpool_fusion)
        assert j.verdict is Verdict.wrong_result and j.symptom == "values"
        assert j.comparison is not None and j.comparison.max_abs == 5.0
    _, plain = workers.run("onnxruntime:disable", MAIN, oc.ort_pad_maxpool_fusion)
    assert plain.verdict is Verdict.pass_


@pytest.mark.parametrize(
    ("case", "stage", "needles"),
    [
        (
            oc.tvm_pow_int64_exponent,
            "import",
            ["TypeError: Binary operators must have the same datatype for both operands.", 'dtype="int64"'],
        ),
        (
            oc.tvm_pow_int32_exponent,
            "import",
            ["TypeError: Binary operators must have the same datatype for both operands.", 'dtype="int32"'],
        ),
        (
            oc.tvm_equal_bool,
            "compile",
            ["LLVM module verification failed", "Invalid operand types for FCmp instruction", "fcmp oeq i1"],
        ),
        (oc.tvm_reducemax_bool, "compile", ["InternalError: Cannot decide min_value for typeT.bool"]),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_tvm_crashes(workers: Workers, case: CaseFn, stage: str, needles: list[str]) -> None:
    result, j = workers.run("tvm:O0", MAIN, case)
    assert j.verdict is Verdict.crash, j.message
    assert result.stage is not None and result.stage.value == stage
    for needle in needles:
        assert needle in j.message


def test_openvino_crashes_on_bool_where_and_on_an_omitted_optional_input(workers: Workers) -> None:
    result, j = workers.run("openvino", MAIN, oc.openvino_where_bool)
    assert j.verdict is Verdict.crash and result.stage is not None and result.stage.value == "compile"
    assert "jit_uni_eltwise_generic.cpp" in j.message and "unsupported dst_prc: boolean" in j.message
    result, j = workers.run("openvino", MAIN, oc.openvino_where_bool_condition_as_branch)
    assert j.verdict is Verdict.crash and result.stage is not None and result.stage.value == "compile"
    assert "select.cpp" in j.message and "Argument 1 and 2 element types must match." in j.message
    result, j = workers.run("openvino", MAIN, oc.openvino_convinteger_omitted_x_zero_point)
    assert j.verdict is Verdict.crash and result.stage is not None and result.stage.value == "compile"
    assert "doesn't support NullNode operation with dynamic rank" in j.message
    _, right = workers.run("openvino", MAIN, oc.ort_unsupported_where_bool)
    assert right.verdict is Verdict.pass_


@pytest.mark.parametrize(
    ("case", "expected", "got"),
    [(oc.openvino_reducel1_axes_attribute, (2, 4), ()), (oc.openvino_reducelogsumexp_axes_attribute, (3, 1), (1, 1))],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_openvino_ignores_opset17_reduce_axes(
    workers: Workers, case: CaseFn, expected: tuple[int, ...], got: tuple[int, ...]
) -> None:
    result, j = workers.run("openvino", MAIN, case)
    assert j.verdict is Verdict.wrong_result and j.symptom == "shape"
    assert result.outputs["y"].shape == got and run_reference(*case())["y"].shape == expected


# (c) NaN semantics


def _evaluator(case: CaseFn) -> dict[str, np.ndarray]:
    model, inputs = case()
    values = ReferenceEvaluator(model).run(None, inputs)
    return {o.name: np.asarray(v) for o, v in zip(model.graph.output, values, strict=True)}


@pytest.mark.parametrize("case", [oc.nan_max, oc.nan_reducemax, oc.nan_clip], ids=lambda f: f.__name__)
def test_both_references_agree_on_nan(case: CaseFn) -> None:
    ours, theirs = run_reference(*case())["y"], _evaluator(case)["y"]
    np.testing.assert_array_equal(ours, theirs)  # NaN where the other has NaN


def test_onnxruntime_propagates_nan_through_max_and_clip_but_reducemax_drops_it(workers: Workers, old: str) -> None:
    for python in (MAIN, old):
        assert workers.run("onnxruntime:all", python, oc.nan_max)[1].verdict is Verdict.pass_
        assert workers.run("onnxruntime:all", python, oc.nan_clip)[1].verdict is Verdict.pass_
        result, j = workers.run("onnxruntime:all", python, oc.nan_reducemax)
        assert j.verdict is Verdict.wrong_result and j.symptom == "nonfinite"
        assert result.outputs["y"].tolist() == [3.0]


@pytest.mark.parametrize("spec", ["tvm:O0", "openvino"])
def test_tvm_and_openvino_drop_nan_in_max_and_clip(workers: Workers, spec: str) -> None:
    result, j = workers.run(spec, MAIN, oc.nan_max)
    assert j.verdict is Verdict.wrong_result and j.symptom == "nonfinite"
    np.testing.assert_array_equal(result.outputs["y"], np.array([1, np.nan, np.nan], np.float32))
    result, j = workers.run(spec, MAIN, oc.nan_clip)
    assert j.verdict is Verdict.wrong_result and j.symptom == "nonfinite"
    assert result.outputs["y"].tolist() == [0.0, 0.5, 1.0]


# (d) declared limitations


@pytest.mark.parametrize(
    ("spec", "case", "needle"),
    [
        ("onnxruntime:all", oc.ort_unsupported_averagepool_float64, "Could not find an implementation for AveragePool"),
        ("onnxruntime:all", oc.ort_unsupported_where_bool, "Could not find an implementation for Where"),
        ("tvm:O0", oc.tvm_unsupported_celu, "not supported for frontend ONNX: Celu"),
        ("tvm:O0", oc.ort_convinteger_omitted_x_zero_point, "not supported for frontend ONNX: ConvInteger"),
        ("openvino", oc.openvino_unsupported_det, "No conversion rule found for operations: Det"),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_declined_models_are_unsupported(workers: Workers, spec: str, case: CaseFn, needle: str) -> None:
    result, j = workers.run(spec, MAIN, case)
    assert result.status is Status.unsupported and j.verdict is Verdict.unsupported
    assert not j.verdict.is_bug and needle in j.message


def test_the_unsupported_cases_run_elsewhere(workers: Workers) -> None:
    assert workers.run("onnxruntime:all", MAIN, oc.tvm_unsupported_celu)[1].verdict is Verdict.pass_
    model, inputs = oc.openvino_unsupported_det()
    result = workers.client("onnxruntime:all", MAIN).run(model.SerializeToString(), inputs)
    assert result.status is Status.ok and float(result.outputs["y"]) == pytest.approx(-2.0, abs=1e-5)
    assert float(run_reference(*oc.openvino_unsupported_det())["y"]) == pytest.approx(-2.0, abs=1e-6)


# (e) the two references disagree


def test_reference_evaluator_fails_on_mean_whose_first_input_broadcasts(workers: Workers) -> None:
    with pytest.raises(ValueError, match="non-broadcastable output operand"):
        _evaluator(oc.reference_mean_first_input_broadcasts)
    assert run_reference(*oc.reference_mean_first_input_broadcasts())["y"].tolist() == [1.0, 1.5, 2.0]
    assert workers.run("onnxruntime:all", MAIN, oc.reference_mean_first_input_broadcasts)[1].verdict is Verdict.pass_


def test_reference_evaluator_sizes_asymmetrically_padded_maxpool_wrongly(workers: Workers) -> None:
    assert _evaluator(oc.reference_maxpool_asymmetric_pads)["y"].shape == (1, 1, 2, 4)
    assert run_reference(*oc.reference_maxpool_asymmetric_pads())["y"].shape == (1, 1, 3, 3)
    assert workers.run("onnxruntime:all", MAIN, oc.reference_maxpool_asymmetric_pads)[1].verdict is Verdict.pass_


def test_a_kernel_missing_for_a_node_the_optimizer_made_is_its_bug_not_a_declined_model() -> None:
    """onnxruntime 1.20.1 to 1.28.0 fuse a float64 x * Sigmoid(x) * 1.702 into a
    com.microsoft.QuickGelu they have no float64 kernel for, and fail to load at `all` a
    model they run at `disable`: 17 cases of a 1.27.0 to 1.28.0 campaign were set aside as
    declined. A NOT_IMPLEMENTED for a node a fusion made (`.../QuickGeluFusion/`) is the
    optimizer's error; one for the model's own node (test_declined_models_are_unsupported)
    stays a declined model. Run on the real 1.28.0 and 1.31.1."""
    old, new = rc.QUICK_GELU_FLOAT64
    model, inputs = rc.quick_gelu_float64()
    expected = run_reference(model, inputs)
    judged = {}
    for version, level in ((old, "all"), (old, "disable"), (new, "all")):
        with WorkerClient(parse_backend(f"onnxruntime:{level}"), str(rc.ort_python(version))) as client:
            judged[version, level] = judge(client.run(model.SerializeToString(), inputs), expected, "QuickGelu")
    crash = judged[old, "all"]
    assert crash.verdict is Verdict.crash and "QuickGeluFusion/" in crash.message, crash.message
    assert judged[old, "disable"].verdict is judged[new, "all"].verdict is Verdict.pass_
