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
| some runs of a side fail, others pass | | flaky (never a regression) |

A side that fails every run is bad, however its runs fail (memory corruption shows another
symptom each time); the note gives the mix and the most frequent failure speaks for it.

"bad" is judged after the false-positive rules: a side whose failure a rule explains
counts as ok, and a case where only explained failures remain is `filtered:<rule>`.
A campaign against one build has no base; every bad case is then persistent.

On an input ONNX leaves undefined (integer division by zero, overflow, out-of-range
casts) no value is wrong, so only a dead process or a hang is bad: one that appears or
goes away between the builds is a new regression or a fix "on an undefined input", and
one both builds have is `crash_on_undefined_input`, counted but never reported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, Field

from oracles.references import Source
from oracles.verdict import Judgement, Symptom, Verdict, crash_kind

FILTERED_PREFIX = "filtered:"
"""The count key of a known false positive is this and the rule's id (oracles.count_keys)."""


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
    def is_bug(self) -> bool:
        """Reported, and a bug in some build: everything reported but `fixed` (good news)."""
        return self.is_reported and self is not CrossVerdict.fixed

    @property
    def fails_a_change(self) -> bool:
        """What a PR check fails on: what head broke, or brought in broken."""
        return self in (CrossVerdict.new_regression, CrossVerdict.new_in_head)


class SideName(StrEnum):
    """The two builds of a two-build campaign (a one-build campaign has head alone)."""

    base = "base"
    head = "head"


def _typed_key(value: object) -> object:
    """A stored key as a CrossVerdict where it names one; `filtered:<rule>` and "" stay text."""
    if not isinstance(value, str) or isinstance(value, CrossVerdict):
        return value
    try:
        return CrossVerdict(value)
    except ValueError:
        return value


CrossKey = Annotated[CrossVerdict | str, BeforeValidator(_typed_key)]
"""A case's count key across sides (CrossJudgement.key) as finding.json stores it, typed: a
CrossVerdict, or `filtered:<rule>` for a known false positive, or "" (older outputs).
The label of a reported finding (FindingRef.across) is the narrower `CrossVerdict | None`."""


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
blocks the change and names its first bad commit, and calling it persistent would let a
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

    @classmethod
    def read(cls, level: str, low: Judgement, bad: Judgement) -> Localization:
        """What the lowest level's judgement `low` says of the failure `bad`: triage asks it of
        a case, the reduction again of the reduced trigger (bot.reduce.finding.relocalize).
        Only a run the lowest level gets right shows the optimizer is needed: one it declines
        says nothing (onnxruntime 1.28 declines at `disable` a model whose
        GemmTransposeFusion crash it has at `all`, and a reduction that kept "passes at
        disable" could not even start)."""
        return cls(
            level=level,
            verdict=low.verdict,
            same_signature=low.verdict is bad.verdict and low.signature == bad.signature,
            depends_on_optimization=low.verdict is Verdict.pass_,
        )


class SideRuns(BaseModel):
    """Every run of one case on one side (the first plus the re-runs)."""

    side: str
    runs: list[Judgement] = Field(min_length=1)
    rule: str | None = None
    """The false-positive rule that explains this side's failure, if any."""
    rule_detail: str = ""
    localization: Localization | None = None
    fresh: Judgement | None = None
    """The run in a fresh worker process, asked for when every other run of a reported
    failure came after earlier cases in one process (bot.campaign.triage)."""
    stale: str = ""
    """The failures a used worker showed on a case a fresh one ran right (the runs are then
    the fresh one alone): state an earlier case left behind, not this case's bug."""

    @property
    def first(self) -> Judgement:
        """The judgement that speaks for the side: on a side that failed every run in more
        than one way (a corrupted heap shows wrong values on one run, a SIGSEGV on the
        next), the most frequent kind of failure, the earliest among equals, so that a
        reduction chases the symptom seen most (TVM 0.25's GatherND on negative indices gave
        values x3 and nonfinite x1, the last in the fresh worker; chasing the nonfinite one,
        the reducer could not reproduce it); else the fresh worker's, when one was asked;
        else the first run's."""
        if self.mixed:
            seen = Counter(_kind(j) for j in self.runs)
            most = max(seen.values())
            return next(j for j in self.runs if seen[_kind(j)] == most)
        if self.fresh is not None:
            return self.fresh
        return self.runs[0]

    @property
    def flaky(self) -> bool:
        """Some runs fail and some do not (or, none failing, they differ in kind). A side
        whose runs all fail, however differently, is failing, not flaky: memory corruption
        fails every run with another symptom each time."""
        failing = {j.verdict.is_bug for j in self.runs}
        return len(failing) > 1 or (failing == {False} and len({j.verdict for j in self.runs}) > 1)

    @property
    def mixed(self) -> bool:
        """Every run failed, not all alike."""
        return all(j.verdict.is_bug for j in self.runs) and len({(j.verdict, j.signature) for j in self.runs}) > 1

    @property
    def symptoms(self) -> str:
        """The mix of a side's failures, most frequent first: `crash (signal 11) x2, wrong_result x1`."""
        seen = Counter(f"{j.verdict.value} ({j.symptom})" if j.symptom else j.verdict.value for j in self.runs)
        return ", ".join(f"{name} x{n}" for name, n in seen.most_common())

    @property
    def bad(self) -> bool:
        return self.first.verdict.is_bug and self.rule is None


