"""The judging budget counts runs: what a reduction while fuzzing may take (candidate runs),
reduce.during_share of all runs whatever triage left, which triage then pays back."""

from __future__ import annotations

from oracles.judging_budget import GRANT, JudgingBudget


def test_a_reduction_takes_its_share_of_all_runs_whatever_triage_left_and_triage_pays_it_back() -> None:
    budget = JudgingBudget(share=0.25)
    assert budget.reduction_room(0.25) == budget.room() == GRANT  # the first finding, before any test paid
    budget.tests = 300
    assert budget.room() == 100 + GRANT  # judging up to a quarter of all runs: a third of the first runs
    assert budget.reduction_room(0.25) == 75 + GRANT  # reductions: a quarter of the 300 runs so far
    assert budget.reduction_room(0.1) == 30 + GRANT
    budget.judging += 140  # triage spent all its room on sightings
    assert budget.room() == 0 and budget.reduction_room(0.25) == 110 + GRANT  # 0.25 * 440 + 40
    budget.reduced(150)
    assert (budget.judging, budget.reducing) == (290, 150)
    assert budget.room() == 0 and not budget.allows(1)  # triage defers until the share recovers
    assert budget.reduction_room(0.25) == 37  # 0.25 * 590 + 40 - 150
    assert budget.reduction_room(0.0) == 0
    budget.tests = 900  # 600 more first runs: triage's room is back
    assert budget.room() == 300 + GRANT - 290
    assert budget.summary().reduction_runs == 150 and budget.summary().judging_runs == 290
