"""summary.json: what a campaign did, counted, so CI logs, merges and reports agree."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, Field, computed_field, field_validator

from backends.results import BackendInfo
from bot.errors import Interrupted, signal_of
from bot.files import write_whole
from bot.findings.bundle import Finding
from bot.findings.store import FindingStore
from bot.sides.config import CompilerConfig
from bot.sides.probe import ProbeFailure
from generator.coverage import CoverageStats
from oracles.count_keys import CountKey
from oracles.judging_budget import JudgingSummary
from oracles.perf import PerfJudgement
from oracles.sides import CrossVerdict, SideName, as_label, finding_label
from oracles.verdict import Verdict


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
    """The failing side's own verdict (crash, wrong_result, timeout)."""
    across: CrossVerdict | None = None
    """The finding's label across sides: new_regression, new_in_head, persistent or fixed (a
    one-build campaign says persistent). One label per fingerprint, everywhere: the one that
    matters most of those it was seen under (oracles.sides.finding_label), and the bundle
    at `path` is a sighting of that label."""

    @field_validator("across", mode="before")
    @classmethod
    def _unlabelled(cls, value: object) -> object:
        """An output written before labels were recorded says "" for none."""
        return as_label(value) if isinstance(value, str) else value

    fingerprint: str
    seed: int
    signature: str
    depends_on_optimization: bool | None = None
    reduced_path: str | None = None
    """The reduced bundle, relative to the output folder like `path`."""
    reduced_nodes: int | None = None
    first_bad: str | None = Field(None, validation_alias=AliasChoices("first_bad", "culprit"))
    """`SHA subject` of the first bad commit, when the campaign bisected this regression
    (summaries before the three culprits had their own names called it `culprit`)."""
    regression_of: str | None = None
    """The fingerprint a regression-corpus bundle was filed under, when this finding is that
    bundle failing again (bot.cases.regression_corpus): a known bug, back."""
    seen: list[str] = Field(default_factory=list)
    """The first input's type and shape (`uint8[3,4]`) of each kept sighting, those folded
    into this finding by reduction included: what a report says it was seen with."""
    triggers: list[str] = Field(default_factory=list)
    """The reduced triggers (their names) of every finding folded into this one because its
    wrong output came from the same kernel with the same symptom and label: one report
    per bug, listing each way it was reached."""
    keys: list[str] = Field(default_factory=list)
    """Of a reduced finding: every identity its evidence gives (the rewrite it needs, the
    kernel or check that failed), its fingerprint first. A later finding sharing any of them
    is the same bug (bot.reduce.finding.rename_finding)."""
    found_s: float | None = None
    """Seconds into the fuzzing when this sighting was kept (the first, for a finding's first bundle)."""
    mutation: str = ""
    """When a mutant found it: its mutation (`sibling: Add -> Max at step 3`) and parent seed."""
    precision: str | None = None
    """A wrong result whose every wrong output is within a few roundings of this narrower
    float type (oracles.compare.Comparison.precision_scale): real, and read as precision."""

    @classmethod
    def of(cls, finding: Finding, path: str, **more: Any) -> FindingRef:
        """The ref of the finding recorded at `path` (relative to the output folder): what
        the bundle's finding.json says of its bug, read from it, never restated by hand."""
        local = finding.localization
        fields: dict[str, Any] = {
            "verdict": finding.verdict,
            "across": finding.across or None,
            "fingerprint": finding.fingerprint,
            "seed": finding.seed or 0,
            "signature": finding.signature,
            "depends_on_optimization": local.depends_on_optimization if local else None,
            "precision": finding.comparison.precision_scale if finding.comparison else None,
        }
        return cls(path=path, **(fields | more))


def count_key_of(ref: FindingRef, two_builds: bool) -> str:
    """A finding's key in the vocabulary of `counts`: its label across builds, or, with
    one build (nothing to compare), its verdict, as its tests were counted."""
    return ref.across if two_builds and ref.across else ref.verdict.value


def distinct_keys(findings: Iterable[FindingRef], two_builds: bool) -> dict[str, int]:
    """Findings by key, one per fingerprint under its one label (Summary.distinct): shared with
    the count a watcher sees while a campaign runs, before its Summary exists."""
    keys: dict[str, str] = {}
    for ref in findings:
        keys[ref.fingerprint] = finding_label([keys.get(ref.fingerprint, ""), count_key_of(ref, two_builds)])
    return dict(sorted(Counter(keys.values()).items()))


