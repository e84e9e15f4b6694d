"""Performance regressions (DeepDiffer): head slower than base on the same model.

Timings are noisy, so each side is measured repeatedly and judged on medians; a
difference must clear both a ratio and an absolute floor, so a model that runs in
microseconds never reports a 2x "regression" that is one scheduler tick.
"""

from __future__ import annotations

import statistics
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Metric(StrEnum):
    compile = "compile"
    run = "run"


class PerfConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repeats: int = Field(5, ge=3, description="timed runs per side; the medians are compared")
    every: int = Field(10, ge=0, description="time every N-th case that passes on both builds; 0 = never")
    min_ratio: float = Field(1.5, gt=1.0, description="head median / base median that counts as slower")
    min_abs_s: dict[Metric, float] = Field(
        default_factory=lambda: {Metric.compile: 0.05, Metric.run: 0.005},
        description="smallest absolute difference of medians that counts, per metric",
    )


class PerfJudgement(BaseModel):
    metric: Metric
    base_median_s: float
    head_median_s: float
    ratio: float
    regression: bool
    """Head is slower by both the ratio and the absolute floor."""
    improvement: bool
    """Base is slower by both: the mirror image, reported as good news."""


def judge_perf(metric: Metric, base_s: list[float], head_s: list[float], cfg: PerfConfig) -> PerfJudgement:
    if not base_s or not head_s:
        raise ValueError("judge_perf needs at least one timing per side")
    base, head = statistics.median(base_s), statistics.median(head_s)
    floor = cfg.min_abs_s.get(metric, 0.0)
    ratio = head / base if base > 0 else float("inf")
    return PerfJudgement(
        metric=metric,
        base_median_s=base,
        head_median_s=head,
        ratio=ratio,
        regression=head - base >= floor and head >= cfg.min_ratio * base,
        improvement=base - head >= floor and base >= cfg.min_ratio * head,
    )
