"""A two-build campaign's divergences: where base and head treated a case differently
(oracles.divergence), counted for summary.json and the PR comment, taught to generation's
focus (generator.focus), and the support a change took away kept on disk.

A divergence key seen for the first time teaches the focus most; the hundredth sighting of
one key adds little (its weight is 1/sqrt of its count), so a change that rewrites every
model with an Add does not drown the one rewrite it made once.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from backends.results import RunResult
from bot.cases.making import Prepared
from bot.findings.bundle import write_bundle
from bot.findings.store import relative_to_root
from bot.findings.summary import DivergenceSummary, DivergentKey, SupportChanges, SupportFinding
from oracles.divergence import Divergence, DivergenceKind, divergences
from oracles.sides import CrossJudgement, CrossVerdict, SideName, SideRuns
from oracles.verdict import Verdict

TOP_KEYS = 12
"""Keys summary.json names (the rest are counted)."""
EXAMPLE_SEEDS = 3
DROPPED_BUNDLES = 3
"""Bundles kept per kind of dropped support (the rest are counted)."""
SUPPORT_FOLDER = "support"
BITS_WEIGHT = 0.25
"""What a bits divergence teaches the focus, against 1 for the other kinds. A release that
changes a math kernel changes the bits of every case that holds the op: onnxruntime 1.21
did so for dozens of ops, and half of all cases diverged in bits from 1.20.1. Such a
divergence is real and reported, but a weak lead; a rewrite only head performs is a strong one."""
RARE = 3
"""The first sightings of a divergence that teach the focus and become parents for mutants;
later ones are counted only (the focus fades unless something new diverges)."""


def _judged(side: SideRuns | None) -> Verdict:
    """A side's verdict for comparing builds: a failure a rule explains counts as right."""
    if side is None:
        return Verdict.pass_
    return Verdict.pass_ if side.rule is not None else side.first.verdict


@dataclass
class Observed:
    """What one test's divergences teach generation."""

    weight: float = 0.0
    """How much its features weigh in the focus (0: nothing to learn)."""
    new: bool = False
    """It showed a divergence no test showed before, other than bits (a yield, bot.cases.mutation)."""
    new_bits: bool = False
    """It showed outputs of an op differing in bits where no test had before (a small yield)."""
    rare: bool = False
    """It showed a divergence other than bits seen at most RARE times: a parent for mutants."""
    rewrites: list[str] = field(default_factory=list)
    """Rewrite keys only one build performed."""
    keys: list[tuple[str, str]] = field(default_factory=list)
    """(kind, key) of each divergence the test showed."""


class DivergenceLog:
    """Counts divergences by kind and key, and keeps what the change took away."""

    def __init__(self, out: Path, fail_on_dropped: bool) -> None:
        self.out = out
        self.tests = 0
        self.fed = 0
        self.kinds: Counter[str] = Counter()
        self.keys: Counter[tuple[str, str]] = Counter()
        self.seeds: dict[tuple[str, str], list[int]] = {}
        self.support = SupportChanges(fails_check=fail_on_dropped)
        self.muted: set[tuple[str, str]] = set()
        """Keys a known bug shows (mute): counted, never taught to generation again. A float16
        Clip regression once made "-Clip only in base" the top key of 452 of 2,075 tests,
        and every Clip case it drew was that one bug again."""

    def mute(self, keys: set[tuple[str, str]]) -> None:
        self.muted |= keys

    def observe(self, case: Prepared, results: list[RunResult], cross: CrossJudgement) -> Observed:
        """Record one two-build test: what its divergences teach generation."""
        if cross.verdict is CrossVerdict.flaky or len(results) != 2:
            return Observed()
        producers = {out: node.op_type for node in case.model.graph.node for out in node.output}
        verdicts = (_judged(cross.base), _judged(cross.head))
        ops = set(producers.values())
        found = divergences(results[0], results[1], verdicts, producers, ops)
        if not found:
            return Observed()
        self.tests += 1
        seen = Observed()
        for d in found:
            kk = (d.kind.value, d.key)
            self.keys[kk] += 1
            self.seeds.setdefault(kk, [])
            if len(self.seeds[kk]) < EXAMPLE_SEEDS:
                self.seeds[kk].append(case.seed)
            seen.keys.append(kk)
            if d.kind.fed and self.keys[kk] <= RARE and kk not in self.muted:
                strong = d.kind is not DivergenceKind.bits
                seen.weight += (1.0 if strong else BITS_WEIGHT) / math.sqrt(self.keys[kk])
                seen.new |= strong and self.keys[kk] == 1
                seen.new_bits |= not strong and self.keys[kk] == 1
                seen.rare |= strong
        self.kinds.update({d.kind.value for d in found})
        self._support(case, results, cross, found)
        if seen.weight:
            self.fed += 1
        seen.rewrites = sorted({k for k in {*results[0].rewrites, *results[1].rewrites} if _one_sided(k, results)})
        return seen

    def _support(
        self, case: Prepared, results: list[RunResult], cross: CrossJudgement, found: list[Divergence]
    ) -> None:
        key = next((d.key for d in found if d.kind is DivergenceKind.support), None)
        if key is None:
            return
        if cross.verdict is CrossVerdict.gained_support:
            self.support.gained[key] = self.support.gained.get(key, 0) + 1
        elif cross.verdict is CrossVerdict.dropped_support:
            self.support.dropped_keys[key] = self.support.dropped_keys.get(key, 0) + 1
            if sum(1 for f in self.support.dropped if f.key == key) < DROPPED_BUNDLES:
                self._keep_dropped(case, results, key)

    def _keep_dropped(self, case: Prepared, results: list[RunResult], key: str) -> None:
        """The model on disk before summary.json names it: model, inputs, what base computed."""
        dest = self.out / SUPPORT_FOLDER / f"dropped-seed{case.seed}"
        write_bundle(dest, case.model, case.inputs, case.reference or dict(results[0].outputs))
        said = {"key": key, SideName.base: results[0].status.value, SideName.head: results[1].message}
        (dest / "support.json").write_text(json.dumps(said, indent=2) + "\n")
        message = " ".join(results[1].message.split())[:300]
        path = relative_to_root(dest, self.out)
        self.support.dropped.append(SupportFinding(path=path, seed=case.seed, key=key, message=message))

    def summary(self) -> DivergenceSummary:
        top = [
            DivergentKey(kind=kind, key=key, tests=n, seeds=self.seeds[(kind, key)])
            for (kind, key), n in sorted(self.keys.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_KEYS]
        ]
        return DivergenceSummary(
            tests=self.tests, kinds=dict(sorted(self.kinds.items())), keys=len(self.keys), top=top, fed=self.fed
        )


def _one_sided(key: str, results: list[RunResult]) -> bool:
    return (key in results[0].rewrites) != (key in results[1].rewrites)
