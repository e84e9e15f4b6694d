"""The tensor types a model may start from: those of the config, or for the `wide_types`
share of seeds the WIDE element types (generator.dtypes.WIDE), where some allowed op takes
them.

A type no allowed op takes first may still be one an allowed op can make: Where's first input
is its bool condition, so a support matrix that holds only (Where, int8), as a head that adds
int8 to Where gives the seeds that draw what head alone runs, takes no start type on its
first slot; an int8 tensor is still one a backward Where produces. Those are the start types
when the first rule finds none, before every type (of which most can grow nothing).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from generator.dtypes import WIDE, DType
from generator.grow import Allowed
from generator.ops.base import OpSpec
from generator.symbolic import TType

WIDE_SALT = 0x5EED_16
"""Salts the stream that picks the `wide_types` share of seeds: one of its own, so the share
changes no other draw."""


def wide_draw(seed: int, share: float) -> bool:
    """Whether the seed's case starts from a WIDE element type (GenConfig.wide_types)."""
    return share > 0 and random.Random(seed ^ WIDE_SALT).random() < share


def start_types(
    seed: int, dtypes: Sequence[DType], wide_share: float, specs: Sequence[type[OpSpec]], allowed: Allowed
) -> list[TType]:
    """Every type at ranks 1 to 5 that some allowed op takes first; a wide seed's are the WIDE
    types alone, when any is startable. Falls back to all of them when none is."""
    seeds = [TType(d, r) for d in dtypes for r in range(1, 6)]
    if wide_draw(seed, wide_share):
        wide = [TType(d, r) for d in WIDE if d not in dtypes for r in range(1, 6)]
        seeds = _startable(wide, specs, allowed) or seeds
    return _startable(seeds, specs, allowed) or _producible(seeds, specs, allowed) or seeds


def _startable(seeds: list[TType], specs: Sequence[type[OpSpec]], allowed: Allowed) -> list[TType]:
    return [t for t in seeds if any(s.slot_ok(0, t) and allowed(s, [t] * s.arity) for s in specs)]


PRODUCE_TRIES = 4
"""Draws of an op's backward input types tried per start type: some ops draw them (Cast's
source type), and one that fits is enough."""


def _producible(seeds: list[TType], specs: Sequence[type[OpSpec]], allowed: Allowed) -> list[TType]:
    """The types some allowed op can be inserted backward to produce. The draws come from a
    stream of their own, so the case's stream is the same whatever they drew."""
    rng = random.Random(0)

    def makes(spec: type[OpSpec], out: TType) -> bool:
        for _ in range(PRODUCE_TRIES):
            sig = spec.backward_inputs(out, rng)
            if sig is not None and spec.accepts(sig) and allowed(spec, sig):
                return True
        return False

    return [t for t in seeds if any(makes(s, t) for s in specs)]


__all__ = ["WIDE_SALT", "start_types", "wide_draw"]
