"""Campaign mechanics on the real onnxruntime worker: lanes, shards, two builds."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from backends.spec import parse_backend
from bot.campaign.run import Campaign
from bot.campaign.side_setup import SideSetup
from bot.campaign.sides import open_campaign
from bot.cases.user_cases import load_user_case
from bot.config import FuzzConfig
from bot.findings.bundle import Finding
from bot.findings.summary import Summary
from oracles.bug_identity import crash_site_fingerprint, kernel_fingerprint
from oracles.judging_budget import GRANT
from tests import release_cases as rc
from tests.conftest import CliResult

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]


def _summary(out: Path) -> dict:  # type: ignore[type-arg]
    return dict(json.loads((out / "summary.json").read_text()))


def test_shards_take_disjoint_seeds(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    seeds = []
    for i in (0, 1):
        out = tmp_path / f"shard{i}"
        r = cli("fuzz", "--out", str(out), "--max-tests", "3", "--no-probe", "--shard", f"{i}/2", "--seed", "10")
        # 2: a finding. Seed 13 meets a real onnxruntime bug (PadFusion makes pool pads that
        # its own kernel refuses), which is not what this test is about.
        assert r.code in (0, 2), r.err
        s = _summary(out)
        assert s["shard"] == f"{i}/2" and s["tests"] == 3
        seeds.append((s["seed_first"], s["seed_last"]))
    # Shard 0 runs 10, 12, 14, ...; shard 1 runs 11, 13, ...: the last seeds have both parities.
    assert {seeds[0][1] % 2, seeds[1][1] % 2} == {0, 1}


def test_a_bad_shard_is_one_line(cli: Callable[..., CliResult]) -> None:
    r = cli("fuzz", "--shard", "2/2", "--max-tests", "1")
    assert r.code == 1 and len(r.err_lines) == 1 and "--shard" in r.err


def test_two_lanes_run_every_case_once_and_find_the_same_bugs(tmp_path: Path) -> None:
    cfg = FuzzConfig(out=tmp_path, probe=False, max_tests=6, budget=120, jobs=2, test_fault={"kind": "perturb"})
    campaign = Campaign(cfg)
    summary = campaign.run()
    assert summary.tests == 6 and len(campaign.lanes) == 2
    assert sum(summary.counts.values()) == 6
    # A perturbing worker makes every case it runs wrong; none passes.
    assert all(k in ("wrong_result", "crash", "unsupported") or k.startswith("filtered:") for k in summary.counts)
    seeds = [f.seed for f in summary.findings]
    assert summary.counts.get("wrong_result", 0) >= 1 and len(seeds) == len(set(seeds))


def test_two_builds_of_the_same_release_only_ever_pass(tmp_path: Path) -> None:
    """Base and head the same onnxruntime: no case can be a regression or a fix."""
    spec = parse_backend("onnxruntime:all")
    sides = [SideSetup("base", spec, sys.executable), SideSetup("head", spec, sys.executable)]
    summary = Campaign(FuzzConfig(out=tmp_path, probe=False, max_tests=5), sides).run()
    assert summary.tests == 5 and summary.base is not None and summary.backend is not None
    assert not {"new_regression", "fixed"} & set(summary.counts), summary.counts


def test_a_perturbed_head_against_a_clean_base_is_a_new_regression(tmp_path: Path) -> None:
    spec = parse_backend("onnxruntime:all")
    sides = [SideSetup("base", spec, sys.executable), SideSetup("head", spec, sys.executable)]
    cfg = FuzzConfig(out=tmp_path, probe=False, max_tests=4, test_fault={"kind": "perturb"})
    summary = Campaign(cfg, sides).run()
    assert summary.new_regressions >= 1 and summary.findings
    ref = summary.findings[0]
    assert ref.across == "new_regression" and Path(ref.path).name.startswith("new_regression-")
    assert not Path(ref.path).is_absolute()  # relative to the output folder, which may move
    finding = json.loads((tmp_path / ref.path / "finding.json").read_text())
    assert finding["side"] == "head" and finding["base_backend"]["name"] == "onnxruntime"


def test_keep_filtered_keeps_a_bundle_of_every_case_set_aside(tmp_path: Path) -> None:
    """A hand audit of a campaign needs every reason a case was not reported: 22 unsupported
    cases and an undefined-input crash once kept no bundle. onnxruntime 1.31 declines a
    sixth of seeds 0..39 (an op at a dtype it has no kernel for)."""
    cfg = FuzzConfig(out=tmp_path, probe=False, max_tests=40, budget=120, oracles={"keep_filtered": True})
    summary = Campaign(cfg).run()
    aside = {k: n for k, n in summary.counts.items() if k in ("unsupported", "crash_on_undefined_input")}
    aside |= {k.split(":", 1)[1]: n for k, n in summary.counts.items() if k.startswith("filtered:")}
    assert aside.get("unsupported", 0) >= 1, summary.counts
    for reason, count in aside.items():
        bundles = sorted((tmp_path / "filtered" / reason).iterdir())
        assert len(bundles) == count, reason
        assert all((b / "model.onnx").is_file() and (b / "finding.json").is_file() for b in bundles)


def _one_node(op: str, dtype: int, shape: list[int]) -> onnx.ModelProto:
    node = onnx.helper.make_node(op, ["x"], ["y"])
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [onnx.helper.make_tensor_value_info("x", dtype, shape)],
        [onnx.helper.make_tensor_value_info("y", dtype, shape)],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8)


def test_a_reduced_wrong_result_is_named_by_its_kernel_symptom_and_label(tmp_path: Path) -> None:
    """One integer-GEMM defect reached through MatMulInteger at three input forms was three
    reports, named by the trigger. A reduced wrong result is named by the kernel that
    computed the wrong output, its kind of mismatch and its label; its trigger stays the
    name people read, and every trigger folded into it is listed."""
    cases = []
    for i, (op, dtype, shape) in enumerate([("Neg", TensorProto.FLOAT, [4]), ("Abs", TensorProto.INT32, [2, 3])]):
        model = _one_node(op, dtype, shape)
        onnx.save(model, str(tmp_path / f"m{i}.onnx"))
        x = np.arange(-2, int(np.prod(shape)) - 2).reshape(shape)
        np.savez(tmp_path / f"m{i}.npz", x=x.astype(onnx.helper.tensor_dtype_to_np_dtype(dtype)))
        cases.append(load_user_case(str(tmp_path / f"m{i}.onnx"), tmp_path / f"m{i}.onnx"))
    cfg = FuzzConfig(
        out=tmp_path / "out",
        probe=False,
        backend="onnxruntime:disable",
        test_fault={"kind": "perturb"},
        reduce={"generalize": False, "budget": 30},
    )
    campaign = open_campaign(cfg)
    campaign.run_cases(list(cases), reduce=True)
    named = {}
    for ref in campaign.summary.findings:
        assert ref.reduced_path is not None and ref.triggers == [ref.signature]
        finding = Finding.model_validate_json((tmp_path / "out" / ref.reduced_path / "finding.json").read_text())
        named[finding.kernel] = ref.fingerprint
        assert ref.fingerprint == kernel_fingerprint(finding, ref.across or "")
    assert set(named) == {"ai.onnx::Neg", "ai.onnx::Abs"}
    neg = Finding.model_validate_json(
        (tmp_path / "out" / campaign.summary.findings[0].reduced_path / "finding.json").read_text()  # type: ignore[operator]
    )
    other_trigger = neg.model_copy(update={"signature": "values in Neg[float16](in[float16])"})
    assert kernel_fingerprint(other_trigger, "wrong_result") == kernel_fingerprint(neg, "wrong_result")
    assert kernel_fingerprint(neg, "fixed") != kernel_fingerprint(neg, "persistent"), "a label splits"
    assert (
        kernel_fingerprint(neg.model_copy(update={"kernel": "ai.onnx::Abs"}), "wrong_result") != named["ai.onnx::Neg"]
    )


def _reduced_one_build(
    tmp_path: Path, makers: list[Callable[[], rc.Case]], version: str, max_findings: int = 100
) -> Campaign:
    """A one-build campaign on the real onnxruntime `version` over `makers`' cases, reduced
    (the first `max_findings` of them)."""
    cases = [load_user_case(str(p), p) for p in rc.saved(tmp_path, [make() for make in makers])]
    cfg = FuzzConfig(
        out=tmp_path / "out",
        probe=False,
        backend="onnxruntime:all",
        python=str(rc.ort_python(version)),
        reduce={"generalize": False, "budget": 60, "max_findings": max_findings, "during": False},
    )
    campaign = open_campaign(cfg)
    campaign.run_cases(list(cases), reduce=True)
    return campaign


def test_a_finding_left_unreduced_folds_into_the_kernel_it_blames(tmp_path: Path) -> None:
    """One reduction allowed: the wrap Pad of 1.28.0 alone is reduced and named by its kernel
    (`values at ai.onnx::Pad`). The same Pad read by an Add, left unreduced, blames the
    same kernel for its first wrong tensor and folds into it; the Gather of a runtime Range
    (GatherToSliceFusion, another bug) blames another and stays a report. Real 1.28.0."""
    makers = [rc.pad_wrap_longer_than_the_axis, rc.pad_wrap_read_by_an_add, rc.gather_of_a_wrapping_range]
    campaign = _reduced_one_build(tmp_path, makers, rc.PAD_WRAP, max_findings=1)
    refs = campaign.summary.findings
    assert len(refs) == 2, [(r.signature, r.reduced_path) for r in refs]
    pad = next(r for r in refs if r.reduced_path is not None)
    assert "Pad" in pad.signature and campaign.summary.occurrences[pad.fingerprint] == 2
    assert any("Gather" in r.signature and r.reduced_path is None for r in refs)


def test_findings_left_unreduced_with_no_reduced_bug_fold_into_each_other(tmp_path: Path) -> None:
    """No reduction at all: the two wrap Pads of 1.28.0 blame one kernel and are one report,
    the Gather of a runtime Range another. Before, every unreduced finding of a label with no
    reduced bug was a report of its own (a 1.31.1 -> 1.32.0 campaign: fifteen of one MaxPool)."""
    makers = [rc.pad_wrap_longer_than_the_axis, rc.pad_wrap_read_by_an_add, rc.gather_of_a_wrapping_range]
    campaign = _reduced_one_build(tmp_path, makers, rc.PAD_WRAP, max_findings=0)
    refs = campaign.summary.findings
    assert all(r.reduced_path is None for r in refs)
    assert len(refs) == 2, [(r.signature, r.fingerprint) for r in refs]
    pad = next(r for r in refs if "Pad" in r.signature)
    assert campaign.summary.occurrences[pad.fingerprint] == 2
    assert len(list((tmp_path / "out" / "duplicates").iterdir())) == 1


def test_one_failed_check_reached_through_two_ops_is_one_report(tmp_path: Path) -> None:
    """onnxruntime 1.21.1 to 1.23.2 refuse a normalization over one element with one check,
    "Size of X.shape[axis:] must be larger than 1", whether a LayerNormalization or the
    SimplifiedLayerNormalization its fusion made from an RMSNorm pattern runs it: two
    reports of one bug in a 1.22.1 to 1.23.2 campaign. A reduced crash is named by the check
    that failed, and lists both triggers. Run on the real 1.21.1."""
    makers = [rc.layernorm_single_element_axis, rc.rms_norm_single_element_axis]
    campaign = _reduced_one_build(tmp_path, makers, rc.REGRESSION_RAISES[1])
    refs = campaign.summary.findings
    assert len(refs) == 1, [(r.signature, r.fingerprint) for r in refs]
    assert len(refs[0].triggers) == 2 and any("SimplifiedLayerNormalization" in t for t in refs[0].triggers)
    assert campaign.summary.occurrences[refs[0].fingerprint] == 2
    # The check they share joins them before the RMSNorm sighting needs a reduction of its own
    # (bot.reduce.campaign: folding before reducing); its message names the fused node.
    assert refs[0].fingerprint in refs[0].keys, refs[0].keys
    # Another check of the same kernel stays another report.
    finding = Finding.model_validate_json((tmp_path / "out" / refs[0].reduced_path / "finding.json").read_text())  # type: ignore[operator]
    other = finding.model_copy(update={"signature": finding.signature.replace("larger than", "at most")})
    assert crash_site_fingerprint(other, "persistent") != crash_site_fingerprint(finding, "persistent")


def test_one_death_in_the_optimizer_reached_two_ways_is_one_report(tmp_path: Path) -> None:
    """onnxruntime 1.25.1 dies of a stack buffer overrun while optimizing a Shape -> Gather
    of a large initializer, reached after a Cast to bool or beside a Dropout -> Mish branch;
    neither reduces to the other, and the signal varies (SIGABRT here, SIGSEGV in the
    campaign that found them: two reports). A death in the optimizer is named by the pass it
    died in, read from a worker that logs its transformers. Run on the real 1.25.1."""
    campaign = _reduced_one_build(
        tmp_path, [rc.shape_gather_after_cast, rc.shape_gather_beside_a_branch], rc.STACK_SMASH
    )
    refs = campaign.summary.findings
    assert len(refs) == 1, [(r.signature, r.fingerprint) for r in refs]
    assert len(refs[0].triggers) == 2 and any("Mish" in t for t in refs[0].triggers)
    finding = Finding.model_validate_json((tmp_path / "out" / refs[0].reduced_path / "finding.json").read_text())  # type: ignore[operator]
    assert finding.stage == "compile" and finding.kernel.startswith("after ")
    assert finding.signature.startswith("memory fault in ")
    # Another pass, or a death that is not memory corruption, stays another report.
    elsewhere = finding.model_copy(update={"kernel": "after ConstantFolding"})
    assert crash_site_fingerprint(elsewhere, "crash") != crash_site_fingerprint(finding, "crash")
    abort = finding.model_copy(
        update={
            "symptom": "signal SIGABRT",
            "message": "worker killed by SIGABRT: terminate called after throwing an instance of 'std::bad_alloc'",
        }
    )
    assert crash_site_fingerprint(abort, "crash") != crash_site_fingerprint(finding, "crash")


def test_a_crash_the_lowest_level_declines_is_reduced(tmp_path: Path) -> None:
    """A build's lowest level declining a model says nothing about whether a crash needs the
    optimizer. Taken as "passes there", the reduction had to keep the model passing at
    `disable`, which the original itself does not, and a 1.27.0 to 1.28.0 campaign's
    GemmTransposeFusion crash stayed unreduced ("does not reproduce"). Run on the real 1.28.0."""
    campaign = _reduced_one_build(tmp_path, [rc.identity_transpose_gemm_beside_gelu], rc.IDENTITY_TRANSPOSE_GEMM)
    [ref] = campaign.summary.findings
    assert ref.verdict.value == "crash" and ref.reduced_path is not None, ref
    finding = Finding.model_validate_json((tmp_path / "out" / ref.path / "finding.json").read_text())
    assert finding.localization is not None and finding.localization.verdict.value == "unsupported"
    assert not finding.localization.depends_on_optimization
    reduced = onnx.load(str(tmp_path / "out" / ref.reduced_path / "model.onnx"))
    assert [n.op_type for n in reduced.graph.node] == ["Transpose", "Gemm"]


def test_a_crash_caused_by_a_wrong_tensor_upstream_is_that_wrong_result(tmp_path: Path) -> None:
    """onnxruntime 1.28.0's "wrap" Pad writes zeros where a pad longer than the axis should
    repeat it: seen as the Pad's wrong values, and as a Div's "Integer division by zero" on
    the Pad divided by itself, two reports of a 1.27.0 to 1.28.0 campaign. The crash is
    blamed on the first wrong tensor before the node it names, and the two are one report.
    Run on the real 1.28.0."""
    makers = [rc.pad_wrap_longer_than_the_axis, rc.pad_wrap_then_div]
    campaign = _reduced_one_build(tmp_path, makers, rc.PAD_WRAP)
    refs = campaign.summary.findings
    assert len(refs) == 1, [(r.verdict, r.signature, r.fingerprint) for r in refs]
    if campaign.summary.counts.get("crash"):  # the padding read as zeros this time, and the Div raised
        assert len(refs[0].triggers) == 2 and any("Div" in t for t in refs[0].triggers)
        assert campaign.summary.occurrences[refs[0].fingerprint] == 2
    # else the Pad read other memory past its input (right values, 2 runs in 60 here; a clean
    # CI clone met it once): the Div passed or was wrong, and the one report still stands
    finding = Finding.model_validate_json((tmp_path / "out" / refs[0].reduced_path / "finding.json").read_text())  # type: ignore[operator]
    assert finding.blamed == "values at ai.onnx::Pad"
    # Another kernel's wrong values, or the Pad's wrong shape, stay other reports.
    other = finding.model_copy(update={"blamed": "values at ai.onnx::Div"})
    assert kernel_fingerprint(other, "crash") != kernel_fingerprint(finding, "crash")


def _prelu(dtype: int) -> rc.Case:
    np_type = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    nodes = [onnx.helper.make_node("PRelu", ["x", "slope"], ["y"])]
    slope = onnx.numpy_helper.from_array(np.array([2], np_type), "slope")
    x = onnx.helper.make_tensor_value_info("x", dtype, [4])
    y = onnx.helper.make_tensor_value_info("y", dtype, [4])
    graph = onnx.helper.make_graph(nodes, "g", [x], [y], [slope])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": np.array([-2, -1, 0, 3], np_type)}


def test_one_check_named_with_the_dtype_it_refused_is_one_report(tmp_path: Path) -> None:
    """TVM refuses an integer PRelu with "Prelu requires the input tensor to have float
    dtype. However, the given input dtype is T.int32" (or T.int64): one check, two reports
    of a TVM 0.25 to 0.27 campaign, because the crash site was read from the message before
    generalization turned the trigger's dtype into T. Run on the real TVM."""
    cases = []
    for name, dtype in (("i32", TensorProto.INT32), ("i64", TensorProto.INT64)):
        model, inputs = _prelu(dtype)
        onnx.save(model, str(tmp_path / f"{name}.onnx"))
        np.savez(tmp_path / f"{name}.npz", **inputs)  # type: ignore[arg-type]
        cases.append(load_user_case(str(tmp_path / f"{name}.onnx"), tmp_path / f"{name}.onnx"))
    cfg = FuzzConfig(out=tmp_path / "out", probe=False, backend="tvm:default", reduce={"budget": 60})
    campaign = open_campaign(cfg)
    campaign.run_cases(list(cases), reduce=True)
    refs = campaign.summary.findings
    assert len(refs) == 1, [(r.signature, r.fingerprint) for r in refs]
    assert "Prelu requires the input tensor to have float dtype" in refs[0].signature
    assert campaign.summary.occurrences[refs[0].fingerprint] == 2


