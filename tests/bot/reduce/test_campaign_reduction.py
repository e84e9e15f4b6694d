"""A campaign's reduction phase (bot.reduce.campaign.CampaignReduction). While fuzzing, a
first finding that finds no room waits and is tried again at its next sighting, and in a
two-build campaign what both builds share cannot take the time what head changed needs.
After it, a finding one already reduced names is folded, not reduced again. Real
onnxruntime workers, head with a planted wrong result (the `perturb` test fault)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from backends.client import WorkerClient
from backends.faults import FaultSpec
from backends.reference import run_reference
from backends.results import BackendInfo
from backends.spec import parse_backend
from bot.config import FuzzConfig
from bot.findings.bundle import Finding, write_bundle
from bot.findings.kept import KeptFindings
from bot.findings.store import FindingStore
from bot.findings.summary import FindingRef
from bot.reduce.campaign import BACKGROUND_SHARE, MIN_DURING_STEPS, CampaignReduction
from bot.reduce.workers import SideRun
from oracles.judging_budget import JudgingBudget
from oracles.sides import CrossVerdict
from oracles.verdict import Verdict, judge
from tests.cases import unary_chain

pytestmark = [pytest.mark.worker]

SPEC = "onnxruntime:disable"
PERTURB: FaultSpec = {"kind": "perturb"}
BUDGET_S = 120.0


def _found(out: Path, name: str, ops: list[str], label: CrossVerdict) -> FindingRef:
    """A wrong result of head's (perturbed) build, judged as a campaign judges it, kept."""
    model, inputs = unary_chain(ops)
    with WorkerClient(parse_backend(SPEC), sys.executable, 30.0, fault=PERTURB) as client:
        result = client.run(model.SerializeToString(), inputs)
    j = judge(result, run_reference(model, inputs), ",".join(ops))
    assert j.verdict is Verdict.wrong_result
    info = BackendInfo(name="onnxruntime", level="disable", version="")
    write_bundle(out / "findings" / name, model, inputs, None, Finding(**j.model_dump(), backend=info, spec=SPEC))
    return FindingRef(
        path=f"findings/{name}",
        verdict=j.verdict,
        across=label,
        fingerprint=name,
        seed=0,
        signature=j.signature,
    )


def _reduction(out: Path, refs: list[FindingRef], budget: JudgingBudget, two: bool = True) -> CampaignReduction:
    """Base as shipped and head perturbed (`two`), or head alone."""
    cfg = FuzzConfig(
        out=out, backend=SPEC, budget=BUDGET_S, reduce={"generalize": False, "budget": 30, "during_share": 0.5}
    )
    runs = {"base": SideRun(SPEC, sys.executable, 30.0)} if two else {}
    runs["head"] = SideRun(SPEC, sys.executable, 30.0, PERTURB)
    return CampaignReduction(cfg, runs, KeptFindings(list(refs)), FindingStore.in_dir(out), budget=budget)


def test_a_finding_with_no_room_waits_and_is_reduced_at_its_next_sighting(tmp_path: Path) -> None:
    """The judging budget spent: the first new_in_head is kept unreduced and waits. Runs go
    by, the room comes back, and the next sighting of that fingerprint reduces it (before,
    it waited for the fuzzing's end whatever came after)."""
    out = tmp_path / "out"
    ref = _found(out, "sqrt-chain", ["Relu", "Neg", "Abs", "Sqrt"], CrossVerdict.new_in_head)
    budget = JudgingBudget(share=0.25)
    budget.judging = budget.room() - MIN_DURING_STEPS + 1
    reduction = _reduction(out, [ref], budget)
    deadline = time.monotonic() + BUDGET_S
    try:
        reduction.during(ref, deadline)
        assert ref.reduced_path is None and set(reduction.waiting) == {ref.fingerprint}
        reduction.again("another-bug", deadline)
        assert ref.reduced_path is None, "a sighting of another bug leaves it waiting"
        budget.tests += 3000  # a thousand runs of judging's share
        reduction.again(ref.fingerprint, deadline)
    finally:
        reduction.close()
    assert ref.reduced_path is not None and ref.reduced_nodes is not None and ref.reduced_nodes < 4
    assert not reduction.waiting and reduction.spent_background_s == 0.0


