"""A seeded random stream that keeps every draw it makes, and can be fed recorded draws back.

A grown model is a sequence of insertions, and each insertion's own choices (the op's
attributes, its inputs' types, the bins its variables fell in) are a short run of draws
from the model's stream. Recording that run with the insertion lets a mutant replay the
insertion as it was, after something before it changed (generator.mutate): fed the same
draws, an op makes the same choices wherever they still fit. Every draw of Python's
Random comes down to `random()` or `getrandbits(k)`, so those two are all that is kept.

A fed draw of the wrong kind (a float where `getrandbits` is asked, or other bits) means
the insertion took another path than when it was recorded: the rest of the feed is
dropped and the stream's own draws take over, so a replay never stalls or repeats.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

Draw = tuple[int, float]
"""(bits, value): `getrandbits(bits)`'s value, or bits 0 for a `random()` float."""


class TapeRandom(random.Random):
    """random.Random, seeded as usual, keeping the draws it made in `draws`."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.draws: list[Draw] = []
        self._feed: Sequence[Draw] = ()
        self._at = 0

    def random(self) -> float:
        value = self._fed(0)
        if value is None:
            value = super().random()
        self.draws.append((0, value))
        return value

    def getrandbits(self, k: int, /) -> int:
        fed = self._fed(k)
        value = int(fed) if fed is not None else super().getrandbits(k)
        self.draws.append((k, value))
        return value

    def _fed(self, bits: int) -> float | None:
        if self._at >= len(self._feed):
            return None
        kind, value = self._feed[self._at]
        if kind != bits:
            self._feed, self._at = (), 0
            return None
        self._at += 1
        return value

    def feed(self, draws: Sequence[Draw]) -> None:
        """Serve `draws` first, in order, then the stream's own (an empty feed stops feeding)."""
        self._feed, self._at = draws, 0

    def since(self, mark: int) -> tuple[Draw, ...]:
        """The draws made since `len(draws)` was `mark`."""
        return tuple(self.draws[mark:])
