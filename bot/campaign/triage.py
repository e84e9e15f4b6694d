"""From a first bad run to a verdict a maintainer can trust.

A candidate finding goes through, in order: the known-false-positive rules (cheap, and
a filtered case needs nothing more), the confirmation of a wrong result (onnx.reference
must agree with the torch reference, or a float64 re-run must side with torch), k runs
on every side (a side that passes some runs and fails others is flaky; one that fails
every run is failing, however differently), the verdict table across sides, and
localization at the lowest level of each bad side's build. Only a case that survives all
of it is reported. Nothing here asks the system under test to judge itself: every
reference and tie-break is an independent computation (oracles.case).

Judging one run (the rules and the confirmation) is oracles.judging's, the one pipeline
that a campaign's generated cases, `fuzzbot check`'s and `fuzzbot run`'s given ones and
the reducer's candidates share; this module adds the re-runs, the table and localization.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Protocol

import numpy as np
import onnx

from backends.client import WorkerClient
from backends.results import RunResult, Status
from oracles.bug_identity import as_sighting_of
from oracles.case import CaseEvidence
from oracles.judging import Judging
from oracles.judging_budget import JudgingBudget
from oracles.references import Source
from oracles.sides import CrossJudgement, CrossVerdict, Localization, SideRuns, combine
from oracles.verdict import Judgement

JudgeRun = Callable[[CaseEvidence, RunResult, dict[str, np.ndarray] | None, str], Judgement]
"""How triage judges one run of a case on a side (the case's evidence, the run, what stands
in for the reference, the side), and names it (`Triage._judge`)."""


class JudgeableCase(Protocol):
    """What triage needs of a test case (the campaign's `Prepared` is one)."""

    model: onnx.ModelProto
    model_bytes: bytes
    inputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray] | None
    source: Source
    gap: str


@dataclass
class Side:
    """One build a case runs on, with a second worker at its lowest level, started on first need."""

    name: str
    client: WorkerClient
    lowest: WorkerClient | None = field(default=None, repr=False)
    twin: Side | None = field(default=None, repr=False)
    """The same build at the campaign's own level, when this side runs a drawn one
    (bot.campaign.levels): its lowest-level worker serves both."""

    def lowest_client(self) -> WorkerClient | None:
        """None when the side already runs at its lowest level."""
        level = self.client.lowest_level
        if level is None or level == self.client.level:
            return None
        if self.twin is not None:
            return self.twin.client if self.twin.client.level == level else self.twin.lowest_client()
        if self.lowest is None:
            c = self.client
            spec = replace(c.spec, level=level)
            self.lowest = WorkerClient(
                spec, c.python, c.timeout_s, fault=c.fault, memory_mb=c.memory_mb, compile_timeout_s=c.compile_timeout_s
            )
        return self.lowest

    def close(self) -> None:
        if self.lowest is not None:
            self.lowest.close()


