"""summary.json: what a campaign did, counted, so CI logs, merges and reports agree."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field

from backends.results import BackendInfo
from bot.probe import ProbeFailure
from bot.sides_config import CompilerConfig
from generator.coverage import CoverageStats
from oracles.perf import PerfJudgement
from oracles.sides import CrossVerdict
from oracles.verdict import Verdict

REPORTED = {CrossVerdict.new_regression.value, CrossVerdict.new_in_head.value, CrossVerdict.persistent.value}
"""Count keys of a two-build campaign that are bugs (fixed is good news, flaky is listed apart,
a crash on an undefined input is counted only)."""


def is_bug_key(count_key: str) -> bool:
    if count_key in REPORTED:
        return True
    try:
        return Verdict(count_key).is_bug
    except ValueError:  # pass-through keys: filtered:<rule>, flaky, fixed, perf_regression
        return False


def in_output(out: Path, path: str) -> Path:
    """Where a path summary.json holds is now: relative to the output folder (what campaigns
    and merges write), so a folder that was moved or downloaded as an artifact still reads;
    an absolute path (an older summary) stays as it is."""
    p = Path(path)
    return p if p.is_absolute() else out / p


class FindingRef(BaseModel):
    path: str
    """The bundle folder, relative to the output folder (`in_output`)."""
    verdict: Verdict
    """The culprit side's own verdict (crash, wrong_result, timeout)."""
    across: str = ""
    """The verdict across sides: persistent, new_regression or fixed."""
    fingerprint: str
    seed: int
    signature: str
    depends_on_optimization: bool | None = None
    reduced_path: str | None = None
    """The reduced bundle, relative to the output folder like `path`."""
    reduced_nodes: int | None = None
    culprit: str | None = None
    """`SHA subject` of the first bad commit, when the campaign bisected this regression."""


class PerfFinding(BaseModel):
    path: str
    """Relative to the output folder, like FindingRef.path."""
    seed: int
    judgements: list[PerfJudgement]


class Timings(BaseModel):
    generation: float = 0.0
    values: float = 0.0
    """The part of `generation` spent keeping every tensor finite and off its margins."""
    reference: float = 0.0
    backend: float = 0.0
    """Wall time of backend requests, from submit to answer (overlaps generation)."""
    backend_compute: float = 0.0
    """Time the worker reported inside compile and run."""
    reduction: float = 0.0


class SupportSummary(BaseModel):
    supported: int
    unsupported: int
    unexpected: list[ProbeFailure] = Field(default_factory=list)
    """Probes that failed for another reason than "unsupported": shown, kept in generation."""
    head_only: dict[str, list[str]] = Field(default_factory=dict)
    """op -> dtypes head runs and base declines (two builds): drawn for a share of the seeds."""


class SideRecord(BaseModel):
    """Where a side of a two-build campaign came from."""

    label: str
    commit: str | None = None
    python: str
    build_log: str | None = None
    build_s: float = 0.0
    cached: bool = False


class Summary(BaseModel):
    tests: int = 0
    cannot_compare: str | None = None
    """Why a two-build campaign ran no test: a side that failed to build or start."""
    sides: dict[str, SideRecord] = Field(default_factory=dict)
    compiler: CompilerConfig | None = None
    """The `compiler:` section the sides were built from, each ref pinned to the commit it
    named then: a report job on a fresh runner rebuilds head from it to re-run repros."""
    counts: dict[str, int] = Field(default_factory=dict)
    dropped: dict[str, int] = Field(default_factory=dict)
    value_work: dict[str, int] = Field(default_factory=dict)
    """Insertions whose values were repaired, and insertions refused because no values kept
    them safe, while the models grew (generator.witness)."""
    references: dict[str, int] = Field(default_factory=dict)
    """Cases by what gave their reference: torch, onnx.reference or none (then base judges
    head's values in a two-build campaign, and only crashes and hangs count in one)."""
    reference_gaps: dict[str, int] = Field(default_factory=dict)
    """Cases the torch reference could not compute, by the op type it stopped at."""
    tiebreaks: dict[str, int] = Field(default_factory=dict)
    """Wrong results against torch, by what confirmed or set them aside (oracles.case.confirm)."""
    run_url: str | None = None
    """The CI run that made this output (GitHub Actions' GITHUB_SERVER_URL, GITHUB_REPOSITORY
    and GITHUB_RUN_ID), whose artifact holds the bundles; reports link it."""
    imports: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Per side, where each module its worker's adapter imported came from (bot.isolation)."""
    findings: list[FindingRef] = Field(default_factory=list)
    perf: list[PerfFinding] = Field(default_factory=list)
    occurrences: dict[str, int] = Field(default_factory=dict)
    wall_s: float = 0.0
    time_s: Timings = Field(default_factory=Timings)
    backend: BackendInfo | None = None
    """The head side (the only side of a one-build campaign)."""
    base: BackendInfo | None = None
    """The base side of a two-build campaign."""
    shard: str | None = None
    """`i/N` when this campaign is one shard of a bigger one."""
    merged_from: list[str] = Field(default_factory=list)
    """The shard ids (`i/N@seed`) a merged output covers; empty for a campaign."""
    seed_first: int = 0
    seed_last: int | None = None
    budget_s: float = 0.0
    worker_restarts: int = 0
    support: SupportSummary | None = None
    coverage: CoverageStats = Field(default_factory=CoverageStats)

    @property
    def finding_count(self) -> int:
        return sum(n for v, n in self.counts.items() if is_bug_key(v))

    @property
    def new_regressions(self) -> int:
        return self.counts.get(CrossVerdict.new_regression.value, 0)

    @property
    def fails_a_change(self) -> int:
        """New regressions and what head brought in broken (new_in_head): a PR check's failure."""
        return self.new_regressions + self.counts.get(CrossVerdict.new_in_head.value, 0)


def ci_run_url(env: Mapping[str, str]) -> str | None:
    """The Actions run this process belongs to, or None outside Actions."""
    repo, run = env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
    if not repo or not run:
        return None
    return f"{env.get('GITHUB_SERVER_URL', 'https://github.com').rstrip('/')}/{repo}/actions/runs/{run}"


def write_summary(summary: Summary, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "summary.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(summary.model_dump_json(indent=2) + "\n")
    tmp.replace(path)
    return path
