"""Which rewrite a reduced failure needs (bot.reduce.rewrite_blame), on real onnxruntime 1.31.1:
one defect met through several kernels is one report, and two defects in two rewrites
stay two."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from backends.client import WorkerClient
from backends.reference import run_reference
from backends.spec import parse_backend
from bot.campaign.sides import open_campaign
from bot.cases.user_cases import load_user_case
from bot.config import FuzzConfig
from bot.findings.bundle import Finding, write_bundle
from bot.reduce.reduced import Reduced
from bot.reduce.rewrite_blame import name_guilty_rewrite
from bot.reduce.workers import SideRun
from oracles.bug_identity import rewrite_fingerprint
from oracles.judging import Judging
from oracles.sides import Localization
from oracles.verdict import Verdict, judge
from tests import release_cases as rc
from tests.generator.test_patterns import QDQ_OPS, VARIANTS, placed

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

SIDE = SideRun("onnxruntime:all", sys.executable, 30.0)


def _judged(model: onnx.ModelProto, inputs: dict[str, np.ndarray], level: str) -> Finding:
    reference = run_reference(model, inputs)
    with WorkerClient(parse_backend(f"onnxruntime:{level}")) as client:
        result = client.run(model.SerializeToString(), inputs)
    j = judge(result, reference, "case")
    assert result.backend is not None
    return Finding(**j.model_dump(), backend=result.backend, spec=f"onnxruntime:{level}")


def _finding(tmp: Path, name: str, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> Path:
    """A reduced bundle of a failure at `all` that `disable` runs right."""
    low = _judged(model, inputs, "disable")
    assert low.verdict is Verdict.pass_, low
    finding = _judged(model, inputs, "all")
    assert finding.verdict.is_bug, finding
    finding.localization = Localization(
        level="disable", verdict=low.verdict, same_signature=False, depends_on_optimization=True
    )
    return write_bundle(tmp / name, model, inputs, run_reference(model, inputs), finding)


def _variant(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    model, inputs = placed(next(v for v in VARIANTS if v.name() == name))
    return model, inputs


@pytest.fixture(scope="module")
def culprits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, Finding]]:
    """Each case's culprit and its reduced finding, named as a campaign names it."""
    tmp = tmp_path_factory.mktemp("culprit")
    cases = {t: _variant(f"{t}~per_axis_output") for t in (*QDQ_OPS, "QdqMatMul")}
    cases["gather_range"] = rc.gather_of_a_wrapping_range()
    cases["layernorm_pow4"] = _variant("LayerNorm~exponent")
    found = {}
    for name, (model, inputs) in cases.items():
        reduced = Reduced.load(_finding(tmp, name, model, inputs))
        rewrite = name_guilty_rewrite(reduced, SIDE, Judging.shipped())
        found[name] = (rewrite, reduced.finding.model_copy(update={"rewrite": rewrite}))
    return found


def test_one_missing_precondition_in_the_qdq_selectors_is_one_report(
    culprits: dict[str, tuple[str, Finding]],
) -> None:
    """The per-channel Q fused into a QLinear kernel with a scalar scale: a type error at
    load (QLinearAdd, QLinearMul), a failed check at run (QLinearGlobalAveragePool), wrong
    values (QLinearSoftmax). By kernel, eight reports; by the rewrite whose absence alone
    makes each right, one."""
    qdq = {t: culprits[t] for t in (*QDQ_OPS, "QdqMatMul")}
    assert {rewrite for rewrite, _ in qdq.values()} == {"QDQSelectorActionTransformer"}, qdq
    symptoms = {(f.verdict, f.stage) for _, f in qdq.values()}
    assert len(symptoms) >= 2, symptoms  # the same defect, seen as more than one symptom
    assert len({rewrite_fingerprint(f, "persistent") for _, f in qdq.values()}) == 1


def test_defects_in_two_rewrites_stay_two_reports(culprits: dict[str, tuple[str, Finding]]) -> None:
    """GatherToSliceFusion's clamp and LayerNormFusion's unchecked exponent are other bugs:
    each is named by its own rewrite, and neither joins the QDQ report."""
    names = {culprits[n][0] for n in ("gather_range", "layernorm_pow4", "QdqAdd")}
    assert names == {"GatherToSliceFusion", "LayerNormFusionL1", "QDQSelectorActionTransformer"}, names
    fps = {rewrite_fingerprint(culprits[n][1], "persistent") for n in ("gather_range", "layernorm_pow4", "QdqAdd")}
    assert len(fps) == 3


def test_a_failure_the_lowest_level_shares_names_no_rewrite(tmp_path: Path) -> None:
    """A wrong result `disable` gets too is no rewrite's: nothing is run, and the kernel's
    name stays."""
    model, inputs = rc.gather_of_a_wrapping_range()
    bundle = _finding(tmp_path, "case", model, inputs)
    path = bundle / "finding.json"
    finding = Finding.model_validate_json(path.read_text())
    assert finding.localization is not None
    finding.localization.depends_on_optimization = False
    path.write_text(finding.model_dump_json())
    assert name_guilty_rewrite(Reduced.load(bundle), SIDE, Judging.shipped()) == ""


