"""The sampling fallback and baseline: fresh random values until every op is safe.

Each sample draws every float leaf from one of a few ranges (in units of the leaf's
initial scale, so fan-in scaling survives) and every integer leaf anew; integer
violations are then repaired in place a few times before the sample is given up. It
needs no gradient, so it also finds values where the gradient search is stuck between
two constraints that pull against each other.
"""

from __future__ import annotations

import numpy as np

from generator.values.interp import Program
from generator.values.leaves import Leaves
from generator.values.repair import repair_integer
from generator.values.search import Budget, Tally, evaluate

RANGES: list[tuple[float, float]] = [(-1.0, 1.0), (0.1, 1.0), (-0.5, 0.5), (1.0, 9.0)]
"""Symmetric draws keep bounded ops (Asin) happy, positive ones logarithms and roots;
[1, 9] is NNSmith's best single range for its sampling baseline."""

REPAIRS_PER_SAMPLE = 4


def sampling_search(
    program: Program, leaves: Leaves, rng: np.random.Generator, budget: Budget, tally: Tally
) -> str | None:
    """None once a sample makes every op safe; otherwise why sampling stopped."""
    while True:
        if tally.samples >= budget.max_samples:
            return "sample limit"
        tally.samples += 1
        leaves.sample(rng, RANGES)
        for _ in range(REPAIRS_PER_SAMPLE):
            failure = evaluate(program, leaves, grad=False)
            if failure is None:
                return None
            tally.last = failure.describe()
            if failure.error is not None:
                return f"reference error at {tally.last}"
            if failure.predicate is None or not failure.predicate.integer:
                break
            if not repair_integer(program, leaves, failure, rng):
                return f"no free value reaches {tally.last}"
            tally.repairs += 1
