"""Where two builds of one compiler treated one case differently, even when both were right.

Every two-build test gives two observations of the same case. A change acts where they
differ: a rewrite only one build performs, an op only one declines, outputs that moved by
a few bits. A regression lives where the change acts, so these divergences are what a PR
check should search around, and what a clean PR's comment can still report.

Each divergence is a kind and a key that names where it happened without the case's own
names (tensor names, seeds, numbers), so divergences of many cases add up by key. Compile
time is the one kind that depends on machine load: it is recorded and reported, never fed
back to generation, so a seed still gives the same case at any load.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from enum import StrEnum

import numpy as np
from pydantic import BaseModel, ConfigDict

from backends.results import RunResult, Status
from oracles.sides import SideName
from oracles.verdict import Verdict

SIDES: tuple[str, ...] = tuple(SideName)
SLOWER = 3.0
"""Compile-time ratio, either way, that counts as a divergence..."""
SLOW_FLOOR_S = 0.05
"""...when the slower side took at least this long (below it, timer noise dominates)."""
_WORD = re.compile(r"\b[A-Z][A-Za-z0-9]+\b")


class DivergenceKind(StrEnum):
    support = "support"
    """One build declines (unsupported) a model the other runs."""
    outcome = "outcome"
    """One build fails (an exception, a dead worker, a hang) where the other runs."""
    verdict = "verdict"
    """Both ran; one answer is right and the other wrong, or both wrong in different ways."""
    rewrite = "rewrite"
    """A rewrite (generator.coverage.Coverage.rewrites key) only one build performed."""
    rewrite_count = "rewrite_count"
    """The same rewrite, performed a different number of times: the optimized graphs differ."""
    bits = "bits"
    """Both right, and an output differs in its bits: the arithmetic changed."""
    compile_time = "compile_time"
    """Compile time differs by SLOWER or more: reported, never fed to generation."""

    @property
    def fed(self) -> bool:
        """Whether generation is steered by it (a function of the builds, not of machine load)."""
        return self is not DivergenceKind.compile_time


class Divergence(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: DivergenceKind
    key: str

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.key}"


def divergences(
    base: RunResult,
    head: RunResult,
    verdicts: tuple[Verdict, Verdict],
    producers: Mapping[str, str],
    op_types: Collection[str] = (),
) -> list[Divergence]:
    """What differs between the first runs of one case on base and head. `verdicts` are the
    sides' judgements against the reference, `producers` maps each graph output to the op
    type that writes it, and `op_types` are the model's, to name the op a build declined."""
    runs = dict(zip(SIDES, (base, head), strict=True))
    found = _support(runs, op_types) or _outcome(runs)
    if found:
        return found
    found = _verdict(dict(zip(SIDES, verdicts, strict=True)))
    found += _rewrites(base.rewrites, head.rewrites)
    if verdicts == (Verdict.pass_, Verdict.pass_):
        found += _bits(base, head, producers)
    found += _compile_time(base.compile_s, head.compile_s)
    return found


def _only(runs: Mapping[str, RunResult], status: set[Status]) -> str | None:
    """The one side whose status is in `status` while the other's is not."""
    hit = [s for s, r in runs.items() if r.status in status]
    return hit[0] if len(hit) == 1 else None


def _support(runs: Mapping[str, RunResult], op_types: Collection[str]) -> list[Divergence]:
    side = _only(runs, {Status.unsupported})
    other = runs[SIDES[1 - SIDES.index(side)]] if side else None
    if side is None or other is None or other.status is Status.unsupported:
        return []
    named = [w for w in _WORD.findall(runs[side].message) if w in op_types]
    what = f" {named[0]}" if named else ""
    return [Divergence(kind=DivergenceKind.support, key=f"only {side} declines{what}")]


def _outcome(runs: Mapping[str, RunResult]) -> list[Divergence]:
    failed = {Status.error, Status.crash, Status.timeout}
    side = _only(runs, failed)
    if side is None:
        return []
    r = runs[side]
    how = {Status.error: "raises", Status.crash: "dies", Status.timeout: "hangs"}[r.status]
    stage = f" at {r.stage.value}" if r.stage else ""
    return [Divergence(kind=DivergenceKind.outcome, key=f"only {side} {how}{stage}")]


def _verdict(verdicts: Mapping[str, Verdict]) -> list[Divergence]:
    base, head = verdicts[SideName.base], verdicts[SideName.head]
    if base == head:
        return []
    wrong = [s for s, v in verdicts.items() if v is not Verdict.pass_]
    key = f"only {wrong[0]} is {verdicts[wrong[0]].value}" if len(wrong) == 1 else f"{base.value} -> {head.value}"
    return [Divergence(kind=DivergenceKind.verdict, key=key)]


def _rewrites(base: Mapping[str, int], head: Mapping[str, int]) -> list[Divergence]:
    found = []
    for key in sorted(set(base) | set(head)):
        b, h = base.get(key, 0), head.get(key, 0)
        if b == h:
            continue
        if not b or not h:
            found.append(Divergence(kind=DivergenceKind.rewrite, key=f"{key} only in {'head' if h else 'base'}"))
        else:
            more = "more" if h > b else "fewer"
            found.append(Divergence(kind=DivergenceKind.rewrite_count, key=f"{key} {more} times in head"))
    return found


def _bits(base: RunResult, head: RunResult, producers: Mapping[str, str]) -> list[Divergence]:
    keys = set()
    for name, b in base.outputs.items():
        h = head.outputs.get(name)
        if h is None or b.dtype != h.dtype or b.shape != h.shape or _bytes(b) == _bytes(h):
            continue
        keys.add(f"{producers.get(name, '?')} output ({b.dtype.name})")
    return [Divergence(kind=DivergenceKind.bits, key=k) for k in sorted(keys)]


def _bytes(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _compile_time(base: float | None, head: float | None) -> list[Divergence]:
    if not base or not head or max(base, head) < SLOW_FLOOR_S:
        return []
    if head >= SLOWER * base:
        return [Divergence(kind=DivergenceKind.compile_time, key="head compiles slower")]
    if base >= SLOWER * head:
        return [Divergence(kind=DivergenceKind.compile_time, key="head compiles faster")]
    return []
