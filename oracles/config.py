"""The `oracles:` section of fuzzbot.yml: how hard a candidate finding is questioned."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from oracles.perf import PerfConfig


class OracleConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reruns: int = Field(3, ge=1, le=20, description="runs of a candidate finding on every side (k); 1 = no re-runs")
    localize: bool = Field(True, description="re-run a bad case at its build's lowest level")
    judging_share: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="the most of a campaign's worker runs while fuzzing that re-runs, localization and reductions may"
        " take, counted in runs; suspects past it are judged after the fuzzing (1: no limit)",
    )
    second_reference: bool = Field(
        True, description="confirm wrong results: onnx.reference agrees with torch, or a float64 rerun sides with it"
    )
    rules: Path | None = Field(None, description="your own known-false-positive rules, read after the shipped ones")
    keep_filtered: bool = Field(
        False,
        description="also save bundles of every case set aside (filtered by a rule, unsupported, crashing "
        "only on an undefined input), under filtered/",
    )
    fail_on_dropped_support: bool = Field(
        False, description="fail the PR check when head declines (unsupported) a model base ran right"
    )
    perf: PerfConfig = Field(default_factory=PerfConfig, description="performance comparison of head against base")
