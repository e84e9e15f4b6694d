"""Which opset each case of a campaign imports, and what it may draw there.

Models in the field import every opset from 11 to the newest, and what changed between
opsets is where frontends and kernels differ: axes that became inputs (Reduce*-18), new
attribute forms (Resize-18's antialias and keep_aspect_ratio_policy, Pad-19's wrap,
AveragePool-19's dilations), kernels registered per version. A campaign pinned to one opset
never reaches those, so each case draws its own, from the lowest the config allows to the
highest every side loads (bot.sides.opset_probe), half of them at that highest: the newest
forms are what a change is likeliest to touch, and the older ones still get the other half.

The draw is a function of the seed alone, salted apart from the generator's own draws: the
same seed gives the same case at any load, in any process, and a mutant grows at its
parent's opset. What a case may draw is the support matrix at its own opset (ops gain
versions and lose kernels between opsets).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.cases.making import alone_side, seed_support
from generator.api import OLDEST_GENERATED, GenConfig, Support
from generator.dtypes import WIDE
from generator.emit import NEWEST_OPSET
from generator.mutate import Genome
from oracles.sides import SideName

TOP_SHARE = 0.5
"""The share of cases at the highest opset of the range; the rest spread evenly below it."""
OPSET_SALT = 0x0F5E7
"""Keeps the opset draw apart from every other draw made from the seed."""
ALONE_SALT = 0xA10E
"""Keeps the opset draw of a seed that draws one side's pairs alone apart from the others."""

PerOpset = Mapping[int, Support]


def campaign_range(cfg: GenConfig, loaded: Sequence[int | None] | None) -> tuple[int, int]:
    """The lowest and highest opset a campaign draws from. `loaded`: each side's highest opset
    from its probe (None for a side that ran no probe model), or None without probing.

    The range starts at the oldest opset the generator writes unless the config names an
    `opset_min`: a converter registered for an op's version 11 or 12 (onnx2torch's Squeeze
    with `axes` as an attribute, its Softmax's 2-D coercion) runs only for models of those
    opsets; 148 of onnx2torch's 263 registrations were out of reach of opsets 17 to 21.

    A pinned `opset` is the whole range. Without the probe nothing says what the sides load,
    so the range ends at `opset_max` where the config names it, else it is `opset_min` alone
    (what campaigns did before opsets were drawn), as it is where a side loaded none of the
    opsets the generator writes. A side that loads less than `opset_min` lowers the range's
    bottom too: a model it cannot load tests nothing."""
    if cfg.opset is not None:
        return cfg.opset, cfg.opset
    if loaded is None:
        return cfg.opset_min, cfg.opset_max if cfg.opset_max is not None else cfg.opset_min
    known = [h for h in loaded if h is not None and h >= OLDEST_GENERATED]
    if len(known) < len(loaded):
        return cfg.opset_min, cfg.opset_min
    high = min([cfg.opset_max if cfg.opset_max is not None else NEWEST_OPSET, *known])
    low = cfg.opset_min if "opset_min" in cfg.model_fields_set else OLDEST_GENERATED
    return min(low, high), high


def draw_opset(seed: int, low: int, high: int) -> int:
    """TOP_SHARE of the seeds at `high`, the rest uniform over [low, high)."""
    if low >= high:
        return high
    rng = random.Random(seed ^ OPSET_SALT)
    return high if rng.random() < TOP_SHARE else rng.randrange(low, high)


@dataclass(frozen=True)
class OpsetPlan:
    """A campaign's opset range with, per opset, what every side runs and what one side alone
    runs (bot.cases.making.seed_support draws the latter for a share of the seeds)."""

    low: int
    high: int
    both: PerOpset | None = None
    """None: no support probe, every op and dtype may be drawn."""
    head: PerOpset | None = None
    base: PerOpset | None = None
    """Per opset where a side runs pairs the other does not: everything that side runs."""
    head_alone: PerOpset | None = None
    base_alone: PerOpset | None = None
    """Per opset: the pairs that side alone runs (bot.cases.making.ALONE_EVERY)."""

    @classmethod
    def pinned(cls, opset: int) -> OpsetPlan:
        return cls(opset, opset)

    @property
    def opsets(self) -> range:
        return range(self.low, self.high + 1)

    def opset_of(self, seed: int, genome: Genome | None = None) -> int:
        """A mutant's parent's opset where the range has it; else the seed's draw."""
        if genome is not None and genome.opset is not None and self.low <= genome.opset <= self.high:
            return genome.opset
        return draw_opset(seed, self.low, self.high)

    def support(self, seed: int, opset: int) -> Support | None:
        if self.both is None:
            return None
        head = self.head.get(opset) if self.head is not None else None
        base = self.base.get(opset) if self.base is not None else None
        return seed_support(seed, self.both.get(opset, {}), head, base)

    def alone(self, seed: int) -> tuple[int, Support] | None:
        """For a seed that draws one side's pairs alone (bot.cases.making.alone_side): an opset
        where that side runs pairs the other does not, and those pairs; None for any other
        seed, or where the sides run the same. The opset is a function of the seed."""
        side = alone_side(seed)
        per = self.head_alone if side is SideName.head else self.base_alone if side is SideName.base else None
        if not per:
            return None
        opsets = sorted(per)
        opset = opsets[random.Random(seed ^ ALONE_SALT).randrange(len(opsets))]
        return opset, per[opset]

    def case_config(self, cfg: GenConfig, seed: int, genome: Genome | None = None) -> tuple[GenConfig, Support | None]:
        """The generator config of one seed's case, at its opset, and the support it draws from."""
        lone = self.alone(seed) if genome is None else None
        support: Support | None
        if lone is not None:
            opset, support = lone
            if cfg.wide_types > 0 and only_wide(support, cfg):
                cfg = cfg.model_copy(update={"wide_types": 1.0})
        else:
            opset = self.opset_of(seed, genome)
            support = self.support(seed, opset)
        at = cfg if cfg.opset == opset else cfg.model_copy(update={"opset": opset})  # pinned for this case
        return at, support

    def any_opset(self) -> Support | None:
        """What every side runs at some opset of the range: stored cases (bot.cases.corpus_feed)
        are filtered by op and dtype alone, so one that needs what no opset runs is left out."""
        if self.both is None:
            return None
        union: Support = {}
        for support in self.both.values():
            for op, dtypes in support.items():
                union.setdefault(op, set()).update(dtypes)
        return union


def only_wide(support: Support, cfg: GenConfig) -> bool:
    """Whether every pair of `support` is keyed by a WIDE type the config's own types leave
    out. What one side alone runs can be that: onnxruntime 1.18.0 adds bfloat16 IsNaN and
    IsInf, and nothing else over 1.17.3. A case starts from a WIDE type only on the
    `wide_types` share of the seeds, so a seed that draws those pairs alone is one of that
    share; drawn from the config's types, it grew nothing (195 of a 1.17.3 -> 1.18.0
    campaign's cases were dropped this way)."""
    keys = {dtype for dtypes in support.values() for dtype in dtypes}
    return bool(keys) and all(d in WIDE and d not in cfg.dtypes for d in keys)
