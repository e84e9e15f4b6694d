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

from backends.client import BackendUnavailable, WorkerClient
from backends.spec import BackendSpecError, adapter_class, parse_backend
from bot.case_making import make_case
from bot.corpus import Corpus, StoredCase, generator_key
from bot.corpus_feed import BATCH
from bot.errors import UserError
from bot.probe import probe_support
from generator.api import GenConfig, Support
from generator.coverage import Coverage


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
    support: Support | None = None,
) -> Filled:
    """Generate every seed of `seeds` the corpus lacks and add it, BATCH cases a transaction;
    with `support` (a backend's probe), only op x dtype pairs that backend runs are drawn."""
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
            case = _stored(seed, cfg, coverage, support)
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


def _stored(seed: int, cfg: GenConfig, coverage: Coverage, support: Support | None) -> StoredCase | None:
    """One seed's case with its reference, as a campaign prepares it; None if it gives none."""
    case = make_case(seed, cfg, support, coverage, None).case
    if case is None:
        return None
    stored = StoredCase(seed, case.model_bytes, case.inputs, case.reference, case.source.value)
    stored.gap, stored.gap_op = case.gap, case.gap_op
    return stored


def probed_support(backend: str, opset: int, cache_dir: Path) -> Support:
    """What `backend` runs, by op x key dtype (the campaign's probe, cached the same way): a
    corpus drawn from it holds no case that backend would only decline."""
    try:
        spec = parse_backend(backend)
        lossy = {} if spec.plugin else dict(getattr(adapter_class(spec.adapter), "lossy_dtypes", {}))
        with WorkerClient(spec) as client:
            assert client.info is not None
            return probe_support(client, client.info, opset, cache_dir, lambda failure: None, lossy=lossy).support()
    except (BackendSpecError, BackendUnavailable) as e:
        raise UserError(f"gen: --backend: {str(e).splitlines()[0]}") from e
