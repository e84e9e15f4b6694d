"""The verdict across sides: what base and head, each run k times, say together.

| base | head | verdict |
|---|---|---|
| ok | ok | pass |
| ok | bad | new regression |
| bad | ok | fixed |
| bad | bad | persistent |
| declines it (unsupported) | bad | new in head (shown beside regressions; not a regression) |
| ok | declines it | dropped support (its own line; fails the check if configured) |
| declines it | ok | gained support (good news, counted) |
| a side disagrees with itself | | flaky (never a regression) |

"bad" is judged after the false-positive rules: a side whose failure a rule explains
counts as ok, and a case where only explained failures remain is `filtered:<rule>`.
A campaign against one build has no base; every bad case is then persistent.

On an input ONNX leaves undefined (integer division by zero, overflow, out-of-range
casts) no value is wrong, so only a dead process or a hang is bad: one that appears or
goes away between the builds is a new regression or a fix "on an undefined input", and
one both builds have is `crash_on_undefined_input`, counted but never reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from pydantic import BaseModel, Field

from oracles.verdict import Judgement, Verdict


class CrossVerdict(StrEnum):
    pass_ = "pass"
    new_regression = "new_regression"
    fixed = "fixed"
    persistent = "persistent"
    new_in_head = "new_in_head"
    """Base declines the model, head runs it wrong: worth flagging, but not a regression."""
    flaky = "flaky"
    unsupported = "unsupported"
    filtered = "filtered"
    """A known false positive; the rule id says which (count key `filtered:<rule>`)."""
    crash_on_undefined_input = "crash_on_undefined_input"
    """Both builds (or the one) die or hang on an input ONNX leaves undefined: counted only."""
    dropped_support = "dropped_support"
    """Head declines a valid model that base ran right: the change took support away. Kept
    apart (OUT/support/), never reduced or filed; fails the check with
    `oracles.fail_on_dropped_support`."""
    gained_support = "gained_support"
    """Head runs right a model base declined: the change added support. Counted."""

    @property
    def is_reported(self) -> bool:
        """What a maintainer hears about: flaky cases are listed apart, filtered ones only counted."""
        return self in (
            CrossVerdict.new_regression,
            CrossVerdict.new_in_head,
            CrossVerdict.fixed,
            CrossVerdict.persistent,
        )

    @property
    def fails_a_change(self) -> bool:
        """What a PR check fails on: what head broke, or brought in broken."""
        return self in (CrossVerdict.new_regression, CrossVerdict.new_in_head)


LABEL_PRECEDENCE: tuple[str, ...] = (
    CrossVerdict.new_regression.value,
    CrossVerdict.new_in_head.value,
    CrossVerdict.persistent.value,
    CrossVerdict.fixed.value,
)
"""The labels of a reported finding, the one that wins first. One fingerprint can be seen
under several in one campaign (base happens to get one model right and another wrong),
and every output must show one label for it. The label that asks the most of a
maintainer wins, because the cost of each mistake is not the same: a new regression
blocks the change and names its culprit commit, and calling it persistent would let a
change that breaks a model which ran before pass unseen, while the bundle kept for it
shows base passing (it is a sighting of that label, not an inference). What head brought
in broken (new_in_head) fails the check too, but base could not run it, so it is no
regression. A bug head still has on any model is not fixed, so persistent beats fixed.
One-build keys (crash, wrong_result, timeout) never meet: the verdict is part of the
fingerprint."""


def label_rank(label: str | None) -> tuple[int, bool, str]:
    """Sort key of `finding_label`: precedence, then a known label before none (an older
    record's), then by name, so that the choice never depends on the order of sightings."""
    name = label or ""
    known = LABEL_PRECEDENCE.index(name) if name in LABEL_PRECEDENCE else len(LABEL_PRECEDENCE)
    return known, name == "", name


def finding_label(labels: Iterable[str | None]) -> str:
    """The one label of a finding seen under `labels` (LABEL_PRECEDENCE; a one-build key such
    as `crash` ranks after them); "" for none."""
    return min((label or "" for label in labels), key=label_rank, default="")


def as_label(text: str | None) -> CrossVerdict | None:
    """A label as stored in older outputs and the findings store ("" for none), typed."""
    return CrossVerdict(text) if text else None


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


def _undefined_note(sides: list[SideRuns]) -> str:
    reason = next((s.first.undefined for s in sides if s.first.undefined), "")
    return f"on an undefined input: {reason}" if reason else ""


def _notes(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def combine(head: SideRuns, base: SideRuns | None = None) -> CrossJudgement:
    """Apply the table. Flakiness is checked first: a side that cannot agree with
    itself says nothing about the other."""
    sides = [s for s in (base, head) if s is not None]
    shaky = [s.side for s in sides if not s.consistent]
    if shaky:
        return CrossJudgement(verdict=CrossVerdict.flaky, base=base, head=head, note=f"runs disagree on {shaky}")
    if head.first.verdict is Verdict.unsupported:
        if base is not None and base.first.verdict is Verdict.pass_:
            note = f"head declines a model base runs right: {head.first.message}"
            return CrossJudgement(verdict=CrossVerdict.dropped_support, base=base, head=head, note=note)
        return CrossJudgement(verdict=CrossVerdict.unsupported, base=base, head=head)
    if not any(s.bad for s in sides):
        rule = _filtered_rule(sides)
        verdict = CrossVerdict.filtered if rule else CrossVerdict.pass_
        if verdict is CrossVerdict.pass_ and base is not None and base.first.verdict is Verdict.unsupported:
            verdict = CrossVerdict.gained_support
        return CrossJudgement(verdict=verdict, rule=rule, base=base, head=head)
    undefined = _undefined_note(sides)
    judged = "judged against base only: no reference computes this case" if head.first.judged_by == "base" else ""
    if base is None or base.bad == head.bad:
        if undefined:
            return CrossJudgement(verdict=CrossVerdict.crash_on_undefined_input, base=base, head=head, note=undefined)
        note = ""
        if base is not None and base.first.signature != head.first.signature:
            note = f"signature changed: {base.first.signature!r} -> {head.first.signature!r}"
        return CrossJudgement(verdict=CrossVerdict.persistent, base=base, head=head, note=note)
    if head.bad and base.first.verdict is Verdict.unsupported:
        note = _notes("base declines the model (unsupported)", undefined)
        return CrossJudgement(verdict=CrossVerdict.new_in_head, base=base, head=head, note=note)
    if head.bad:
        return CrossJudgement(verdict=CrossVerdict.new_regression, base=base, head=head, note=_notes(undefined, judged))
    return CrossJudgement(verdict=CrossVerdict.fixed, base=base, head=head, note=undefined)
