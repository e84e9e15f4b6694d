"""The keys of a campaign's counts (summary.json `counts`): every case counts once, under one key.

A key is a one-build verdict (`crash`, `wrong_result`, ...), a verdict across two builds
(`new_regression`, `flaky`, `dropped_support`, ...), `perf_regression` (a timing judged
apart from correctness), or `filtered:<rule>` (a known false positive, by the rule's id).
summary.json keeps them as text, so older outputs and merges read as they are; what a key
means (its rank in a table, whether it is a bug, which folder keeps its set-aside
bundles) is said here once, not by string tests at each reader.
"""

from __future__ import annotations

__all__ = [
    "ASIDE_FOLDERS",
    "FILTERED_FOLDER",
    "FILTERED_PREFIX",
    "FLAKY_FOLDER",
    "ORDER",
    "PERF_FOLDER",
    "PERF_REGRESSION",
    "SET_ASIDE_FOLDERS",
    "CountKey",
]

from dataclasses import dataclass

from oracles.sides import FILTERED_PREFIX, CrossVerdict
from oracles.verdict import Verdict

PERF_REGRESSION = "perf_regression"

ORDER: tuple[str, ...] = (
    CrossVerdict.new_regression,
    CrossVerdict.new_in_head,
    CrossVerdict.fixed,
    CrossVerdict.persistent,
    Verdict.crash,
    Verdict.timeout,
    Verdict.wrong_result,
    PERF_REGRESSION,
    CrossVerdict.flaky,
    CrossVerdict.crash_on_undefined_input,
    CrossVerdict.dropped_support,
    CrossVerdict.gained_support,
    FILTERED_PREFIX,
    Verdict.unsupported,
    Verdict.pass_,
)
"""The order tables list keys in: what a PR check fails on first, good news and passes last."""

FLAKY_FOLDER, FILTERED_FOLDER, PERF_FOLDER = "flaky", "filtered", "perf"
SET_ASIDE_FOLDERS = (FLAKY_FOLDER, FILTERED_FOLDER, PERF_FOLDER)
"""The output folders of cases set aside, beside findings/: what a merge copies over."""

ASIDE_FOLDERS = {CrossVerdict.flaky.value: f"{FLAKY_FOLDER}/", PERF_REGRESSION: f"{PERF_FOLDER}/"}
"""The set-aside keys with a folder of their own; a `filtered:<rule>` key's is filtered/<rule>/."""


@dataclass(frozen=True)
class CountKey:
    """One count key, read from its text."""

    text: str

    @classmethod
    def filtered(cls, rule: str) -> CountKey:
        """The key of cases the rule `rule` (its id) set aside as known false positives."""
        return cls(f"{FILTERED_PREFIX}{rule}")

    def __str__(self) -> str:
        return self.text

    @property
    def rule(self) -> str | None:
        """The rule's id of a `filtered:<rule>` key; None for any other."""
        return self.text[len(FILTERED_PREFIX) :] if self.text.startswith(FILTERED_PREFIX) else None

    @property
    def rank(self) -> tuple[int, str]:
        """Where the key sorts in a table (ORDER, then by its text; unknown keys last)."""
        group = FILTERED_PREFIX if self.rule is not None else self.text
        return (ORDER.index(group) if group in ORDER else len(ORDER)), self.text

    @property
    def is_bug(self) -> bool:
        """A bug in some build: a reported verdict across builds but `fixed` (good news), or
        a one-build verdict that is a failure. Flaky, filtered and perf keys are not."""
        try:
            return CrossVerdict(self.text).is_bug
        except ValueError:
            pass
        try:
            return Verdict(self.text).is_bug
        except ValueError:
            return False

    @property
    def aside_folder(self) -> str | None:
        """The output folder that keeps the bundles of a set-aside key (flaky/, perf/,
        filtered/<rule>/); None for a key whose cases are findings or only counted."""
        if self.rule is not None:
            return f"{FILTERED_FOLDER}/{self.rule}/"
        return ASIDE_FOLDERS.get(self.text)

    @property
    def is_aside(self) -> bool:
        """Set aside: judged and kept apart, never reported (flaky, perf, filtered)."""
        return self.aside_folder is not None
