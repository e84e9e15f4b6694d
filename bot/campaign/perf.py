"""Timing one case on base and head, for the performance oracle (oracles/perf.py).

Runs alternate between the sides, so drift in the machine's load (another job, a
thermal step) lands on both medians instead of on one side.
"""

from __future__ import annotations

import numpy as np

from backends.client import WorkerClient
from backends.results import RunResult, Status
from oracles.perf import Metric, PerfConfig, PerfJudgement, judge_perf
from oracles.sides import SideName


def _times(result: RunResult) -> dict[Metric, float] | None:
    if result.status is not Status.ok or result.compile_s is None or result.run_s is None:
        return None
    return {Metric.compile: (result.import_s or 0.0) + result.compile_s, Metric.run: result.run_s}


def compare_perf(
    base: WorkerClient, head: WorkerClient, model: bytes, inputs: dict[str, np.ndarray], cfg: PerfConfig
) -> list[PerfJudgement]:
    """One judgement per metric; empty when either side fails to run the case at all
    (a failure is the correctness oracles' business, not a timing)."""
    samples: dict[SideName, dict[Metric, list[float]]] = {s: {m: [] for m in Metric} for s in SideName}
    for _ in range(cfg.repeats):
        for name, client in ((SideName.base, base), (SideName.head, head)):
            times = _times(client.run(model, inputs))
            if times is None:
                return []
            for metric, seconds in times.items():
                samples[name][metric].append(seconds)
    return [judge_perf(m, samples[SideName.base][m], samples[SideName.head][m], cfg) for m in Metric]
