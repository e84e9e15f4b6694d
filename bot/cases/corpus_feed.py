"""A campaign's view of a case corpus (bot.cases.corpus): the stored cases to replay, in the
order of the coverage they add, and the fresh cases to add back.

The order is chosen from the coverage index alone when the first case is asked for;
each case's blobs are read only when it is issued, so a corpus of 10,000 cases costs
a fraction of a second before the first test. Fresh cases and the rewrites the systems
report are written in batches, so a lane seldom waits for the disk.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from bot.cases.corpus import Corpus, Index, generator_key, greedy_order
from bot.cases.making import Prepared
from bot.cases.shard import Shard
from bot.findings.summary import CorpusSummary
from generator.api import GenConfig, Support

BATCH = 64
"""Fresh cases (and learned features) written per transaction."""


@dataclass
class CorpusFeed:
    corpus: Corpus
    key: str
    first_seed: int
    shard: Shard
    summary: CorpusSummary
    known: set[int] = field(default_factory=set)
    """Seeds this key already has: fresh generation skips them."""
    order: list[int] | None = None
    """Case ids still to replay, best first (reversed: popped from the end)."""
    pending: list[Prepared] = field(default_factory=list)
    learned: list[tuple[int, str]] = field(default_factory=list)
    """(seed, feature) rows a run taught (the rewrites it fired), written with the next batch."""
    pruned: bool = False

    @classmethod
    def open(cls, folder: Path, cfg: GenConfig, first_seed: int, shard: Shard | None = None) -> CorpusFeed:
        t0 = time.perf_counter()
        corpus = Corpus(folder)
        key = generator_key(cfg)
        _, stale = corpus.count(key)
        summary = CorpusSummary(path=str(folder), stale=stale)
        feed = cls(corpus, key, first_seed, shard or Shard(0, 1), summary, corpus.seeds(key))
        summary.load_s += time.perf_counter() - t0
        return feed

    def rekey(self, cfg: GenConfig) -> None:
        """Key the feed by the config generation really follows: a campaign knows its opset
        range (bot.cases.opsets) only once its sides have been probed, after the corpus was
        opened, and cases drawn over another range are other cases."""
        t0 = time.perf_counter()
        key = generator_key(cfg)
        if key != self.key and self.order is None and not self.pending:
            self.key = key
            _, self.summary.stale = self.corpus.count(key)
            self.known = self.corpus.seeds(key)
        self.summary.load_s += time.perf_counter() - t0

    def _mine(self, seed: int) -> bool:
        return (seed - self.first_seed) % self.shard.count == self.shard.index

    def _choose(self, support: Support | None) -> list[int]:
        """This shard's cases that every side runs, best first, reversed for popping."""
        index = self.corpus.index(self.key)
        drop = _unsupported(index, support)
        seeds = {cid: s for cid, s in index.seeds.items() if self._mine(s) and cid not in drop}
        self.summary.unsupported = sum(1 for cid, s in index.seeds.items() if self._mine(s) and cid in drop)
        return greedy_order(seeds, index.features)[::-1]

    def replay(self, support: Support | None) -> Prepared | None:
        """The next stored case, or None once the corpus has nothing left for this shard."""
        t0 = time.perf_counter()
        try:
            if self.order is None:
                self.order = self._choose(support)
                self.summary.order_s = time.perf_counter() - t0
            if not self.order:
                return None
            case = self.corpus.load(self.order.pop())
            self.summary.replayed += 1
            return case
        finally:
            self.summary.load_s += time.perf_counter() - t0

    def add(self, case: Prepared) -> None:
        """Keep a fresh case for the next batch write."""
        self.summary.generated += 1
        self.known.add(case.seed)
        self.pending.append(case)
        if len(self.pending) >= BATCH:
            self.flush()

    def flush(self) -> None:
        if not (self.pending or self.learned):
            return
        t0 = time.perf_counter()
        if not self.pruned:
            self.corpus.prune_stale(self.key)
            self.pruned = True
        if self.pending:
            self.summary.added += self.corpus.add(self.key, self.pending)
        if self.learned:
            self.corpus.add_features(self.key, self.learned)
        self.pending, self.learned = [], []
        self.summary.write_s += time.perf_counter() - t0

    def close(self) -> None:
        """Write what is left; safe to call twice."""
        self.flush()
        self.corpus.close()


def _unsupported(index: Index, support: Support | None) -> set[int]:
    """Cases with an (op, key dtype) pair the support matrix leaves out: replaying them
    would only count declined models."""
    if support is None:
        return set()
    bad = set()
    for fid, name in index.names.items():
        kind, _, rest = name.partition(":")
        op, _, dtype = rest.partition("/")
        if kind == "opdtype" and dtype not in {d.value for d in support.get(op, ())}:
            bad.add(fid)
    return {cid for cid, fid in index.features if fid in bad}
