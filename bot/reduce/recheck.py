"""A label asked again when its finding does not reproduce at the start of its reduction.

A regression or a fix is a claim about both builds: one fails the case, the other runs it
right. The campaign's k runs of each side are the evidence; the reduction's first check is
a second look, in other worker processes. When that look does not reproduce the finding,
the reducer leaves it unreduced, which is right for a failure that slips through now and
then. But if the side that passed every campaign run now fails, or the side that failed
every run now passes, that side's runs disagree, and the table (oracles.sides) calls such a
case flaky: the label is not a claim the builds back.

Seen on onnxruntime 1.27.0 -> 1.28.0: a Pad in "wrap" mode reads past its input. Head
passed a Hardmax case three times in a worker other cases had used, so the case was
labelled `fixed`; the reduction's check, and every fresh process after it, failed it on
head. A `fixed` report whose repro prints BUG on the fixed build is the wrong label the
issue tracker would close.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.findings.bundle import Finding, load_bundle
from bot.reduce.candidates import CandidateJudge
from bot.reduce.workers import SidePools
from oracles.verdict import Judgement, Verdict
from reducers.candidate import Candidate


@dataclass(frozen=True)
class Disagreement:
    """A side whose answer on the original changed between the campaign and the reduction."""

    side: str
    was: str
    now: Judgement

    @property
    def note(self) -> str:
        what = self.now.verdict.value + (f" ({self.now.symptom})" if self.now.symptom else "")
        return f"{self.side} {self.was} on every campaign run, then {what} when the reduction asked again"


def disagreement(bundle: Path, finding: Finding, guard: str, pools: SidePools) -> Disagreement | None:
    """The side whose runs now disagree with the label, asking each side up to k times
    (oracles.asking: as often as the campaign's runs made the claim):
    the guard failing, or (the guard still passing) the failing side passing. None when both
    still say what the label says, or the pipeline sets every run aside."""
    bundle_ = load_bundle(bundle)
    case = Candidate(bundle_.model, bundle_.inputs)
    for side, was in ((guard, "passed"), (finding.side, "failed")):
        found = _other_than(was, case, CandidateJudge(pools.pool(side), pools.judging))
        if found is not None:
            return Disagreement(side, was, found)
    return None


def _other_than(was: str, case: Candidate, judge: CandidateJudge) -> Judgement | None:
    """The first of the side's asks that does not say what its campaign runs said."""

    def differs(now: Judgement) -> bool:
        return (was == "passed") == now.verdict.is_bug and now.verdict is not Verdict.unsupported

    return judge.judging.asking.first_of_claim(lambda: judge.judge(case), differs)


__all__ = ["Disagreement", "disagreement"]