def test_findings_left_unreduced_are_folded_into_the_rewrite_they_need(tmp_path: Path) -> None:
    """A campaign reduces a few dozen findings; a flood of one rewrite's defect, each a model
    of its own, is left unreduced. With one reduction allowed, the per-channel QLinearAdd is
    reduced and named by QDQSelectorActionTransformer; the QLinearMul, QLinearSoftmax and
    QLinearGlobalAveragePool findings, unreduced, are right with that rewrite off, and fold
    into it. The GatherToSliceFusion finding is not, and stays a report of its own."""
    names = ["QdqAdd", "QdqMul", "QdqSoftmax", "QdqGlobalAveragePool"]
    made = [_variant(f"{t}~per_axis_output") for t in names] + [rc.gather_of_a_wrapping_range()]
    cases = [load_user_case(str(p), p) for p in rc.saved(tmp_path, made)]
    cfg = FuzzConfig(
        out=tmp_path / "out",
        probe=False,
        backend="onnxruntime:all",
        reduce={"generalize": False, "budget": 60, "max_findings": 1, "during": False},
    )
    campaign = open_campaign(cfg)
    campaign.run_cases(list(cases), reduce=True)
    refs = campaign.summary.findings
    assert len(refs) == 2, [(r.signature, r.reduced_path) for r in refs]
    qdq = next(r for r in refs if r.reduced_path is not None)
    rest = next(r for r in refs if r is not qdq)
    reduced = Finding.model_validate_json((tmp_path / "out" / str(qdq.reduced_path) / "finding.json").read_text())
    assert reduced.rewrite == "QDQSelectorActionTransformer"
    assert campaign.summary.occurrences[qdq.fingerprint] == 4
    assert "Gather" in rest.signature and rest.reduced_path is None
    assert len(list((tmp_path / "out" / "duplicates").iterdir())) == 3


def test_folding_asks_a_rewrite_only_of_a_finding_its_own_names_leave_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three reduced bugs, each named by its rewrite, and two unreduced findings. A second
    sighting of the per-channel QLinearAdd is named by its own check already, and joins with
    no rewrite asked; the QLinearMul, whose check is another, is asked which rewrites changed
    its graph and then only QDQSelectorActionTransformer, not all three: each question is a
    worker, and asking every rewrite of every finding took 205 of a 300 s reduction share."""
    from bot.findings.kept import KeptFindings
    from bot.findings.store import FindingStore
    from bot.findings.summary import FindingRef
    from bot.reduce import rewrite_blame
    from bot.reduce.campaign import TRACE_FROM, CampaignReduction
    from oracles.bug_identity import crash_site_fingerprint
    from oracles.sides import CrossVerdict

    out = tmp_path / "out"
    named = {"QdqAdd": "QDQSelectorActionTransformer", "gather": "GatherToSliceFusion", "ln": "LayerNormFusionL1"}
    made = {
        "QdqAdd": _variant("QdqAdd~per_axis_output"),
        "gather": rc.gather_of_a_wrapping_range(),
        "ln": _variant("LayerNorm~exponent"),
        "again": _variant("QdqAdd~per_axis_output"),
        "QdqMul": _variant("QdqMul~per_axis_output"),
    }
    refs: list[FindingRef] = []
    for name, (model, inputs) in made.items():
        bundle = _finding(out / "findings", name, model, inputs)
        finding = Finding.model_validate_json((bundle / "finding.json").read_text())
        ref = FindingRef(
            path=f"findings/{name}",
            verdict=finding.verdict,
            across=CrossVerdict.persistent,
            fingerprint=name,
            seed=len(refs),
            signature=finding.signature,
            depends_on_optimization=True,
        )
        if name in named:
            finding.rewrite = named[name]
            (bundle / "finding.json").write_text(finding.model_dump_json())
            ref.reduced_path = ref.path
            ref.keys = [name, rewrite_fingerprint(finding, "persistent")]
            if finding.verdict is Verdict.crash:
                ref.keys.append(crash_site_fingerprint(finding, "persistent"))
        refs.append(ref)
    asked: list[dict[str, str]] = []
    run = rewrite_blame.Rewrites.run

    def counted(self: rewrite_blame.Rewrites, options: dict[str, str]) -> tuple[object, str]:
        asked.append(options)
        return run(self, options)

    monkeypatch.setattr(rewrite_blame.Rewrites, "run", counted)
    kept = KeptFindings(list(refs))
    reduction = CampaignReduction(
        FuzzConfig(backend="onnxruntime:all", out=str(out)), {"head": SIDE}, kept, FindingStore.in_dir(out)
    )
    try:
        reduction.fold_unreduced()
    finally:
        reduction.close()
    assert len(named) >= TRACE_FROM
    assert [r.fingerprint for r in kept.findings] == list(named), kept.findings
    assert asked == [{"trace": "1"}, {"disable": "QDQSelectorActionTransformer"}], asked
