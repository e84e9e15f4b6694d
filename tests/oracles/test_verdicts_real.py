"""Verdicts, filters and fingerprints on the real cases of tests/oracle_cases.py, run
on the real backends (onnxruntime 1.31.1 and 1.20.1, TVM, OpenVINO)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

import onnx
import pytest

from backends.client import BackendUnavailable, WorkerClient
from backends.spec import parse_backend
from bot.campaign.triage import Side, Triage
from oracles.case import CaseEvidence
from oracles.config import OracleConfig
from oracles.judging import Judging
from oracles.references import read_reference
from oracles.rules import load_rules
from oracles.sides import CrossJudgement, CrossVerdict
from oracles.signature import canonical_ops
from oracles.tolerances import ToleranceConfig
from oracles.verdict import Judgement, Verdict
from tests import oracle_cases as oc

pytestmark = [pytest.mark.worker]

CaseFn = Callable[[], oc.Case]


class _Case:
    """A case as a campaign prepares it: its reference with the fallbacks (none for Det:
    the status alone decides an unsupported case)."""

    def __init__(self, fn: CaseFn) -> None:
        self.model, self.inputs = fn()
        self.model_bytes = self.model.SerializeToString()
        reading = read_reference(self.model, self.inputs)
        self.reference, self.source, self.gap = reading.outputs, reading.source, reading.gap


class Workers:
    """One worker per (spec, interpreter) for the module: TVM takes seconds to import."""

    def __init__(self) -> None:
        self.clients: dict[tuple[str, str], WorkerClient] = {}

    def side(self, name: str, spec: str, python: str = sys.executable) -> Side:
        key = (spec, python)
        if key not in self.clients:
            client = WorkerClient(parse_backend(spec), python, 120)
            try:
                client.start()
            except BackendUnavailable as e:
                pytest.skip(f"{spec}: {e}")
            self.clients[key] = client
        return Side(name, self.clients[key])

    def close(self) -> None:
        for c in self.clients.values():
            c.close()


@pytest.fixture(scope="module")
def workers() -> Iterator[Workers]:
    w = Workers()
    yield w
    w.close()


@pytest.fixture(scope="module")
def triage() -> Triage:
    return Triage(Judging(OracleConfig(), ToleranceConfig(), load_rules()))


def _triage(triage: Triage, fn: CaseFn, *sides: Side) -> CrossJudgement:
    case = _Case(fn)
    try:
        return triage.triage(case, list(sides), [s.client.run(case.model_bytes, case.inputs) for s in sides])
    finally:
        for s in sides:
            s.close()


# --- two onnxruntime releases ------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "symptom"),
    [
        (oc.ort_pad_averagepool_fusion, Verdict.wrong_result),
        (oc.ort_reducesum_noop_empty_axes_float, Verdict.crash),
        (oc.ort_convinteger_omitted_x_zero_point, Verdict.crash),
    ],
)
def test_a_bug_only_the_old_release_has_is_fixed_or_new_depending_on_which_is_head(
    workers: Workers, triage: Triage, fn: CaseFn, symptom: Verdict
) -> None:
    old = str(oc.old_ort_python())
    forward = _triage(triage, fn, workers.side("base", "onnxruntime:all", old), workers.side("head", "onnxruntime:all"))
    assert forward.verdict is CrossVerdict.fixed, forward.note
    assert forward.failing.side == "base" and forward.failing.first.verdict is symptom
    # A triage of its own: one that saw this failure in a fresh worker already believes it.
    fresh_eyes = Triage(Judging(OracleConfig(), ToleranceConfig(), load_rules()))
    back = _triage(
        fresh_eyes, fn, workers.side("base", "onnxruntime:all"), workers.side("head", "onnxruntime:all", old)
    )
    assert back.verdict is CrossVerdict.new_regression, back.note
    # Confirmed on every run the same way. The old release's worker ran the forward case, so
    # a failure that leaves the process alive is run once more in a fresh one, where the
    # real bug is still there; a crash's re-runs are in fresh processes already.
    died = back.head.runs[0].symptom.startswith("signal")
    runs = 3 if died else 4
    assert (back.head.fresh is None) == died
    assert back.head.runs == back.head.runs[:1] * runs


def test_the_new_release_breaking_a_model_the_old_one_ran_is_a_new_regression(workers: Workers, triage: Triage) -> None:
    old = str(oc.old_ort_python())
    cross = _triage(
        triage,
        oc.ort_shape_unsqueeze_add,
        workers.side("base", "onnxruntime:all", old),
        workers.side("head", "onnxruntime:all"),
    )
    assert cross.verdict is CrossVerdict.new_regression
    assert cross.head.first.verdict is Verdict.crash and cross.head.first.stage == "compile"


def test_localization_says_the_pad_fusion_bug_needs_the_optimizer(workers: Workers, triage: Triage) -> None:
    old = str(oc.old_ort_python())
    cross = _triage(triage, oc.ort_pad_averagepool_fusion, workers.side("head", "onnxruntime:all", old))
    assert cross.verdict is CrossVerdict.persistent
    local = cross.head.localization
    assert local is not None and local.level == "disable" and local.verdict is Verdict.pass_
    assert local.depends_on_optimization
    # A kernel bug is there at every level.
    crash = _triage(triage, oc.ort_reducesum_noop_empty_axes_float, workers.side("head", "onnxruntime:all", old))
    assert crash.head.localization is not None and not crash.head.localization.depends_on_optimization


def test_a_bug_both_releases_have_is_persistent(workers: Workers, triage: Triage) -> None:
    old = str(oc.old_ort_python())
    cross = _triage(
        triage,
        oc.ort_pad_maxpool_fusion,
        workers.side("base", "onnxruntime:all", old),
        workers.side("head", "onnxruntime:all"),
    )
    assert cross.verdict is CrossVerdict.persistent and cross.note == ""


# --- filters -------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["tvm:O0", "openvino"])
@pytest.mark.parametrize("fn", [oc.nan_max, oc.nan_clip])
def test_nan_semantics_differences_are_filtered_not_reported(
    workers: Workers, triage: Triage, spec: str, fn: CaseFn
) -> None:
    cross = _triage(triage, fn, workers.side("head", spec))
    assert cross.head.first.verdict is Verdict.wrong_result  # the backend really differs
    assert cross.key == "filtered:nan-max-min-clip", cross.head.rule_detail


def test_nan_skipped_by_every_reducemax_is_filtered(workers: Workers, triage: Triage) -> None:
    cross = _triage(triage, oc.nan_reducemax, workers.side("head", "onnxruntime:all"))
    assert cross.key == "filtered:nan-max-min-clip"


@pytest.mark.parametrize(
    ("fn", "spec"),
    [
        (oc.ort_unsupported_averagepool_float64, "onnxruntime:all"),
        (oc.ort_unsupported_where_bool, "onnxruntime:all"),
        (oc.tvm_unsupported_celu, "tvm:O0"),
        (oc.openvino_unsupported_det, "openvino"),
    ],
)
def test_declared_limitations_are_unsupported(workers: Workers, triage: Triage, fn: CaseFn, spec: str) -> None:
    case = _Case(fn)
    side = workers.side("head", spec)
    cross = triage.triage(case, [side], [side.client.run(case.model_bytes, case.inputs)])
    assert cross.verdict is CrossVerdict.unsupported and not cross.verdict.is_reported
    assert len(cross.head.runs) == 1  # a declared limitation is not re-run


@pytest.mark.parametrize("fn", [oc.reference_mean_first_input_broadcasts, oc.reference_maxpool_asymmetric_pads])
def test_the_second_reference_disagrees_on_its_known_defects(fn: CaseFn) -> None:
    """onnx.reference's own defects: it disagrees with torch, and the float64 re-run, which
    shares neither's rounding, sides with torch, so a real wrong result there stands."""
    model, inputs = fn()
    ev = CaseEvidence.compute(model, inputs)
    assert ev.reference is not None
    found = ev.confirm(Judgement(verdict=Verdict.wrong_result), ev.reference)
    assert found.believed and found.path == "float64 sides with torch", found
    assert found.detail.startswith("onnx.reference")


