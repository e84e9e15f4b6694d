"""Mutants in a campaign: which cases are searched around, and how much of the budget goes there.

These cases become parents (generator.mutate): divergent ones, where base and head
treated the case differently; near misses, where a rewrite fired on one build only or an
output came within a quarter of its tolerance; every finding's original, unreduced model,
because bugs cluster; and, where the system's own Python code is measured, cases that
executed code no case had, the lines a change touched above all (bot.campaign.code_feedback).
Each seed is either fresh or a mutant of a parent, and the split follows what each source
has been yielding, the way AFL and libFuzzer give energy to productive seeds: a case
yields when it shows a divergence never seen before, adds coverage, or is a new finding. A
parent whose mutants yielded is drawn more, one mutated often without a yield less. Every
decision is drawn from a stream seeded by the seed itself (and the campaign's state so
far), so the same seed and the same history give the same case.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import onnx

from generator.dtypes import DType
from generator.mutate import Genome, Mutant, mutate
from generator.ops.base import OpSpec
from oracles.verdict import Judgement

MUTATION_SALT = 0x6D75_7461
MIN_SHARE = 0.1
"""The least share of seeds mutants get while there are parents: a source must be tried to be judged."""
MAX_SHARE = 0.7
"""The most: fresh generation keeps finding what no parent is near."""
MUTANT_PRIOR = 0.25
"""Mutants start at a fifth of the seeds (against fresh generation's prior of 1): they must
earn more, because a fresh case is where a divergence no parent is near turns up."""
MAX_PARENTS = 64
"""Parents kept of each kind; past it, the least productive of the most mutated make room."""
WHY_WEIGHT = {"divergent": 5.0, "diff_coverage": 5.0, "finding": 3.0, "near_miss": 1.0, "code_coverage": 1.0}
"""How often each kind of parent is drawn, among the kinds there are: divergences, and cases
that first executed a line the change touched, are where a change acts; findings are where
bugs cluster; near misses, and cases that reached new code elsewhere, are many and each is a
weaker lead (bot.campaign.code_feedback)."""


@dataclass
class Parent:
    seed: int
    genome: Genome
    why: str
    """A key of WHY_WEIGHT."""
    model: onnx.ModelProto | None = None
    """The case's model, to tell when a bug it shows becomes known (Mutation.forget)."""
    mutated: int = 0
    yielded: int = 0
    found: bool = False
    """One of its mutants was kept as a finding."""

    def energy(self) -> float:
        """Within its kind: more for a parent whose mutants yielded, less for one mutated often."""
        return (1 + 2 * self.yielded) / math.sqrt(1 + self.mutated)


@dataclass
class SourceYield:
    cases: int = 0
    gains: float = 0.0
    prior: float = 1.0
    """Gains credited before any case, over two cases: what the source is assumed to be worth untried."""

    def rate(self) -> float:
        return (self.gains + self.prior) / (self.cases + 2)


@dataclass
class MutationPlan:
    """What a seed is to be: a parent's mutant (with the mutation), or fresh (None)."""

    parent: Parent
    mutant: Mutant


@dataclass
class Mutation:
    """The campaign's parents and the yield of each source."""

    enabled: bool = True
    parents: dict[int, Parent] = field(default_factory=dict)
    fresh: SourceYield = field(default_factory=SourceYield)
    mutants: SourceYield = field(default_factory=lambda: SourceYield(prior=MUTANT_PRIOR))
    by_why: dict[str, SourceYield] = field(default_factory=dict)
    """Mutants' yield by the kind of their parent."""
    kinds: Counter[str] = field(default_factory=Counter)
    """Mutants made, by mutation kind."""
    kind_gains: Counter[str] = field(default_factory=Counter)
    """Mutants that yielded, by mutation kind."""
    lineage: dict[int, tuple[Judgement, ...]] = field(default_factory=dict)
    """A finding parent's seed -> the failures it was kept for: a mutant that shows one again
    is a sighting of that finding (oracles.bug_identity.as_sighting_of). Kept past the parent
    itself, for the mutants in flight when it is forgotten or makes room."""

    def add_parent(
        self,
        seed: int,
        genome: Genome | None,
        why: str,
        model: onnx.ModelProto | None = None,
        shown: Sequence[Judgement] = (),
    ) -> None:
        """A case worth searching around; a stronger reason replaces a weaker one. `shown`:
        the failures a finding was kept for."""
        if not self.enabled or genome is None:
            return
        if shown:
            self.lineage[seed] = tuple(j.model_copy(update={"comparison": None}) for j in shown)
        known = self.parents.get(seed)
        if known is not None:
            if WHY_WEIGHT.get(why, 1.0) > WHY_WEIGHT.get(known.why, 1.0):
                known.why = why
            return
        kin = [p for p in self.parents.values() if p.why == why]
        if len(kin) >= MAX_PARENTS:
            worst = min(kin, key=lambda p: (p.energy(), -p.seed))
            del self.parents[worst.seed]
        self.parents[seed] = Parent(seed, genome, why, model)

    def share(self) -> float:
        """The share of seeds mutants get now."""
        if not self.parents:
            return 0.0
        m, f = self.mutants.rate(), self.fresh.rate()
        return min(MAX_SHARE, max(MIN_SHARE, m / (m + f)))

    def plan(self, seed: int, specs: dict[str, type[OpSpec]], dtypes: list[DType]) -> MutationPlan | None:
        """Whether `seed` is a mutant, of which parent, by which mutation (`specs`: the ops and
        template variants by step name that the mutant may use, generator.api.step_specs)."""
        if not self.enabled or not self.parents:
            return None
        rng = random.Random(seed ^ MUTATION_SALT)
        if rng.random() >= self.share():
            return None
        kinds = sorted({p.why for p in self.parents.values()}, key=lambda w: (-WHY_WEIGHT.get(w, 1.0), w))
        weights = [WHY_WEIGHT.get(w, 1.0) * self.by_why.get(w, SourceYield()).rate() for w in kinds]
        why = rng.choices(kinds, weights)[0]
        parents = sorted((p for p in self.parents.values() if p.why == why), key=lambda p: p.seed)
        parent = rng.choices(parents, [p.energy() for p in parents])[0]
        mutant = mutate(parent.genome, rng, specs.get, sorted(specs), dtypes)
        if mutant is None:
            return None
        parent.mutated += 1
        self.kinds[mutant.kind.value] += 1
        return MutationPlan(parent, mutant)

    def forget(self, shows_known: Callable[[onnx.ModelProto], bool]) -> int:
        """Drop the parents whose model shows a bug now known (its mutants would show it
        again, and generation steers away from it): how many went."""
        gone = [seed for seed, p in self.parents.items() if p.model is not None and shows_known(p.model)]
        for seed in gone:
            del self.parents[seed]
        return len(gone)

    def first_finding(self, parent_seed: int) -> bool:
        """Whether this is the first finding among `parent_seed`'s mutants (and note it)."""
        parent = self.parents.get(parent_seed)
        if parent is None or parent.found:
            return False
        parent.found = True
        return True

    def credit(self, parent_seed: int | None, kind: str | None, gain: float) -> None:
        """A judged case's yield (bot.campaign.run: 1 for a new finding or a divergence never
        seen, a little for a new op pair), to its source, its parent's kind, its parent and
        its mutation kind."""
        parent = self.parents.get(parent_seed) if parent_seed is not None else None
        sources = [self.mutants] if parent_seed is not None else [self.fresh]
        if parent is not None:
            sources.append(self.by_why.setdefault(parent.why, SourceYield()))
        for source in sources:
            source.cases += 1
            source.gains += gain
        if gain >= 1 and parent is not None:
            parent.yielded += 1
        if gain >= 1 and kind:
            self.kind_gains[kind] += 1
