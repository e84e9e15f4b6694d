"""The one re-run policy (oracles.asking): how often a build is asked again, and which
answers settle it. Each caller used to loop its own way; these hold the policy's counts
and its stops, which every caller now shares."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from oracles.asking import TRIES, Asking
from oracles.config import OracleConfig
from oracles.judging import Judging
from oracles.tolerances import ToleranceConfig


def _answers(*values: str | None) -> tuple[Callable[[], str | None], list[int]]:
    """An ask that answers `values` in turn, and the count of asks made."""
    it: Iterator[str | None] = iter(values)
    asked = [0]

    def ask() -> str | None:
        asked[0] += 1
        return next(it)

    return ask, asked


def test_one_showing_answer_of_a_few_is_enough_and_the_asking_stops_there() -> None:
    ask, asked = _answers(None, "pass", "bug", "bug")
    assert Asking(reruns=3).first_showing(ask, lambda a: a == "bug") == "bug"
    assert asked[0] == 3


def test_a_failure_that_never_shows_is_asked_exactly_tries_times() -> None:
    ask, asked = _answers(*(["pass"] * 10))
    assert Asking(reruns=5, tries=4).first_showing(ask, lambda a: a == "bug") is None
    assert asked[0] == 4


def test_every_ask_must_show_it_and_the_first_that_does_not_ends_the_asking() -> None:
    ask, asked = _answers("pass", "bug", "pass")
    assert Asking(reruns=1).every_showing(ask, lambda a: a == "pass") is None
    assert asked[0] == 2
    ask, asked = _answers(*(["pass"] * TRIES))
    assert Asking(reruns=1).every_showing(ask, lambda a: a == "pass") == ["pass"] * TRIES


def test_a_claim_is_k_runs_and_a_recheck_asks_as_often_as_the_claim() -> None:
    asking = Asking(reruns=5)
    ask, asked = _answers(*"abcdefgh")
    assert asking.claim(ask) == list("abcde")
    ask, asked = _answers(*"abcdefgh")
    assert asking.again(ask) == list("abcd")
    ask, asked = _answers(*(["same"] * 9))
    assert asking.first_of_claim(ask, lambda a: a != "same") is None
    assert asked[0] == 5


def test_shown_once_counts_asks_until_one_is_true() -> None:
    ask, asked = _answers(None, None, "x")
    assert Asking(reruns=1).shown_once(lambda: ask() is not None)
    assert asked[0] == 3
    assert not Asking(reruns=1, tries=2).shown_once(lambda: False)


def test_the_judging_asks_as_often_as_the_config_says() -> None:
    assert Judging(OracleConfig(reruns=7), ToleranceConfig()).asking == Asking(reruns=7, tries=TRIES)
    with pytest.raises(ValueError, match="at least once"):
        Asking(reruns=0)


def test_a_failure_that_does_not_come_and_go_is_asked_once_whatever_k_is() -> None:
    once = Asking(reruns=5).once()
    assert once == Asking(reruns=5, tries=1)
    ask, asked = _answers("pass", "bug")
    assert once.first_showing(ask, lambda a: a == "bug") is None
    assert asked[0] == 1
