"""The judging budget (oracles.judging_budget): triage of suspects leaves a reserve of the
share to reductions, which are what teach a campaign to steer away from a bug."""

from __future__ import annotations

from oracles.judging_budget import GRANT, REDUCTION_RESERVE, JudgingBudget


def test_triage_leaves_the_reserve_to_reductions() -> None:
    """Triage spends runs until only the reserve is left: it is then refused a triage that
    a reduction may still start, and the reserve is the share's part it names."""
    budget = JudgingBudget(share=0.25, tests=3000)
    whole = budget.room()
    assert whole == int(0.25 / 0.75 * 3000) + GRANT
    while budget.allows(8):
        budget.judging += 8
    assert not budget.allows(8)
    assert budget.room() >= int(REDUCTION_RESERVE * (whole - GRANT)) - 8
    assert budget.triage_room() < 8 <= budget.room()


def test_a_budget_without_a_share_refuses_nothing() -> None:
    """share 1.0: judging takes what it needs, triage and reductions alike."""
    budget = JudgingBudget(share=1.0, judging=10**6)
    assert budget.allows(10**6) and budget.room() >= 10**6


def test_the_grant_is_whole_to_both() -> None:
    """Before any test has paid for judging, the first suspects are judged in full."""
    budget = JudgingBudget(share=0.25)
    assert budget.triage_room() == budget.room() == GRANT
