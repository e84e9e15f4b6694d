"""How often the bot asks a build again before it believes an answer, and which answers
settle it: the one re-run policy.

A failure is asked again wherever the bot must stand behind it: a campaign's triage of a
suspect, the start of its reduction, the reduced trigger in fresh workers, the lowest level
a finding is localized at, a label asked again when a reduction does not reproduce it, and
each commit of a bisection. Each of those used to loop in its own way, with its own count.
The counts differ for a reason, and both live here:

- **`reruns` (k, the config's `oracles.reruns`)**: the runs that make a claim. Triage runs a
  suspect k times on every side, a bisection each commit k times, a recheck each side up to k
  times. Every one of a claim's runs must agree, or the table (oracles.sides) calls it flaky.
- **`tries` (`TRIES`)**: the asks that find a failure the claim already stands behind. A
  reduction's start, its reduced trigger and its lowest level are asked up to `tries` times,
  and one ask that shows the failure is enough: a bug that reads stray memory shows now and
  then, and asking once lost it (see `TRIES`).

What counts as showing the bug is the caller's (oracles.bug_identity at the caller's
distance); how often, and whether one ask or every ask must show it, is this module's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

T = TypeVar("T")

TRIES = 3
"""How often a failure the campaign found is asked before the bot gives up on it, as a
campaign asks each failure k times. onnxruntime 1.30.0's "wrap" Pad reads past its input:
the values it writes are whatever memory held, wrong values in one run, non-finite ones in
the next, now and then right. A campaign kept 80 such findings in a minute, and its
reduction, asking each original once, reduced none, so the bug was never learned and
generation kept finding it."""


@dataclass(frozen=True)
class Asking:
    """The re-run policy of one campaign (its `oracles.reruns`)."""

    reruns: int
    tries: int = TRIES

    def __post_init__(self) -> None:
        if self.reruns < 1 or self.tries < 1:
            raise ValueError(f"a build is asked at least once (reruns={self.reruns}, tries={self.tries})")

    def once(self) -> Asking:
        """The policy for a failure that does not come and go (a death that is not a memory
        fault): one ask settles it, and asking more only costs runs."""
        return replace(self, tries=1)

    def first_showing(self, ask: Callable[[], T | None], shows: Callable[[T], bool]) -> T | None:
        """The first of up to `tries` answers that shows the failure (None: none did). An
        ask may answer None (a rule set the run aside), which shows nothing."""
        return _first(self.tries, ask, shows)

    def shown_once(self, ask: Callable[[], bool]) -> bool:
        """Whether one of up to `tries` asks shows the failure."""
        return any(ask() for _ in range(self.tries))

    def every_showing(self, ask: Callable[[], T | None], shows: Callable[[T], bool]) -> list[T] | None:
        """`tries` answers, each showing it; None at the first that does not (one ask that
        differs is enough to doubt it)."""
        answers: list[T] = []
        for _ in range(self.tries):
            answer = ask()
            if answer is None or not shows(answer):
                return None
            answers.append(answer)
        return answers

    def claim(self, ask: Callable[[], T]) -> list[T]:
        """The k runs of a claim, every one asked (the caller's table reads them together)."""
        return [ask() for _ in range(self.reruns)]

    def again(self, ask: Callable[[], T]) -> list[T]:
        """The k - 1 runs after a first one that came for free (triage's first run is the fuzzing's)."""
        return [ask() for _ in range(self.reruns - 1)]

    def first_of_claim(self, ask: Callable[[], T | None], shows: Callable[[T], bool]) -> T | None:
        """The first of up to k answers that shows it: a recheck of a claim asks as often as
        the claim was made."""
        return _first(self.reruns, ask, shows)


def _first(times: int, ask: Callable[[], T | None], shows: Callable[[T], bool]) -> T | None:
    for _ in range(times):
        answer = ask()
        if answer is not None and shows(answer):
            return answer
    return None


__all__ = ["TRIES", "Asking"]