class Triage:
    """Re-runs, the table across sides and localization around the one judging pipeline
    (oracles.judging), which every other caller shares."""

    def __init__(self, judging: Judging, budget: JudgingBudget | None = None) -> None:
        """`judging`: the pipeline with the config's re-runs, tolerances and rules, which
        every other caller (reduction, recheck, bisection) shares. `budget`: the runs
        judging may take while fuzzing (oracles.judging_budget); None, or a
        `triage(..., deferrable=False)`, judges every suspect in full."""
        self.cfg = judging.cfg
        self.budget = budget
        self.judging = judging
        self.seen_fresh: set[str] = set()
        """Fingerprints of failures seen in a fresh worker process: another sighting needs no
        restart to be believed (on TVM, where most cases are reported, a restart per case
        would cost a third of a campaign)."""

    @property
    def tiebreaks(self) -> Counter[str]:
        """How each wrong result against torch was confirmed or set aside (summary.json)."""
        return self.judging.tiebreaks

    @property
    def reference_warnings(self) -> int:
        """Warnings onnx.reference raised while confirming wrong results (summary.json)."""
        return self.judging.reference_warnings

    def evidence(self, case: JudgeableCase) -> CaseEvidence:
        return self.judging.evidence(case.model, case.inputs, case.reference, case.source, case.gap)

    def prepare(self, case: JudgeableCase, sides: Sequence[Side]) -> CaseEvidence:
        """The case's evidence with what judging needs before any result (each side's bounds,
        from the model's provenance) worked out: called while the workers compute, so the
        time is off the lane's critical path."""
        ev = self.evidence(case)
        for side in sides:
            info = side.client.info
            ev.bounds(info.name if info is not None else None)
        return ev

    def triage(
        self,
        case: JudgeableCase,
        sides: Sequence[Side],
        first: Sequence[RunResult],
        ev: CaseEvidence | None = None,
        deferrable: bool = True,
        lineage: Sequence[Judgement] = (),
    ) -> CrossJudgement:
        """`sides` and `first` are in the order (base, head), or just (head,); `ev`: the
        case's evidence when `prepare` made it already. With a budget, a suspect whose
        re-runs do not fit comes back `deferred` (judge it again later, not deferrable), and
        one whose failure triage has settled is taken on its first runs. `lineage`: the
        failures the model this case is a mutant of showed; a run that shows one of them
        again is named as it (oracles.bug_identity.as_sighting_of)."""
        ev = ev if ev is not None else self.evidence(case)
        against = self._base_as_reference(ev, first)
        judge = partial(self._judge, lineage=lineage)
        runs = [SideRuns(side=s.name, runs=[judge(ev, r, against, s.name)]) for s, r in zip(sides, first, strict=True)]
        if not any(r.first.verdict.is_bug for r in runs):
            return self._combine(runs)
        for side_runs, result in zip(runs, first, strict=True):
            self.judging.explain(ev, side_runs, result)
        if not any(r.bad for r in runs):
            return self._combine(runs)
        seen = self._combine(runs)
        key = (seen.key, *((r.side, r.first.fingerprint) for r in runs if r.bad))
        if self.budget is not None and deferrable:
            if self.budget.settled(key):
                self.budget.settled_skips += 1
                return seen
            if seen.verdict is not CrossVerdict.new_regression and not self.budget.allows(self.cost(sides)):
                self.budget.deferred += 1
                return seen.model_copy(update={"deferred": True})
        verdict = self._confirm(case, sides, first, runs, ev, against, judge)
        if self.budget is not None and verdict.verdict.is_reported and verdict.key == seen.key:
            self.budget.confirm(key)
        return verdict

    def _judge(
        self,
        ev: CaseEvidence,
        result: RunResult,
        against: dict[str, np.ndarray] | None,
        side: str,
        lineage: Sequence[Judgement] = (),
    ) -> Judgement:
        """Every run of a case, the fresh one included, is named the same way, so that the
        side's runs agree on whose sighting the case is."""
        return as_sighting_of(lineage, self.judging.judge(ev, result, against, side))

    def cost(self, sides: Sequence[Side]) -> int:
        """The runs a full triage of a suspect takes at most: k - 1 re-runs a side, a fresh
        worker and the lowest level for each."""
        return len(sides) * (self.judging.asking.reruns - 1 + 1 + int(self.cfg.localize))

    def _confirm(
        self,
        case: JudgeableCase,
        sides: Sequence[Side],
        first: Sequence[RunResult],
        runs: list[SideRuns],
        ev: CaseEvidence,
        against: dict[str, np.ndarray] | None,
        judge: JudgeRun,
    ) -> CrossJudgement:
        """The re-runs, a fresh worker where the first runs came from used ones, the table
        across sides, and localization: every run counted against the budget. `judge`: how
        each run is judged and named (`_judge`, with the case's lineage)."""
        used = [result.earlier_requests > 0 for result in first]
        for i, (side, side_runs) in enumerate(zip(sides, runs, strict=True)):
            for again in self.judging.asking.again(partial(side.client.run, case.model_bytes, case.inputs)):
                self._spent(1)
                side_runs.runs.append(judge(ev, again, against, side.name))
                used[i] = used[i] and again.earlier_requests > 0
        verdict = self._combine(runs)
        if verdict.verdict.is_reported:
            for side, side_runs, in_used in zip(sides, runs, used, strict=True):
                if not side_runs.bad:
                    continue
                if in_used and side_runs.first.fingerprint not in self.seen_fresh:
                    self._in_a_fresh_worker(ev, side, side_runs, against, judge)
                elif not in_used:
                    self.seen_fresh.add(side_runs.first.fingerprint)
            verdict = self._combine(runs)
        if self.cfg.localize and verdict.verdict.is_reported:
            for side, side_runs in zip(sides, runs, strict=True):
                if side_runs.bad:
                    side_runs.localization = self.localize(ev, side, side_runs.first, against)
        return verdict

    def _in_a_fresh_worker(
        self,
        ev: CaseEvidence,
        side: Side,
        side_runs: SideRuns,
        against: dict[str, np.ndarray] | None,
        judge: JudgeRun,
    ) -> None:
        """Run a failure once more in a process no earlier case ran in. Every other run of the
        side came after earlier cases in one process, and a case can leave a worker broken
        for every case after it: on TVM 0.26, "Check not null: ptr" on each later case made
        2 of 22 findings false, and each repro passed in a fresh process. Seen failing fresh,
        that run speaks for the side; passing, the side is right on this case, and the used
        worker is restarted, which frees the cases after it. The fresh process is a fork of
        one that imported the build and ran nothing (backends.fresh): a new import per new
        failure held a buggy converter's lane for 37% of its campaign."""
        self._spent(1)
        ran = side.client.run_fresh(ev.model.SerializeToString(), ev.inputs)
        fresh = judge(ev, ran, against, side.name)
        side_runs.fresh = fresh
        if fresh.verdict.is_bug:
            side_runs.runs.append(fresh)
            self.seen_fresh.add(fresh.fingerprint)
            self.judging.tiebreaks["a fresh worker fails it too"] += 1
        else:
            side.client.restart()
            side_runs.stale = side_runs.symptoms
            side_runs.runs = [fresh]
            self.judging.tiebreaks["only a used worker fails it: a fresh one runs it right"] += 1

    def _spent(self, runs: int) -> None:
        if self.budget is not None:
            self.budget.judging += runs

    @staticmethod
    def _base_as_reference(ev: CaseEvidence, first: Sequence[RunResult]) -> dict[str, np.ndarray] | None:
        """Base's outputs, when no reference computes the case and base ran it: DeepDiffer's
        oracle, head must not move away from base (and then nothing is called persistent)."""
        if ev.reference is not None or len(first) != 2 or first[0].status is not Status.ok:
            return None
        return dict(first[0].outputs)

    def localize(
        self, ev: CaseEvidence, side: Side, bad: Judgement, against: dict[str, np.ndarray] | None = None
    ) -> Localization | None:
        client = side.lowest_client()
        if client is None:
            return None
        self._spent(1)
        low = self.judging.judge(ev, client.run(ev.model.SerializeToString(), ev.inputs), against, side.name)
        return Localization.read(client.level, low, bad)

    @staticmethod
    def _combine(runs: list[SideRuns]) -> CrossJudgement:
        if len(runs) == 1:
            return combine(runs[0])
        return combine(runs[1], runs[0])


__all__ = ["CrossJudgement", "CrossVerdict", "JudgeableCase", "Side", "Triage"]
