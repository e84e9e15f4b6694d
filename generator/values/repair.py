"""Direct repair of integer operands, and redrawing of values that cannot move.

Integer tensors have no gradient, and a zero divisor is a point, not a slope: the
offending elements are redrawn from values known to be safe. When the operand is
computed rather than a leaf (an integer Sub feeding a Div), or a float loss has no
gradient path back to any leaf (through a Cast to int, a comparison), the leaves it
depends on are redrawn instead, only at the offending elements when the path is
elementwise, so that each round keeps what already works and converges.

The operand's safe set is not always right for the leaves behind it: a divisor
OneHot(i, depth 1) is nonzero only where i == 0, CastLike(Not(b)) only where b is
False, fmod(a, b) only where b does not divide a. So leaves behind a computed operand
are drawn from one of several sets (0 included), booleans get a polarity per leaf, and
an integer Mod on the way is given a divisor larger than its dividend.
"""

from __future__ import annotations

import numpy as np
import torch

from generator.values.interp import Failure, Node, Program
from generator.values.leaves import Leaves
from generator.values.trace import traced_marks

OWN_ONLY = 0.75
"""How often only the position-specific leaves are redrawn, when there are any."""

INT_SETS: tuple[list[int], ...] = ([0], [1], [1, 2, 3, 4, 5, 6, 7, 8], [2, 3, 4, 5, 6, 7, 8], [-1], [-8, -4, -2])
"""What integer leaves behind a float predicate are redrawn from, one set per redraw: Acos
or Atanh of Cast(int) needs 0 everywhere, Log of it >= 1, Acosh >= 2; drawing from all of
-8..8 gets every position right at once almost never. Negative sets wrap in unsigned
leaves, into large values, which is one more set to try."""

OWN_SET = 0.5
"""How often leaves behind a computed integer operand are drawn from the predicate's own
safe set rather than from one of INT_SETS."""

SIGNED = 0.5
"""How often a computed integer divisor's leaves are redrawn whole, one sign per leaf."""

MOD_FIRST = 0.5
"""How often a nonzero repair first makes the integer Mods on the way return their dividend."""

DIVIDENDS = list(range(1, 9))
MOD_DIVISORS = list(range(9, 17))
"""fmod(a, b) == a when |b| > |a|: a nonzero dividend and a larger divisor give a nonzero
result, where both drawn from 1..8 make b divide a (fmod 0) at some position of thousands."""


def upstream(program: Program, failure: Failure) -> list[str]:
    """The free leaves the failing operands depend on, in a fixed order."""
    names = [failure.node.inputs[i] for i in failure.slots() if i < len(failure.node.inputs)]
    return sorted(frozenset().union(*(program.ancestors.get(n, frozenset()) for n in names)))


def redraw_upstream(program: Program, leaves: Leaves, failure: Failure, rng: np.random.Generator) -> bool:
    """Redraw what the failing operands depend on; False when they depend on no free value.

    An integer predicate's safe values (nonzero for a divisor) are used for float leaves
    and, half of the time, for integer leaves: a divisor computed as Relu(x) or Cast(x) is
    nonzero far more often when x is. The other half, integer leaves share one of INT_SETS,
    0 included (an index into OneHot(depth 1), a difference that must vanish), and each
    boolean leaf is set all True or all False (a Not may lie on the way).
    """
    ups = upstream(program, failure)
    if not ups:
        return False
    p = failure.predicate
    nonzero = p is not None and p.name.endswith("!= 0")
    if nonzero and rng.random() < MOD_FIRST and _mod_redraw(program, leaves, failure, rng):
        return True
    values = p.safe_values(_dtype(failure)) if p is not None and p.integer and p.safe_values else None
    own = [n for n in ups if failure.bad is not None and leaves.shape(n) == tuple(failure.bad.shape)]
    if own and rng.random() < OWN_ONLY:
        # Leaves with one element per unsafe position can fix each position on its own;
        # redrawing the shared (broadcast) leaves too would undo the positions already fixed.
        ups = own
    ints = [n for n in ups if n in leaves.ints]
    traced = traced_marks(program, failure, ups)
    leaves.redraw([n for n in ups if n in leaves.spans], rng, failure.bad, values, traced)
    if values is None or rng.random() >= OWN_SET:
        values = INT_SETS[int(rng.integers(len(INT_SETS)))]
    leaves.redraw(ints, rng, failure.bad, values, traced)
    for name in (n for n in ups if n in leaves.fixed):
        leaves.redraw([name], rng, failure.bad, [int(rng.random() < 0.5)], traced)
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
    find an assignment that clears every position at once. Magnitudes start at 2, so that
    a Shrink (lambda < 1 but a bias that truncates 1 - bias to 0) or a Cast(x / 2) on the
    way keeps them nonzero too. A boolean leaf is set all True
    or all False (a Not on the way turns one into the other). False when no integer or
    boolean leaf lies behind the divisor.
    """
    ups = [n for n in upstream(program, failure) if n in leaves.ints or n in leaves.fixed]
    if not ups:
        return False
    for name in ups:
        t = leaves.ints.get(name, leaves.fixed.get(name))
        assert t is not None
        if t.dtype == torch.bool:
            leaves.redraw([name], rng, None, [int(rng.random() < 0.5)])
            continue
        positive = not t.dtype.is_signed or rng.random() < 0.5
        leaves.redraw([name], rng, None, list(range(2, 9)) if positive else list(range(-8, -1)))
    return True


def _mods(program: Program, leaves: Leaves, names: list[str]) -> list[Node]:
    """The integer Mod nodes that `names` are computed from, with integer leaves behind both
    operands."""
    seen: set[int] = set()
    todo = list(names)
    found: list[Node] = []
    while todo:
        node = program.producer.get(todo.pop())
        if node is None or node.index in seen:
            continue
        seen.add(node.index)
        todo.extend(x for x in node.inputs if x)
        if node.op_type == "Mod" and all(
            any(n in leaves.ints for n in program.ancestors.get(x, frozenset())) for x in node.inputs[:2]
        ):
            found.append(node)
    return found


def _mod_redraw(program: Program, leaves: Leaves, failure: Failure, rng: np.random.Generator) -> bool:
    """Make every integer Mod behind a failing "!= 0" operand return its (nonzero) dividend:
    the dividend's integer leaves from DIVIDENDS, the divisor's from MOD_DIVISORS, whole.
    False when there is no such Mod."""
    names = [failure.node.inputs[i] for i in failure.slots() if i < len(failure.node.inputs)]
    mods = _mods(program, leaves, names)
    for node in mods:
        dividend = program.ancestors.get(node.inputs[0], frozenset())
        divisor = program.ancestors.get(node.inputs[1], frozenset()) - dividend
        leaves.redraw(sorted(n for n in dividend if n in leaves.ints), rng, None, DIVIDENDS)
        leaves.redraw(sorted(n for n in divisor if n in leaves.ints), rng, None, MOD_DIVISORS)
    return bool(mods)


def _dtype(failure: Failure) -> torch.dtype:
    p = failure.predicate
    assert p is not None
    t = failure.operands[p.repair]
    assert t is not None
    return t.dtype