def bug_count(distinct: Mapping[str, int]) -> int:
    """Distinct findings that are bugs (fixed ones are good news), from `distinct_keys`."""
    return sum(n for k, n in distinct.items() if CountKey(k).is_bug)


def seen_union(*forms: Iterable[str]) -> list[str]:
    """Input forms of several sightings, each once, in the order first seen (FindingRef.seen)."""
    return list(dict.fromkeys(form for group in forms for form in group))


class PerfFinding(BaseModel):
    path: str
    """Relative to the output folder, like FindingRef.path."""
    seed: int
    judgements: list[PerfJudgement]


class DivergentKey(BaseModel):
    """One place two builds differed (oracles.divergence), with how many tests went there."""

    kind: str
    key: str
    tests: int
    seeds: list[int] = Field(default_factory=list)
    """The first few seeds that showed it."""


class DivergenceSummary(BaseModel):
    """summary.json's `divergence` (two builds): where base and head treated a case
    differently, right or wrong, counted by test."""

    tests: int = 0
    """Tests where the builds differed in anything."""
    kinds: dict[str, int] = Field(default_factory=dict)
    """Tests by kind of divergence (a test can count under several)."""
    keys: int = 0
    """Distinct (kind, key) pairs seen."""
    top: list[DivergentKey] = Field(default_factory=list)
    """The most frequent keys, most tests first."""
    fed: int = 0
    """Divergent tests whose features steered generation (generator.focus)."""


class MutationSummary(BaseModel):
    """summary.json's `mutation`: how the seeds were split between fresh generation and
    mutants of interesting cases (bot.cases.mutation), and what each yielded."""

    parents: dict[str, int] = Field(default_factory=dict)
    """Cases mutants were grown from at the end, by kind: divergent, near_miss, finding."""
    fresh: int = 0
    fresh_gains: float = 0.0
    """What fresh cases yielded: 1 per new finding or divergence never seen, a tenth per new op pair."""
    mutants: int = 0
    mutant_gains: float = 0.0
    kinds: dict[str, int] = Field(default_factory=dict)
    """Mutants by mutation kind."""
    kind_gains: dict[str, int] = Field(default_factory=dict)


class HintSummary(BaseModel):
    """summary.json's `hint`: what the change's diff named (bot.campaign.hint)."""

    source: str
    """`git diff BASE HEAD`, the Python sources of the two installed packages, or none."""
    files: int = 0
    ops: dict[str, float] = Field(default_factory=dict)
    """Op types by weight (1: the most named), the most named first."""
    pairs: list[str] = Field(default_factory=list)
    scopes: list[str] = Field(default_factory=list)
    """Functions and classes the change touched, the first few."""
    note: str = ""
    """Why there is no hint, when there is none."""


class CodeCoverageSummary(BaseModel):
    """summary.json's `code_coverage`: the system's own Python code a campaign's cases
    executed on the build under test (guide.code_coverage; bot.campaign.code_feedback)."""

    measured: int = 0
    """Runs measured (every case, or one seed in `every`)."""
    every: int = 1
    files: int = 0
    arcs: int = 0
    """Distinct line-to-line arcs (branches) executed, over every file measured."""
    lines: int = 0
    changed_lines: int = 0
    """Lines the change touched in head (from the diff; 0 without one)."""
    changed_lines_reached: int = 0
    cases_reaching_change: int = 0
    """Cases that were the first to execute a line of the change."""
    note: str = ""
    """Why the code was not measured, when it was not."""


class KnownShare(BaseModel):
    """One bug learned while fuzzing, and how many tests still showed it after: the share
    a known bug keeps of a campaign (generator.avoid steers away from it, its divergence
    keys stop teaching generation, and the focus on its ops is halved)."""

    known_at: int
    """Tests run when its reduction made it known."""
    tests_after: int = 0
    shown_after: int = 0
    """Tests after `known_at` whose failure was this bug."""


class SupportFinding(BaseModel):
    """A model head declines that base ran right: kept under OUT/support/."""

    path: str
    seed: int
    key: str
    """The support divergence (`only head declines Max`)."""
    message: str
    """What head said."""


