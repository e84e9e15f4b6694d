"""Fresh z3 contexts, made ahead of need on a background thread.

A model that needs the solver gets a context of its own: a context keeps every term made
in it, and a shared one would let earlier models change the solver's answers for a later
one, so the same seed would no longer give the same case. Making a context costs about a
millisecond, on the critical path of the 40% of models that need one. z3's C calls release
the GIL, so a thread makes the next contexts while the model before grows; a context
nobody has used is the same whichever thread made it.
"""

from __future__ import annotations

import queue
import threading

import z3

AHEAD = 2
"""Contexts kept ready: a model needs at most one."""


class ContextSupply:
    """Hands out never-used contexts; the thread that makes them starts on the first take."""

    def __init__(self, ahead: int = AHEAD) -> None:
        self._ready: queue.Queue[z3.Context] = queue.Queue(maxsize=ahead)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def take(self) -> z3.Context:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._fill, name="z3-contexts", daemon=True)
                self._thread.start()
        return self._ready.get()

    def _fill(self) -> None:
        while True:
            self._ready.put(z3.Context())
