"""z3 contexts handed out for generation, and the cycles that hold them."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import z3

from generator.z3_contexts import COLLECT_EVERY, STOP_POLL_S, ContextSupply


class _Cycle:
    """Stands for a grown model: a context and what was made in it, in a reference cycle."""

    def __init__(self, ctx: object) -> None:
        self.ctx = ctx
        self.me = self


def test_the_supply_collects_cycles_holding_contexts_every_so_many_contexts() -> None:
    """Python's collector counts objects, not z3's native megabytes behind them: a model's
    context in a cycle waited for a full collection, and generation grew by 431 MB per 1,000
    models. The supply runs one every COLLECT_EVERY contexts, whatever the collector's own
    thresholds say (here it is switched off)."""
    supply = ContextSupply()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        held = weakref.ref(_Cycle(supply.take()))
        for _ in range(COLLECT_EVERY - 2):
            supply.take()
        assert held() is not None  # nothing collected it yet: the cycle holds its context
        supply.take()
        assert held() is None
    finally:
        if was_enabled:
            gc.enable()


def _fillers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "z3-contexts"]


def test_a_supply_closed_or_dropped_stops_its_thread_and_frees_its_contexts() -> None:
    """A thread that held its supply kept it, the contexts it made ahead and itself alive for
    the life of the process: about 50 MB a campaign in a bot that runs them back to back."""
    before = len(_fillers())
    closed, dropped = ContextSupply(), ContextSupply()
    closed.take(), dropped.take()
    assert len(_fillers()) == before + 2
    waiting = weakref.ref(closed._ready)
    closed.close()
    del dropped
    gc.collect()
    deadline = time.monotonic() + 10 * STOP_POLL_S + 5
    while len(_fillers()) > before and time.monotonic() < deadline:
        time.sleep(STOP_POLL_S)
    assert len(_fillers()) == before
    assert waiting() is not None and waiting().empty()  # type: ignore[union-attr]
    assert isinstance(closed.take(), z3.Context), "a closed supply still hands out fresh contexts"