class SupportChanges(BaseModel):
    """summary.json's `support_changes` (two builds): what the change took away or added."""

    dropped: list[SupportFinding] = Field(default_factory=list)
    """Bundles of dropped support, a few per key (counts: `dropped_support`)."""
    dropped_keys: dict[str, int] = Field(default_factory=dict)
    """Tests of dropped support, by key."""
    gained: dict[str, int] = Field(default_factory=dict)
    """Tests head runs right that base declined, by key (`only base declines Max`)."""
    fails_check: bool = False
    """Dropped support fails the PR check (oracles.fail_on_dropped_support)."""


class Timings(BaseModel):
    start: float = 0.0
    """From built sides to the first test: every worker up, the sides checked, the diff read,
    support probed (bot.campaign.run.Campaign.start). Outside `wall_s`."""
    generation: float = 0.0
    values: float = 0.0
    """The part of `generation` spent keeping every tensor finite and off its margins."""
    reference: float = 0.0
    corpus: float = 0.0
    """Reading cases from the case corpus and writing fresh ones back (bot.cases.corpus_feed)."""
    backend: float = 0.0
    """Wall time of backend requests, from submit to answer (overlaps generation, and the
    judging of the case before, which runs while the next one is in flight)."""
    backend_compute: float = 0.0
    """Time the worker reported inside compile and run."""
    sides: dict[str, float] = Field(default_factory=dict)
    """`backend_compute` by side (base, head): where a two-build campaign's compile and run went."""
    triage: float = 0.0
    """Judging first runs, with the re-runs, rules and localization a suspect case gets
    (their backend requests included), outside `backend`."""
    reduction: float = 0.0
    reduction_during: float = 0.0
    """The part of `reduction` spent while fuzzing (the first finding of each kind), inside `wall_s`."""


class CorpusSummary(BaseModel):
    """summary.json's `corpus`: where a campaign's cases came from, and what it added back."""

    path: str
    replayed: int = 0
    generated: int = 0
    added: int = 0
    stale: int = 0
    """Cases of another generator key in the corpus: never replayed (pruned when cases are added)."""
    unsupported: int = 0
    """Stored cases left out because they use an op x dtype pair the backend does not run."""
    load_s: float = 0.0
    """Choosing the order and reading the replayed cases."""
    order_s: float = 0.0
    """The part of `load_s` spent choosing the order from the index, before the first replayed case."""
    write_s: float = 0.0


class RegressionSummary(BaseModel):
    """summary.json's `regressions`: the regression corpus replayed before fuzzing."""

    path: str
    replayed: int = 0
    regressed: list[str] = Field(default_factory=list)
    """Fingerprints of known bugs that fail on head again and pass on base."""
    failing: list[str] = Field(default_factory=list)
    """Fingerprints still failing (on head, or on both builds)."""
    passing: int = 0
    skipped: dict[str, str] = Field(default_factory=dict)
    """Bundles that could not be loaded, with why."""
    added: list[str] = Field(default_factory=list)
    """Fingerprints of this run's reduced findings, added to the corpus."""
    unsaved: dict[str, str] = Field(default_factory=dict)
    """Fingerprints whose reduced bundle could not be copied in, with why."""
    seconds: float = 0.0


class SupportSummary(BaseModel):
    supported: int
    unsupported: int
    unexpected: list[ProbeFailure] = Field(default_factory=list)
    """Probes that failed for another reason than "unsupported": shown, kept in generation."""
    head_only: dict[str, list[str]] = Field(default_factory=dict)
    """op -> dtypes head runs and base declines (two builds): drawn for a share of the seeds."""
    base_only: dict[str, list[str]] = Field(default_factory=dict)
    """op -> dtypes base runs and head declines: drawn for a share of the seeds, so that
    support a change took away shows as `dropped_support`."""
    from_base: int = 0
    """Pairs head took from base's answers unasked, at the top opset: the change's diff
    touched none of their ops (`probe_from_base`)."""


class SideRecord(BaseModel):
    """Where a side of a two-build campaign came from."""

    label: str
    commit: str | None = None
    python: str
    build_log: str | None = None
    build_s: float = 0.0
    cached: bool = False


