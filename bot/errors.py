"""The bot's error family: what a user's input or environment can cause, said in one line.

The CLI catches `UserError` (and the other packages' own families) and prints `error:` and
the message, never a traceback.
"""

from __future__ import annotations


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
