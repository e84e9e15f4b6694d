"""Generation in processes of its own (bot.cases.generation_pool), through the campaign's case
source: real spawned processes, real generation and references."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.campaign.run import Campaign
from bot.cases.making import make_case
from bot.cases.source import CaseSource
from bot.config import FuzzConfig, ReduceSettings
from generator.api import GenConfig
from generator.avoid import Avoid
from generator.coverage import Coverage

pytestmark = [pytest.mark.worker, pytest.mark.campaign]

CFG = GenConfig(nodes=4)


def _made(processes: int, count: int) -> tuple[list[tuple[int, bytes]], CaseSource]:
    source = CaseSource(CFG, first_seed=100)
    source.processes = processes
    source.avoid = Avoid([])
    cases = []
    for _ in range(count):
        case = source.next(lambda: True)
        assert case is not None
        cases.append((case.seed, case.model_bytes))
    source.close()
    return cases, source


def test_the_same_seeds_and_processes_give_the_same_cases_in_seed_order() -> None:
    first, source = _made(2, 6)
    again, _ = _made(2, 6)
    assert first == again
    seeds = [seed for seed, _ in first]
    assert seeds == sorted(seeds) and seeds[0] == 100
    assert source.pool is None, "closing stops the processes"
    made = len(first) + sum(source.dropped.values())
    assert made <= source.coverage.models <= made + 4, "each process's coverage is taken in when it stops"
    assert source.times.generation > 0 and source.references["torch"] + source.references.get("onnx", 0) >= 1


def test_a_process_makes_its_seeds_as_this_process_would_with_the_same_coverage() -> None:
    """Process 0 of 2 makes seeds 100, 102, 104 in order, with a coverage of its own."""
    pooled, _ = _made(2, 6)
    coverage = Coverage()
    alone = []
    for seed in (100, 102, 104):
        made = make_case(seed, CFG, None, coverage, Avoid([]))
        assert made.case is not None
        alone.append((seed, made.case.model_bytes))
    assert [c for c in pooled if c[0] % 2 == 0] == alone


def test_a_campaign_runs_on_cases_a_generation_process_made(tmp_path: Path) -> None:
    off = ReduceSettings(enabled=False)
    cfg = FuzzConfig(budget=4, out=tmp_path, generation_processes=1, generator=CFG, reduce=off)
    summary = Campaign(cfg).run()
    assert summary.tests > 0
    assert summary.coverage is not None and summary.coverage.models >= summary.tests
    assert summary.time_s.generation > 0 and summary.time_s.triage > 0
    assert summary.time_s.sides.keys() == {"head"}


def test_a_generation_process_that_dies_costs_one_seed_and_is_replaced() -> None:
    source = CaseSource(CFG, first_seed=100)
    source.processes = 1
    first = source.next(lambda: True)
    assert first is not None and source.pool is not None
    source.pool.children[0].process.kill()
    source.pool.children[0].process.wait()
    after = [source.next(lambda: True) for _ in range(3)]
    assert all(case is not None for case in after)
    assert source.dropped["generation_process_died"] == 1
    seeds = [case.seed for case in after if case is not None]
    assert seeds == sorted(seeds) and seeds[0] > first.seed
    assert source.pool.children[0].process.poll() is None, "a fresh process took the dead one's place"
    source.close()
