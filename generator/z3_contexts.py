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

import gc
import queue
import threading

import z3

AHEAD = 2
"""Contexts kept ready: a model needs at most one."""
COLLECT_EVERY = 50
"""Contexts handed out between two full collections: about 50 MB of z3's memory at most
waits for the collector, and a collection (tens of milliseconds with a campaign's heap)
comes about every 125 models."""


class ContextSupply:
    """Hands out never-used contexts; the thread that makes them starts on the first take."""

    def __init__(self, ahead: int = AHEAD) -> None:
        self._ready: queue.Queue[z3.Context] = queue.Queue(maxsize=ahead)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.taken = 0

    def take(self) -> z3.Context:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._fill, name="z3-contexts", daemon=True)
                self._thread.start()
            self.taken += 1
            collect = self.taken % COLLECT_EVERY == 0
        if collect:
            gc.collect()
        return self._ready.get()

    def _fill(self) -> None:
        while True:
            self._ready.put(z3.Context())
