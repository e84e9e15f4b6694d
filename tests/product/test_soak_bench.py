"""bench/soak.py's reading of how each campaign ended: the soak's `died` count is its goal."""

from __future__ import annotations

from bench.soak import died, growth_mb


def test_a_campaign_the_soak_was_told_to_stop_is_no_death() -> None:
    assert not died(143, summarized=False)
    assert not died(130, summarized=False)


def test_a_crash_an_exception_or_a_missing_summary_is_a_death() -> None:
    assert died(-11, summarized=False)
    assert died("MemoryError: ", summarized=False)
    assert died(0, summarized=False)
    assert not died(0, summarized=True) and not died(2, summarized=True)


def test_growth_leaves_the_first_campaign_out() -> None:
    assert growth_mb([100.0, 500.0, 500.0, 500.0]) == 0.0
    assert growth_mb([500.0, 500.0, 510.0, 520.0]) == 10.0
    assert growth_mb([500.0]) is None