# --- fingerprints -----------------------------------------------------------------------


def _backend_of(fn: CaseFn) -> str:
    name = fn.__name__
    return "tvm:O0" if name.startswith("tvm") else "openvino" if name.startswith("openvino") else "onnxruntime:all"


OLD_RELEASE_BUGS = {
    oc.ort_reducesum_noop_empty_axes_float,
    oc.ort_reducesum_noop_empty_axes_int32,
    oc.ort_einsum_transpose_reduce,
    oc.ort_convinteger_omitted_x_zero_point,
    oc.ort_pad_averagepool_fusion,
}
"""Cases only onnxruntime 1.20.1 gets wrong."""


def _judged(workers: Workers, triage: Triage, fn: CaseFn, python: str | None = None) -> Judgement:
    case = _Case(fn)
    if python is None:
        python = str(oc.old_ort_python()) if fn in OLD_RELEASE_BUGS else sys.executable
    side = workers.side("head", _backend_of(fn), python)
    j = triage.evidence(case).judge(side.client.run(case.model_bytes, case.inputs))
    assert j.verdict.is_bug, j
    return j


def _fingerprint(workers: Workers, triage: Triage, fn: CaseFn, python: str | None = None) -> str:
    return _judged(workers, triage, fn, python).fingerprint


@pytest.mark.parametrize(("a", "b"), [p for p in oc.SAME_BUG_PAIRS if p[0] is not oc.openvino_reducel1_axes_attribute])
def test_two_models_hitting_one_bug_get_one_fingerprint(workers: Workers, triage: Triage, a: CaseFn, b: CaseFn) -> None:
    assert _fingerprint(workers, triage, a) == _fingerprint(workers, triage, b)


