"""What one campaign has learned so far, and summary.json built from it once.

A campaign's parts share one working state while it runs: the lanes count tests and
times, the keeper and the reduction change the list of findings (bot.findings.kept), start
and probe record the builds. `Summary` is only the schema of what is written: it is built
in one place, `CampaignState.summary`, when the campaign finishes or a signal stops it,
from this state and from what each collaborator counted itself (`Tallies`).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from backends.results import BackendInfo
from bot import __version__
from bot.cases.shard import Shard
from bot.config import FuzzConfig
from bot.findings.kept import KeptFindings
from bot.findings.summary import (
    CodeCoverageSummary,
    CorpusSummary,
    DivergenceSummary,
    HintSummary,
    KnownShare,
    MutationSummary,
    PerfFinding,
    RegressionSummary,
    SideRecord,
    Summary,
    SupportChanges,
    SupportSummary,
    Timings,
    ci_run_url,
)
from bot.sides.config import CompilerConfig
from generator.coverage import CoverageStats
from oracles.judging_budget import JudgingSummary

if TYPE_CHECKING:
    from bot.campaign.divergence import DivergenceLog
    from bot.campaign.triage import Triage
    from bot.cases.source import CaseSource
    from bot.reduce.campaign import CampaignReduction


@dataclass
class CampaignState:
    """The working state the campaign's parts share; each field is one summary.json field."""

    seed_first: int
    budget_s: float
    shard: str | None = None
    """`i/N` when this campaign is one shard of a bigger one."""
    run_url: str | None = None
    sides: dict[str, SideRecord] = field(default_factory=dict)
    """Where each side of a two-build campaign came from, filled as each is built."""
    compiler: CompilerConfig | None = None
    """The `compiler:` section with each ref pinned to its commit (bot.campaign.sides.pinned)."""
    kept: KeptFindings = field(default_factory=KeptFindings)
    times: Timings = field(default_factory=Timings)
    """The lanes' own timings (backend, triage); generation's and reduction's are their owners'."""
    tests: int = 0
    seed_last: int | None = None
    perf: list[PerfFinding] = field(default_factory=list)
    levels: Counter[str] = field(default_factory=Counter)
    """Cases by the level they ran at, when a campaign draws among levels."""
    backend: BackendInfo | None = None
    base: BackendInfo | None = None
    imports: dict[str, dict[str, str]] = field(default_factory=dict)
    hint: HintSummary | None = None
    support: SupportSummary | None = None
    regressions: RegressionSummary | None = None
    wall_s: float = 0.0
    worker_restarts: int = 0
    memory_bound: int | None = None
    onnx_crashes: int = 0
    """The bound in force while the campaign computed on cases (backends.memory)."""
    known_share: dict[str, KnownShare] = field(default_factory=dict)
    judging: JudgingSummary | None = None

    @classmethod
    def of(cls, cfg: FuzzConfig, shard: Shard | None = None) -> CampaignState:
        """The state of a campaign about to start: nothing learned, the run's identity set."""
        return cls(
            seed_first=cfg.seed,
            budget_s=cfg.budget,
            shard=str(shard) if shard else None,
            run_url=ci_run_url(os.environ),
        )

    @property
    def finding_count(self) -> int:
        """Distinct findings that are bugs so far, as summary.json will count them."""
        return self.kept.finding_count(self.base is not None)

    def summary(self, tallies: Tallies | None = None) -> Summary:
        """summary.json's value: this state, and what the collaborators counted (nothing, for
        a campaign stopped before it could start)."""
        t = tallies or Tallies()
        times = self.times.model_copy(update=asdict(t.times))
        return Summary(
            fuzzbot_version=__version__,
            tests=self.tests,
            sides=self.sides,
            compiler=self.compiler,
            counts=t.counts,
            dropped=t.dropped,
            solver_backstops=t.solver_backstops,
            value_work=t.value_work,
            references=t.references,
            reference_gaps=t.reference_gaps,
            tiebreaks=t.tiebreaks,
            reference_warnings=t.reference_warnings,
            steered=t.steered,
            run_url=self.run_url,
            imports=self.imports,
            findings=self.kept.findings,
            perf=self.perf,
            levels=dict(sorted(self.levels.items())),
            occurrences=self.kept.occurrences,
            wall_s=self.wall_s,
            time_s=times,
            backend=self.backend,
            base=self.base,
            shard=self.shard,
            seed_first=self.seed_first,
            seed_last=self.seed_last,
            budget_s=self.budget_s,
            worker_restarts=self.worker_restarts,
            memory_bound=self.memory_bound,
            reduction_over_bound=t.reduction_over_bound,
            onnx_crashes=self.onnx_crashes,
            support=self.support,
            coverage=t.coverage,
            corpus=t.corpus,
            regressions=self.regressions,
            divergence=t.divergence,
            support_changes=t.support_changes,
            mutation=t.mutation,
            hint=self.hint,
            code_coverage=t.code_coverage,
            known_share=self.known_share,
            judging=self.judging,
        )


