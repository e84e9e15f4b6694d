"""The system's own code coverage as feedback: the arcs its Python converter and passes
executed over a campaign, and the lines a change touched.

COMET and Tzer steer by the compiler's coverage: a case that reaches code no case reached
before is kept as a seed, and its mutants search around it. A PR's regression lives in the
lines the PR changed, so a case that is the first to execute one of them weighs most: it
yields like a divergence never seen (1), becomes a parent of the strongest kind, and
teaches the focus its features (generator.focus). A case that only adds arcs elsewhere
yields a little (CODE_GAIN) and becomes a weaker parent. The worker measures
(backends.code_coverage); this keeps the campaign's union across worker restarts, since
each worker only knows its own.

Measuring costs what tracing Python costs: nothing for a C++ build, up to half the test
rate for a converter that is all Python. `every` samples it: one seed in `every` is
measured, chosen from the seed alone, so the same seed gives the same case and the same
decision at any load.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from backends.results import RunResult
from bot.findings.summary import CodeCoverageSummary

CODE_GAIN = 0.2
"""A case's yield for new arcs outside the change: more than a new op pair (bot.campaign.run
PAIR_GAIN), since code reached is what the compiler did with the model, not what it held."""
MEASURE_SALT = 0x636F_7665


@dataclass
class Reach:
    """What one measured run reached first in the campaign."""

    arcs: int = 0
    lines: int = 0
    changed: int = 0
    """Lines of the change executed for the first time."""


@dataclass
class CodeFeedback:
    """One campaign's code coverage of the build under test."""

    changed: dict[str, set[int]] = field(default_factory=dict)
    """Diff path -> head's line numbers the change touched (bot.campaign.hint.Changed.new_lines)."""
    every: int = 1
    arcs: dict[str, set[tuple[int, int]]] = field(default_factory=dict)
    lines: dict[str, set[int]] = field(default_factory=dict)
    measured: int = 0
    reached_change: int = 0
    """Cases that were the first to execute some line of the change."""
    _paths: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def of(cls, changed: Mapping[str, Iterable[int]], every: int) -> CodeFeedback:
        return cls(changed={p: set(lines) for p, lines in changed.items() if lines}, every=max(1, every))

    def measures(self, seed: int) -> bool:
        """Whether the case of `seed` is measured: every one, or one in `every` by the seed."""
        return self.every <= 1 or (seed * 2654435761 ^ MEASURE_SALT) % self.every == 0

    def observe(self, result: RunResult) -> Reach:
        """Add a measured run's first arcs (none: it reached nothing new in its worker) to
        the union; what it reached that no case had."""
        reach = Reach()
        self.measured += 1
        for name, arcs in result.arcs.items():
            mine = self.arcs.setdefault(name, set())
            new = set(arcs) - mine
            if not new:
                continue
            mine |= new
            reach.arcs += len(new)
            executed = self.lines.setdefault(name, set())
            fresh = {line for arc in new for line in arc if line > 0} - executed
            executed |= fresh
            reach.lines += len(fresh)
            diff = self._diff_path(name)
            if diff is not None:
                reach.changed += len(fresh & self.changed[diff])
        if reach.changed:
            self.reached_change += 1
        return reach

    def _diff_path(self, name: str) -> str | None:
        """The diff's path for a measured file: a diff names repository paths
        (`onnx2torch/ops/pad.py`) or paths inside the installed package
        (`relax/frontend/onnx/onnx_frontend.py`), the worker names package paths
        (`tvm/relax/frontend/onnx/onnx_frontend.py`); one is a suffix of the other."""
        if name not in self._paths:
            self._paths[name] = next(
                (p for p in self.changed if name == p or name.endswith("/" + p) or p.endswith("/" + name)), None
            )
        return self._paths[name]

    def summary(self) -> CodeCoverageSummary:
        changed = sum(len(lines) for lines in self.changed.values())
        reached = sum(
            len(self.lines.get(name, set()) & self.changed[diff])
            for name in self.lines
            if (diff := self._diff_path(name)) is not None
        )
        return CodeCoverageSummary(
            measured=self.measured,
            every=self.every,
            files=len(self.arcs),
            arcs=sum(len(a) for a in self.arcs.values()),
            lines=sum(len(lines) for lines in self.lines.values()),
            changed_lines=changed,
            changed_lines_reached=reached,
            cases_reaching_change=self.reached_change,
        )
