"""Attribute and shape binning (NNSmith Algorithm 2), applied per insertion.

Left alone, z3 answers with the smallest model it finds, so every dimension and
kernel would be 1. Each new variable of an insertion is pushed into a drawn bin:
bin 0 is exactly zero (for variables where zero is a real value: pads, starts),
bin i >= 1 is the exponential range [2^(i-1), 2^i). When the drawn set is
unsatisfiable, it is halved and each half retried, as the paper does.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import z3

from generator.symbolic import BinVar, Concretizer, Cond, Dim

ZERO_BIN_P = 1 / 3
MIN_GROUP = 3
"""Groups this small are dropped rather than split further: each split costs two checks."""

BinWeight = Callable[[str, int | str], float]
"""Extra weight of bin `i` for the variable key `op.prefix`; coverage feedback plugs in here.
An attribute's presence has two named bins of its own (ABSENT, AT_DEFAULT), and so has an
optional input's (ABSENT, PRESENT)."""
ABSENT = "absent"
"""The bin of a defaulted attribute a node leaves out (generator.emit.ExplicitDefaults)."""
AT_DEFAULT = "default"
"""The bin of a defaulted attribute a node writes out at its default value."""
PRESENT = "present"
"""The bin of an optional input a node writes (generator.ops.optional); ABSENT where it
leaves it out."""


def var_key(op_type: str, var: z3.ArithRef) -> str:
    """`Conv.kernel` for the variable `kernel_12` created while inserting a Conv."""
    return f"{op_type}.{var.decl().name().rsplit('_', 1)[0]}"


def bin_of(value: int) -> int:
    """The bin a solved value fell into (0 for zero and below, else its bit length)."""
    return 0 if value <= 0 else value.bit_length()