class Summary(BaseModel):
    fuzzbot_version: str | None = None
    """The fuzzbot that ran the campaign (None in summaries written before it was recorded)."""
    tests: int = 0
    cannot_compare: str | None = None
    """Why a two-build campaign ran no test: a side that failed to build or start."""
    sides: dict[str, SideRecord] = Field(default_factory=dict)
    compiler: CompilerConfig | None = None
    """The `compiler:` section the sides were built from, each ref pinned to the commit it
    named then: a report job on a fresh runner rebuilds head from it to re-run repros."""
    counts: dict[str, int] = Field(default_factory=dict)
    dropped: dict[str, int] = Field(default_factory=dict)
    solver_backstops: int = 0
    """z3 checks the wall-clock backstop stopped while models grew (generator.solver): each
    one's seed may grow another case on another machine, the only such place."""
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
    reference_warnings: int = 0
    """numpy warnings (overflow, invalid value) onnx.reference raised, for references and
    tie-breaks: counted here instead of printed, where a log reader takes them for errors."""
    levels: dict[str, int] = Field(default_factory=dict)
    """Cases by the level they ran at, when the campaign drew among levels (bot.campaign.levels)."""
    steered: dict[str, int] = Field(default_factory=dict)
    """Insertions undone because they completed a known bug's trigger, by the bug's
    fingerprint (generator.avoid)."""
    run_url: str | None = None
    """The CI run that made this output (GitHub Actions' GITHUB_SERVER_URL, GITHUB_REPOSITORY
    and GITHUB_RUN_ID), whose artifact holds the bundles; reports link it."""
    imports: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Per side, where each module its worker's adapter imported came from (bot.sides.isolation)."""
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
    stopped_by: str | None = None
    """The signal (SIGINT, SIGTERM) that interrupted the run before it ended on its own: its
    counts and findings are those made until then, and its budget was not spent. None for a
    run that ended by itself (budget, --max-tests, or every case judged)."""
    stopped_at: str | None = None
    """When it was interrupted (UTC, ISO 8601, seconds)."""
    worker_restarts: int = 0
    memory_bound: int | None = None
    reduction_over_bound: int = 0
    """Findings left as they were because reducing, naming or folding one asked for more
    memory than `memory_bound`: each is still listed, a report of its own."""
    onnx_crashes: int = 0
    """Models onnx's checker or shape inference crashed, hung or ran out of memory on
    (generator.onnx_checks), each read as an invalid model: a bug in onnx, not in the system."""
    """Bytes of data segment the bot's own process could hold while it fuzzed, judged and
    reduced: what it held at the start plus `memory:` (backends.memory); a case that asked
    more is counted in `dropped`."""
    support: SupportSummary | None = None
    coverage: CoverageStats = Field(default_factory=CoverageStats)
    corpus: CorpusSummary | None = None
    """Cases replayed from the case corpus, generated, and added back (`--corpus`)."""
    regressions: RegressionSummary | None = None
    """The regression corpus replayed before fuzzing (`--regressions`)."""
    divergence: DivergenceSummary | None = None
    """Where the two builds differed (two builds only)."""
    support_changes: SupportChanges | None = None
    """Models head declines that base ran right, and the reverse (two builds only)."""
    mutation: MutationSummary | None = None
    """Fresh cases against mutants (guide.mutation)."""
    hint: HintSummary | None = None
    """What the change's diff named, which weighed generation (guide.hint; two builds only)."""
    code_coverage: CodeCoverageSummary | None = None
    """The system's own Python code the cases executed (guide.code_coverage)."""
    known_share: dict[str, KnownShare] = Field(default_factory=dict)
    judging: JudgingSummary | None = None
    """Worker runs judging took while fuzzing (oracles.judging_share)."""
    """Bugs learned while fuzzing (by the bug's name), with the share of later tests each still took."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def interrupted(self) -> bool:
        """Whether a signal ended the run early (`stopped_by`): a reader of summary.json
        needs no other field to tell a partial run from a finished one."""
        return self.stopped_by is not None

    def mark_interrupted(self, signal: str) -> None:
        """Record the first signal that stopped the run (a second one while it writes its
        results changes nothing)."""
        if self.stopped_by is None:
            self.stopped_by = signal
            self.stopped_at = datetime.now(UTC).isoformat(timespec="seconds")

    def build(self, side: str) -> str:
        """`name version (level) @ `commit`` of the head or base build, for people: the commit
        the side was built from when fuzzbot built it from a ref (the one a reviewer knows),
        else the one the build reports; "?" when the side never started."""
        info = self.backend if side == SideName.head else self.base
        if info is None:
            return "?"
        record = self.sides.get(side)
        commit = (record.commit if record is not None and record.commit else None) or info.commit
        return f"{info.name} {info.version} ({info.level})" + (f" @ `{commit[:12]}`" if commit else "")

    def key_of(self, ref: FindingRef) -> str:
        """A finding's key in the vocabulary of `counts` (`count_key_of`)."""
        return count_key_of(ref, self.base is not None)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def distinct(self) -> dict[str, int]:
        """Findings by key: one per fingerprint, under its one label. `counts` counts tests by
        the same keys, so a bug seen by five seeds is 5 there and 1 here; every report
        that says "finding" means this number, and "test" or "case" means the other."""
        return distinct_keys(self.findings, self.base is not None)

    @property
    def finding_count(self) -> int:
        """Distinct findings that are bugs (fixed ones are good news)."""
        return bug_count(self.distinct)

    @property
    def new_regressions(self) -> int:
        return self.distinct.get(CrossVerdict.new_regression.value, 0)

    @property
    def fails_a_change(self) -> int:
        """New regressions and what head brought in broken (new_in_head): a PR check's failure;
        with `oracles.fail_on_dropped_support`, each kind of model head stopped running too."""
        dropped = self.support_changes
        lost = len(dropped.dropped_keys) if dropped is not None and dropped.fails_check else 0
        return self.new_regressions + self.distinct.get(CrossVerdict.new_in_head.value, 0) + lost

    def settle_labels(self) -> dict[str, str]:
        """Give every ref of a fingerprint the finding's one label (a reduction may relabel
        one ref, or keep two bundles of one bug), and return fingerprint -> label."""
        labels: dict[str, str] = {}
        for ref in self.findings:
            labels[ref.fingerprint] = finding_label([labels.get(ref.fingerprint), ref.across])
        for ref in self.findings:
            ref.across = as_label(labels[ref.fingerprint])
        return labels


