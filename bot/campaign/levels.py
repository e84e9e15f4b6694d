"""Which configuration of the build each case runs at, when a campaign draws among several.

A compiler is more than its default level: TVM users fold constants or decompose ops for
inference before the default pipeline, onnxruntime serves with a parallel executor, and
known bugs show only there. A campaign with `levels` runs each case at one of them on
every side (both builds compile it the same way, so the verdict table still compares like
with like), with one worker per side and level, started when a case first needs it.

The draw depends on the case's seed alone: a campaign sharded, or run with any number of
lanes, runs each case at the same level, and a finding names its level in its spec, so its
reduction and its repro run there too.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from dataclasses import replace

from backends.client import BackendUnavailable, WorkerClient
from backends.spec import BackendSpecError, canonical_level
from bot.campaign.side_setup import SideSetup
from bot.campaign.triage import Side
from bot.config import FuzzConfig
from oracles.sides import SideName


def case_level(seed: int, levels: Sequence[str]) -> str | None:
    """The level the case of `seed` runs at; None (the side's own) unless there is a choice.
    A hash, not the generator's stream: drawing a level must not change the case."""
    if len(levels) < 2:
        return levels[0] if levels else None
    return levels[zlib.crc32(f"level {seed}".encode()) % len(levels)]


def check_levels(levels: Sequence[str], clients: Sequence[WorkerClient]) -> list[str]:
    """`levels` as each started side spells them; a level a side's build lacks (a plugin's
    worker lists its own) stops the campaign before any test, in one line."""
    out: list[str] = []
    for level in levels:
        spelled = set()
        for client in clients:
            offered = client.handshake.get("levels") or [client.level]
            try:
                spelled.add(canonical_level(level, offered, client.spec.name))
            except BackendSpecError as e:
                raise BackendUnavailable(f"levels: {e}") from e
        out.append(spelled.pop())
    return out


def make_lane(cfg: FuzzConfig, setups: Sequence[SideSetup], level: str | None = None) -> list[Side]:
    """One worker per side, at the sides' own level or at `level`; only head's gets the
    test fault unless it says `both` (then every failure is persistent), and only head's measures
    the system's code (the build under test: bot.campaign.code_feedback)."""
    fault = cfg.test_fault.spec() if cfg.test_fault else None
    coverage: bool | list[str] = (cfg.guide.coverage_modules or True) if cfg.guide.code_coverage else False
    return [
        Side(
            s.name,
            WorkerClient(
                replace(s.spec, level=level) if level is not None else s.spec,
                s.python,
                cfg.timeout,
                fault=fault if s.name == SideName.head or (cfg.test_fault and cfg.test_fault.both) else None,
                compile_timeout_s=cfg.compile_timeout,
                coverage=coverage if s.name == SideName.head else False,
            ),
        )
        for s in setups
    ]


def offered(level: str | None, lane: Sequence[Side]) -> str | None:
    """`level` where every side of `lane` offers it, else None (the lane's own): a stored
    bundle's level from another backend, or from a build that has since dropped it, is
    replayed where the campaign runs."""
    if level is None:
        return None
    try:
        return check_levels([level], [side.client for side in lane])[0]
    except BackendUnavailable:
        return None


class LevelLanes:
    """One lane's workers at every level its cases draw: the lane the campaign started (its
    own level) and, per other level, a lane made when a case first draws it, whose sides
    share the own lane's lowest-level workers."""

    def __init__(self, cfg: FuzzConfig, setups: Sequence[SideSetup]) -> None:
        self.cfg, self.setups = cfg, setups
        self.own = make_lane(cfg, setups)
        self._others: dict[str, list[Side]] = {}

    def at(self, level: str | None) -> list[Side]:
        if level is None or level == self.own[-1].client.level:
            return self.own
        if level not in self._others:
            lane = make_lane(self.cfg, self.setups, level)
            for side, twin in zip(lane, self.own, strict=True):
                side.twin = twin
            self._others[level] = lane
        return self._others[level]

    def sides(self) -> Iterator[Side]:
        """Every side of every level started so far."""
        yield from self.own
        for lane in self._others.values():
            yield from lane
