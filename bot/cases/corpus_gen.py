"""`fuzzbot gen --corpus DIR`: generated cases, with their reference outputs, written into
a case corpus (bot.cases.corpus) instead of bundle folders.

Generation is what `fuzzbot gen` does for bundles (one coverage shared by the seeds in
order), so a seed's case here is the bundle `gen` writes for it from the same first seed.
Seeds the corpus already holds for this generator key are skipped, not regenerated.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from backends.client import BackendUnavailable, WorkerClient
from backends.spec import BackendSpecError, parse_backend
from bot.cases.corpus import Corpus, generator_key
from bot.cases.corpus_feed import BATCH
from bot.cases.making import Prepared, make_case
from bot.errors import UserError
from bot.sides.probe import declared_lossy, probe_support
from generator.api import DEFAULT_OPSET, GenConfig, Support
from generator.coverage import Coverage
from generator.z3_contexts import ContextSupply


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
        contexts = ContextSupply()
        batch: list[Prepared] = []
        for seed in seeds:
            if seed in have:
                filled.skipped += 1
                continue
            case = make_case(seed, cfg, support, coverage, None, contexts).case
            if case is None:
                filled.dropped += 1
                continue
            batch.append(case)
            if len(batch) >= BATCH:
                filled.added += corpus.add(key, batch)
                batch = []
        filled.added += corpus.add(key, batch)
        filled.total = corpus.count(key)[0]
        return filled
    finally:
        corpus.close()


def probed_support(backend: str, opset: int | None, cache_dir: Path) -> Support:
    """What `backend` runs, by op x key dtype at `opset` (None: the default one, which `gen`
    writes), the campaign's probe, cached the same way: a corpus drawn from it holds no case
    that backend would only decline."""
    opset = DEFAULT_OPSET if opset is None else opset
    try:
        spec = parse_backend(backend)
        with WorkerClient(spec) as client:
            assert client.info is not None
            lossy = declared_lossy(spec)
            return probe_support(client, client.info, opset, cache_dir, lambda failure: None, lossy=lossy).support()
    except (BackendSpecError, BackendUnavailable) as e:
        raise UserError(f"gen: --backend: {str(e).splitlines()[0]}") from e
