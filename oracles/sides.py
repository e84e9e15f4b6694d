"""The verdict across sides: what base and head, each run k times, say together.

| base | head | verdict |
|---|---|---|
| ok | ok | pass |
| ok | bad | new regression |
| bad | ok | fixed |
| bad | bad | persistent |
| a side disagrees with itself | | flaky (never a regression) |

"bad" is judged after the false-positive rules: a side whose failure a rule explains
counts as ok, and a case where only explained failures remain is `filtered:<rule>`.
A campaign against one build has no base; every bad case is then persistent.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from oracles.verdict import Judgement, Verdict


class CrossVerdict(StrEnum):
    pass_ = "pass"
    new_regression = "new_regression"
    fixed = "fixed"
    persistent = "persistent"
    flaky = "flaky"
    unsupported = "unsupported"
    filtered = "filtered"
    """A known false positive; the rule id says which (count key `filtered:<rule>`)."""

    @property
    def is_reported(self) -> bool:
        """What a maintainer hears about: flaky cases are listed apart, filtered ones only counted."""
        return self in (CrossVerdict.new_regression, CrossVerdict.fixed, CrossVerdict.persistent)


class Localization(BaseModel):
    """The same build at its lowest level: does the bug need the optimizer?"""

    level: str
    verdict: Verdict
    same_signature: bool
    depends_on_optimization: bool
    """True when the lowest level gets it right: an optimization pass is the suspect."""


class SideRuns(BaseModel):
    """Every run of one case on one side (the first plus the re-runs)."""

    side: str
    runs: list[Judgement] = Field(min_length=1)
    rule: str | None = None
    """The false-positive rule that explains this side's failure, if any."""
    rule_detail: str = ""
    localization: Localization | None = None

    @property
    def first(self) -> Judgement:
        return self.runs[0]

    @property
    def consistent(self) -> bool:
        """Every run gave the same verdict with the same signature."""
        return len({(j.verdict, j.signature) for j in self.runs}) == 1

    @property
    def bad(self) -> bool:
        return self.first.verdict.is_bug and self.rule is None


class CrossJudgement(BaseModel):
    verdict: CrossVerdict
    rule: str | None = None
    base: SideRuns | None = None
    head: SideRuns
    note: str = ""

    @property
    def key(self) -> str:
        """The summary's count key: `filtered:<rule>` for filtered cases, else the verdict."""
        return f"filtered:{self.rule}" if self.verdict is CrossVerdict.filtered else self.verdict.value

    @property
    def culprit(self) -> SideRuns:
        """The side whose failure names the finding: head unless only base is bad."""
        if self.base is not None and self.base.bad and not self.head.bad:
            return self.base
        return self.head


def _filtered_rule(sides: list[SideRuns]) -> str | None:
    return next((s.rule for s in sides if s.rule is not None), None)


def combine(head: SideRuns, base: SideRuns | None = None) -> CrossJudgement:
    """Apply the table. Flakiness is checked first: a side that cannot agree with
    itself says nothing about the other."""
    sides = [s for s in (base, head) if s is not None]
    shaky = [s.side for s in sides if not s.consistent]
    if shaky:
        return CrossJudgement(verdict=CrossVerdict.flaky, base=base, head=head, note=f"runs disagree on {shaky}")
    if head.first.verdict is Verdict.unsupported:
        return CrossJudgement(verdict=CrossVerdict.unsupported, base=base, head=head)
    if not any(s.bad for s in sides):
        rule = _filtered_rule(sides)
        verdict = CrossVerdict.filtered if rule else CrossVerdict.pass_
        return CrossJudgement(verdict=verdict, rule=rule, base=base, head=head)
    if base is None or base.bad == head.bad:
        note = ""
        if base is not None and base.first.signature != head.first.signature:
            note = f"signature changed: {base.first.signature!r} -> {head.first.signature!r}"
        return CrossJudgement(verdict=CrossVerdict.persistent, base=base, head=head, note=note)
    if head.bad:
        note = "base declines the model (unsupported)" if base.first.verdict is Verdict.unsupported else ""
        return CrossJudgement(verdict=CrossVerdict.new_regression, base=base, head=head, note=note)
    return CrossJudgement(verdict=CrossVerdict.fixed, base=base, head=head)
