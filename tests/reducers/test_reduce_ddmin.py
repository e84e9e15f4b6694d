"""The generic ddmin core and its tester: minimality, determinism, cache, bounds."""

from __future__ import annotations

import time
import zlib

from reducers.ddmin import ddmin_list
from reducers.tester import ReduceConfig
from reducers.tester import Tester as CandidateTester


def _one_minimal(result: list[int], predicate: object) -> bool:
    assert callable(predicate)
    return all(not predicate([x for x in result if x != drop]) for drop in result)


def test_finds_exactly_the_needed_items() -> None:
    def pred(s: list[int]) -> bool:
        return {3, 17, 31} <= set(s)

    result, stats = ddmin_list(list(range(40)), pred)
    assert result == [3, 17, 31]
    assert stats.tests > 0 and stats.stopped is None


def test_result_is_one_minimal_for_a_non_monotone_predicate() -> None:
    def pred(s: list[int]) -> bool:
        return 5 in s and sum(s) % 3 == 0

    items = list(range(30))
    assert pred(items)
    result, _ = ddmin_list(items, pred)
    assert pred(result)
    assert _one_minimal(result, pred)


def test_same_answer_whatever_the_number_of_jobs() -> None:
    def pred(s: list[int]) -> bool:  # an arbitrary, deterministic, non-monotone predicate
        return 7 in s and 23 in s and zlib.crc32(bytes(s)) % 4 != 0

    items = list(range(32))
    assert pred(items)
    one, _ = ddmin_list(items, pred, ReduceConfig(jobs=1))
    four, stats4 = ddmin_list(items, pred, ReduceConfig(jobs=4))
    assert one == four
    assert stats4.tests > 0


def test_repeated_candidates_are_cache_hits_not_tests() -> None:
    calls: list[list[int]] = []

    def pred(s: list[int]) -> bool:
        calls.append(s)
        return {3, 17, 31} <= set(s)

    _, stats = ddmin_list(list(range(40)), pred)
    assert stats.tests == len(calls)
    assert stats.cache_hits > 0
    assert len({tuple(c) for c in calls}) == len(calls)  # nothing was run twice


def test_invalid_candidates_are_counted_but_never_tested() -> None:
    seen: list[str] = []

    def pred(c: str) -> bool:
        seen.append(c)
        return c == "b"

    tester: CandidateTester[str] = CandidateTester(pred, str)
    assert tester.first_success([None, "a", None, "b", "a"]) == 3
    assert seen == ["a", "b"] and tester.stats.invalid == 2 and tester.stats.tests == 2


def test_test_count_bound_stops_with_a_passing_subset() -> None:
    def pred(s: list[int]) -> bool:
        return {3, 17, 31} <= set(s)

    result, stats = ddmin_list(list(range(40)), pred, ReduceConfig(max_tests=5, jobs=3))
    assert stats.tests <= 5 and stats.stopped == "max_tests"
    assert pred(result)


def test_time_bound_stops_early() -> None:
    def slow(s: list[int]) -> bool:
        time.sleep(0.05)
        return {3, 17, 31} <= set(s)

    t0 = time.monotonic()
    result, stats = ddmin_list(list(range(64)), slow, ReduceConfig(budget_s=0.3))
    assert stats.stopped == "time"
    assert time.monotonic() - t0 < 1.5
    assert slow(result)
