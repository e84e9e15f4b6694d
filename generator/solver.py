"""The solver an insertion's unknowns go to: bounded by counts, never by seconds.

A check is held to z3's resource count (`rlimit`), so the same seed gives the same case on
a loaded runner, and all of one model's checks share one budget, so no seed, whatever its
shapes, holds a campaign up. Growth takes `unknown` as a refused insertion.
"""

from __future__ import annotations

from collections.abc import Callable

import z3

CHECK_RLIMIT = 1_000_000
"""z3's resource count a check may spend (its `rlimit`): one z3 cannot settle within it
(nonlinear shapes) counts as a rejected insertion. A count, not a clock, so the same seed
gives the same case on a loaded runner; about 0.3 s of one core here."""
MODEL_RLIMIT = 8 * CHECK_RLIMIT
"""The resource count all of one model's checks may spend together: past it, insertions
that need the solver are refused and the model grows from concrete draws alone, so no
seed, whatever its shapes, holds a campaign up for more than a few seconds."""
SOLVER_PARAMS: dict[str, bool] = {"arith.nl.nra": False}
"""z3's nonlinear real-arithmetic fallback (nlsat) is turned off: its cell decomposition
ticks the resource count about a thousand times slower than the rest of the solver, so a
backward Conv over three spatial dims once spent 120 s inside one check that `rlimit`
was meant to hold to 0.3 s. The linear core and the nonlinear lemmas (Groebner, Horner)
still settle the shapes growth asks about: over 800 seeds of a narrow-support matrix,
the same op pairs were covered with 38 checks more left undecided (of 2,556)."""


BACKSTOP_MS = 5000
"""A wall-clock limit behind the count, for the work z3 does without counting it: its term
rewriter once spent 8 s and 4.7 billion allocations expanding the product of three padded
dims (a Pad's element count), at 180,000 resource units. A check the count bounds takes at
most about 0.3 s, so only such a check ever meets this limit, on any load; when one does,
the model's solver is spent (it grows on from concrete draws) and the case says so
(`GeneratedCase.solver_backstops`, summary.json's `solver_backstops`): the one place where a seed's
case could depend on the machine."""


class MeteredSolver(z3.Solver):  # type: ignore[misc]
    """A simple solver whose checks draw on one resource budget for the whole model
    (MODEL_RLIMIT), each check also held to CHECK_RLIMIT; once the budget is spent every
    check answers `unknown` at once, which growth takes as a rejected insertion."""

    def __init__(self, ctx: z3.Context, on_backstop: Callable[[], None] = lambda: None) -> None:
        super().__init__(solver=z3.Z3_mk_simple_solver(ctx.ref()), ctx=ctx)
        for key, value in SOLVER_PARAMS.items():
            self.set(key, value)
        self.set("timeout", BACKSTOP_MS)
        self.on_backstop = on_backstop
        self.spent = 0
        """Resource units spent by this solver's checks so far (its context's count)."""

    def check(self, *assumptions: z3.ExprRef) -> z3.CheckSatResult:
        left = MODEL_RLIMIT - self.spent
        if left <= 0:
            return z3.unknown
        limit = min(CHECK_RLIMIT, left)
        self.set("rlimit", limit)
        result = super().check(*assumptions)
        before, self.spent = self.spent, int(self.statistics().get_key_value("rlimit count"))
        if result == z3.unknown and self.spent - before < limit and _stopped(self.reason_unknown()):
            self.spent = MODEL_RLIMIT
            self.on_backstop()
        return result


def _stopped(reason: str) -> bool:
    """z3 gave up because it was stopped (its timeout says `canceled`, as the resource limit
    does), not because the problem is beyond it (`incomplete ...`)."""
    return "canceled" in reason or "timeout" in reason