def _perturbed(out: Path, share: float) -> Summary:
    cfg = FuzzConfig(
        out=out,
        probe=False,
        max_tests=30,
        budget=600,
        test_fault={"kind": "perturb"},
        oracles={"judging_share": share},
        reduce={"enabled": False},
        guide={"mutation": False},  # a finding's mutants would be other cases: the same seeds, the same cases
    )
    return Campaign(cfg).run()


def test_judging_past_its_share_of_runs_waits_for_the_end_and_loses_no_finding(tmp_path: Path) -> None:
    """A perturbing worker makes every case a suspect. With no share of the runs for judging
    (its first grant aside), suspects wait for the end of the fuzzing, each is then judged in
    full and counted under its verdict, and the campaign keeps the findings it keeps with
    judging unbounded, each with the time it was first seen."""
    bounded = _perturbed(tmp_path / "bounded", 0.0)
    free = _perturbed(tmp_path / "free", 1.0)
    j = bounded.judging
    assert j is not None and j.deferred > 0 and j.after_runs > 0
    assert j.judging_runs <= GRANT + 2 * 3, "while fuzzing, the grant and no more (one triage may overrun it)"
    assert free.judging is not None and free.judging.deferred == 0
    assert sum(bounded.counts.values()) == bounded.tests == 30 and bounded.counts == free.counts
    assert {f.fingerprint for f in bounded.findings} == {f.fingerprint for f in free.findings}
    assert all(f.found_s is not None and f.found_s <= bounded.wall_s for f in bounded.findings)


