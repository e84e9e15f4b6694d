"""How much of a campaign's worker runs judging may take while fuzzing, counted in runs.

A case that looks bad is asked again: k runs per side, a fresh worker, the build's lowest
level; a finding's first reduction runs hundreds of candidates. On a compiler that fails
often, that work took the budget from the search: a campaign on a real pure-Python converter
found 85 failures in its first 368 tests, and spent 159 s triaging and 376 s reducing in a
300-second budget, at 1.3 tests per second. A PR check on such a compiler must still search.

So judging gets a share of the runs: the re-runs and reductions while fuzzing may add at
most `share` of all worker runs, plus a small grant so the first finding is judged at once.
Runs, not seconds, so the same seeds get the same judging at any machine load. What does not
fit waits: a suspect case keeps its first runs and is judged in full once the fuzzing ends
(bot.campaign.run), a reduction waits for the phase after the budget. A regression head
brought in is what a PR check is for, and is never kept waiting; a failure whose name
triage has already confirmed SETTLED times needs no more confirming (its k runs and fresh
worker said the same each time) and costs no re-runs at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel


class JudgingSummary(BaseModel):
    """summary.json's `judging`: the worker runs judging took while fuzzing, against the
    first runs of the tests."""

    share: float
    """The most of all runs judging may take (oracles.judging_share)."""
    first_runs: int = 0
    judging_runs: int = 0
    """Re-runs, fresh workers and lowest levels of triage, and reduction candidates, while fuzzing."""
    judging_share: float = 0.0
    deferred: int = 0
    """Suspect cases judged in full after the fuzzing, for want of runs during it."""
    after_runs: int = 0
    """The runs that took, after the fuzzing."""
    unjudged: int = 0
    """Deferred suspects past the runs judging may take after the fuzzing: counted on their
    first runs, never kept."""
    settled_skips: int = 0
    """Sightings of a failure triage had confirmed enough times, taken on their first runs."""


GRANT = 40
"""Runs judging may take before any test has paid for them: the first suspects of a campaign
are judged in full, and its first finding reduced, at once."""
REDUCTION_RESERVE = 0.25
"""Of the runs judging may take, the part triage of a suspect other than a new regression
leaves to reductions. A reduction is what teaches the campaign to steer away from a bug;
a triage only confirms one sighting. On an old release, triage of distinct names of a few
shared bugs held the whole share: onnxruntime 1.27.0 -> 1.28.0 reduced for 3 s in 300,
and three bugs it never reduced while fuzzing were 551 of its 2,094 tests."""
SETTLED = 2
"""Full triages of one failure (its fingerprints on the bad sides, and the label across them)
after which another sighting is taken on its first runs."""


@dataclass
class JudgingBudget:
    """Runs spent on first runs and on judging; `share` caps judging at a share of all."""

    share: float
    tests: int = 0
    """First runs: one per side per test."""
    judging: int = 0
    """Re-runs, fresh workers and lowest levels of triage, and reduction candidates, while fuzzing."""
    deferred: int = 0
    after: int = 0
    """Runs judging the deferred suspects took after the fuzzing."""
    unjudged: int = 0
    settled_skips: int = 0
    confirmed: dict[tuple[object, ...], int] = field(default_factory=dict)
    """Full triages that reported each failure (bad sides' fingerprints and the label)."""

    def room(self) -> int:
        """Runs judging may still take now: what a reduction may spend."""
        return self._room(1.0)

    def triage_room(self) -> int:
        """Runs a triage may still take now: the room less REDUCTION_RESERVE of the share."""
        return self._room(1.0 - REDUCTION_RESERVE)

    def _room(self, part: float) -> int:
        if self.share >= 1.0:
            return 1 << 30
        allowed = part * self.share / (1.0 - self.share) * self.tests + GRANT
        return max(0, int(allowed) - self.judging)

    def after_room(self) -> int:
        """Runs judging may take after the fuzzing: the share again, of the first runs."""
        if self.share >= 1.0:
            return 1 << 30
        return int(self.share * self.tests) + GRANT

    def allows(self, runs: int) -> bool:
        """Whether a triage of `runs` fits now."""
        return runs <= self.triage_room()

    def settled(self, key: tuple[object, ...]) -> bool:
        return self.confirmed.get(key, 0) >= SETTLED

    def confirm(self, key: tuple[object, ...]) -> None:
        self.confirmed[key] = self.confirmed.get(key, 0) + 1

    def summary(self) -> JudgingSummary:
        spent = self.tests + self.judging
        return JudgingSummary(
            share=self.share,
            first_runs=self.tests,
            judging_runs=self.judging,
            judging_share=round(self.judging / spent, 3) if spent else 0.0,
            deferred=self.deferred,
            after_runs=self.after,
            unjudged=self.unjudged,
            settled_skips=self.settled_skips,
        )