class CrossJudgement(BaseModel):
    verdict: CrossVerdict
    rule: str | None = None
    base: SideRuns | None = None
    head: SideRuns
    note: str = ""
    base_failure: str = ""
    """Of a persistent case whose sides fail differently (another kind of failure, stage
    or symptom): base's failure. The label is provisional until base is asked about the
    reduced model (bot.reduce.campaign): a crash new in head once read as persistent
    because base failed on the same case for another reason."""
    deferred: bool = False
    """Triage judged only the first runs: its re-runs did not fit the runs judging may take
    while fuzzing (oracles.judging_budget), so the case is judged again after it."""

    @property
    def key(self) -> str:
        """The summary's count key: `filtered:<rule>` for filtered cases, else the verdict."""
        return f"{FILTERED_PREFIX}{self.rule}" if self.verdict is CrossVerdict.filtered else self.verdict.value

    @property
    def failing(self) -> SideRuns:
        """The failing side, whose failure names the finding: head unless only base is bad.
        (Of the other two things once called a culprit, the first bad commit is
        bot.bisect's `first_bad` and the rewrite to blame bot.reduce.rewrite_blame's.)"""
        if self.base is not None and self.base.bad and not self.head.bad:
            return self.base
        return self.head


def fails_differently(a: Judgement, b: Judgement) -> bool:
    """Two failures of one model that are not one bug: another verdict (a crash against a
    wrong result), another stage (compile against run), another symptom (an exception
    against a SIGSEGV, values against a shape) or wrong values in other outputs. A
    reworded message is the same failure."""
    return (a.verdict, a.stage, a.symptom, _wrong_outputs(a)) != (b.verdict, b.stage, b.symptom, _wrong_outputs(b))


def _wrong_outputs(j: Judgement) -> frozenset[str]:
    return frozenset(o.name for o in j.comparison.outputs if o.mismatch) if j.comparison else frozenset()


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
    shaky = [s.side for s in sides if s.flaky]
    if shaky:
        return CrossJudgement(verdict=CrossVerdict.flaky, base=base, head=head, note=f"runs disagree on {shaky}")
    cross = _combine_settled(head, base)
    mixed = [f"{s.side} failed every run, not alike: {s.symptoms}" for s in sides if s.mixed]
    stale = [f"{s.side} failed only in a worker earlier cases had used ({s.stale})" for s in sides if s.stale]
    extra = [*mixed, *stale]
    return cross.model_copy(update={"note": _notes(cross.note, *extra)}) if extra else cross


def _combine_settled(head: SideRuns, base: SideRuns | None) -> CrossJudgement:
    """The table, for sides that each agree with themselves on passing or failing."""
    sides = [s for s in (base, head) if s is not None]
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
    judged = "judged against base only: no reference computes this case" if head.first.judged_by == Source.base else ""
    if base is None or base.bad == head.bad:
        if undefined:
            return CrossJudgement(verdict=CrossVerdict.crash_on_undefined_input, base=base, head=head, note=undefined)
        note, differs = "", ""
        if base is not None and fails_differently(base.first, head.first):
            differs = f"{base.first.verdict.value} ({base.first.symptom}) at {base.first.stage}: {base.first.message}"
            note = f"base fails differently: {differs[:300]}"
        elif base is not None and base.first.signature != head.first.signature:
            note = f"signature changed: {base.first.signature!r} -> {head.first.signature!r}"
        return CrossJudgement(verdict=CrossVerdict.persistent, base=base, head=head, note=note, base_failure=differs)
    if head.bad and base.first.verdict is Verdict.unsupported:
        note = _notes("base declines the model (unsupported)", undefined)
        return CrossJudgement(verdict=CrossVerdict.new_in_head, base=base, head=head, note=note)
    if head.bad:
        return CrossJudgement(verdict=CrossVerdict.new_regression, base=base, head=head, note=_notes(undefined, judged))
    return CrossJudgement(verdict=CrossVerdict.fixed, base=base, head=head, note=undefined)


def _kind(j: Judgement) -> tuple[Verdict, str]:
    """A failure's kind among a side's runs: a wrong result's kind of mismatch, a death's
    kind (memory corruption under any signal is one), an error's message."""
    if j.verdict is Verdict.wrong_result:
        return j.verdict, j.symptom
    if j.verdict is Verdict.crash and j.symptom != Symptom.exception:
        return j.verdict, crash_kind(j)
    return j.verdict, j.signature
