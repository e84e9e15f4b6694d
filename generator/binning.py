"""Attribute and shape binning (NNSmith Algorithm 2).

Left alone, z3 answers with the smallest model it finds, so every dimension and
kernel would be 1. Each binnable variable is pushed into a randomly drawn
exponential bin [2^(i-1), 2^i); when the whole set is unsatisfiable a random half
is kept and the check repeats, until a satisfiable subset remains.
"""

from __future__ import annotations

import random

import z3

ZERO_BIN_P = 1 / 3


def bin_constraint(var: z3.ArithRef, zero_ok: bool, k: int, rng: random.Random) -> z3.BoolRef:
    # Zero is the most common real value of a pad or a start, so it gets a bin of its own.
    if zero_ok and rng.random() < ZERO_BIN_P:
        return var == 0
    i = rng.randint(1, k)
    lo, hi = 2 ** (i - 1), 2**i - 1
    a, b = sorted((rng.randint(lo, hi), rng.randint(lo, hi)))
    return z3.And(var >= a, var <= b)


MIN_GROUP = 3
"""Groups this small are dropped rather than split further: each split costs two checks."""


def _keep_satisfiable(solver: z3.Solver, bins: list[z3.BoolRef], model: z3.ModelRef) -> z3.ModelRef:
    """Add `bins` if they fit; otherwise halve them and try each half in turn.

    Returns the model of the last satisfiable check: re-checking at the end could
    time out on nonlinear constraints that were solved a moment ago.
    """
    if not bins:
        return model
    solver.push()
    solver.add(*bins)
    if solver.check() == z3.sat:
        return solver.model()
    solver.pop()
    if len(bins) > MIN_GROUP:
        mid = len(bins) // 2
        model = _keep_satisfiable(solver, bins[:mid], model)
        model = _keep_satisfiable(solver, bins[mid:], model)
    return model


def solve_with_bins(
    solver: z3.Solver, model: z3.ModelRef, binnable: list[tuple[z3.ArithRef, bool]], k: int, rng: random.Random
) -> z3.ModelRef:
    """A model of `solver` that keeps as many of the drawn bins as halving finds room for.

    `model` must satisfy the solver's current assertions. Where the paper drops the
    unsatisfiable half, both halves are retried on top of what already fits, so one
    conflicting bin costs O(log n) checks, not half of all bins.
    """
    bins = [bin_constraint(v, zero_ok, k, rng) for v, zero_ok in binnable]
    rng.shuffle(bins)
    return _keep_satisfiable(solver, bins, model)
