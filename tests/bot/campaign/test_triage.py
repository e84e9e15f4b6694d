"""Verdicts across sides, re-runs, localization, provenance-aware bounds and the
performance oracle, on real onnxruntime workers (faults injected in the worker are
real wrong outputs, flaky outputs and slow runs)."""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from backends.client import WorkerClient
from backends.faults import FaultSpec
from backends.reference import run_reference
from backends.spec import parse_backend
from bot.campaign.perf import compare_perf
from bot.campaign.triage import Side, Triage
from bot.config import FuzzConfig, load_config
from bot.findings.bundle import Finding
from oracles.conditioning import rounding_spread
from oracles.config import OracleConfig
from oracles.judging import Judging
from oracles.perf import Metric, PerfConfig, judge_perf
from oracles.references import Source
from oracles.rules import load_rules
from oracles.sides import CrossVerdict, SideRuns, combine
from oracles.tolerances import DEFAULTS, EXACT, Tolerance, ToleranceConfig
from oracles.verdict import Judgement, Verdict
from tests import release_cases as rc
from tests.conftest import CliResult

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

ORT = parse_backend("onnxruntime:all")


def _model(
    nodes: list[onnx.NodeProto], inputs: dict[str, int], outputs: dict[str, int], shape: list[int]
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, shape) for n, t in inputs.items()],
        [helper.make_tensor_value_info(n, t, shape) for n, t in outputs.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


class _Case:
    def __init__(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> None:
        self.model, self.inputs = model, inputs
        self.model_bytes = model.SerializeToString()
        self.reference: dict[str, np.ndarray] | None = run_reference(model, inputs)
        self.source, self.gap = Source.torch, ""


def _tanh_case(scale: float = 1.0) -> _Case:
    model = _model([helper.make_node("Tanh", ["x"], ["y"])], {"x": TensorProto.FLOAT}, {"y": TensorProto.FLOAT}, [8])
    return _Case(model, {"x": np.linspace(-2, 2, 8, dtype=np.float32) * np.float32(scale)})


@pytest.fixture
def triage() -> Triage:
    return Triage(Judging(OracleConfig(), ToleranceConfig(), load_rules()))


def _side(name: str, fault: str | None = None, spec: str = "onnxruntime:all", python: str = sys.executable) -> Side:
    f: FaultSpec | None = {"kind": fault, "every": 1} if fault else None
    return Side(name, WorkerClient(parse_backend(spec), python, 30, fault=f))


@pytest.fixture
def sides() -> Iterator[Callable[..., Side]]:
    made: list[Side] = []

    def make(*args: str) -> Side:
        made.append(_side(*args))
        return made[-1]

    yield make
    for s in made:
        s.client.close()
        s.close()


def _first(case: _Case, *sides: Side) -> list:  # type: ignore[type-arg]
    return [s.client.run(case.model_bytes, case.inputs) for s in sides]


# --- the table, on real runs ---------------------------------------------------------


@pytest.mark.parametrize(
    ("base_fault", "head_fault", "verdict"),
    [
        (None, None, CrossVerdict.pass_),
        (None, "perturb", CrossVerdict.new_regression),
        ("perturb", None, CrossVerdict.fixed),
        ("perturb", "perturb", CrossVerdict.persistent),
        (None, "flaky", CrossVerdict.flaky),
        ("flaky", None, CrossVerdict.flaky),
    ],
)
def test_base_and_head_combine_into_the_table_verdict(
    triage: Triage, sides: Callable[..., Side], base_fault: str | None, head_fault: str | None, verdict: CrossVerdict
) -> None:
    case = _tanh_case()
    base, head = sides("base", base_fault), sides("head", head_fault)
    cross = triage.triage(case, [base, head], _first(case, base, head))
    assert cross.verdict is verdict, cross.note
    bad_runs = [len(s.runs) for s in (cross.base, cross.head) if s is not None]
    # Candidates are re-run k=3 times on every side; a clean pass is never re-run.
    assert bad_runs == ([1, 1] if verdict is CrossVerdict.pass_ else [3, 3])


def test_a_flaky_side_is_never_a_regression_even_when_its_first_run_was_bad(
    triage: Triage, sides: Callable[..., Side]
) -> None:
    case = _tanh_case(0.5)
    base, head = sides("base"), sides("head", "flaky")
    cross = triage.triage(case, [base, head], _first(case, base, head))
    assert cross.head.first.verdict is Verdict.wrong_result
    assert [j.verdict for j in cross.head.runs] == [Verdict.wrong_result, Verdict.pass_, Verdict.wrong_result]
    assert cross.verdict is CrossVerdict.flaky and not cross.verdict.is_reported


def test_a_side_that_fails_every_run_differently_is_failing_not_flaky(
    triage: Triage, sides: Callable[..., Side]
) -> None:
    """Base TVM 0.26 corrupted its heap on negative scatter indices: wrong values on one run,
    a crash or an internal error on the next. 12 such cases were set aside as flaky while
    every run failed. The `corrupt` fault fails each run, by turns wrong and raising."""
    case = _tanh_case(0.5)
    base, head = sides("base", "corrupt"), sides("head")
    cross = triage.triage(case, [base, head], _first(case, base, head))
    assert cross.base is not None
    assert [j.verdict for j in cross.base.runs] == [Verdict.wrong_result, Verdict.crash, Verdict.wrong_result]
    assert cross.verdict is CrossVerdict.fixed and cross.verdict.is_reported, cross.note
    assert cross.base.first.verdict is Verdict.wrong_result, "the most frequent failure speaks for the side"
    assert "base failed every run, not alike: wrong_result" in cross.note and "crash (exception) x1" in cross.note
    # A side that passes some runs is still flaky, whatever the other side does.
    flaky = sides("flaky", "flaky")
    assert triage.triage(case, [base, flaky], _first(case, base, flaky)).verdict is CrossVerdict.flaky


def test_the_most_frequent_failure_speaks_for_a_mixed_side_over_the_fresh_worker() -> None:
    """TVM 0.25 corrupts its heap on GatherND's negative indices: wrong values in three runs,
    non-finite values in the fourth, the fresh worker's. The fresh run spoke for the side,
    and the reducer, chasing non-finite values, never reproduced the finding. A side that
    fails every run in one way still speaks by its fresh run; memory faults under two
    signals are one kind."""

    def wrong(symptom: str) -> Judgement:
        return Judgement(verdict=Verdict.wrong_result, symptom=symptom, signature=f"{symptom} in GatherND")

    runs = [wrong("values"), wrong("values"), wrong("values"), wrong("nonfinite")]
    side = SideRuns(side="base", runs=runs, fresh=runs[-1])
    assert side.mixed and side.first.symptom == "values"
    same = SideRuns(side="base", runs=[wrong("values")] * 3 + [wrong("values").model_copy(update={"message": "f"})])
    same.fresh = same.runs[-1]
    assert not same.mixed and side.first is not None and same.first.message == "f"
    segv = Judgement(verdict=Verdict.crash, symptom="signal SIGSEGV", signature="signal SIGSEGV")
    smash = Judgement(
        verdict=Verdict.crash,
        symptom="signal SIGABRT",
        signature="signal SIGABRT",
        message="worker killed by SIGABRT: *** stack smashing detected ***: terminated",
    )
    dying = SideRuns(side="base", runs=[wrong("values"), segv, smash], fresh=smash)
    assert dying.first.verdict is Verdict.crash, "two memory faults outnumber one wrong value"


def _poisoner_and_every(victim: bytes) -> tuple[_Case, int]:
    """A case the `poison` fault triggers on and a period it spares `victim` at."""
    model = _model([helper.make_node("Relu", ["x"], ["y"])], {"x": TensorProto.FLOAT}, {"y": TensorProto.FLOAT}, [8])
    poisoner = _Case(model, {"x": np.linspace(-2, 2, 8, dtype=np.float32)})
    crc_p, crc_v = zlib.crc32(poisoner.model_bytes), zlib.crc32(victim)
    every = next(n for n in range(2, 1000) if crc_p % n == 0 and crc_v % n != 0)
    return poisoner, every


def test_a_failure_only_a_used_worker_shows_is_run_in_a_fresh_one_and_not_reported(triage: Triage) -> None:
    """A TVM 0.26 case left its worker failing "Check not null: ptr" on every case after it;
    2 of 22 findings were such victims, and each repro passed in a fresh process. The
    `poison` fault is that: the case it triggers on runs right and breaks the process."""
    victim = _tanh_case(0.5)
    poisoner, every = _poisoner_and_every(victim.model_bytes)
    fault: FaultSpec = {"kind": "poison", "every": every}
    base = Side("base", WorkerClient(ORT, sys.executable, 30))
    head = Side("head", WorkerClient(ORT, sys.executable, 30, fault=fault))
    try:
        assert head.client.run(poisoner.model_bytes, poisoner.inputs).status.value == "ok"
        first = _first(victim, base, head)
        assert first[1].status.value == "error" and "Check not null" in first[1].message
        assert first[1].earlier_requests == 1
        cross = triage.triage(victim, [base, head], first)
        assert cross.verdict is CrossVerdict.pass_, cross.note
        assert cross.head.fresh is not None and cross.head.fresh.verdict is Verdict.pass_
        assert "crash (exception) x3" in cross.head.stale
        assert triage.tiebreaks["only a used worker fails it: a fresh one runs it right"] == 1
        # The restart freed the cases after it.
        assert head.client.run(victim.model_bytes, victim.inputs).status.value == "ok"
    finally:
        for s in (base, head):
            s.client.close()


def test_a_wrong_result_a_fresh_worker_shows_too_is_still_reported(triage: Triage, sides: Callable[..., Side]) -> None:
    """The real bug of the same family: a perturbed Tanh after other cases in one process."""
    case = _tanh_case(0.5)
    base, head = sides("base"), sides("head", "perturb")
    other, _ = _poisoner_and_every(case.model_bytes)
    head.client.run(other.model_bytes, other.inputs)
    cross = triage.triage(case, [base, head], _first(case, base, head))
    assert cross.verdict is CrossVerdict.new_regression, cross.note
    assert cross.head.fresh is not None and cross.head.fresh.verdict is Verdict.wrong_result
    assert [j.verdict for j in cross.head.runs] == [Verdict.wrong_result] * 4
    assert triage.tiebreaks["a fresh worker fails it too"] == 1
    # The same failure seen again in a used worker is believed without another restart.
    restarts = head.client.restarts
    again_case = _tanh_case(0.25)
    cross = triage.triage(again_case, [base, head], _first(again_case, base, head))
    assert cross.verdict is CrossVerdict.new_regression and cross.head.fresh is None
    assert head.client.restarts == restarts
    # A failure first seen in a fresh process needs no other.
    fresh_case = _tanh_case(1.5)
    again = sides("head2", "perturb")
    assert triage.triage(fresh_case, [again], _first(fresh_case, again)).head.fresh is None


def test_localization_reruns_at_the_lowest_level_of_the_same_build(triage: Triage, sides: Callable[..., Side]) -> None:
    case = _tanh_case()
    head = sides("head", "perturb", "onnxruntime:extended")
    cross = triage.triage(case, [head], _first(case, head))

    assert cross.verdict is CrossVerdict.persistent
    local = cross.head.localization
    assert local is not None and local.level == "disable"
    assert local.verdict is Verdict.wrong_result and local.same_signature and not local.depends_on_optimization
    # At the lowest level already: nothing to localize against.
    low = sides("low", "perturb", "onnxruntime:disable")
    assert triage.triage(case, [low], _first(case, low)).head.localization is None


def test_a_filtered_side_counts_as_ok_and_a_wholly_filtered_case_names_its_rule(
    triage: Triage, sides: Callable[..., Side]
) -> None:
    """Sqrt with an operand a hair above zero, and the perturbed element is that one: moving
    the operand by its margin moves it too, so the difference is instability."""
    x = np.array([1e-7, 2.0, 2.0, 2.0], np.float32)
    model = _model([helper.make_node("Sqrt", ["x"], ["y"])], {"x": TensorProto.FLOAT}, {"y": TensorProto.FLOAT}, [4])
    case = _Case(model, {"x": x})
    base, head = sides("base"), sides("head", "perturb")
    cross = triage.triage(case, [base, head], _first(case, base, head))
    assert cross.verdict is CrossVerdict.filtered and cross.key == "filtered:unstable-margin"
    assert "explains all 1 mismatching element" in cross.head.rule_detail
    assert len(cross.head.runs) == 1  # a filtered case is not worth re-running


def test_an_unstable_element_does_not_hide_a_wrong_one_elsewhere(triage: Triage, sides: Callable[..., Side]) -> None:
    """The same Sqrt near zero, but the perturbed element is a stable one: the margin
    explains nothing there, so the head's real wrong output is a regression."""
    x = np.array([2.0, 1e-7, 2.0, 2.0], np.float32)
    model = _model([helper.make_node("Sqrt", ["x"], ["y"])], {"x": TensorProto.FLOAT}, {"y": TensorProto.FLOAT}, [4])
    case = _Case(model, {"x": x})
    base, head = sides("base"), sides("head", "perturb")
    cross = triage.triage(case, [base, head], _first(case, base, head))
    assert cross.verdict is CrossVerdict.new_regression, cross.head.rule_detail


def test_the_table_itself_for_unsupported_and_changed_signatures() -> None:
    def runs(side: str, verdict: Verdict, signature: str = "") -> SideRuns:
        return SideRuns(side=side, runs=[Judgement(verdict=verdict, signature=signature)] * 3)

    unsupported = runs("base", Verdict.unsupported)
    new = combine(runs("head", Verdict.crash, "a"), unsupported)
    assert new.verdict is CrossVerdict.new_in_head and new.verdict.is_reported and new.verdict.fails_a_change
    assert "base declines" in new.note
    dropped = combine(runs("head", Verdict.unsupported), runs("base", Verdict.pass_))
    assert dropped.verdict is CrossVerdict.dropped_support and not dropped.verdict.is_reported
    both = combine(runs("head", Verdict.unsupported), runs("base", Verdict.unsupported))
    assert both.verdict is CrossVerdict.unsupported
    wrong_base = combine(runs("head", Verdict.unsupported), runs("base", Verdict.wrong_result, "w"))
    assert wrong_base.verdict is CrossVerdict.unsupported  # nothing right was taken away
    gained = combine(runs("head", Verdict.pass_), unsupported)
    assert gained.verdict is CrossVerdict.gained_support and not gained.verdict.fails_a_change
    changed = combine(runs("head", Verdict.crash, "b"), runs("base", Verdict.crash, "a"))
    assert changed.verdict is CrossVerdict.persistent and "signature changed" in changed.note
    assert combine(runs("head", Verdict.timeout, "hang")).verdict is CrossVerdict.persistent


# --- tolerances ------------------------------------------------------------------------


def _cast_model() -> onnx.ModelProto:
    """float16 -> Sqrt -> Cast(float64): the float64 output carries float16 rounding."""
    nodes = [helper.make_node("Sqrt", ["x"], ["s"]), helper.make_node("Cast", ["s"], ["y"], to=TensorProto.DOUBLE)]
    return _model(nodes, {"x": TensorProto.FLOAT16}, {"y": TensorProto.DOUBLE}, [4])


def test_an_output_is_judged_at_the_precision_of_its_least_precise_ancestor() -> None:
    bounds = ToleranceConfig().for_outputs(_cast_model(), "onnxruntime")
    assert bounds == {"y": DEFAULTS["float16"]}
    plain = _model([helper.make_node("Sqrt", ["x"], ["y"])], {"x": TensorProto.DOUBLE}, {"y": TensorProto.DOUBLE}, [4])
    assert ToleranceConfig().for_outputs(plain, None) == {"y": DEFAULTS["float64"]}


def test_backend_and_op_overrides_resolve_in_order() -> None:
    cfg = ToleranceConfig.model_validate(
        {
            "dtypes": {"float16": {"atol": 0.02, "rtol": 0.02}},
            "backends": {"tvm": {"float16": {"atol": 0.05, "rtol": 0.01}}},
            "ops": {"Sqrt": {"float16": {"atol": 0.001, "rtol": 0.1}}},
        }
    )
    model = _cast_model()
    # Global dtype override, then the op override loosens only what it names.
    assert cfg.for_outputs(model, "onnxruntime")["y"] == Tolerance(atol=0.02, rtol=0.1)
    assert cfg.for_outputs(model, "tvm")["y"] == Tolerance(atol=0.05, rtol=0.1)
    exp = _model([helper.make_node("Exp", ["x"], ["y"])], {"x": TensorProto.FLOAT16}, {"y": TensorProto.FLOAT16}, [4])
    assert cfg.for_outputs(exp, "onnxruntime")["y"] == Tolerance(atol=0.02, rtol=0.02)
    # Relu selects exact values: it rounds nothing, so no dtype bound applies to it.
    relu = _model([helper.make_node("Relu", ["x"], ["y"])], {"x": TensorProto.FLOAT16}, {"y": TensorProto.FLOAT16}, [4])
    assert cfg.for_outputs(relu, "onnxruntime")["y"] == EXACT


def test_the_flat_tolerance_form_of_older_configs_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "fuzzbot.yml"
    path.write_text("tolerances:\n  float32: {atol: 0.1, rtol: 0.2}\noracles:\n  reruns: 5\n")
    cfg = load_config(path, {})
    assert cfg.tolerances.dtypes["float32"] == Tolerance(atol=0.1, rtol=0.2)
    assert cfg.oracles.reruns == 5


def test_a_broken_oracles_section_is_one_line(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    path = tmp_path / "fuzzbot.yml"
    path.write_text("oracles:\n  reruns: 0\n")
    r = cli("fuzz", "--config", str(path))
    assert r.code == 1 and len(r.err_lines) == 1 and "oracles.reruns" in r.err


# --- the campaign ------------------------------------------------------------------------


def test_a_flaky_backend_yields_no_findings_only_flaky_bundles(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    out = tmp_path / "out"
    r = cli("fuzz", "--out", str(out), "--max-tests", "4", "--budget", "60s", "--no-probe", "--test-fault", "flaky")
    assert r.code == 0, r.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"].get("flaky", 0) >= 1 and summary["findings"] == []
    flaky = sorted((out / "flaky").iterdir())
    assert len(flaky) == summary["counts"]["flaky"]
    finding = Finding.model_validate_json((flaky[0] / "finding.json").read_text())
    assert finding.across == "flaky" and len(set(finding.runs)) == 2


def test_findings_record_their_runs_and_localization(tmp_path: Path) -> None:
    from bot.campaign.run import Campaign

    cfg = FuzzConfig(out=tmp_path, probe=False, max_tests=3, budget=60, test_fault={"kind": "perturb"})
    summary = Campaign(cfg).run()
    assert summary.findings and all(f.depends_on_optimization is False for f in summary.findings)
    finding = Finding.model_validate_json((tmp_path / summary.findings[0].path / "finding.json").read_text())
    assert finding.runs == [finding.verdict] * 3 and finding.localization is not None


# --- performance -----------------------------------------------------------------------


def test_perf_judgement_needs_both_the_ratio_and_the_absolute_floor() -> None:
    cfg = PerfConfig()
    assert judge_perf(Metric.run, [0.010] * 5, [0.030] * 5, cfg).regression
    # 3x slower but only 2 microseconds: noise, not a regression.
    assert not judge_perf(Metric.run, [1e-6] * 5, [3e-6] * 5, cfg).regression
    # 20 ms slower but only 1.1x: within the machine's variance for a slow compile.
    assert not judge_perf(Metric.run, [0.200] * 5, [0.220] * 5, cfg).regression
    # Medians, not means: one outlier on head does not make a regression.
    assert not judge_perf(Metric.run, [0.01] * 5, [0.01, 0.01, 0.01, 0.01, 5.0], cfg).regression
    assert judge_perf(Metric.run, [0.030] * 5, [0.010] * 5, cfg).improvement


def test_a_really_slower_head_is_a_perf_regression_and_the_reverse_an_improvement(
    sides: Callable[..., Side],
) -> None:
    case = _tanh_case()
    fast, slow = sides("base").client, sides("head", "slow").client
    cfg = PerfConfig(repeats=3)
    run = {j.metric: j for j in compare_perf(fast, slow, case.model_bytes, case.inputs, cfg)}
    assert run[Metric.run].regression and run[Metric.run].head_median_s >= 0.05
    assert not run[Metric.compile].regression
    back = {j.metric: j for j in compare_perf(slow, fast, case.model_bytes, case.inputs, cfg)}
    assert back[Metric.run].improvement and not back[Metric.run].regression


# --- the second reference -----------------------------------------------------------------


def _lrn_case() -> _Case:
    """LRN, where onnx.reference normalises across the batch instead of the channels."""
    node = helper.make_node("LRN", ["x"], ["y"], size=3, alpha=1.0)
    model = _model([node], {"x": TensorProto.FLOAT}, {"y": TensorProto.FLOAT}, [2, 3, 2, 2])
    x = np.random.default_rng(0).uniform(-2, 2, (2, 3, 2, 2)).astype(np.float32)
    return _Case(model, {"x": x})


def test_a_defect_of_onnx_reference_does_not_hide_a_wrong_result(sides: Callable[..., Side]) -> None:
    """onnx.reference's LRN disagrees with torch; the float64 re-run, which shares neither
    reference's rounding nor the backend's code, sides with torch, so the perturbed head
    is a finding, and the finding records what decided."""
    case = _lrn_case()
    triage = Triage(Judging(OracleConfig(), ToleranceConfig(), load_rules()))
    head = sides("head", "perturb")
    cross = triage.triage(case, [head], _first(case, head))
    assert cross.verdict is CrossVerdict.persistent, cross.head.rule_detail
    assert cross.head.rule_detail.startswith("float64 sides with torch: onnx.reference:")
    assert triage.tiebreaks == {"float64 sides with torch": 1}


def test_a_torch_reference_the_float64_rerun_contradicts_is_set_aside(sides: Callable[..., Side]) -> None:
    """A torch reference off by 10% on Tanh (as a bug in fuzzbot's own op would be):
    onnx.reference disagrees, the float64 re-run sides with it, and the case is set aside as
    a reference disagreement, whatever the backend answered."""
    case = _tanh_case()
    assert case.reference is not None
    case.reference = {"y": case.reference["y"] * np.float32(1.1)}
    triage = Triage(Judging(OracleConfig(), ToleranceConfig(), load_rules()))
    head = sides("head")
    cross = triage.triage(case, [head], _first(case, head))
    assert cross.key == "filtered:reference-disagreement"
    assert cross.head.rule_detail.startswith("float64 sides with the backend")
    assert triage.tiebreaks == {"float64 sides with the backend": 1}


def test_a_case_whose_rounding_alone_exceeds_its_bounds_is_set_aside(sides: Callable[..., Side]) -> None:
    """tan(tan(tan(-0.998261))) in float32, from a real campaign against onnxruntime: each
    Tan amplifies the last one's rounding, and torch (-9.1671), onnxruntime (-9.1941) and
    the float64 truth (-9.1767) all differ by more than float32's bounds. The backend is
    not far worse than the reference itself, so nothing here is a bug."""
    nodes = [helper.make_node("Tan", [a], [b]) for a, b in (("x", "s"), ("s", "t"), ("t", "y"))]
    model = _model(nodes, {"x": TensorProto.FLOAT}, {"y": TensorProto.FLOAT}, [1])
    case = _Case(model, {"x": np.array([-0.998261], np.float32)})
    triage = Triage(Judging(OracleConfig(), ToleranceConfig(), load_rules()))
    head = sides("head")
    cross = triage.triage(case, [head], _first(case, head))
    assert cross.key == "filtered:beyond-precision", cross.head.rule_detail
    assert triage.tiebreaks == {"float64 shows the case beyond its precision": 1}
    # A backend far worse than rounding explains is still a bug on the same case.
    broken = sides("broken", "perturb")
    assert triage.triage(case, [broken], _first(case, broken)).verdict is CrossVerdict.persistent


def test_a_wrong_result_no_second_reference_reads_is_not_set_aside(triage: Triage, sides: Callable[..., Side]) -> None:
    """onnx.reference cannot run DequantizeLinear at opset 17, and the float64 re-run once
    could not either: a real weight-quantization regression in onnxruntime (Conv and Gemm
    after a DequantizeLinear) sat in filtered/reference-disagreement, because a missing reading
    counted against it. Now the float64 re-run computes Q/DQ at float32 and sides with torch."""
    x = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    inits = [
        helper.make_tensor("s", TensorProto.FLOAT, [4], [0.1, 0.2, 0.3, 0.4]),
        helper.make_tensor("z", TensorProto.INT8, [4], [1, 0, -1, 2]),
        helper.make_tensor("w", TensorProto.FLOAT, [4, 2], [0.5] * 8),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s", "z"], ["d"], axis=1),
        helper.make_node("MatMul", ["d", "w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])],
        inits,
    )
    case = _Case(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), {"x": x})
    base, head = sides("base"), sides("head", "perturb")
    cross = triage.triage(case, [base, head], _first(case, base, head))
    assert cross.verdict is CrossVerdict.new_regression, cross.head.rule_detail
    assert cross.head.rule_detail.startswith("float64 sides with torch"), cross.head.rule_detail
    assert "onnx.reference failed" in cross.head.rule_detail


def test_the_kernel_that_computed_a_wrong_output_is_read_from_the_optimized_graph(sides: Callable[..., Side]) -> None:
    """At `all`, onnxruntime fuses Conv and Relu into an NCHWc Conv and appends a
    ReorderOutput; the kernel of the output is the fused Conv, looked up through the
    reorder. At `disable` the model's own node ran."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 1, 3, 3], [1.0] * 18)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
        [w],
    )
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 1, 4, 4)
    case = _Case(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), {"x": x})
    triage = Triage(Judging(OracleConfig(reruns=1, localize=False), ToleranceConfig(), load_rules()))
    for spec, kernel in (("onnxruntime:all", "com.microsoft.nchwc::Conv"), ("onnxruntime:disable", "ai.onnx::Relu")):
        head = sides("head", "perturb", spec)
        cross = triage.triage(case, [head], _first(case, head))
        assert cross.head.first.verdict is Verdict.wrong_result and cross.head.first.kernel == kernel, spec


def test_an_ill_conditioned_chain_is_judged_by_how_far_rounding_moves_it(
    triage: Triage, sides: Callable[..., Side]
) -> None:
    """tan(tan(tan(0.9964386))) in float32: onnxruntime (1.22 to 1.31) lands a few
    thousandths from the reference, which is how far moving each operand by one float32
    rounding moves the float64 result. Reported three times in one campaign as a wrong
    result; a backend well outside that bound on the same case still is one."""
    nodes = [helper.make_node("Tan", [a], [b]) for a, b in (("x", "t0"), ("t0", "t1"), ("t1", "y"))]
    model = _model(nodes, {"x": TensorProto.FLOAT}, {"y": TensorProto.FLOAT}, [1])
    case = _Case(model, {"x": np.array([0.9964386], np.float32)})
    head = sides("head")
    cross = triage.triage(case, [head], _first(case, head))
    assert cross.verdict is CrossVerdict.filtered and cross.rule == "beyond-precision", cross.head.rule_detail
    assert cross.head.rule_detail.startswith("rounding alone moves the case that far")
    wrong = sides("wrong", "perturb")
    assert triage.triage(case, [wrong], _first(case, wrong)).verdict is CrossVerdict.persistent


def test_a_float_mod_next_to_its_jump_is_a_rounding_discontinuity(triage: Triage, sides: Callable[..., Side]) -> None:
    """fmod(1.505863, elu(-0.02239394)): the quotient is 5e-5 from 68, and how a backend
    rounds Elu's exp(x) - 1 decides the side of the jump (onnxruntime 1.23: 0, torch: 0.0221).
    Reported as a wrong result in a 1.22-to-1.23 campaign."""
    nodes = [helper.make_node("Elu", ["a"], ["e"]), helper.make_node("Mod", ["b", "e"], ["y"], fmod=1)]
    model = _model(nodes, {"a": TensorProto.FLOAT, "b": TensorProto.FLOAT}, {"y": TensorProto.FLOAT}, [1])
    case = _Case(model, {"a": np.array([-0.02239394], np.float32), "b": np.array([1.505863], np.float32)})
    head = sides("head", None, "onnxruntime:all", str(rc.ort_python("1.23.2")))
    cross = triage.triage(case, [head], _first(case, head))
    assert cross.head.first.verdict is Verdict.wrong_result, "1.23.2 lands on the other side of the jump"
    assert cross.verdict is CrossVerdict.filtered and cross.rule == "rounding-discontinuity", cross.head.rule_detail
    # A float Mod far from its jump, computed wrong, is still a bug.
    far = _Case(model, {"a": np.array([-0.5], np.float32), "b": np.array([1.3], np.float32)})
    wrong = sides("wrong", "perturb")
    assert triage.triage(far, [wrong], _first(far, wrong)).verdict is CrossVerdict.persistent


def test_rounding_that_leaves_an_ops_domain_makes_the_case_too_sensitive_to_judge() -> None:
    """The log of the sum of a MeanVarianceNormalization's output: the sum cancels to about
    0, and one rounding of the operands turns the log NaN. onnxruntime 1.22 and 1.23 gave
    NaN where torch gave a number, reported as a persistent wrong result; the spread is
    infinite there, and a case without the cancellation keeps a finite one."""
    nodes = [
        helper.make_node("MeanVarianceNormalization", ["x"], ["m"], axes=[0]),
        helper.make_node("ReduceLogSum", ["m"], ["y"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = np.random.default_rng(2).uniform(-2, -0.1, 64).astype(np.float32)
    spread = rounding_spread(model, {"x": x})
    assert spread is not None and np.isinf(spread["y"])
    plain = _model([helper.make_node("Tan", ["x"], ["y"])], {"x": TensorProto.FLOAT}, {"y": TensorProto.FLOAT}, [3])
    calm = rounding_spread(plain, {"x": np.array([0.1, 0.2, 0.3], np.float32)})
    assert calm is not None and np.all(np.isfinite(calm["y"])) and np.all(calm["y"] < 1e-6)


def _chain(*ops: str) -> _Case:
    """x -> ops in turn -> y, float32 [8]."""
    names = ["x", *(f"t{i}" for i in range(len(ops) - 1)), "y"]
    nodes = [helper.make_node(op, [a], [b]) for op, a, b in zip(ops, names, names[1:], strict=False)]
    model = _model(nodes, {"x": TensorProto.FLOAT}, {"y": TensorProto.FLOAT}, [8])
    return _Case(model, {"x": np.linspace(-2, 2, 8, dtype=np.float32)})


def test_a_mutant_that_shows_its_parents_wrong_result_is_triaged_as_a_sighting_of_it(
    triage: Triage, sides: Callable[..., Side]
) -> None:
    """A mutant of a finding's model whose first wrong output the same kernel computed carries
    the finding's name through every run, so it is counted there, not kept as a new finding
    under its own op list; one whose wrong output another kernel computed keeps its own."""
    head = sides("head", "perturb")
    parent = _chain("Tanh")
    found = triage.triage(parent, [head], _first(parent, head)).head
    assert found is not None and found.first.kernel.endswith("Tanh")
    lineage = (found.first,)

    mutant = _chain("Abs", "Tanh")
    cross = triage.triage(mutant, [head], _first(mutant, head), lineage=lineage)
    assert cross.verdict is CrossVerdict.persistent and cross.head is not None, cross.note
    assert {j.fingerprint for j in cross.head.runs} == {found.first.fingerprint}
    assert cross.head.first.signature == found.first.signature
    unnamed = triage.triage(mutant, [head], _first(mutant, head))
    assert unnamed.head is not None and unnamed.head.first.fingerprint != found.first.fingerprint

    moved = _chain("Tanh", "Abs")
    other = triage.triage(moved, [head], _first(moved, head), lineage=lineage)
    assert other.head is not None and other.head.first.kernel.endswith("Abs")
    assert other.head.first.fingerprint != found.first.fingerprint