def test_judging_after_the_fuzzing_gives_failures_both_builds_share_its_share_and_no_more(tmp_path: Path) -> None:
    """Both builds perturb every case: each suspect is a failure they share, which says
    nothing of the change. After the fuzzing those get the judging share again of the
    first runs, the rest stay counted on their first runs, and nothing else is lost."""
    cfg = FuzzConfig(
        out=tmp_path / "out",
        probe=False,
        max_tests=40,
        budget=600,
        compiler={"base": {"python": sys.executable}, "head": {"python": sys.executable}},
        test_fault={"kind": "perturb", "both": True},
        oracles={"judging_share": 0.0},
        reduce={"enabled": False},
        guide={"mutation": False, "divergence": False},
    )
    summary = open_campaign(cfg).run()
    j = summary.judging
    assert j is not None and j.deferred > 0 and j.unjudged > 0, j
    assert summary.counts.get("persistent", 0) > 0 and sum(summary.counts.values()) == summary.tests == 40
    assert j.after_runs <= GRANT + 2 * 4, "the first runs' share (0 here) and the grant, one triage past it at most"
    kept = sum(1 for f in summary.findings if f.across == "persistent")
    assert 0 < j.deferred - j.unjudged <= kept <= summary.tests - j.unjudged, "judged ones kept, unjudged ones not"
