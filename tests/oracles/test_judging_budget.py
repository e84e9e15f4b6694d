"""The judging budget counts runs: what a reduction while fuzzing may take (candidate runs),
within the judging share and within reduce.during_share of all runs."""

from __future__ import annotations

from oracles.judging_budget import GRANT, JudgingBudget


def test_a_reduction_takes_what_judging_has_left_and_at_most_its_share_of_all_runs() -> None:
    budget = JudgingBudget(share=0.25)
    assert budget.reduction_room(0.25) == budget.room() == GRANT  # the first finding, before any test paid
    budget.tests = 300
    assert budget.room() == 100 + GRANT  # judging up to a quarter of all runs: a third of the first runs
    assert budget.reduction_room(0.25) == 75 + GRANT  # reductions: a quarter of the 300 runs so far
    assert budget.reduction_room(0.1) == 30 + GRANT
    budget.reduced(100)
    assert (budget.judging, budget.reducing) == (100, 100)
    assert budget.reduction_room(0.25) == GRANT  # 0.25 * 400 + 40 - 100, and what judging has left
    assert budget.reduction_room(0.1) == 0  # 0.1 * 400 + 40 - 100 < 0
    budget.judging += 40  # triage's re-runs count against the same judging room
    assert budget.reduction_room(0.25) == budget.room() == 0
    assert JudgingBudget(share=0.25, tests=300).reduction_room(1.0) == 100 + GRANT  # the judging room alone
    assert budget.summary().reduction_runs == 100
