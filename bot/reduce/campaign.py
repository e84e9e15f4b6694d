"""A campaign's reduction phase: the first finding of each kind while fuzzing, the rest after.

Reducing the first finding of a kind at once turns it into a known bug: its trigger goes
to the generator (generator.avoid), and the rest of the campaign spends its budget on
bugs not yet found instead of on occurrences of this one. What is left unreduced when the
fuzzing budget ends is reduced after it, within `reduce.share` of the budget
(bot.reduce.finding for the order, the naming and the folding).
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from backends.memory import within_bound
from bot.config import FuzzConfig
from bot.findings.bundle import Finding, load_bundle
from bot.findings.kept import KeptFindings
from bot.findings.known_bugs import KnownBug, known_bug, read_known
from bot.findings.records import FindingRecords
from bot.findings.store import FindingStore
from bot.findings.summary import FindingRef, in_output, seen_union
from bot.reduce.blame import blame
from bot.reduce.finding import (
    across_after_reduction,
    finding_level,
    generalize,
    reduce_one,
    reduction_order,
    rename_finding,
)
from bot.reduce.recheck import disagreement
from bot.reduce.reduced import Reduced
from bot.reduce.rewrite_blame import Rewrites, names_rewrites
from bot.reduce.workers import SidePools, SideRun
from generator.avoid import Avoid
from oracles.bug_identity import crash_site_fingerprint, kernel_fingerprint, rewrite_fingerprint
from oracles.judging import Judging
from oracles.judging_budget import JudgingBudget
from oracles.sides import CrossVerdict
from oracles.verdict import Symptom, Verdict

T = TypeVar("T")

MIN_DURING_S = 5.0
"""A reduction while fuzzing needs this much of the budget left; otherwise it waits for
the phase after the budget, which has its own share. Reductions while fuzzing are bounded
in candidate runs (the judging budget) and in seconds (`reduce.during_share` of the budget,
`reduce.budget` each). Bounded in candidate runs alone, the reductions of a 600 s
onnxruntime nightly took 579 s of it for 74 candidate runs: slow candidates (up to the
test timeout each) or the work besides them (generalization, blame, fresh workers)."""
BACKGROUND_SHARE = 0.5
"""Of the reduction time while fuzzing, the most that a two-build campaign spends on bugs
both builds share or head fixed: an old release is dense with persistent bugs, and a
1.17.3 -> 1.18.0 campaign spent the share on six of them, while the two bugs only 1.18.0
had, met at 25 s and 35 s, waited for the end, and one was a tenth of its tests."""
FOLD_MIN_S = 30.0
"""Folding the unreduced findings gets at least this long after the reductions, even where
they used all of `reduce.share`: a fold saves a report, and costs a blame or two."""
TRACE_FROM = 3
"""With this many rewrites to ask of one unreduced finding, the build is first asked which
rewrites changed its graph (one traced run): each question is a worker of its own, and a
rewrite that changed nothing can make nothing right by its absence."""
MIN_DURING_STEPS = 30
"""Nor does one start with fewer candidate runs left in the judging budget: a reduction cut
that short names nothing (oracles.judging_budget)."""


def _tests_spent(bundle: Path, cap: int) -> int:
    """The candidates a reduction of `bundle` ran (its reduction.json), else `cap`."""
    try:
        steps = json.loads((bundle / "reduced" / "reduction.json").read_text())["steps"]
        return sum(int(step.get("tests", 0)) for step in steps)
    except (OSError, ValueError, KeyError, TypeError):
        return cap


class CampaignReduction:
    """The reduction phase of one campaign, with the known bugs it learns and the time it took.

    It shares the campaign's kept findings (`kept`), which it renames, relabels and folds;
    `on_known` is called with the bug when it becomes known (its trigger is in `avoid`)."""

    def __init__(
        self,
        cfg: FuzzConfig,
        runs: dict[str, SideRun],
        kept: KeptFindings,
        store: FindingStore,
        on_known: Callable[[KnownBug], None] = lambda bug: None,
        budget: JudgingBudget | None = None,
    ) -> None:
        self.cfg = cfg
        self.sides = list(runs)
        """Side names, base first."""
        self.kept = kept
        self.store = store
        self.on_known = on_known
        self.budget = budget
        """The runs judging may take while fuzzing, which a reduction then spends in
        candidates (oracles.judging_budget); None: `reduce.during_share` alone."""
        self.spent_s = 0.0
        """Seconds spent reducing, while fuzzing and after (summary.json's time_s.reduction)."""
        self.spent_during_s = 0.0
        """The part of `spent_s` spent while fuzzing, inside the fuzzing's wall time."""
        self.out = Path(cfg.out)
        self.records = FindingRecords(kept, store, self.out)
        """Renaming, folding and relabelling a kept finding, each in every record at once."""
        self.pools = SidePools(runs, Judging(cfg.oracles, cfg.tolerances))
        """Candidates are judged as the campaign judges (its rules and tolerances), with
        counts of their own: the summary's tie-breaks are the campaign's cases only."""
        self.known: dict[str, KnownBug] = {b.fingerprint: b for b in read_known(cfg.known_bugs.files)}
        self.avoid = Avoid([b.trigger() for b in self.known.values()], cfg.known_bugs.avoid)
        self._kinds: set[tuple[str, str]] = set()
        self.moved: Counter[tuple[str, str]] = Counter()
        """Cases whose count key a reduction changed, (from, to): a label the reduction's
        second look found flaky (`_ask_again`). summary.json's counts follow them."""
        self.aliases: dict[str, str] = {}
        """A reduced finding's first fingerprint -> the bug's name: a later sighting under the
        first one is an occurrence of the named bug, not a new finding to reduce again."""
        self.waiting: dict[str, FindingRef] = {}
        """First findings of their kind whose reduction while fuzzing found no room, by
        fingerprint: tried again at each sighting (`again`)."""
        self.spent_background_s = 0.0
        """The part of `spent_during_s` spent on findings a PR check does not fail on."""
        self._evidence: dict[str, set[str]] = {}
        """An unreduced finding's names from its check and its blame, by bundle path: folding
        runs again after each reduction, and a blame is runs on the build."""
        self._rewrites_asked: dict[str, dict[str, bool]] = {}
        """Of an unreduced finding, by bundle path: each rewrite asked, and whether its absence
        alone made the build right."""
        self.over_bound = 0
        """Findings whose reduction, naming or folding asked for more memory than the bot's
        bound (summary.json `reduction_over_bound`): each stays as it was, a report of its own."""

    def during(self, ref: FindingRef, deadline: float) -> None:
        """Reduce `ref` now if it is the first of its kind and the budget has room; one that
        waits for room is tried again at its next sighting (`again`)."""
        settings = self.cfg.reduce
        kind = (ref.verdict.value, ref.signature)
        if not (settings.enabled and settings.during) or kind in self._kinds or ref.reduced_path is not None:
            self.waiting.pop(ref.fingerprint, None)
            return
        left = deadline - time.monotonic()
        allowed = self._allowed_during(ref)
        steps = self._room(ref)
        if left < MIN_DURING_S or allowed < MIN_DURING_S or steps < MIN_DURING_STEPS:
            self.waiting.setdefault(ref.fingerprint, ref)
            return
        self.waiting.pop(ref.fingerprint, None)
        left = min(left, allowed)
        self._kinds.add(kind)
        t0 = time.monotonic()
        self.bounded(ref, partial(self.reduce, ref, min(settings.budget, left), min(settings.max_tests, steps)))
        spent = time.monotonic() - t0
        self.spent_s += spent
        self.spent_during_s += spent
        if self._background(ref):
            self.spent_background_s += spent
        if self.budget is not None:
            self.budget.judging += _tests_spent(in_output(self.out, ref.reduced_path or ref.path), steps)

    def again(self, fingerprint: str, deadline: float) -> None:
        """Another sighting under `fingerprint`: a finding whose reduction waited for room
        is tried again now, so the bug a campaign keeps meeting is the first to get it. One
        skipped once used to wait for the fuzzing's end: in a 1.17.3 -> 1.18.0 campaign,
        1.18.0's float64 QuickGelu with no kernel, first seen at 35 s while earlier reductions held the
        room, was 361 of its 3,446 tests."""
        ref = self.waiting.get(fingerprint)
        if ref is not None and ref in self.kept.findings:
            self.during(ref, deadline)

    def _room(self, ref: FindingRef) -> int:
        """Candidate runs a reduction of `ref` may take now. A regression head brought in
        is what a PR check is for: as triage never defers one (bot.campaign.triage), its
        reduction does not wait for the judging budget's room either. Its runs are charged
        all the same, so the suspects after it wait until the tests have paid them back. On
        onnxruntime 1.18.1 -> 1.19.0, where triage of the old release's persistent bugs held
        the room, head's float16 Clip regression was reduced and avoided at test 3,012 of
        3,361 in one campaign and only after the fuzzing in another: 534 and 397 of their
        tests."""
        settings = self.cfg.reduce
        if self.budget is None or (len(self.sides) > 1 and ref.across is CrossVerdict.new_regression):
            return settings.max_tests
        return self.budget.room()

    def _background(self, ref: FindingRef) -> bool:
        """A finding a PR check does not fail on: both builds share it, or head fixed it."""
        return len(self.sides) > 1 and ref.across in (CrossVerdict.persistent, CrossVerdict.fixed)

    def _allowed_during(self, ref: FindingRef) -> float:
        """Seconds of `reduce.during_share` left to `ref`: what both builds share may take
        BACKGROUND_SHARE of it, the rest stays for what head changed."""
        share = self.cfg.reduce.during_share * self.cfg.budget
        allowed = share - self.spent_during_s
        if self._background(ref):
            allowed = min(allowed, BACKGROUND_SHARE * share - self.spent_background_s)
        return allowed

    def after(self) -> None:
        """Reduce what is still unreduced and fold what is left, within `reduce.share` of the
        budget: each reduction gets what remains of it, and folding stops at its end. A PR
        campaign on onnx2torch kept 138 findings in five minutes; reduced and folded without a
        bound, they held the check for ten more.

        What head changed is reduced first. Then every other finding is folded into the bugs
        already reduced before any more is reduced, and again after each reduction: a fold
        costs a blame (a second, on onnxruntime), a reduction up to `reduce.budget`. Folding
        last, in what the reductions left of the share, a 1.17.3 -> 1.18.0 campaign left 111
        findings unfolded, 138 reports; folding first, it made 41."""
        settings = self.cfg.reduce
        if not settings.enabled:
            return
        t0 = time.monotonic()
        deadline = t0 + settings.share * self.cfg.budget if self.cfg.budget else None
        order = reduction_order(self.kept.findings)[: settings.max_findings]
        changed = [r for r in order if not self._background(r)] if len(self.sides) > 1 else []
        if self._reduce_each(changed, deadline, fold=False):
            self.fold_unreduced(deadline)
            self._reduce_each([r for r in order if r not in changed], deadline, fold=True)
        self.fold_unreduced(None if deadline is None else max(deadline, time.monotonic() + FOLD_MIN_S))
        self.spent_s += time.monotonic() - t0

    def _reduce_each(self, refs: list[FindingRef], deadline: float | None, *, fold: bool) -> bool:
        """Reduce each of `refs` still unreduced and kept (a fold may have taken it), with
        what is left of the share; whether the share lasted. `fold`: fold the rest into each
        new reduced bug at once (the keys asked before are kept, so a fold is set
        intersections and the blames of findings not asked yet)."""
        for ref in refs:
            left = (
                self.cfg.reduce.budget if deadline is None else min(self.cfg.reduce.budget, deadline - time.monotonic())
            )
            if left < MIN_DURING_S:
                return False
            if ref.reduced_path is None and ref in self.kept.findings:
                self.bounded(ref, partial(self.reduce, ref, left))
                if fold and ref.reduced_path is not None:
                    self.fold_unreduced(deadline)
        return True

    def fold_unreduced(self, deadline: float | None = None) -> None:
        """Fold each finding left unreduced into a reduced bug of its label when its own
        evidence gives one of that bug's names (FindingRef.keys): the check its message
        names, the kernel that computed its first wrong tensor (bot.reduce.blame), or a
        rewrite whose absence alone makes the build right (bot.reduce.rewrite_blame). A campaign
        of onnxruntime 1.30.0 against 1.31.1 kept over a hundred findings in six minutes,
        most of them the QDQ selectors' per-channel defect, SimplifiedLayerNormFusion's and
        the "wrap" Pad's, each a model of its own; a reduction budget reduces a few dozen.
        A finding whose label has no reduced bug it shares a name with joins the first such
        unreduced finding that does."""
        reduced: dict[str, list[FindingRef]] = {}
        rewrites: dict[str, set[str]] = {}
        for r in self.kept.findings:
            if r.reduced_path is not None:
                reduced.setdefault(_label(r), []).append(r)
                rewrites.setdefault(_label(r), set()).add(self._rewrite(r))
        unmatched: dict[str, list[tuple[FindingRef, set[str]]]] = {}
        for ref in [r for r in self.kept.findings if r.reduced_path is None]:
            if deadline is not None and time.monotonic() > deadline:
                break  # the rest stay apart: each still a finding of its own
            bundle = in_output(self.out, ref.path)
            finding = Finding.model_validate_json((bundle / "finding.json").read_text())
            named = rewrites.get(_label(ref), set()) - {""}
            keys = self.bounded(ref, partial(self._own_keys, ref, bundle, finding))
            if keys is None:  # past the memory bound: not asked again
                keys = self._evidence[ref.path] = set()
            target = _joins(reduced.get(_label(ref), []), keys)
            if target is None and named:
                # a rewrite is asked only of a finding its own names leave alone: each
                # question is a worker of its own, and in a 1.19.0 -> 1.19.2 campaign asking
                # them of all 180 findings took 205 of the share's 300 s
                keys = keys | (self.bounded(ref, partial(self._rewrite_keys, ref, bundle, finding, named)) or set())
                target = _joins(reduced.get(_label(ref), []), keys)
            # With no reduced bug to join, a finding joins the first unreduced one of its label
            # that shares a name: 1.31.1 -> 1.32.0 left fifteen findings of one fixed MaxPool
            # kernel unreduced, fifteen reports where one tells the bug.
            first = next((r for r, named in unmatched.get(_label(ref), []) if named & keys), None)
            into = target if target is not None else first
            if into is not None:
                self._fold(ref, into, bundle)
            elif keys:
                unmatched.setdefault(_label(ref), []).append((ref, keys))

    def bounded(self, ref: FindingRef, work: Callable[[], T]) -> T | None:
        """`work()` on one finding, or None when it asked for more memory than the bot's bound
        (backends.memory). The references re-raise past the bound so that a case is dropped,
        not judged without a reading; after the reduction itself, blame, generalization and
        folding compute references on cut and varied models, and a campaign between
        onnxruntime 1.17.3 and 1.18.0 died there, asking torch for 1.6 TB. The finding stays
        as far as it got (its bundle and records are written step by step) and is counted."""

        def dropped() -> None:
            self.over_bound += 1
            print(f"warning: {ref.path}: left as it was: it asks for more memory than the bot's bound", file=sys.stderr)

        return within_bound(work, dropped)

    def _own_keys(self, ref: FindingRef, bundle: Path, finding: Finding) -> set[str]:
        """The names an unreduced finding's own evidence gives it, as a reduced one is named
        (bot.reduce.finding.rename_finding): the check its message names and the kernel its
        blame finds, asked once per finding (`after` folds again after each reduction)."""
        keys = self._evidence.get(ref.path)
        if keys is None:
            label = _label(ref)
            pools = self.pools.at_level(finding_level(finding))
            keys = set()
            if finding.verdict is Verdict.crash and finding.symptom == Symptom.exception:
                keys.add(crash_site_fingerprint(finding, label))
            found = blame(load_bundle(bundle), pools.pool(finding.side), pools.judging)
            if found is not None:
                keys.add(kernel_fingerprint(finding.model_copy(update={"blamed": found.name}), label))
            self._evidence[ref.path] = keys
        return keys

    def _rewrite_keys(self, ref: FindingRef, bundle: Path, finding: Finding, named: set[str]) -> set[str]:
        """The names of `named` (the rewrites its label's reduced bugs need) whose absence
        alone makes the build right on this finding, each asked once per finding; with
        TRACE_FROM or more new to ask, only those that changed its graph."""
        pools = self.pools.at_level(finding_level(finding))
        asked = self._rewrites_asked.setdefault(ref.path, {})
        side = pools.side_run(finding.side)
        todo = sorted(named - set(asked))
        if todo and ref.depends_on_optimization and names_rewrites(side):
            case = Rewrites(load_bundle(bundle), side, pools.judging)
            changed = set(case.changed()) if len(todo) >= TRACE_FROM else set(todo)
            asked.update({rw: rw in changed and case.right_without([rw]) for rw in todo})
        needed = [rw for rw in sorted(named) if asked.get(rw)]
        return {rewrite_fingerprint(finding.model_copy(update={"rewrite": rw}), _label(ref)) for rw in needed}

    def _rewrite(self, ref: FindingRef) -> str:
        path = in_output(self.out, str(ref.reduced_path)) / "finding.json"
        return Finding.model_validate_json(path.read_text()).rewrite

    def _fold(self, ref: FindingRef, target: FindingRef, bundle: Path) -> None:
        """`ref`, unreduced, is another sighting of `target`'s bug: counted there, kept as a
        duplicate, and its own name listed among the bug's triggers (a crash's message names
        the node that ran the check: another way the bug is reached, which its reduction
        would have named, had folding not made it unneeded)."""
        self.aliases[ref.fingerprint] = target.fingerprint
        ref.triggers = seen_union(ref.triggers, [ref.signature])
        self.records.fold(ref, target, bundle)

    def reduce(self, ref: FindingRef, budget_s: float, max_tests: int | None = None) -> None:
        """Reduce, relabel, generalize and name one finding; fold it into an earlier one
        with the same name, or learn it as a known bug. `max_tests`: fewer candidates than
        `reduce.max_tests` (what the judging budget has left while fuzzing)."""
        bundle = in_output(self.out, ref.path)
        finding = Finding.model_validate_json((bundle / "finding.json").read_text())
        others = [s for s in self.sides if s != finding.side]
        guard = others[0] if others and ref.across in (CrossVerdict.new_regression, CrossVerdict.fixed) else None
        both = bool(others) and ref.across == CrossVerdict.persistent and not finding.base_failure
        settings = self.cfg.reduce.model_copy(
            update={"budget": budget_s, "max_tests": max_tests or self.cfg.reduce.max_tests}
        )
        pools = self.pools.at_level(finding_level(finding))
        reduced = reduce_one(bundle, finding, guard, pools, settings, others[0] if both else None)
        if reduced is None:
            if guard is not None:
                self._ask_again(ref, bundle, finding, guard, pools)
            return
        provisional = ref.across == CrossVerdict.new_in_head or (
            ref.across == CrossVerdict.persistent and bool(finding.base_failure)
        )
        if provisional and others:
            was = ref.across
            assert was is not None
            ref.across = across_after_reduction(reduced, others[0], pools, otherwise=was)
            guard = others[0] if ref.across == CrossVerdict.new_regression else None
            bundle = self._relabelled(ref, bundle, reduced, was)
        evidence = generalize(reduced, finding.side, guard, pools) if settings.generalize else None
        first_seen = ref.fingerprint
        named = rename_finding(ref, bundle, reduced, self.records, evidence)
        self.aliases[first_seen] = ref.fingerprint
        if named:
            self._learn(reduced)
            return
        first = next(r for r in self.kept.findings if r.fingerprint == ref.fingerprint and r is not ref)
        self.records.fold(ref, first, bundle)

    def _ask_again(self, ref: FindingRef, bundle: Path, finding: Finding, guard: str, pools: SidePools) -> None:
        """A regression or fix that did not reproduce: when one side now answers otherwise
        than in every campaign run, the case is flaky (bot.reduce.recheck). It moves to
        OUT/flaky/ with the answer in its note, leaves the findings, and its count moves
        with it; the label it had is not one the builds back."""
        found = disagreement(bundle, finding, guard, pools)
        if found is None:
            return
        print(f"warning: {bundle}: {ref.across} set aside as flaky: {found.note}", file=sys.stderr)
        self.records.set_aside_as_flaky(ref, bundle, "; ".join(n for n in (finding.note, found.note) if n))
        self.moved[str(ref.across), CrossVerdict.flaky.value] += 1

    def first_names(self, fingerprint: str) -> set[str]:
        """Every first fingerprint (triage's, before reduction) named `fingerprint` since."""
        return {first for first, named in self.aliases.items() if named == fingerprint} | {fingerprint}

    def occurrence(self, fingerprint: str, label: str) -> FindingRef | None:
        """The listed bug a sighting under `fingerprint` (before reduction) and `label` is an
        occurrence of, when that fingerprint's finding was reduced into it and the label is
        the bug's; else None (a stronger label still earns its own bundle)."""
        name = self.aliases.get(fingerprint)
        return next((r for r in self.kept.findings if r.fingerprint == name and r.across == label), None)

    def _learn(self, reduced: Reduced) -> None:
        bug = known_bug(reduced.bundle.model, reduced.finding)
        if bug is not None:
            self.known[bug.fingerprint] = bug
            self.avoid.add(bug.trigger())
            self.on_known(bug)

    def _relabelled(self, ref: FindingRef, bundle: Path, reduced: Reduced, was: CrossVerdict) -> Path:
        """The bundle folder renamed for the label its reduction earned (its name starts
        with the label, which people read), with ref and the reduced record following it."""
        moved = self.records.relabel(ref, bundle, was)
        if moved == bundle:
            return bundle
        reduced.moved_to(moved / reduced.path.name)
        if ref.across == CrossVerdict.new_regression:  # base was asked about the trigger, not each candidate
            reduced.learn(kept={**reduced.finding.kept, self.sides[0]: "pass on the reduced model"})
        return moved

    def close(self) -> None:
        self.pools.close()


def _joins(reduced: list[FindingRef], keys: set[str]) -> FindingRef | None:
    """The first reduced bug that one of `keys` names."""
    return next((r for r in reduced if set(r.keys or [r.fingerprint]) & keys), None)


def _label(ref: FindingRef) -> str:
    return ref.across.value if ref.across else ""
