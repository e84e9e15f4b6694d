"""Where generation is asked to look more: the features of cases on which two builds
diverged, and the ops a change's diff names.

Coverage feedback (generator.coverage) steers toward what no model has had yet. That finds
old bugs in bulk, but a change acts on a few ops, pairs and patterns, and a regression
lives there: a fusion head extended to a pattern base left alone rewrites every case that
holds the pattern, long before one of them holds the attribute form it gets wrong. So a
campaign learns, from each divergent case (oracles.divergence), the op types, producer >
consumer pairs, rewrite templates, attribute bins and dtypes that case held, and the
rewrites that only one build performed; and the next models draw toward them.

What is drawn toward is a feature's *contrast*: how often it came with a divergence, over
how often any model had it (the campaign's coverage), so that Add, which every model
holds, does not win by being everywhere. A feature named by a diff hint (bot.campaign.hint)
carries a weight of its own that never fades; what divergences taught fades model by model
unless new divergences renew it, so a campaign that has searched one divergence out moves
on to the next.

All draws come from the model's seeded rng, and none at all while the focus is empty: a
campaign with nothing to focus on grows exactly the models it grew before.
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from generator.ops.base import OpSpec
from generator.symbolic import TType

FOCUS_SHARE = 0.5
"""The share of op choices, insertion proposals and first-tensor dtypes a non-empty focus
makes; the rest are coverage feedback's, so what diverges never starves what is new."""
PATTERN_BONUS = 8.0
"""How much more a template variant in focus is drawn, at full weight."""
BIN_BONUS = 4.0
"""The extra weight of an attribute bin in focus, at full weight (an uncovered bin gets 2)."""
INPUT = "input"


@dataclass(frozen=True)
class CaseFeatures:
    """What one generated model held, in the vocabulary coverage counts it in."""

    ops: tuple[str, ...] = ()
    pairs: tuple[str, ...] = ()
    """`producer>consumer`, `input` for a graph input (generator.coverage.pair_key)."""
    patterns: tuple[str, ...] = ()
    """Template variants placed, `Template~near_miss` (generator.patterns)."""
    bins: tuple[str, ...] = ()
    """`Op.var=bin` of each binned variable (generator.binning.var_key, bin_of)."""
    dtypes: tuple[str, ...] = ()
    """The dtypes the model's ops read."""


Weights = defaultdict[str, float]
FIELDS = ("ops", "pairs", "patterns", "bins", "dtypes", "rewrites")
DECAY = 0.99
"""What a learned weight keeps per model grown: a divergence steers the next hundred or so
models, then fades unless it is seen again (a half-life of about 69 models)."""
KNOWN_QUIET = 0.5
"""What the pull toward a known bug's ops keeps each time a bug of theirs becomes known: its
cases are that bug again, while another bug of the same ops must stay reachable."""
HINT_STRENGTH = 0.5
"""What a diff hint alone makes of the share: a prior that never fades, and never takes
more than half of what a fresh divergence takes."""


def _weights() -> Weights:
    return defaultdict(float)


@dataclass
class Layer:
    """Feature weights of one kind of evidence."""

    ops: Weights = field(default_factory=_weights)
    pairs: Weights = field(default_factory=_weights)
    patterns: Weights = field(default_factory=_weights)
    bins: Weights = field(default_factory=_weights)
    dtypes: Weights = field(default_factory=_weights)
    rewrites: Weights = field(default_factory=_weights)
    """Rewrite keys one build performed and the other did not (oracles.divergence)."""

    @property
    def empty(self) -> bool:
        return not any(getattr(self, name) for name in FIELDS)

    def add(self, name: str, keys: Iterable[str], weight: float) -> None:
        mine: Weights = getattr(self, name)
        for key in set(keys):
            mine[key] += weight

    def scale(self, factor: float) -> None:
        for name in FIELDS:
            mine: Weights = getattr(self, name)
            for key in mine:
                mine[key] *= factor

    def strength(self) -> float:
        """The largest op, pair or pattern weight: how hard this layer pulls."""
        return max(
            (w for name in ("ops", "pairs", "patterns", "rewrites") for w in getattr(self, name).values()), default=0.0
        )


@dataclass
class Focus:
    """Where one campaign's models are drawn toward, shared by every model it grows: what
    divergent cases held (`learned`, fading model by model) and what a diff names (`hinted`)."""

    learned: Layer = field(default_factory=Layer)
    hinted: Layer = field(default_factory=Layer)
    share: float = FOCUS_SHARE

    @property
    def empty(self) -> bool:
        return self.learned.empty and self.hinted.empty

    def learn(self, features: CaseFeatures, weight: float = 1.0, rewrites: Iterable[str] = ()) -> None:
        """A divergent case's features, weighted (a divergence never seen before weighs more),
        and the rewrites only one build performed on it."""
        for name in FIELDS[:-1]:
            self.learned.add(name, getattr(features, name), weight)
        self.learned.add("rewrites", rewrites, weight)

    def quiet(self, ops: Iterable[str]) -> None:
        """A bug of `ops` became known: both layers pull toward them, and their pairs, by
        KNOWN_QUIET as hard. A diff that names Clip keeps steering toward Clip for the whole
        campaign; once its Clip regression is found, that pull only finds it again."""
        named = set(ops)
        for layer in (self.learned, self.hinted):
            for op in named & set(layer.ops):
                layer.ops[op] *= KNOWN_QUIET
            for pair in layer.pairs:
                producer, _, consumer = pair.partition(">")
                if producer in named or consumer in named:
                    layer.pairs[pair] *= KNOWN_QUIET

    def tick(self) -> None:
        """One model grown: what was learned fades a little."""
        if not self.learned.empty:
            self.learned.scale(DECAY)

    def weights(self, name: str) -> dict[str, float]:
        """Both layers' weights of one field, summed."""
        out: dict[str, float] = dict(getattr(self.learned, name))
        for key, w in getattr(self.hinted, name).items():
            out[key] = out.get(key, 0.0) + w
        return out

    def strength(self) -> float:
        """How much of FOCUS_SHARE the focus takes now: all of it while a divergence is fresh."""
        learned = min(1.0, self.learned.strength())
        return max(learned, HINT_STRENGTH if not self.hinted.empty else 0.0)

    def copy(self) -> Focus:
        return copy.deepcopy(self)


