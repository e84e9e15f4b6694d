"""`fuzzbot gen --corpus DIR`: generated cases, with their reference outputs, written into
a case corpus (bot.corpus) instead of bundle folders.

Generation is what `fuzzbot gen` does for bundles (one coverage shared by the seeds in
order), so a seed's case here is the bundle `gen` writes for it from the same first seed.
Seeds the corpus already holds for this generator key are skipped, not regenerated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.corpus import Corpus, StoredCase, generator_key
from bot.corpus_feed import BATCH
from generator.api import GenConfig, generate
from generator.coverage import Coverage
from generator.values import NoValidValues
from oracles.references import read_reference


@dataclass
class Filled:
    """What one `gen --corpus` did."""

    added: int = 0
    skipped: int = 0
    """Seeds the corpus already had for this key."""
    dropped: int = 0
    """Seeds that gave no case (no valid values, or no op fits)."""
    pruned: int = 0
    """Stale cases (other generator keys) deleted first."""
    total: int = 0
    """Cases of this key in the corpus afterwards."""


def fill_corpus(
    folder: Path,
    cfg: GenConfig,
    seeds: range,
    coverage: Coverage | None = None,
    on_case: Callable[[int], None] | None = None,
) -> Filled:
    """Generate every seed of `seeds` the corpus lacks and add it, BATCH cases a transaction."""
    corpus = Corpus(folder)
    try:
        key = generator_key(cfg)
        filled = Filled(pruned=corpus.prune_stale(key))
        have = corpus.seeds(key)
        coverage = coverage if coverage is not None else Coverage()
        batch: list[StoredCase] = []
        for seed in seeds:
            if seed in have:
                filled.skipped += 1
                continue
            case = _stored(seed, cfg, coverage)
            if case is None:
                filled.dropped += 1
                continue
            batch.append(case)
            if len(batch) >= BATCH:
                filled.added += corpus.add(key, batch)
                batch = []
            if on_case is not None:
                on_case(seed)
        filled.added += corpus.add(key, batch)
        filled.total = corpus.count(key)[0]
        return filled
    finally:
        corpus.close()


def _stored(seed: int, cfg: GenConfig, coverage: Coverage) -> StoredCase | None:
    """One seed's case with its reference, as a campaign would prepare it; None if it gives none."""
    try:
        case = generate(seed, cfg, coverage=coverage)
    except (NoValidValues, RuntimeError):
        return None
    reading = read_reference(case.model, case.inputs)
    stored = StoredCase(seed, case.model.SerializeToString(), case.inputs, reading.outputs, reading.source.value)
    stored.gap, stored.gap_op = reading.gap, reading.gap_op
    return stored
