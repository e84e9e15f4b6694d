"""The one place that runs the predicate: cache, budget, parallel batches.

A reduction spends nearly all its time in the predicate (a backend run in another
process), so every pass goes through one `Tester`: a candidate already seen in any
pass is a cache hit, the test and time bounds hold across passes, and N candidates
are evaluated at once on N threads. Determinism comes from deciding only after a
whole batch is back, taking the first success in the candidates' fixed order.
(Only an early stop by --max-tests or time can make the end point depend on N, since
N jobs may spend tests on candidates one job would never have reached.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

from pydantic import BaseModel, Field

C = TypeVar("C")


class BudgetExhausted(Exception):
    """The test count or time bound is reached; reducers keep what they have."""


class ReduceConfig(BaseModel):
    jobs: int = Field(1, ge=1, description="candidates evaluated at once")
    max_tests: int | None = Field(None, ge=1, description="stop after this many predicate runs")
    budget_s: float | None = Field(None, gt=0, description="stop after this many seconds")


class TesterStats(BaseModel):
    tests: int = 0
    """Predicate runs; cache hits and invalid candidates are not tests."""
    cache_hits: int = 0
    invalid: int = 0
    """Candidates refused before testing (for ONNX: the checker said no)."""
    elapsed_s: float = 0.0
    stopped: str | None = None
    """Why the reduction stopped early: "max_tests" or "time"; None when it finished."""


class Tester(Generic[C]):
    def __init__(
        self,
        predicate: Callable[[C], bool],
        key: Callable[[C], Hashable],
        config: ReduceConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.predicate = predicate
        self.key = key
        self.config = config or ReduceConfig()
        self.stats = TesterStats()
        self.on_test: Callable[[TesterStats], None] = lambda s: None
        self._clock = clock
        self._start = clock()
        self._cache: dict[Hashable, bool] = {}
        self._pool = ThreadPoolExecutor(self.config.jobs) if self.config.jobs > 1 else None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def check_budget(self) -> None:
        """Raise BudgetExhausted once a bound is reached (work between tests counts in time)."""
        self._check_budget()

    def _check_budget(self) -> None:
        self.stats.elapsed_s = self._clock() - self._start
        cfg = self.config
        if cfg.max_tests is not None and self.stats.tests >= cfg.max_tests:
            self.stats.stopped = "max_tests"
        elif cfg.budget_s is not None and self.stats.elapsed_s >= cfg.budget_s:
            self.stats.stopped = "time"
        if self.stats.stopped:
            raise BudgetExhausted(self.stats.stopped)

    def first_success(self, candidates: Sequence[C | None]) -> int | None:
        """Index of the first candidate (in order) the predicate accepts; None if none.

        None entries are invalid candidates: skipped, counted, never tested.
        Raises BudgetExhausted when a bound stops it before an answer.
        """
        keys = [None if c is None else self.key(c) for c in candidates]
        self.stats.invalid += sum(c is None for c in candidates)
        pos = 0
        fresh: set[Hashable] = set()
        while pos < len(candidates):
            pos = self._skip_known(keys, pos, fresh)
            if pos < 0:
                return -pos - 1
            if pos >= len(candidates):
                return None
            self._check_budget()
            fresh |= self._evaluate_window(candidates, keys, pos)
        return None

    def _skip_known(self, keys: Sequence[Hashable | None], pos: int, fresh: set[Hashable]) -> int:
        """First position whose answer is unknown; -(i+1) when candidate i is a known success.

        Answers computed by this very call (`fresh`) are not counted as cache hits."""
        while pos < len(keys):
            k = keys[pos]
            if k is not None and k not in self._cache:
                return pos
            if k is not None:
                self.stats.cache_hits += k not in fresh
                if self._cache[k]:
                    return -pos - 1
            pos += 1
        return pos

    def _evaluate_window(
        self, candidates: Sequence[C | None], keys: Sequence[Hashable | None], pos: int
    ) -> set[Hashable]:
        """Run up to `jobs` unknown candidates from `pos` on, all at once; cache the answers."""
        room = self.config.jobs
        if self.config.max_tests is not None:
            room = min(room, self.config.max_tests - self.stats.tests)
        batch: dict[Hashable, C] = {}
        for c, k in zip(candidates[pos:], keys[pos:], strict=True):
            if len(batch) >= room:
                break
            if c is not None and k is not None and k not in self._cache and k not in batch:
                batch[k] = c
        items = list(batch.items())
        if self._pool is not None and len(items) > 1:
            answers = list(self._pool.map(lambda kc: bool(self.predicate(kc[1])), items))
        else:
            answers = [bool(self.predicate(c)) for _, c in items]
        for (k, _), ok in zip(items, answers, strict=True):
            self._cache[k] = ok
        self.stats.tests += len(items)
        self.stats.elapsed_s = self._clock() - self._start
        self.on_test(self.stats)
        return set(batch)
