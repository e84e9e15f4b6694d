"""Culprit bisection: the first commit between a good and a bad ref that shows a finding's bug.

Each tested commit is built (cached, by `bot.sides.workspace`) and runs the bundle's model k
times on that build's worker, each run judged by the campaign's own pipeline
(oracles.judging). Bug identity decides the outcome, not mere failure: a
commit is bad only when every run has the bundle's verdict class and signature, good
when every run passes; a commit whose runs disagree, that fails another way (another
signature, unsupported, a worker that cannot start), or that does not build is skipped,
as `git bisect skip` would. A search whose skipped commits border the boundary cannot
name one commit and returns the candidates instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from backends.client import BackendUnavailable, WorkerClient
from backends.spec import BackendSpec, system_modules
from bot.errors import UserError
from bot.findings.bundle import Bundle
from bot.sides.isolation import BuildRoots, IsolationError, check_isolation
from bot.sides.workspace import BuildFailed, Commit, Workspace, WorkspaceError
from oracles.bug_identity import Distance, same_bug
from oracles.judging import Judging
from oracles.references import Source
from oracles.sides import CrossVerdict, SideRuns
from oracles.verdict import Judgement, Verdict


class BisectError(UserError):
    """A bisection that cannot start (bad refs, a bundle that does not reproduce); one line."""


class Outcome(StrEnum):
    good = "good"
    bad = "bad"
    skip = "skip"


@dataclass(frozen=True)
class Step:
    commit: Commit
    outcome: Outcome
    detail: str
    """What the runs showed (`wrong_result x3`), or why the commit was skipped."""
    built: bool = False
    """Whether this step built the commit now (False when its build came from the cache)."""


@dataclass
class BisectResult:
    good: Commit
    bad: Commit
    first_bad: Commit | None
    candidates: list[Commit]
    """Just the first bad commit when decided; otherwise every commit that may be it."""
    steps: list[Step] = field(default_factory=list)

    @property
    def builds(self) -> int:
        return sum(s.built for s in self.steps)


@dataclass(frozen=True)
class BugIdentity:
    """The bug being bisected: the bundle's judgement, which a commit's run shows when it is
    the same bug at another commit (oracles.bug_identity: the model stays fixed while the build
    changes, so a wrong result keeps its kind of mismatch, a death its kind, anything else
    its signature)."""

    original: Judgement
    declined_is_good: bool = False
    """For a `new_in_head` finding: a commit that declines the model (unsupported) is before
    the bug, so the search names the first commit that runs it wrong."""

    @property
    def verdict(self) -> Verdict:
        return self.original.verdict

    @property
    def signature(self) -> str:
        return self.original.signature

    def shown_by(self, judgement: Judgement) -> bool:
        return same_bug(self.original, judgement, Distance.commit)


def classify(identity: BugIdentity, judgements: Sequence[Judgement]) -> tuple[Outcome, str]:
    """Good, bad or skip for one commit's k runs, with the reason in a few words."""
    kinds = [j.verdict.value for j in judgements]
    if all(j.verdict is Verdict.pass_ for j in judgements):
        return Outcome.good, f"pass x{len(judgements)}"
    if identity.declined_is_good and all(j.verdict is Verdict.unsupported for j in judgements):
        return Outcome.good, f"declines the model x{len(judgements)}"
    if all(identity.shown_by(j) for j in judgements):
        return Outcome.bad, f"{identity.verdict.value} x{len(judgements)}"
    if len(set(kinds)) > 1 or len({j.signature for j in judgements}) > 1:
        return Outcome.skip, f"runs disagree: {', '.join(kinds)}"
    first = judgements[0]
    return Outcome.skip, f"fails differently: {first.verdict.value}: {first.signature or first.message}"


def search(commits: Sequence[Commit], test: Callable[[Commit], Step]) -> tuple[list[Commit], list[Step]]:
    """Binary search over `commits` (after the good ref; the last is known bad).

    Returns the candidates for the first bad commit (one when decided) and the steps.
    After a skip, the untested commit nearest the midpoint is tried next (the later
    one on a tie), so a broken build costs one extra step, not the whole search.
    """
    lo, hi = -1, len(commits) - 1  # last known good index (-1: the good ref), first known bad
    skipped: set[int] = set()
    steps: list[Step] = []
    while True:
        untested = [i for i in range(lo + 1, hi) if i not in skipped]
        if not untested:
            return list(commits[lo + 1 : hi + 1]), steps
        mid = (lo + hi) // 2
        i = min(untested, key=lambda k: (abs(k - mid), -k))
        step = test(commits[i])
        steps.append(step)
        if step.outcome is Outcome.good:
            lo = i
        elif step.outcome is Outcome.bad:
            hi = i
        else:
            skipped.add(i)


