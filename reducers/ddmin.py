"""Zeller's ddmin (with complement tests) over any list of items.

The core knows nothing about ONNX: it sees items, a way to build a candidate from a
subset (which may say "invalid" by returning None), and a `Tester` that owns the
predicate, the cache, the budget and the parallelism. Keeping the tester separate
lets one cache and one budget span every pass of a reduction.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from pydantic import BaseModel

from reducers.tester import BudgetExhausted, ReduceConfig, Tester, TesterStats

T = TypeVar("T")
C = TypeVar("C")


class DDState(BaseModel):
    """Where a ddmin run stands: enough to show progress or to explain where it stopped."""

    size: int
    granularity: int = 2
    rounds: int = 0


def _chunks(items: Sequence[T], n: int) -> list[list[T]]:
    """`n` contiguous, near-equal parts, so neighbours (often related nodes) stay together."""
    k, extra = divmod(len(items), n)
    out: list[list[T]] = []
    start = 0
    for i in range(n):
        end = start + k + (1 if i < extra else 0)
        out.append(list(items[start:end]))
        start = end
    return [c for c in out if c]


def ddmin(
    items: Sequence[T],
    build: Callable[[list[T]], C | None],
    tester: Tester[C],
    on_state: Callable[[DDState], None] | None = None,
) -> list[T]:
    """A 1-minimal subset of `items` whose candidate still passes the tester's predicate.

    `items` itself is assumed to pass. Subsets are tried before complements (Zeller's
    order), a batch at a time, and the first success in that fixed order wins, so the
    answer does not depend on how many jobs evaluated the batch. When the budget runs
    out, the smallest passing subset found so far is returned.
    """
    current = list(items)
    state = DDState(size=len(current))
    try:
        while len(current) >= 2:
            n = min(state.granularity, len(current))
            parts = _chunks(current, n)
            complements = [[x for j, p in enumerate(parts) if j != i for x in p] for i in range(len(parts))]
            subsets: list[list[T]] = parts + (complements if len(parts) > 2 else [])
            hit = tester.first_success([build(s) for s in subsets])
            state.rounds += 1
            if hit is not None and hit < len(parts):
                current, state.granularity = subsets[hit], 2
            elif hit is not None:
                current, state.granularity = subsets[hit], max(n - 1, 2)
            elif n >= len(current):
                break
            else:
                state.granularity = min(2 * n, len(current))
            state.size = len(current)
            if on_state is not None:
                on_state(state)
    except BudgetExhausted:
        pass
    return current


def ddmin_list(
    items: Sequence[T],
    predicate: Callable[[list[T]], bool],
    config: ReduceConfig | None = None,
    key: Callable[[list[T]], Hashable] = tuple,
) -> tuple[list[T], TesterStats]:
    """The plain interface: items and a predicate over subsets. Returns the minimal
    subset and the stats (tests, cache hits, time)."""
    tester: Tester[list[T]] = Tester(predicate, key, config)
    try:
        return ddmin(items, lambda s: s, tester), tester.stats
    finally:
        tester.close()
