"""A campaign's share of the seeds, when several jobs split one campaign (`--shard I/N`)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Shard:
    """`i/N`: this job takes every N-th seed, starting at the i-th (0-based)."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not m or int(m.group(2)) < 1 or int(m.group(1)) >= int(m.group(2)):
            raise ValueError(f"{text!r} is not a shard I/N with 0 <= I < N, e.g. 0/4")
        return cls(int(m.group(1)), int(m.group(2)))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
