"""Generation in processes of its own, feeding the execution lanes.

Growing a model, searching its values and computing the reference take most of a cold
campaign's time, all of it Python under one interpreter lock. With `jobs` lanes, `jobs`
generation processes make the cases instead, each a few seeds ahead, so a lane takes a
ready case and the campaign's process keeps to running and judging.

Seeds are dealt round robin in the order the campaign issues them, and taken back in that
order: process k makes every k-th seed with its own coverage, so the same seeds and the
same number of processes give the same cases. The rewrites the systems report and the
triggers of bugs learned while fuzzing reach each process with its next seed.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import bot
from bot.cases.making import Made, make_case, mark_mutant
from bot.cases.mutation import MutationPlan
from bot.cases.opsets import OpsetPlan
from generator.api import GenConfig
from generator.avoid import Avoid, Trigger
from generator.coverage import Coverage
from generator.focus import Focus
from generator.framing import receive, send
from generator.mutate import Genome
from generator.z3_contexts import ContextSupply

AHEAD = 2
"""Seeds each process is given before its first is taken: enough to hide one slow model."""


@dataclass(frozen=True)
class Plan:
    """What every process needs to make a seed's case, sent once at its start."""

    cfg: GenConfig
    opsets: OpsetPlan
    """Each seed's opset, and the support matrices it draws from."""
    strength: float


@dataclass
class Request:
    seed: int
    rewrites: Counter[str]
    triggers: list[Trigger]
    focus: Focus | None = None
    """The campaign's focus as it stands (generator.focus); None: unchanged since the last request."""
    genome: Genome | None = None
    """The genome to grow a mutant from (generator.mutate); None: a fresh case."""


def serve(inbox: IO[bytes], outbox: IO[bytes]) -> None:
    """A generation process: its Plan, then one case per request until a None; then its
    coverage and what its known triggers steered away from."""
    plan: Plan = receive(inbox)
    coverage = Coverage()
    contexts = ContextSupply()
    avoid = Avoid([], plan.strength)
    focus = Focus()
    while (request := receive(inbox)) is not None:
        coverage.rewrites.update(request.rewrites)
        for trigger in request.triggers:
            avoid.add(trigger)
        focus = request.focus if request.focus is not None else focus
        cfg, support = plan.opsets.case_config(plan.cfg, request.seed, request.genome)
        send(outbox, make_case(request.seed, cfg, support, coverage, avoid, contexts, focus, request.genome))
    send(outbox, (coverage, dict(avoid.steered)))


def _spawn(plan: Plan) -> subprocess.Popen[bytes]:
    """`python -m bot.cases.generation_pool`, importing this checkout's fuzzbot (a child of a
    process whose own main module is a script must never re-run it)."""
    root = str(Path(bot.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    child = subprocess.Popen(
        [sys.executable, "-m", "bot.cases.generation_pool"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    assert child.stdin is not None
    with contextlib.suppress(OSError):  # it died at once: its first `take` finds out
        send(child.stdin, plan)
    return child


@dataclass
class _Child:
    process: subprocess.Popen[bytes]
    rewrites: Counter[str] = field(default_factory=Counter)
    """Reported since this process's last request."""
    triggers_sent: int = 0
    focus_sent: int = -1
    """The focus version (GenerationPool.focus_version) this process last got."""

    @property
    def inbox(self) -> IO[bytes]:
        assert self.process.stdin is not None
        return self.process.stdin

    @property
    def outbox(self) -> IO[bytes]:
        assert self.process.stdout is not None
        return self.process.stdout


class GenerationPool:
    def __init__(
        self,
        plan: Plan,
        processes: int,
        avoid: Avoid | None,
        focus: Focus | None = None,
        planner: Callable[[int], MutationPlan | None] | None = None,
    ) -> None:
        """`planner` says, as each seed is dealt, whether it is a mutant (bot.cases.mutation)."""
        self.plan = plan
        self.avoid = avoid
        self.focus = focus
        self.planner = planner
        self.focus_version = 0
        """Bumped by the campaign each time `focus` learns something (note_focus)."""
        self.children = [_Child(_spawn(plan)) for _ in range(processes)]
        self.pending: deque[tuple[int, _Child, MutationPlan | None]] = deque()
        self.dealt = 0

    def note_rewrites(self, keys: Counter[str]) -> None:
        for child in self.children:
            child.rewrites.update(keys)

    def note_focus(self) -> None:
        """The focus changed: each process gets a copy with its next request."""
        self.focus_version += 1

    def take(self, seeds: Iterator[int]) -> Made:
        """The next seed's case, in the order `seeds` gives them; keeps every process `AHEAD`
        seeds ahead."""
        while len(self.pending) < AHEAD * len(self.children):
            self._deal(next(seeds))
        seed, child, mutation = self.pending.popleft()
        try:
            made: Made = receive(child.outbox)
        except (EOFError, OSError, pickle.UnpicklingError):
            self._restart(child)
            return Made(seed, None, "generation_process_died")
        return mark_mutant(made, mutation)

    def _deal(self, seed: int) -> None:
        child = self.children[self.dealt % len(self.children)]
        self.dealt += 1
        mutation = self.planner(seed) if self.planner is not None else None
        self.pending.append((seed, child, mutation))
        self._request(child, seed, mutation)

    def _request(self, child: _Child, seed: int, mutation: MutationPlan | None) -> None:
        triggers = self.avoid.triggers if self.avoid is not None else []
        focus = self.focus.copy() if self.focus is not None and child.focus_sent != self.focus_version else None
        genome = mutation.mutant.genome if mutation is not None else None
        request = Request(seed, child.rewrites, list(triggers[child.triggers_sent :]), focus, genome)
        child.rewrites, child.triggers_sent, child.focus_sent = Counter(), len(triggers), self.focus_version
        with contextlib.suppress(OSError):  # a dead process: `take` finds it and restarts it
            send(child.inbox, request)

    def _restart(self, child: _Child) -> None:
        """A process that died (killed, out of memory, a crash in a library) loses the seed it
        was making; a fresh one takes its other seeds, in order, with a fresh coverage."""
        child.process.kill()
        child.process.wait()
        for stream in (child.inbox, child.outbox):
            with contextlib.suppress(OSError):  # unsent bytes to a dead process
                stream.close()
        child.process, child.triggers_sent, child.focus_sent = _spawn(self.plan), 0, -1
        for seed, owner, mutation in self.pending:
            if owner is child:
                self._request(child, seed, mutation)

    def close(self, absorb: Callable[[Coverage, dict[str, int]], Any]) -> None:
        """Stop every process, handing each one's coverage and steering counts to `absorb`;
        the seeds dealt and not taken are dropped unmade, as a stopped campaign drops them."""
        for child in self.children:
            try:
                for _ in [p for p in self.pending if p[1] is child]:
                    receive(child.outbox)
                send(child.inbox, None)
                absorb(*receive(child.outbox))
            except (EOFError, OSError, pickle.UnpicklingError):
                pass
            for stream in (child.inbox, child.outbox):
                with contextlib.suppress(OSError):
                    stream.close()
            try:
                child.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
        self.pending.clear()


def main() -> None:
    """The child's side: messages on the original stdout, anything printed goes to stderr."""
    outbox = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve(sys.stdin.buffer, outbox)


if __name__ == "__main__":
    main()