@dataclass(frozen=True)
class OwnTimes:
    """The timings generation and reduction keep themselves (summary.json's `time_s`)."""

    generation: float = 0.0
    values: float = 0.0
    reference: float = 0.0
    corpus: float = 0.0
    reduction: float = 0.0
    reduction_during: float = 0.0


@dataclass(frozen=True)
class Tallies:
    """What the campaign's collaborators counted themselves, under the summary.json fields
    they fill: the case source, triage, the reduction, the divergence log, the lanes' counts."""

    counts: dict[str, int] = field(default_factory=dict)
    coverage: CoverageStats = field(default_factory=CoverageStats)
    dropped: dict[str, int] = field(default_factory=dict)
    value_work: dict[str, int] = field(default_factory=dict)
    solver_backstops: int = 0
    corpus: CorpusSummary | None = None
    references: dict[str, int] = field(default_factory=dict)
    reference_gaps: dict[str, int] = field(default_factory=dict)
    tiebreaks: dict[str, int] = field(default_factory=dict)
    reference_warnings: int = 0
    steered: dict[str, int] = field(default_factory=dict)
    mutation: MutationSummary | None = None
    divergence: DivergenceSummary | None = None
    support_changes: SupportChanges | None = None
    code_coverage: CodeCoverageSummary | None = None
    times: OwnTimes = field(default_factory=OwnTimes)
    reduction_over_bound: int = 0

    @classmethod
    def of(
        cls,
        counts: Counter[str],
        source: CaseSource,
        triage: Triage,
        reduction: CampaignReduction,
        divergence: DivergenceLog | None,
        code: CodeCoverageSummary | None = None,
    ) -> Tallies:
        """Each collaborator's counts, sorted where summary.json lists them by key."""
        g = source.times
        moved = Counter(counts)
        for (was, now), n in reduction.moved.items():
            moved[was] -= n
            moved[now] += n
        return cls(
            counts=dict(sorted((key, n) for key, n in moved.items() if n > 0 or counts.get(key) == 0)),
            coverage=source.coverage_stats(),
            dropped=dict(sorted(source.dropped.items())),
            value_work=dict(sorted(source.value_work.items())),
            solver_backstops=source.solver_backstops,
            corpus=source.corpus.summary.model_copy() if source.corpus is not None else None,
            references=dict(sorted(source.references.items())),
            reference_gaps=dict(sorted(source.reference_gaps.items())),
            tiebreaks=dict(sorted(triage.tiebreaks.items())),
            reference_warnings=source.reference_warnings + triage.reference_warnings,
            steered=dict(sorted(reduction.avoid.steered.items())),
            mutation=source.mutation_summary(),
            divergence=divergence.summary() if divergence is not None else None,
            support_changes=divergence.support if divergence is not None else None,
            code_coverage=code,
            times=OwnTimes(g.generation, g.values, g.reference, g.corpus, reduction.spent_s, reduction.spent_during_s),
            reduction_over_bound=reduction.over_bound,
        )
