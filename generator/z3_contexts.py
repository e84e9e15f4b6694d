"""Fresh z3 contexts, made ahead of need on a background thread.

A model that needs the solver gets a context of its own: a context keeps every term made
in it, and a shared one would let earlier models change the solver's answers for a later
one, so the same seed would no longer give the same case. Making a context costs about a
millisecond, on the critical path of the 40% of models that need one. z3's C calls release
the GIL, so a thread makes the next contexts while the model before grows; a context
nobody has used is the same whichever thread made it.

**Collected every COLLECT_EVERY contexts.** A grown model's context, solver, solutions and
terms sit in reference cycles with its graph, so only Python's cycle collector frees them,
and it runs by counts of Python objects: it cannot see that each cycle holds about 1 MB of
z3's native memory. Between full collections generation alone grew by 431 MB per 1,000
models (bench/generation_memory.py), and a soak campaign's bot process reached 2.9 GB. A
full collection every COLLECT_EVERY contexts handed out keeps it flat; counting contexts,
not seconds, keeps the same seed the same case at any load.
"""

from __future__ import annotations

import contextlib
import gc
import queue
import threading
import weakref

import z3

AHEAD = 2
"""Contexts kept ready: a model needs at most one."""
COLLECT_EVERY = 50
"""Contexts handed out between two full collections: about 50 MB of z3's memory at most
waits for the collector, and a collection (tens of milliseconds with a campaign's heap)
comes about every 125 models."""


class ContextSupply:
    """Hands out never-used contexts; the thread that makes them starts on the first take,
    and stops when the supply is closed or no longer referenced.

    The thread holds the queue and a stop flag, never the supply: a thread that held it kept
    it, its waiting contexts and itself alive for the life of the process, about 50 MB a
    supply, so a bot running campaigns back to back (bench/soak.py) grew by that much, or
    twice that with two lanes, per campaign."""

    def __init__(self, ahead: int = AHEAD) -> None:
        self._ready: queue.Queue[z3.Context] = queue.Queue(maxsize=ahead)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closer = weakref.finalize(self, _stop_filling, self._stop, self._ready)
        self.taken = 0

    def take(self) -> z3.Context:
        with self._lock:
            if self._stop.is_set():  # closed: made here, as the thread would have made it
                return z3.Context()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=_fill, args=(self._ready, self._stop), name="z3-contexts", daemon=True
                )
                self._thread.start()
            self.taken += 1
            collect = self.taken % COLLECT_EVERY == 0
        if collect:
            gc.collect()
        return self._ready.get()

    def close(self) -> None:
        """Stop the thread and drop the contexts it made ahead."""
        self._closer()


STOP_POLL_S = 0.1
"""How often a thread whose queue is full looks whether its supply was closed."""


def _fill(ready: queue.Queue[z3.Context], stop: threading.Event) -> None:
    while not stop.is_set():
        context = z3.Context()
        while not stop.is_set():
            try:
                ready.put(context, timeout=STOP_POLL_S)
                break
            except queue.Full:
                continue
    _drain(ready)  # a put that the closer's drain made room for may have landed after it


def _stop_filling(stop: threading.Event, ready: queue.Queue[z3.Context]) -> None:
    stop.set()
    _drain(ready)


def _drain(ready: queue.Queue[z3.Context]) -> None:
    with contextlib.suppress(queue.Empty):
        while True:
            ready.get_nowait()