def rewrites_fired(coverage: CoverageStats, top: int = 3) -> str | None:
    """One line on the rewrites head's optimizer performed: how many distinct, and the most
    frequent with the cases each fired in; None when the system reported none."""
    if not coverage.rewrites:
        return None
    most = sorted(coverage.rewrites.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    more = ", ..." if len(coverage.rewrites) > top else ""
    listed = ", ".join(f"{key} {n}" for key, n in most)
    return f"rewrites fired: {len(coverage.rewrites)} distinct ({listed}{more})"


def symbolic_share(coverage: CoverageStats) -> str | None:
    """One line on how many generated models declared a symbolic input dim, where any did:
    compilers take other paths when a dim is unknown, so a campaign says how often it asked."""
    if not coverage.symbolic or not coverage.models:
        return None
    return f"symbolic dims: {coverage.symbolic} of {coverage.models} models ({coverage.symbolic / coverage.models:.0%})"


def ci_run_url(env: Mapping[str, str]) -> str | None:
    """The Actions run this process belongs to, or None outside Actions."""
    repo, run = env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
    if not repo or not run:
        return None
    return f"{env.get('GITHUB_SERVER_URL', 'https://github.com').rstrip('/')}/{repo}/actions/runs/{run}"


def write_summary(summary: Summary, out: Path) -> Path:
    """OUT/summary.json, after telling the store beside it each listed finding's label: the
    two are written together so that summary.md (read from the store) and the reports (read
    from summary.json) can never name one finding two ways. Written from a `finally` while a
    signal is on its way up (a campaign stopped by SIGINT or SIGTERM), the summary first
    says so (`stopped_by`), so that no one takes a partial run for a finished one."""
    if isinstance(stopping := sys.exception(), (KeyboardInterrupt, Interrupted)):
        summary.mark_interrupted(signal_of(stopping))
    out.mkdir(parents=True, exist_ok=True)
    FindingStore.in_dir(out).relabel(summary.settle_labels())
    return write_whole(out / "summary.json", summary.model_dump_json(indent=2) + "\n")