class CommitTester:
    """Builds a commit and judges the bundle's model on it, k times (the judging's
    oracles.asking), against the bundle's
    reference, as the campaign judged it (oracles.judging: the envelope, the rules shipped
    and the user's, a wrong result against torch confirmed by a second reading): a commit
    whose failure a false-positive rule explains, or that no second reading confirms, is
    not showing the bug."""

    def __init__(
        self,
        workspace: Workspace,
        spec: BackendSpec,
        bundle: Bundle,
        identity: BugIdentity,
        judging: Judging,
        timeout_s: float = 10.0,
    ) -> None:
        if bundle.reference is None or not bundle.inputs:
            raise BisectError(f"{bundle.path}: bisection needs the bundle's inputs.npz and reference.npz")
        self.workspace = workspace
        self.spec = spec
        self.identity = identity
        self.timeout_s = timeout_s
        self.model = bundle.model
        self.model_bytes = bundle.model.SerializeToString()
        self.inputs = bundle.inputs
        self.judging = judging
        judged_by = bundle.finding.judged_by if bundle.finding is not None else ""
        source = Source(judged_by) if judged_by in {s.value for s in Source} else Source.torch
        self.evidence = judging.evidence(bundle.model, bundle.inputs, bundle.reference, source)

    def __call__(self, commit: Commit) -> Step:
        try:
            side = self.workspace.prepare_commit(commit.sha)
        except BuildFailed as e:
            how = "build failed earlier" if e.cached else "build failed"
            return Step(commit, Outcome.skip, f"{how} (log: {e.log})", built=not e.cached)
        roots = BuildRoots(side.root, side.shared) if side.root is not None else None
        try:
            judgements = self.runs(str(side.python), roots)
        except BackendUnavailable as e:
            return Step(commit, Outcome.skip, f"worker unavailable: {e}", built=not side.cached)
        outcome, detail = classify(self.identity, judgements)
        return Step(commit, outcome, detail, built=not side.cached)

    @staticmethod
    def identity_of(finding: Judgement, across: str) -> BugIdentity:
        """The bug a finding names, as bisection looks for it."""
        return BugIdentity(finding, across == CrossVerdict.new_in_head)

    def runs(self, python: str, roots: BuildRoots | None = None) -> list[Judgement]:
        """k judged runs on the build under `python`; with `roots`, the worker must prove it
        imports that build (bot.sides.isolation), or the bisection stops: every step would test
        the same code."""
        with WorkerClient(self.spec, python, self.timeout_s) as client:
            if roots is not None:
                system = (*system_modules(self.spec), *client.handshake.get("system_modules", ()))
                try:
                    check_isolation("under test", client.modules, roots, tuple(system))
                except IsolationError as e:
                    raise BisectError(str(e)) from e
            return self.judging.asking.claim(
                lambda: as_bisected(self.judging.run(self.evidence, client.run(self.model_bytes, self.inputs)))
            )


def as_bisected(runs: SideRuns) -> Judgement:
    """A run's judgement, a failure the judging sets aside (a rule, an unconfirmed wrong
    result) read as the pass it is for the bug's purposes."""
    judged = runs.first
    if runs.rule is None or not judged.verdict.is_bug:
        return judged
    return judged.model_copy(update={"verdict": Verdict.pass_, "message": f"set aside: {runs.rule}: {judged.message}"})


def bisect(
    workspace: Workspace,
    tester: Callable[[Commit], Step],
    good: str,
    bad: str,
    on_step: Callable[[Step], None] | None = None,
) -> BisectResult:
    """Check that `bad` shows the bug and `good` does not, then search the commits between."""
    try:
        good_commit, bad_commit = workspace.describe(good), workspace.describe(bad)
        commits = workspace.commits_between(good, bad)
    except WorkspaceError as e:
        raise BisectError(str(e)) from e
    if not commits:
        raise BisectError(f"--good {good} and --bad {bad} are the same commit")
    steps: list[Step] = []

    def run(commit: Commit) -> Step:
        step = tester(commit)
        steps.append(step)
        if on_step is not None:
            on_step(step)
        return step

    try:
        for ref, commit, wanted in ((bad, bad_commit, Outcome.bad), (good, good_commit, Outcome.good)):
            step = run(commit)
            if step.outcome is not wanted:
                flag = "--bad" if wanted is Outcome.bad else "--good"
                raise BisectError(f"{flag} {ref} ({commit.short}) is not {wanted.value}: {step.detail}")
        candidates, _ = search(commits, run)
    except WorkspaceError as e:  # a checkout that git refuses, not a build failure: nothing to skip
        raise BisectError(str(e)) from e
    first_bad = candidates[0] if len(candidates) == 1 else None
    return BisectResult(good_commit, bad_commit, first_bad, candidates, steps)
