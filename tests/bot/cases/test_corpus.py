"""The case corpus (bot.cases.corpus): written by `gen --corpus`, replayed by `fuzz --corpus`,
keyed so that a stale corpus is never replayed, and readable only when it is one."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from bot.cases.corpus import Corpus, case_features, generator_key, greedy_order
from bot.cases.corpus_feed import CorpusFeed, _unsupported
from bot.cases.corpus_gen import probed_support
from bot.cases.shard import Shard
from bot.cases.source import CaseSource
from generator.api import GenConfig, generate
from generator.coverage import Coverage
from oracles.references import read_reference
from tests.conftest import CliResult

pytestmark = [pytest.mark.worker, pytest.mark.campaign]

NODES = 5
CFG = GenConfig(nodes=NODES)


def _gen(cli: Callable[..., CliResult], folder: Path, count: int, *more: str) -> CliResult:
    r = cli("gen", "--corpus", str(folder), "--count", str(count), "--nodes", str(NODES), *more)
    assert r.code == 0, r.err
    return r


def _rows(folder: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(folder / "corpus.sqlite") as db:
        return [(int(s), str(k)) for s, k in db.execute("SELECT seed, key FROM cases ORDER BY seed")]


def _same_arrays(a: dict[str, np.ndarray] | None, b: dict[str, np.ndarray] | None) -> bool:
    if a is None or b is None:
        return a is b
    return list(a) == list(b) and all(a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes() for k in a)


def test_gen_writes_a_corpus_and_skips_the_seeds_it_has(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    folder = tmp_path / "corpus"
    assert "added 4 case(s)" in _gen(cli, folder, 4).out
    r = _gen(cli, folder, 6)
    assert "added 2 case(s)" in r.out and "4 already there" in r.out
    assert [s for s, _ in _rows(folder)] == list(range(6))


def test_a_replayed_case_is_byte_for_byte_the_generated_one(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    """Same seed, same key, same case: gen shares one coverage across its seeds in order,
    so regenerating them in that order gives the stored bytes back."""
    folder = tmp_path / "corpus"
    _gen(cli, folder, 4)
    feed = CorpusFeed.open(folder, CFG, 0)
    replayed = {}
    while (case := feed.replay(None)) is not None:
        replayed[case.seed] = case
    feed.close()
    coverage = Coverage()
    for seed in range(4):
        fresh = generate(seed, CFG, coverage=coverage)
        case = replayed[seed]
        assert case.model_bytes == fresh.model.SerializeToString()
        assert _same_arrays(case.inputs, fresh.inputs)
        assert _same_arrays(case.reference, read_reference(fresh.model, fresh.inputs).outputs)


def test_a_changed_config_sees_the_old_cases_as_stale(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    folder = tmp_path / "corpus"
    _gen(cli, folder, 3)
    other = GenConfig(nodes=NODES + 1)
    assert generator_key(other) != generator_key(CFG)
    feed = CorpusFeed.open(folder, other, 0)
    assert feed.summary.stale == 3 and not feed.known
    assert feed.replay(None) is None
    feed.close()
    r = cli("gen", "--corpus", str(folder), "--count", "2", "--nodes", str(NODES + 1))
    assert r.code == 0 and "3 stale case(s)" in r.out, r.out + r.err
    assert {k for _, k in _rows(folder)} == {generator_key(other)}


def test_replay_picks_the_case_that_adds_the_most_coverage_first(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    # Case 3 adds three features; then 1 and 2 each add feature 3 (a tie, broken by the lower
    # seed), and 2 adds nothing after 1.
    rows = [(1, 1), (1, 3), (2, 3), (3, 1), (3, 2), (3, 4)]
    assert greedy_order({1: 10, 2: 20, 3: 30}, rows) == [3, 1, 2]
    folder = tmp_path / "corpus"
    _gen(cli, folder, 8)
    corpus = Corpus(folder)
    index = corpus.index(generator_key(CFG))
    corpus.close()
    per_case = {cid: sum(1 for c, _ in index.features if c == cid) for cid in index.seeds}
    order = greedy_order(index.seeds, index.features)
    assert sorted(order) == sorted(index.seeds)
    assert per_case[order[0]] == max(per_case.values())
    feed = CorpusFeed.open(folder, CFG, 0)
    first = feed.replay(None)
    feed.close()
    assert first is not None and first.seed == index.seeds[order[0]]
    assert len(case_features(first.model)) == max(per_case.values())


def test_a_shard_replays_only_its_seeds(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    folder = tmp_path / "corpus"
    _gen(cli, folder, 6)
    feed = CorpusFeed.open(folder, CFG, 0, Shard(1, 2))
    seeds = []
    while (case := feed.replay(None)) is not None:
        seeds.append(case.seed)
    feed.close()
    assert sorted(seeds) == [1, 3, 5]


def test_a_corrupt_or_foreign_corpus_is_one_line(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "corpus.sqlite").write_bytes(b"this is no database\n" * 400)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    with sqlite3.connect(foreign / "corpus.sqlite") as db:
        db.execute("CREATE TABLE t(x)")
    for folder, why in ((corrupt, "unusable"), (foreign, "not a fuzzbot corpus")):
        for args in (("gen", "--count", "1"), ("fuzz", "--max-tests", "1", "--no-probe")):
            r = cli(*args, "--corpus", str(folder), "--out", str(tmp_path / "out"))
            assert r.code == 1 and len(r.err_lines) == 1, r.err
            assert r.err_lines[0].startswith("error: corpus") and why in r.err, r.err


def test_a_campaign_replays_the_corpus_then_adds_fresh_cases(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    folder, out = tmp_path / "corpus", tmp_path / "out"
    _gen(cli, folder, 3)
    args = ("--max-tests", "6", "--no-probe", "--nodes", str(NODES), "--out", str(out), "--corpus", str(folder))
    r = cli("fuzz", *args)
    assert r.code in (0, 2), r.err
    summary = json.loads((out / "summary.json").read_text())
    corpus = summary["corpus"]
    assert summary["tests"] == 6
    assert (corpus["replayed"], corpus["generated"], corpus["added"], corpus["stale"]) == (3, 3, 3, 0)
    assert summary["time_s"]["corpus"] > 0
    # Fresh seeds skip the three the corpus had.
    assert [s for s, _ in _rows(folder)] == list(range(6))
    with sqlite3.connect(folder / "corpus.sqlite") as db:
        rewrites = db.execute("SELECT count(*) FROM case_features WHERE feature LIKE 'rewrite:%'").fetchone()[0]
    assert bool(rewrites) == bool(summary["coverage"]["rewrites"])


def test_replayed_cases_join_the_coverage_that_steers_fresh_generation(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    folder = tmp_path / "corpus"
    _gen(cli, folder, 3)
    source = CaseSource(CFG, first_seed=0)
    source.corpus = CorpusFeed.open(folder, CFG, 0)
    replayed = [source.next(lambda: True) for _ in range(3)]
    ops = {n.op_type for case in replayed if case is not None for n in case.model.graph.node}
    assert ops and ops <= set(source.coverage.ops)
    assert source.coverage.pairs and source.coverage.models == 0, "replays are not generated models"
    fresh = source.next(lambda: True)
    assert fresh is not None and fresh.seed == 3 and source.coverage.models == 1
    source.close()


def test_gen_for_a_backend_draws_only_what_its_probe_says_it_runs(
    tmp_path: Path, cli: Callable[..., CliResult], probe_cache: str
) -> None:
    folder = tmp_path / "corpus"
    _gen(cli, folder, 12, "--backend", "onnxruntime", "--cache-dir", probe_cache)
    feed = CorpusFeed.open(folder, CFG, 0)
    index = feed.corpus.index(feed.key)
    support = probed_support("onnxruntime", CFG.opset, Path(probe_cache))
    assert len(index.seeds) >= 10 and not _unsupported(index, support)
    feed.close()
    bad = cli("gen", "--corpus", str(folder), "--count", "1", "--backend", "nosuch")
    assert bad.code != 0 and bad.err.count("\n") <= 1 and "unknown backend" in bad.err
