"""The bot's error family: what a user's input or environment can cause, said in one line.

The CLI catches `UserError` (and the other packages' own families) and prints `error:` and
the message, never a traceback.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType


class UserError(Exception):
    """Bad input or an unusable environment, reported in one line with exit status 1."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM, raised where the main thread is, so that every `finally` runs and a
    campaign writes what it has: a CI job's timeout or cancel sends SIGTERM, which would
    otherwise end the process on the spot. Not a KeyboardInterrupt, which typer turns into
    a silent exit 130 that no longer says which signal it was; like one, it is no
    `Exception`, so no `except Exception` swallows it."""

    def __init__(self, signal: str = "SIGINT", note: str = "") -> None:
        super().__init__(signal)
        self.signal = signal
        self.note = note
        """Where what was done so far is (a campaign's summary.json), for the error line."""


def signal_of(interrupt: BaseException) -> str:
    """The signal behind an interrupt: a bare KeyboardInterrupt is Python's own SIGINT."""
    return interrupt.signal if isinstance(interrupt, Interrupted) else "SIGINT"


EXIT_SIGNALLED = {"SIGINT": 130, "SIGTERM": 143}
"""A command's exit code when a signal stopped it (docs/exit-codes.md): 128 + the signal's
number, as a shell reports a process the signal ended."""


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` for the section's length, so its `finally`
    blocks run (a campaign writes its summary); a signal the caller set to be ignored
    (a background job's SIGINT) stays ignored. Only the main thread may set handlers.

    Python drops an exception raised inside a finalizer (`__del__`) with an "Exception
    ignored" line: one CI run's SIGTERM landed while a z3 `Context.__del__` ran, and the
    cancelled campaign fuzzed on to its budget. An interrupt lost that way is sent again
    once the finalizer has returned."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    main = threading.main_thread().ident
    active = [True]

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signal.Signals(signum).name)

    def again(number: int) -> None:
        if active[0] and main is not None:
            signal.pthread_kill(main, number)

    def lost(unraisable: sys.UnraisableHookArgs) -> None:
        if isinstance(unraisable.exc_value, Interrupted):
            number = signal.Signals[unraisable.exc_value.signal]
            # From a thread: the main thread is still inside the finalizer here.
            resend = threading.Timer(0.05, again, (number,))
            resend.daemon = True
            resend.start()
            return
        hook(unraisable)

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    hook, sys.unraisablehook = sys.unraisablehook, lost
    for s, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(s, interrupt)
    try:
        yield
    finally:
        active[0] = False
        sys.unraisablehook = hook
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """A SIGINT or SIGTERM that comes inside waits for the section's end, then acts as it
    would have. A section that writes a finding's bundle and lists it is done whole: an
    interrupt between the two left a bundle that the interrupted campaign's summary.json
    did not list (one CI run of tests/bot/findings/test_outputs_kept.py). Only a Python handler waits
    (an ignored signal stays ignored, a default one still ends the process); outside the
    main thread, where no handler runs, nothing changes. Nested, the outermost section
    holds the signal. Keep the section short: a signal waits for all of it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def wait(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    held: dict[int, Callable[[int, FrameType | None], object]] = {}
    for s in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(s)
        if callable(handler):
            held[s] = handler
            signal.signal(s, wait)
    try:
        yield
    finally:
        for number, kept in held.items():
            signal.signal(number, kept)
        if caught:
            held[caught[0]](caught[0], None)
