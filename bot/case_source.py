"""Seeds turned into runnable cases: a generated model, NaN/Inf-free inputs, and the
torch reference's outputs.

Seeds are handed out in order (within a shard: first + i, first + i + N, ...), so a
campaign's seed range says exactly which models it tried. Generation holds a lock:
the coverage feedback is shared by every lane of a campaign.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from backends.reference import ReferenceError, run_reference
from generator.api import GenConfig, Support, generate
from generator.coverage import Coverage
from generator.values import NoValidValues


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


@dataclass
class Prepared:
    seed: int
    model: onnx.ModelProto
    model_bytes: bytes
    inputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray]


@dataclass
class SourceTimes:
    generation: float = 0.0
    values: float = 0.0
    """The part of `generation` spent keeping values safe (generator.witness)."""
    reference: float = 0.0


class CaseSource:
    def __init__(self, cfg: GenConfig, first_seed: int, shard: Shard | None = None) -> None:
        self.cfg = cfg
        self.shard = shard or Shard(0, 1)
        self.next_seed = first_seed + self.shard.index
        self.support: Support | None = None
        self.coverage = Coverage()
        self.dropped: Counter[str] = Counter()
        self.value_work: Counter[str] = Counter()
        """Insertions whose values were repaired, and refused, while models grew."""
        self.times = SourceTimes()
        self.issued = 0
        self._lock = threading.Lock()

    def next(self, may_start: Callable[[], bool]) -> Prepared | None:
        """The next runnable case, or None once `may_start` says the campaign is over."""
        with self._lock:
            while may_start():
                seed = self.next_seed
                self.next_seed += self.shard.count
                case = self._prepare(seed)
                if case is not None:
                    self.issued += 1
                    return case
        return None

    def _prepare(self, seed: int) -> Prepared | None:
        t0 = time.perf_counter()
        try:
            case = generate(seed, self.cfg, support=self.support, coverage=self.coverage)
        except NoValidValues:
            # Never run: its value work ran past its time budget (generator.witness).
            self.dropped["no_valid_values"] += 1
            return None
        except RuntimeError:
            self.dropped["generation_failed"] += 1
            return None
        finally:
            self.times.generation += time.perf_counter() - t0
        if case.values is not None:
            self.times.values += case.values.time_ms / 1000
            self.value_work["repaired_insertions"] += case.values.grown_repairs
            self.value_work["refused_insertions"] += case.values.grown_refusals
        t1 = time.perf_counter()
        try:
            reference = run_reference(case.model, case.inputs)
        except ReferenceError as e:
            print(f"warning: seed {seed}: reference failed: {e}", file=sys.stderr)
            self.dropped["reference_error"] += 1
            return None
        finally:
            self.times.reference += time.perf_counter() - t1
        if not all(np.isfinite(v).all() for v in reference.values()):
            self.dropped["nonfinite_reference"] += 1
            return None
        return Prepared(seed, case.model, case.model.SerializeToString(), case.inputs, reference)
