"""The workers a reduction runs: how to start one side again (`SideRun`), and one long-lived
worker per side and level for a whole reduction phase (`SidePools`). The reducer's passes
(bot.reduce.finding, bot.reduce.rewrite_blame) take them from here, so neither needs the other
for them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

from backends.client import WorkerClient
from backends.faults import FaultSpec
from backends.spec import BackendSpec, parse_backend
from bot.reduce.candidates import ClientPool
from oracles.judging import Judging


@dataclass(frozen=True)
class SideRun:
    """How to run one side again: its backend spec string, interpreter and test fault."""

    spec: str
    python: str
    timeout_s: float
    fault: FaultSpec | None = None

    def pool(self, spec: BackendSpec) -> ClientPool:
        """One worker on `spec` (this side's, at some level), started on this side's
        interpreter with its limit and test fault."""
        fault = FaultSpec(**self.fault) if self.fault else None
        return ClientPool(lambda: WorkerClient(spec, self.python, self.timeout_s, fault=fault), 1)


class SidePools:
    """One long-lived worker per side (and per level asked for) for the whole reduction
    phase, started on first use: a TVM worker takes seconds to import, and a campaign
    reduces dozens of findings. `judging` is the campaign's pipeline, which judges every
    candidate as the campaign judged the finding."""

    def __init__(self, runs: dict[str, SideRun], judging: Judging) -> None:
        self.runs = runs
        self.judging = judging
        self._pools: dict[tuple[str, str | None], ClientPool] = {}
        self.level: str | None = None
        """Every side's own level in this view (at_level); None: each side's spec's."""

    def at_level(self, level: str | None) -> SidePools:
        """The same workers, with `level` as every side's own: a finding whose case drew a
        level (bot.campaign.levels) is reduced, rechecked and generalized at it."""
        view = copy.copy(self)
        view.level = level
        return view

    def spec(self, side: str, level: str | None = None) -> BackendSpec:
        """`side`'s spec at `level`, else at this view's level, else its own."""
        spec = parse_backend(self.runs[side].spec)
        level = level or self.level
        return replace(spec, level=level) if level else spec

    def side_run(self, side: str) -> SideRun:
        return replace(self.runs[side], spec=str(self.spec(side)))

    def pool(self, side: str, level: str | None = None) -> ClientPool:
        """`side`'s workers, at `level` when given (else this view's, else the side's own)."""
        spec = self.spec(side, level)
        key = (side, spec.level)
        if key not in self._pools:
            self._pools[key] = self.runs[side].pool(spec)
        return self._pools[key]

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
