"""z3 contexts handed out for generation, and the cycles that hold them."""

from __future__ import annotations

import gc
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


def test_a_supply_closed_or_dropped_stops_its_thread_and_frees_its_contexts() -> None:
    """A thread that held its supply kept it, the contexts it made ahead and itself alive for
    the life of the process: about 50 MB a campaign in a bot that runs them back to back."""
    closed, dropped = ContextSupply(), ContextSupply()
    closed.take(), dropped.take()
    threads = [closed._thread, dropped._thread]
    assert all(t is not None and t.is_alive() for t in threads)
    gone = weakref.ref(dropped)
    closed.close()
    del dropped
    gc.collect()
    assert gone() is None, "the thread no longer keeps its supply"
    deadline = time.monotonic() + 10 * STOP_POLL_S + 5
    while any(t is not None and t.is_alive() for t in threads) and time.monotonic() < deadline:
        time.sleep(STOP_POLL_S)
    assert not any(t is not None and t.is_alive() for t in threads)
    assert closed._ready.empty(), "the contexts made ahead are dropped"
    assert isinstance(closed.take(), z3.Context), "a closed supply still hands out fresh contexts"