@pytest.mark.parametrize(("a", "b"), oc.DIFFERENT_BUG_PAIRS)
def test_two_bugs_get_two_fingerprints(workers: Workers, triage: Triage, a: CaseFn, b: CaseFn) -> None:
    assert _fingerprint(workers, triage, a) != _fingerprint(workers, triage, b)


@pytest.mark.parametrize(("a", "b"), oc.SAME_BUG_AT_TWO_DTYPES)
def test_one_bug_at_two_dtypes_differs_only_in_the_dtype_named(
    workers: Workers, triage: Triage, a: CaseFn, b: CaseFn
) -> None:
    """TVM's Pow with an int64 and an int32 exponent: shapes and names erased, the dtypes kept."""
    ja, jb = _judged(workers, triage, a), _judged(workers, triage, b)
    assert ja.fingerprint != jb.fingerprint
    assert ja.signature.replace("int64", "int32") == jb.signature


def test_one_bug_keeps_its_fingerprint_across_releases(workers: Workers, triage: Triage) -> None:
    """The relu-clip fusion crash: onnxruntime reworded its status (RUNTIME_EXCEPTION -> FAIL)
    and moved the line, but it is the same bug."""
    old = str(oc.old_ort_python())
    fn = oc.ort_relu_clip_fusion_int8
    assert _fingerprint(workers, triage, fn, old) == _fingerprint(workers, triage, fn, sys.executable)


def test_the_canonical_op_signature_ignores_names_and_node_order() -> None:
    model, _ = oc.ort_pad_maxpool_fusion()
    renamed = onnx.ModelProto()
    renamed.CopyFrom(model)
    g = renamed.graph
    names = {v.name for v in [*g.input, *g.output]} | {t for n in g.node for t in [*n.input, *n.output] if t}
    names |= {i.name for i in g.initializer}
    new = {name: f"t{i}_renamed" for i, name in enumerate(sorted(names))}
    for v in [*g.input, *g.output, *g.initializer]:
        v.name = new[v.name]
    for node in g.node:
        node.name = f"renamed_{node.name}"
        node.input[:] = [new[t] if t else t for t in node.input]
        node.output[:] = [new[t] for t in node.output]
    nodes = list(g.node)
    del g.node[:]
    g.node.extend(reversed(nodes))  # out of order: the signature must not care
    assert canonical_ops(renamed) == canonical_ops(model)
    other, _ = oc.ort_pad_averagepool_fusion()
    assert canonical_ops(other) != canonical_ops(model)