def contrast(weights: Mapping[str, float], seen: Mapping[str, int]) -> dict[str, float]:
    """Each key's weight over how often any model had it (at least once)."""
    return {k: w / max(1, seen.get(k, 0)) for k, w in weights.items() if w > 0}


def _normalized(scores: Mapping[str, float]) -> dict[str, float]:
    top = max(scores.values(), default=0.0)
    return {k: v / top for k, v in scores.items()} if top > 0 else {}


class FocusDraws:
    """One model's view of the focus: the draws it makes, from the model's rng."""

    def __init__(
        self,
        focus: Focus,
        specs: Sequence[type[OpSpec]],
        rng: random.Random,
        seen: Callable[[str], Mapping[str, int]],
    ) -> None:
        """`seen(name)` is the coverage counter of the same name (ops, pairs, attrs, dtypes, patterns)."""
        self.rng = rng
        self.share = focus.share * focus.strength()
        by_name = {s.op_type: s for s in specs}
        ops = contrast(focus.weights("ops"), seen("ops"))
        self.ops = [(by_name[o], w) for o, w in sorted(ops.items()) if o in by_name]
        pairs = contrast(focus.weights("pairs"), seen("pairs"))
        self.pairs = sorted((k, w) for k, w in pairs.items() if k.partition(">")[2] in by_name)
        self.by_name = by_name
        self.bins = _normalized(contrast(focus.weights("bins"), seen("attrs")))
        self.patterns = _normalized(contrast(focus.weights("patterns"), seen("patterns")))
        self.rewrites = {k for k, w in focus.weights("rewrites").items() if w > 0}
        self.dtypes = contrast(focus.weights("dtypes"), seen("dtypes"))
        self.hinted_ops = _normalized(dict(focus.hinted.ops))

    def _now(self) -> bool:
        return self.rng.random() < self.share

    def choose_op(self) -> type[OpSpec] | None:
        if not self.ops or not self._now():
            return None
        return self.rng.choices([s for s, _ in self.ops], [w for _, w in self.ops])[0]

    def propose(
        self,
        producers: Mapping[int, str],
        consumers: Mapping[int, list[str]],
        tensors: Sequence[TType],
        placeholders: Sequence[int],
    ) -> tuple[str, type[OpSpec], int] | None:
        """An insertion toward a focused pair: its consumer after a tensor its producer made;
        else its producer in place of a graph input its consumer reads; else a focused op
        on any tensor it reads (so that the pair can form next)."""
        if not (self.pairs or self.ops) or not self._now():
            return None
        holes = set(placeholders)
        made: dict[str, list[int]] = {}
        for t in range(len(tensors)):
            made.setdefault(INPUT if t in holes else producers.get(t, INPUT), []).append(t)
        fits: list[tuple[str, type[OpSpec], list[int], float]] = []
        for key, w in self.pairs:
            producer, _, consumer = key.partition(">")
            spec = self.by_name[consumer]
            after = [t for t in made.get(producer, ()) if spec.slot_ok(0, tensors[t])]
            if after:
                fits.append(("forward", spec, after, w))
            elif producer in self.by_name:
                before = [t for t in placeholders if consumer in consumers.get(t, ())]
                if before:
                    fits.append(("backward", self.by_name[producer], before, w))
        if not fits:
            fits = [
                ("forward", s, [t for t in range(len(tensors)) if s.slot_ok(0, tensors[t])], w) for s, w in self.ops
            ]
            fits = [f for f in fits if f[2]]
        if not fits:
            return None
        way, spec, cands, _ = self.rng.choices(fits, [f[3] for f in fits])[0]
        return way, spec, self.rng.choice(cands)

    def bin_bonus(self, key: str, i: int) -> float:
        return BIN_BONUS * self.bins.get(f"{key}={i}", 0.0)

    def pattern_factor(self, name: str, fires: Iterable[str], ops: Sequence[str]) -> float:
        """1 for a variant out of focus; up to 1 + PATTERN_BONUS for one in it, one whose
        rewrite only one build performed, or one written with ops a diff named (by the
        share of its ops named)."""
        hit = self.patterns.get(name, 0.0)
        if any(k in self.rewrites for k in fires):
            hit = 1.0
        named = [self.hinted_ops[o] for o in ops if o in self.hinted_ops]
        if named:
            hit = max(hit, max(named) * len(named) / len(ops))
        return 1.0 + PATTERN_BONUS * hit

    def first_types(self, types: list[TType]) -> list[TType]:
        """The first tensor's types, narrowed to one focused dtype (the share of the time)."""
        present = {t.dtype.value for t in types}
        weights = sorted((d, w) for d, w in self.dtypes.items() if d in present)
        if not weights or not self._now():
            return types
        dtype = self.rng.choices([d for d, _ in weights], [w for _, w in weights])[0]
        return [t for t in types if t.dtype.value == dtype]