def test_a_regression_head_brought_in_is_reduced_at_once_and_its_runs_are_charged(tmp_path: Path) -> None:
    """The judging budget spent, as triage of an old release's shared bugs leaves it: a
    new_regression is still reduced at its first sighting (before, it waited for room, and
    a float16 Clip regression was 534 of a campaign's 3,361 tests). Its candidates are
    charged, so the room stays empty for the suspects after it; a new_in_head finding with
    the same budget waits."""
    out = tmp_path / "out"
    ref = _found(out, "sqrt-chain", ["Relu", "Neg", "Abs", "Sqrt"], CrossVerdict.new_regression)
    other = _found(out, "exp-chain", ["Neg", "Abs", "Exp"], CrossVerdict.new_in_head)
    budget = JudgingBudget(share=0.25)
    budget.judging = budget.room()
    spent = budget.judging
    reduction = _reduction(out, [ref, other], budget)
    deadline = time.monotonic() + BUDGET_S
    try:
        reduction.during(ref, deadline)
        reduction.during(other, deadline)
    finally:
        reduction.close()
    assert ref.reduced_path is not None and ref.reduced_nodes is not None and ref.reduced_nodes < 4
    assert budget.judging > spent and budget.room() == 0
    assert other.reduced_path is None and set(reduction.waiting) == {"exp-chain"}


def test_what_both_builds_share_leaves_the_time_for_what_head_changed(tmp_path: Path) -> None:
    """With the background's part of the share spent, a persistent finding waits while a
    new_in_head one found after it is reduced; in a one-build campaign the same finding
    would have had the whole share."""
    out = tmp_path / "out"
    shared = _found(out, "shared", ["Relu", "Neg", "Abs", "Sqrt"], CrossVerdict.persistent)
    changed = _found(out, "changed", ["Neg", "Abs", "Exp"], CrossVerdict.new_in_head)
    reduction = _reduction(out, [shared, changed], JudgingBudget(share=1.0))
    reduction.spent_background_s = reduction.spent_during_s = BACKGROUND_SHARE * 0.5 * BUDGET_S - 1.0
    deadline = time.monotonic() + BUDGET_S
    try:
        reduction.during(shared, deadline)
        assert shared.reduced_path is None and set(reduction.waiting) == {"shared"}
        reduction.during(changed, deadline)
    finally:
        reduction.close()
    assert changed.reduced_path is not None, "head's change had the rest of the share"
    assert reduction.spent_background_s == BACKGROUND_SHARE * 0.5 * BUDGET_S - 1.0, "and it is not the background's"


def test_after_the_fuzzing_a_finding_a_reduced_bug_names_is_folded_not_reduced(tmp_path: Path) -> None:
    """One build: one bug reduced while fuzzing, a second sighting of it under another
    fingerprint, and another bug: the sighting is folded into the first by its blame, with no reduction of
    its own, and only the other bug is reduced. (Folding last, both were reduced, and the
    share ran out before a 1.17.3 -> 1.18.0 campaign's other 111 findings were folded.)"""
    out = tmp_path / "out"
    first = _found(out, "first", ["Relu", "Neg", "Abs", "Sqrt"], CrossVerdict.persistent)
    again = _found(out, "again", ["Relu"], CrossVerdict.persistent)  # the fault shows in a first output alone
    other = _found(out, "other", ["Neg", "Abs", "Exp"], CrossVerdict.persistent)
    reduction = _reduction(out, [first, again, other], JudgingBudget(share=1.0), two=False)
    try:
        reduction.during(first, time.monotonic() + BUDGET_S)
        assert first.reduced_path is not None
        reduction.after()
    finally:
        reduction.close()
    kept = reduction.kept.findings
    assert [r.fingerprint for r in kept] == [first.fingerprint, other.fingerprint], kept
    assert other.reduced_path is not None, "the other bug had the share"
    folded = [p for p in (out / "duplicates").rglob("finding.json") if "again" in str(p)]
    assert folded and not any("reduced" in p.parts for p in folded), folded