class BinChooser:
    def __init__(self, k: int, rng: random.Random, weight: BinWeight | None = None, unit_dims: float = 0.0) -> None:
        """`unit_dims`: the chance a free tensor's dim is 1 (an edge case's size-1 and
        broadcast dims, generator.edges)."""
        self.k = k
        self.rng = rng
        self.weight = weight
        self.unit_dims = unit_dims

    def free_shape(self, rank: int, max_elements: int) -> list[int]:
        """A binned shape for a tensor nothing constrains yet, drawn without the solver:
        each dim from a random bin, then the largest dims halved until the cap holds."""
        shape = []
        for _ in range(rank):
            if self.unit_dims and self.rng.random() < self.unit_dims:
                shape.append(1)
                continue
            i = self.rng.randint(1, self.k)
            shape.append(self.rng.randint(2 ** (i - 1), 2**i - 1))
        while math.prod(shape) > max_elements:
            big = shape.index(max(shape))
            shape[big] = max(1, shape[big] // 2)
        return shape

    def value(self, op_type: str, small: bool = False) -> Concretizer:
        """Concrete draws from the same bins `draw` would constrain to (concrete-first).
        `small` keeps to the bins below 8, where most attributes of small tensors fit."""
        cap = 7 if small else 2**self.k - 1

        def draw_value(prefix: str, zero_ok: bool, lo: int | None, hi: int | None) -> int:
            lo_b = 1 if lo is None and not zero_ok else (0 if lo is None else lo)
            hi_b = min(hi, cap) if hi is not None else cap
            if hi_b < lo_b:
                return lo_b
            if zero_ok and lo_b <= 0 <= hi_b and self.rng.random() < ZERO_BIN_P:
                return 0
            i = self._pick_bin(f"{op_type}.{prefix}", max(lo_b, 1), hi_b)
            if i is None:
                return lo_b
            return self.rng.randint(max(lo_b, 2 ** (i - 1)), min(hi_b, 2**i - 1))

        return draw_value

    def _pick_bin(self, key: str, lo: int, hi: int) -> int | None:
        choices = [i for i in range(1, self.k + 1) if 2 ** (i - 1) <= hi and 2**i - 1 >= lo]
        if not choices:
            return None
        if self.weight is None:
            return self.rng.choice(choices)
        return self.rng.choices(choices, [1.0 + self.weight(key, i) for i in choices])[0]

    def draw(self, op_type: str, b: BinVar) -> z3.BoolRef | None:
        """A bin constraint for `b`, or None when its bounds leave nothing to choose."""
        var, zero_ok = b.var, b.zero_ok
        lo_b = -math.inf if b.lo is None else b.lo
        hi_b = math.inf if b.hi is None else b.hi
        if lo_b >= hi_b:
            return None
        ranges = {i: (2 ** (i - 1), 2**i - 1) for i in range(1, self.k + 1)}
        ranges = {i: (max(lo, lo_b), min(hi, hi_b)) for i, (lo, hi) in ranges.items() if lo <= hi_b and hi >= lo_b}
        zero = zero_ok and lo_b <= 0 <= hi_b
        if not ranges and not zero:
            return None
        key = var_key(op_type, var)
        choices = ([0] if zero else []) + sorted(ranges)
        if self.weight is None:
            # Zero is the most common real value of a pad or a start, so it gets a bin of its own.
            i = 0 if zero and (not ranges or self.rng.random() < ZERO_BIN_P) else self.rng.choice(choices[zero:])
        else:
            weights = [(self.k / 2 if i == 0 else 1.0) + self.weight(key, i) for i in choices]
            i = self.rng.choices(choices, weights)[0]
        if i == 0:
            return var == 0
        lo, hi = (int(v) for v in ranges[i])
        first, last = sorted((self.rng.randint(lo, hi), self.rng.randint(lo, hi)))
        return z3.And(var >= first, var <= last)


@dataclass
class Solution:
    """The values an insertion's unknowns took; `model` is None when it had none."""

    model: z3.ModelRef | None

    def eval(self, term: Dim) -> int:
        if isinstance(term, int):
            return term
        if self.model is None:
            raise ValueError(f"{term} was never solved")
        return int(self.model.eval(term, model_completion=True).as_long())


def _keep_satisfiable(solver: z3.Solver, bins: list[z3.BoolRef], model: z3.ModelRef) -> z3.ModelRef:
    """Add `bins` if they fit; otherwise halve them and try each half in turn.

    Returns the model of the last satisfiable check; the scopes it pushes are left for
    the caller to pop.
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


def solve_local(
    get_solver: Callable[[], z3.Solver],
    cons: Sequence[Cond],
    fresh: Sequence[BinVar],
    pinned: set[int],
    op_type: str,
    bins: BinChooser,
) -> Solution | None:
    """Solve one insertion: its constraints plus bins for its `fresh` variables, except
    those `pinned` (ids of variables an equality already fixes: their bins would only
    cost unsatisfiable checks).

    The solver (made on demand: most insertions need none) is left exactly as it was
    found. None means the insertion is invalid.
    """
    symbolic: list[z3.BoolRef] = []
    for c in cons:
        if isinstance(c, bool):
            if not c:
                return None
        else:
            symbolic.append(c)
    for b in fresh:
        symbolic += b.bound_constraints()
    if not symbolic and not fresh:
        return Solution(None)
    solver = get_solver()
    depth = solver.num_scopes()
    solver.push()
    try:
        solver.add(*symbolic)
        wanted = [b for b in fresh if b.binned and b.var.get_id() not in pinned]
        drawn = [c for b in wanted if (c := bins.draw(op_type, b)) is not None]
        if drawn:
            solver.push()
            solver.add(*drawn)
            if solver.check() == z3.sat:
                return Solution(solver.model())
            solver.pop()
        if solver.check() != z3.sat:
            return None
        model = solver.model()
        if len(drawn) > 1:
            bins.rng.shuffle(drawn)
            model = _keep_satisfiable(solver, drawn, model)
        return Solution(model)
    finally:
        solver.pop(solver.num_scopes() - depth)
