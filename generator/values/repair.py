"""Direct repair of integer operands, and redrawing of values that cannot move.

Integer tensors have no gradient, and a zero divisor is a point, not a slope: the
offending elements are redrawn from values known to be safe. When the operand is
computed rather than a leaf (an integer Sub feeding a Div), or a float loss has no
gradient path back to any leaf (through a Cast to int, a comparison), the leaves it
depends on are redrawn instead, only at the offending elements when the path is
elementwise, so that each round keeps what already works and converges.
"""

from __future__ import annotations

import numpy as np
import torch

from generator.values.interp import Failure, Program
from generator.values.leaves import Leaves

OWN_ONLY = 0.75
"""How often only the position-specific leaves are redrawn, when there are any."""

INT_SETS: tuple[list[int], ...] = ([0], [1], [1, 2, 3, 4, 5, 6, 7, 8], [2, 3, 4, 5, 6, 7, 8], [-1], [-8, -4, -2])
"""What integer leaves behind a float predicate are redrawn from, one set per redraw: Acos
or Atanh of Cast(int) needs 0 everywhere, Log of it >= 1, Acosh >= 2; drawing from all of
-8..8 gets every position right at once almost never. Negative sets wrap in unsigned
leaves, into large values, which is one more set to try."""

SIGNED = 0.5
"""How often a computed integer divisor's leaves are redrawn whole, one sign per leaf."""


def upstream(program: Program, failure: Failure) -> list[str]:
    """The free leaves the failing operands depend on, in a fixed order."""
    names = [failure.node.inputs[i] for i in failure.slots() if i < len(failure.node.inputs)]
    return sorted(frozenset().union(*(program.ancestors.get(n, frozenset()) for n in names)))


def redraw_upstream(program: Program, leaves: Leaves, failure: Failure, rng: np.random.Generator) -> bool:
    """Redraw what the failing operands depend on; False when they depend on no free value.

    An integer predicate's safe values (nonzero for a divisor) are used for every leaf on
    the way: a divisor computed as Relu(x) or Cast(x) is nonzero far more often when x is.
    """
    ups = upstream(program, failure)
    if not ups:
        return False
    p = failure.predicate
    values = p.safe_values(_dtype(failure)) if p is not None and p.integer and p.safe_values else None
    own = [n for n in ups if failure.bad is not None and leaves.shape(n) == tuple(failure.bad.shape)]
    if own and rng.random() < OWN_ONLY:
        # Leaves with one element per unsafe position can fix each position on its own;
        # redrawing the shared (broadcast) leaves too would undo the positions already fixed.
        ups = own
    ints = [n for n in ups if n in leaves.ints]
    if values is None and ints:
        leaves.redraw([n for n in ups if n not in leaves.ints], rng, failure.bad, None)
        leaves.redraw(ints, rng, failure.bad, INT_SETS[int(rng.integers(len(INT_SETS)))])
        return True
    leaves.redraw(ups, rng, failure.bad, values)
    return True


def repair_integer(program: Program, leaves: Leaves, failure: Failure, rng: np.random.Generator) -> bool:
    """Fix an integer predicate's violation; False when no free value can change it."""
    p = failure.predicate
    assert p is not None and p.integer and p.safe_values is not None
    name = failure.node.inputs[p.repair]
    if name in leaves.ints:
        leaves.redraw([name], rng, failure.bad, p.safe_values(_dtype(failure)))
        return True
    if p.name.endswith("!= 0") and rng.random() < SIGNED and _signed_redraw(program, leaves, failure, rng):
        return True
    return redraw_upstream(program, leaves, failure, rng)


def _signed_redraw(program: Program, leaves: Leaves, failure: Failure, rng: np.random.Generator) -> bool:
    """Redraw every integer leaf behind a computed divisor whole, each with one random sign.

    Position by position, a - b or a + b redrawn from the same small set hits 0 again and
    again (every pair of a broadcast must differ); with a sign per leaf, a sum of same-sign
    terms, a difference of opposite-sign ones and any product are never 0, so a few draws
    find an assignment that clears every position at once. False when no integer leaf
    (or boolean one, set True) lies behind the divisor.
    """
    ups = [n for n in upstream(program, failure) if n in leaves.ints or n in leaves.fixed]
    if not ups:
        return False
    for name in ups:
        t = leaves.ints.get(name, leaves.fixed.get(name))
        assert t is not None
        positive = t.dtype == torch.bool or not t.dtype.is_signed or rng.random() < 0.5
        leaves.redraw([name], rng, None, list(range(1, 9)) if positive else list(range(-8, 0)))
    return True


def _dtype(failure: Failure) -> torch.dtype:
    p = failure.predicate
    assert p is not None
    t = failure.operands[p.repair]
    assert t is not None
    return t.dtype
