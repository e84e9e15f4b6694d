"""Which rewrite template, in which variant, the next insertion tries.

COMET steers toward what coverage has not seen; here the coverage is the rewrites the
systems under test actually performed (generator.coverage.Coverage.rewrites, read off
their optimized graphs). A template whose rewrite never fired comes up mostly in its
exact form, to make it fire; once it has fired, mostly as near misses, where a rewrite
that forgets a precondition is wrong. Variants tried often are drawn less, so every
one keeps coming up. All draws come from the model's seeded rng.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Sequence, Set

from generator.coverage import Coverage
from generator.dtypes import DType
from generator.focus import FocusDraws
from generator.patterns.base import EXACT, Pattern
from generator.symbolic import TType

UNFIRED_EXACT = 3.0
"""Weight of the exact form of a template whose rewrite has not fired yet (near misses: 1)."""
FIRED_NEAR_MISS = 3.0
"""Weight of each near miss of a template whose rewrite has fired (its exact form: 1)."""


def fired(template: type[Pattern], coverage: Coverage | None) -> bool:
    return coverage is not None and any(coverage.rewrites.get(k, 0) for k in template.fires)


FUSION = 2.0
"""Base weight of a template whose rewrite makes a new op (a fusion) over one whose rewrite
only removes nodes: random growth already makes many removable nodes, never a fusion."""


@functools.cache
def _base(variant: type[Pattern]) -> float:
    """A variant's weight before coverage: fusions weigh more, and the members of a family
    share their variant's."""
    return (FUSION if any(k.startswith("+") for k in variant.fires) else 1.0) / variant.siblings


def weight(variant: type[Pattern], coverage: Coverage | None) -> float:
    base = _base(variant)
    if coverage is None:
        return base
    exact = variant.variant == EXACT
    w = (1.0 if exact else FIRED_NEAR_MISS) if fired(variant, coverage) else (UNFIRED_EXACT if exact else 1.0)
    return base * w / math.sqrt(1 + coverage.patterns.get(variant.name(), 0))


class PatternChooser:
    """Replaces a share of an op chooser's draws by a template variant that fits the
    model's remaining node budget."""

    def __init__(
        self,
        variants: Sequence[type[Pattern]],
        share: float,
        rng: random.Random,
        coverage: Coverage | None,
        focus: FocusDraws | None = None,
    ) -> None:
        """`focus`, when given, weighs up the variants two builds diverged on."""
        self.variants = list(variants)
        self.weights = [weight(v, coverage) for v in self.variants]
        if focus is not None:
            factors = [focus.pattern_factor(v.name(), v.fires, v.support_ops()) for v in self.variants]
            self.weights = [w * f for w, f in zip(self.weights, factors, strict=True)]
        self.share = share
        self.rng = rng

    def first_types(self, types: list[TType]) -> list[TType]:
        """The types a model's first tensor may take. Most rewrites are of float32 graphs
        (what exporters write), and a template can only enter a graph that has a tensor
        it reads; so, as often as templates are drawn, the model starts from a float32
        tensor of rank 1 to 4 where that type is allowed. Rank 1 included: a fusion may
        fail on rank-1 inputs alone, and the templates whose ops allow it must meet them."""
        if not self.variants or self.rng.random() >= self.share:
            return types
        floats = [t for t in types if t.dtype is DType.float32 and 1 <= t.rank <= 4]
        return floats or types

    def draw(self, left: int, types: Set[TType]) -> type[Pattern] | None:
        """A variant for the next insertion (the share of the time), among those that fit
        the `left` nodes of the model's budget and can read one of the graph's tensor
        `types`; None: grow op by op this time."""
        if not self.variants or self.rng.random() >= self.share:
            return None
        room = max(left, 2)
        fits = [
            (v, w)
            for v, w in zip(self.variants, self.weights, strict=True)
            if v.node_cost <= room and any(v.slot_ok(0, t) for t in types)
        ]
        if not fits:
            return None
        return self.rng.choices([v for v, _ in fits], [w for _, w in fits])[0]
