"""A fuzzing campaign: generate, compute the reference, run every side, triage, keep
findings, until the budget is spent.

One build (a backend, optionally under another interpreter) or two (base and head of a
compiler, each in its own venv). Each lane owns one worker per side; with `jobs` lanes
the workers of one lane run a case while another lane generates the next, and within
a lane the next case is generated while the workers compute, so both cores stay busy.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from backends.memory import OVER_BOUND, bounded, within_bound
from backends.results import BackendInfo, RunResult, Status
from backends.spec import BackendSpec, adapter_class, parse_backend, system_modules
from bot.bisect.finding import bisect_finding
from bot.campaign.code_feedback import CODE_GAIN, CodeFeedback
from bot.campaign.divergence import DivergenceLog
from bot.campaign.hint import change_hint
from bot.campaign.keeping import FindingKeeper
from bot.campaign.levels import LevelLanes, case_level, check_levels, offered
from bot.campaign.perf import compare_perf
from bot.campaign.probing import Probed, ask_opsets, loads_up_to, plan_opsets, probe_range
from bot.campaign.side_setup import SideSetup
from bot.campaign.state import CampaignState, Tallies
from bot.campaign.triage import Side, Triage
from bot.cases.corpus_feed import CorpusFeed
from bot.cases.making import Prepared
from bot.cases.regression_corpus import RegressionCorpus
from bot.cases.shard import Shard
from bot.cases.source import CaseSource
from bot.config import FuzzConfig
from bot.errors import interrupts_deferred
from bot.findings.bundle import write_bundle
from bot.findings.known_bugs import KNOWN_FILE, KnownBug, holds, write_known
from bot.findings.store import FindingStore, relative_to_root
from bot.findings.summary import KnownShare, PerfFinding, RegressionSummary, Summary, in_output, write_summary
from bot.findings.summary_md import write_summary_md
from bot.reduce.campaign import CampaignReduction
from bot.reduce.workers import SideRun
from bot.sides.isolation import check_isolation
from bot.sides.probe import ProbeFailure, SupportMatrix, declared_lossy
from generator import onnx_checks
from generator.ops import registry
from oracles.case import CaseEvidence
from oracles.count_keys import PERF_FOLDER, PERF_REGRESSION
from oracles.judging import Judging
from oracles.judging_budget import JudgingBudget
from oracles.rules import load_rules
from oracles.sides import CrossJudgement, CrossVerdict, SideName

__all__ = ["Campaign", "Lane"]

T = TypeVar("T")


def default_processes(jobs: int) -> int:
    """One generation process per lane when every lane's worker and every such process get a
    core of their own beside the campaign's; on fewer cores they would only take turns (on 2
    cores, 1 lane: 72 tests/s in-process, 64 with a generation process)."""
    return jobs if (os.cpu_count() or 1) >= 2 * jobs + 1 else 0


SET_ASIDE = frozenset({CrossVerdict.filtered, CrossVerdict.unsupported, CrossVerdict.crash_on_undefined_input})
"""What `oracles.keep_filtered` keeps a bundle of under filtered/<rule or verdict>/: every
bad-looking case that is not reported, so that none of the reasons goes unaudited."""
PAIR_GAIN = 0.1
"""What a case that only covered a new op pair, or new bits, yields (a new finding or another
new divergence: 1): new pairs come with half of all fresh cases, new bits with many cases
of a release that changed a kernel, so counting them whole would crowd out the rest."""
DEFER_PER_FAILURE = 2
"""Suspects of one failure (label and fingerprints) kept to be judged after the fuzzing."""
NEAR_MISS = 0.5
"""The share of its dtype's tolerance an output must reach to make its case a near miss."""

Lane = list[Side]
"""One worker per side, in the order (base, head) or (head,)."""


@dataclass
class Deferred:
    """A suspect judged on its first runs while fuzzing, to be judged in full after."""

    case: Prepared
    results: list[RunResult]
    level: str | None
    key: str
    """The count key its first runs gave, moved to its verdict's once judged."""
    found_s: float
    sighting: int = 1
    """Which sighting of its failure it is (up to DEFER_PER_FAILURE)."""
    persistent: bool = False
    """Its first runs said both builds fail alike (two builds): what a PR check says least about."""


class Campaign:
    """One campaign. Its parts share `state` (bot.campaign.state), which open_campaign may
    have begun (the sides it built); summary.json is built from it once, when it finishes."""

    def __init__(
        self,
        cfg: FuzzConfig,
        sides: list[SideSetup] | None = None,
        shard: Shard | None = None,
        state: CampaignState | None = None,
    ) -> None:
        self.cfg = cfg
        self.setups = sides or [SideSetup(SideName.head, parse_backend(cfg.backend), cfg.python or sys.executable)]
        self.spec: BackendSpec = self.setups[-1].spec
        self.two_sided = len(self.setups) == 2
        self.state = state or CampaignState.of(cfg, shard)
        self._onnx_crashes_before = onnx_checks.crashes()  # the helper outlives a campaign run in-process
        self._summary: Summary | None = None
        self.regressions = RegressionCorpus.open(cfg.regressions) if cfg.regressions is not None and not shard else None
        """Replayed by the unsharded run (or a merge's first shard would replay it N times)."""
        self.counts: Counter[str] = Counter()
        self.deadline = 0.0
        self._fuzzing_since: float | None = None
        self.on_test: Callable[[CampaignState], None] = lambda s: None
        self.on_probe_failure: Callable[[ProbeFailure], None] = lambda f: None
        self.on_probe_progress: Callable[[int, int], None] | None = None
        self.lane_sets = [LevelLanes(cfg, self.setups) for _ in range(cfg.jobs)]
        self.lanes: list[Lane] = [lanes.own for lanes in self.lane_sets]
        """Each lane at the campaign's own level; `lane_sets` adds the levels cases draw."""
        self.levels: list[str] = []
        self.client = self.lanes[0][-1].client
        """Lane 0's head worker: the one that probes support."""
        self.judging = JudgingBudget(cfg.oracles.judging_share)
        """The worker runs judging may take while fuzzing (oracles.judging_budget)."""
        self.triage = Triage(Judging(cfg.oracles, cfg.tolerances, load_rules(cfg.oracles.rules)), budget=self.judging)
        self._deferred: list[Deferred] = []
        self._deferred_per: Counter[tuple[object, ...]] = Counter()
        self.store = FindingStore.in_dir(Path(cfg.out))
        runs = {s.name: self._side_run(i) for i, s in enumerate(self.setups)}
        self.reduction = CampaignReduction(
            cfg, runs, self.state.kept, self.store, on_known=self._bug_known, budget=self.judging
        )
        self.source = CaseSource(
            cfg.generator,
            cfg.seed,
            shard,
            processes=default_processes(cfg.jobs) if cfg.generation_processes is None else cfg.generation_processes,
            corpus=CorpusFeed.open(cfg.corpus, cfg.generator, cfg.seed, shard) if cfg.corpus is not None else None,
            avoid=self.reduction.avoid,
            mutation=cfg.guide.mutation,
        )
        self.keeping = FindingKeeper(
            cfg, self.setups, self.state, self.store, self.reduction, self._count_key, self._fuzzing_s
        )
        self.divergence = DivergenceLog(Path(cfg.out), cfg.oracles.fail_on_dropped_support) if self.two_sided else None
        self.code = CodeFeedback.of({}, cfg.guide.coverage_every)
        """Head's own Python code the cases executed, and the lines the change touched."""
        self.touched: frozenset[str] | None = None
        """The op types the change can have touched, where its diff accounts for every line:
        head's probe asks about these and takes base's answers for the rest."""
        for name in self.reduction.known:  # known from a file: from the first test on
            self.state.known_share[name] = KnownShare(known_at=0)
        self._shown_keys: dict[str, set[tuple[str, str]]] = {}
        """Divergence keys of reported cases, by the failure's first fingerprint: muted once
        its bug is known (bot.campaign.divergence.DivergenceLog.mute)."""
        self._lock = threading.RLock()
        self._stop = threading.Event()

    @property
    def next_seed(self) -> int:
        return self.source.next_seed

    @property
    def summary(self) -> Summary:
        """summary.json as the campaign wrote it when it finished (or was stopped)."""
        if self._summary is None:
            raise RuntimeError("the campaign has not finished: its state is `state`")
        return self._summary

    def _bug_known(self, bug: KnownBug) -> None:
        """A bug became known while fuzzing: generation forgets the parents that show it and
        quiets its focus on the bug's ops, the divergence keys its cases showed stop teaching
        generation, and the share of later tests it still takes is counted (summary.json
        `known_share`). A bug learned after the fuzzing (its reduction came after the
        budget) changes no test, and is not counted."""
        if self.state.wall_s:
            return
        self.source.forget_known([n.op_type for n in bug.nodes])
        if self.divergence is not None:
            firsts = self.reduction.first_names(bug.fingerprint)
            self.divergence.mute(set().union(*(self._shown_keys.get(f, set()) for f in firsts)))
        self.state.known_share.setdefault(bug.fingerprint, KnownShare(known_at=self.state.tests))

    def _fuzzing_s(self) -> float:
        """Seconds since the fuzzing started (0 before, and for cases a user hands over)."""
        return 0.0 if self._fuzzing_since is None else time.monotonic() - self._fuzzing_since

    def stop(self) -> None:
        """End the fuzzing after the cases in flight (a watcher that has seen enough)."""
        self._stop.set()

    def _may_start(self) -> bool:
        if self._stop.is_set():
            return False
        if self.cfg.max_tests is not None and self.source.issued >= self.cfg.max_tests:
            return False
        return time.monotonic() < self.deadline

    def start(self) -> BackendInfo:
        """Bring every worker up and prove each side runs its own build; a side that cannot
        start, or imports another's code, fails here, before any test. Its time is
        summary.json's `time_s.start`: what a PR pays between a built head and its first test."""
        began = time.perf_counter()
        try:
            infos = [side.client.start() for lane in self.lanes for side in lane]
            self.state.backend = infos[len(self.setups) - 1]
            self.state.base = infos[0] if self.two_sided else None
            self.levels = check_levels(self.cfg.levels, [side.client for side in self.lanes[0]])
            self.check_sides()
            self._read_hint()
            self.probe()
        except BaseException:
            self.close()
            raise
        self.state.times.start = time.perf_counter() - began
        return self.state.backend

    def check_sides(self) -> None:
        """Record where each side's modules came from, and refuse a side fuzzbot built whose
        system under test (or any dependency) comes from outside its build."""
        for setup, side in zip(self.setups, self.lanes[0], strict=True):
            modules = side.client.modules
            self.state.imports[setup.name] = modules
            if setup.roots is not None:
                system = (*system_modules(setup.spec), *side.client.handshake.get("system_modules", ()))
                check_isolation(setup.name, modules, setup.roots, tuple(system))

    def _read_hint(self) -> None:
        """Read the change's diff (two builds): it weighs generation (guide.hint), and says
        which ops head's probe must ask about (probe_from_base)."""
        if not (self.two_sided and (self.cfg.guide.hint or self.cfg.probe_from_base)):
            return
        client = self.lanes[0][-1].client
        systems = [*system_modules(self.spec), *client.handshake.get("system_modules", ())]
        hint = change_hint(
            self.setups, self.state.sides, self.state.imports, systems, registry(), sources=self.cfg.guide.hint
        )
        if self.cfg.probe_from_base:
            self.touched = hint.touched
        if not self.cfg.guide.hint:
            return
        self.state.hint = hint.summary
        self.source.focus.hinted = hint.layer
        self.code = CodeFeedback.of(hint.lines, self.cfg.guide.coverage_every)

    def _worth_probing(self) -> bool:
        """Plugins are never imported here, so they are probed; built-ins say if it pays."""
        if self.spec.plugin:
            return True
        return bool(getattr(adapter_class(self.spec.adapter), "probe", True))

    def probe(self) -> Probed:
        """Ask every side, as far as `probe` allows (bot.campaign.probing): the highest opset it
        loads, which bounds the range each case draws its opset from (bot.cases.opsets), then
        what it runs at each opset of the range. Generation draws from what every side runs at
        the case's opset, so a case is a comparison, not a declined model; what only one side
        runs is drawn for a share of the seeds, where a wrong answer is `new_in_head` and a
        decline `dropped_support`."""
        failures: list[ProbeFailure] = []

        def failed(f: ProbeFailure) -> None:
            failures.append(f)
            self.on_probe_failure(f)

        cache, lane = Path(self.cfg.cache_dir), self.lanes[0]
        answers = ask_opsets(self.setups, lane, cache) if self.cfg.probe else None
        plan = plan_opsets(self.cfg.generator, answers)
        matrices: list[dict[int, SupportMatrix]] = []
        if self.cfg.probe and self._worth_probing():
            lossy = declared_lossy(self.spec)
            ops = self.cfg.generator.ops
            plan, matrices = probe_range(
                self.setups, lane, plan, cache, failed, self.on_probe_progress, lossy, ops, self.touched
            )
        probed = Probed(plan, list(answers) if answers is not None else [None] * len(self.setups), matrices)
        self._follow(probed, failures)
        return probed

    def _follow(self, probed: Probed, failures: list[ProbeFailure]) -> None:
        """Generation follows the probe's plan; summary.json says what each side loads and runs."""
        plan, gen = probed.plan, self.cfg.generator
        self.source.opsets = plan
        if (plan.low, plan.high) != (gen.written_opset, gen.written_opset):  # another range: other cases
            self.source.cfg = gen.model_copy(update={"opset_min": plan.low, "opset_max": plan.high})
        if self.source.corpus is not None:
            self.source.corpus.rekey(self.source.cfg)
        self.state.backend = loads_up_to(self.state.backend, probed.answers[-1])
        if self.two_sided:
            self.state.base = loads_up_to(self.state.base, probed.answers[0])
        support = probed.support_summary(self.two_sided, failures)
        if support is not None:
            self.state.support = support

    def run(self, on_test: Callable[[CampaignState], None] | None = None) -> Summary:
        if on_test is not None:
            self.on_test = on_test
        if self.state.backend is None:
            self.start()
        start = self._fuzzing_since = time.monotonic()
        self.deadline = start + self.cfg.budget
        try:
            with bounded(self.cfg.memory) as self.state.memory_bound:  # builds (bisection's) run unbounded
                self._replay_regressions()
                self._run_lanes()
                self._judge_deferred()
                self._stop_fuzzing(start)
                self.reduction.after()
            self.bisect_regressions()
        finally:
            # Also on Ctrl-C or an internal error: the counts so far are kept beside the findings.
            if not self.state.wall_s:
                self._stop_fuzzing(start)
            self.write_results()
        return self.summary

    def _replay_regressions(self) -> None:
        """Judge every bundle of the regression corpus before the first generated case, on
        lane 0, as `fuzzbot check` would; within the budget, first."""
        if self.regressions is None:
            return
        t0 = time.monotonic()
        replay = self.state.regressions = RegressionSummary(path=str(self.regressions.folder))
        while self._may_start() and (replayed := self.regressions.next()) is not None:
            replayed.case.regression_of = replayed.fingerprint
            lane = self.lane_sets[0].at(offered(replayed.level, self.lanes[0]))
            judged = self._within_bound(partial(self._run_case, replayed.case, lane))
            if judged is None:
                self.regressions.skipped[replayed.fingerprint] = "judging it asks for more memory than the bound"
                continue
            cross, _ = judged
            replay.replayed += 1
            if cross.verdict in (CrossVerdict.new_regression, CrossVerdict.new_in_head):
                replay.regressed.append(replayed.fingerprint)
            elif cross.verdict.is_reported:
                replay.failing.append(replayed.fingerprint)
            else:
                replay.passing += 1
        replay.skipped = dict(self.regressions.skipped)
        replay.seconds = round(time.monotonic() - t0, 3)

    def write_results(self) -> None:
        """summary.json (built here, once), summary.md and the known bugs: when the campaign
        ends, and from a `finally` or an `except` when a signal stops it (then marked so)."""
        self.reduction.close()
        out = Path(self.cfg.out)
        regressions = self.state.regressions
        if self.regressions is not None and regressions is not None:
            regressions.added = self.regressions.add(out, self.state.kept.findings)
            regressions.unsaved = dict(self.regressions.unsaved)
        code = self.code.summary() if self.cfg.guide.code_coverage else None
        if code is not None and not code.measured:
            code.note = self._why_unmeasured()
        tallies = Tallies.of(self.counts, self.source, self.triage, self.reduction, self.divergence, code)
        self.state.judging = self.judging.summary()
        self.state.onnx_crashes = onnx_checks.crashes() - self._onnx_crashes_before
        summary = self._summary = self.state.summary(tallies)
        write_summary(summary, out)
        write_summary_md(out, summary)
        write_known(out / KNOWN_FILE, list(self.reduction.known.values()))

    def _why_unmeasured(self) -> str:
        """summary.json's one line on why head's code was never measured."""
        head = self.lanes[0][-1].client
        state = str(head.handshake.get("coverage", "off"))
        if state == "on":
            return "no case executed the measured packages"
        modules = head.handshake.get("coverage_modules") or []
        return state if modules else "off: the backend names no Python code of its own to measure"

    def _stop_fuzzing(self, start: float) -> None:
        """wall_s is the fuzzing time; reduction and bisection have their own timings."""
        self.state.wall_s = time.monotonic() - start
        self.state.worker_restarts = sum(side.client.restarts for lanes in self.lane_sets for side in lanes.sides())
        self.close()
        self.source.close()

    def _run_lanes(self) -> None:
        if len(self.lane_sets) == 1:
            self._run_lane(self.lane_sets[0])
            return
        errors: list[BaseException] = []

        def work(lanes: LevelLanes) -> None:
            try:
                self._run_lane(lanes)
            except BaseException as e:  # noqa: BLE001 - handed to the main thread below
                errors.append(e)
                self._stop.set()

        threads = [threading.Thread(target=work, args=(lanes,), daemon=True) for lanes in self.lane_sets]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except BaseException:
            self._stop.set()
            raise
        if errors:
            raise errors[0]

    def _run_lane(self, lanes: LevelLanes) -> None:
        """A worker waits on the lane as little as can be: while it computes a case, the lane
        makes the next one and prepares this one's judging (bot.campaign.triage.Triage.prepare), and
        the next case is sent before this one is judged. Re-runs that judging asks for run in
        between (WorkerClient.run keeps the answer sent ahead), so the cases, their order and
        their verdicts are those of a lane that waits. After a crash or a timeout nothing is
        sent ahead: the worker is gone, and the re-run restarts it first. Each case runs on
        the lane's workers at its drawn level (bot.campaign.levels)."""
        case = self.source.next(self._may_start)
        ahead = False
        while case is not None:
            lane = lanes.at(case_level(case.seed, self.levels))
            if not ahead:
                self._send(case, lane)
            following = self.source.next(self._may_start)
            evidence = self._within_bound(partial(self.triage.prepare, case, lane))
            results = [side.client.collect() for side in lane]
            ahead = False
            if following is not None and not any(r.status in (Status.crash, Status.timeout) for r in results):
                self._send(following, lanes.at(case_level(following.seed, self.levels)))
                ahead = True
            if evidence is not None:
                self._within_bound(partial(self.record, case, results, lane, evidence, deferrable=True))
            case = following

    def _within_bound(self, compute: Callable[[], T]) -> T | None:
        """`compute()`, or None when it asked for more memory than the campaign's bound
        (backends.memory): the case is dropped and counted, and the campaign goes on. A case
        dropped after its first runs were counted stays counted under them as well."""
        return within_bound(compute, self._dropped_over_bound)

    def _dropped_over_bound(self) -> None:
        with self._lock:
            self.source.drop(OVER_BOUND)

    def _send(self, case: Prepared, lane: Lane) -> None:
        """Every side gets the case; head's worker measures its code where the campaign asks
        (guide.code_coverage, on the seeds `coverage_every` picks)."""
        measure = self.cfg.guide.code_coverage and self.code.measures(case.seed)
        for side in lane:
            side.client.submit(case.model_bytes, case.inputs, measure=measure and side.name == SideName.head)

    def close(self) -> None:
        for lanes in self.lane_sets:
            for side in lanes.sides():
                side.client.close()
                side.close()

    def run_cases(self, cases: list[Prepared], reduce: bool = False) -> list[tuple[CrossJudgement, list[RunResult]]]:
        """Judge cases a user already has, as the campaign judges its own (`fuzzbot check`):
        the same sides, rules, references, re-runs and localization, no generation; with
        `reduce`, their findings are then reduced across the sides (`fuzzbot reduce --config`)."""
        if self.state.backend is None:
            self.start()
        lane = self.lanes[0]
        judged = []
        start = time.monotonic()
        try:
            for case in cases:  # a user's own models: judged as they are, unbounded
                judged.append(self._run_case(case, lane))
            self._stop_fuzzing(start)
            if reduce:
                with bounded(self.cfg.memory) as self.state.memory_bound:  # the reducer's candidates are the bot's
                    self.reduction.after()
        finally:
            if not self.state.wall_s:
                self._stop_fuzzing(start)
            self.write_results()
        return judged

    def _run_case(self, case: Prepared, lane: Lane) -> tuple[CrossJudgement, list[RunResult]]:
        """One case on every side of `lane`, judged and counted, with nothing overlapping it."""
        self._send(case, lane)
        results = [side.client.collect() for side in lane]
        return self.record(case, results, lane), results

    def record(
        self,
        case: Prepared,
        results: list[RunResult],
        lane: Lane | None = None,
        evidence: CaseEvidence | None = None,
        deferrable: bool = False,
    ) -> CrossJudgement:
        """Triage the first runs (re-runs, rules and localization happen there), then count.
        The rewrites counted are head's: the build under test, the one generation steers toward.
        `deferrable` (a fuzzing lane's case): a suspect whose re-runs do not fit the judging
        budget waits for the end of the fuzzing (oracles.judging_budget)."""
        lane = lane or self.lanes[0]
        t0 = time.perf_counter()
        lineage = self.source.lineage(case)
        cross = self.triage.triage(case, lane, results, evidence, deferrable=deferrable, lineage=lineage)
        judged = time.perf_counter() - t0
        self.source.note_rewrites(results[-1].rewrites, case.seed)
        with self._lock:
            self._account(case, results, lane, judged, cross)
            self._conclude(case, results, lane, cross)
            tests = self.state.tests
            self.on_test(self.state)  # tests and findings are current; the rest is counted where it happens
        every = self.cfg.oracles.perf.every
        if self.two_sided and cross.verdict is CrossVerdict.pass_ and every and tests % every == 0:
            self.check_perf(case, lane)
        return cross

    def _account(
        self, case: Prepared, results: list[RunResult], lane: Lane, judged: float, cross: CrossJudgement
    ) -> None:
        """One test's times, its count and its runs, under the lock."""
        times = self.state.times
        times.triage += judged
        times.backend += sum(r.wall_s for r in results)
        for side, r in zip(lane, results, strict=True):
            spent = (r.compile_s or 0.0) + (r.run_s or 0.0)
            times.backend_compute += spent
            times.sides[side.name] = times.sides.get(side.name, 0.0) + spent
        self.judging.tests += len(lane)
        self.counts[self._count_key(cross)] += 1
        self.state.tests += 1  # with its count: a signal after here leaves the two agreeing
        self._count_known(case, cross)
        self.state.seed_last = max(case.seed, self.state.seed_last or case.seed)
        if self.levels and (ran := results[-1].backend) is not None:
            self.state.levels[ran.level] += 1

    def _conclude(self, case: Prepared, results: list[RunResult], lane: Lane, cross: CrossJudgement) -> None:
        """What a judged test yields to generation, and the finding it is, kept on disk; a
        deferred suspect is kept to be judged after the fuzzing, and teaches generation what
        its first runs showed (its divergences, the code it reached) now."""
        gain = max(
            self._diverged(case, results, cross),
            self._reached(case, results[-1], cross),
            PAIR_GAIN if case.new_coverage else 0.0,
        )
        if self.two_sided and self._near_miss(cross, results[-1]):
            self.source.add_parent(case, "near_miss")
        if cross.deferred:
            self._defer(case, results, cross)
        elif cross.verdict.is_reported:
            ref = self.keeping.keep(case, results, cross)
            if ref is None:  # another sighting: its reduction may have waited for room
                self.reduction.again(cross.failing.first.fingerprint, self.deadline)
            else:
                if not self.two_sided or cross.verdict is not CrossVerdict.persistent:
                    # a PR check is after what changed; in one build a finding is no parent
                    # (CaseSource.found's `parent`, measured in docs/campaigns.md)
                    shown = [s.first for s in (cross.base, cross.head) if s is not None and s.bad]
                    gain = max(gain, self.source.found(case, shown, parent=self.two_sided))
                self.reduction.during(ref, self.deadline)
        elif cross.verdict is CrossVerdict.flaky or (cross.verdict in SET_ASIDE and self.cfg.oracles.keep_filtered):
            self.keeping.keep_aside(case, results, cross)
        self.source.credit(case, gain)

    def _defer(self, case: Prepared, results: list[RunResult], cross: CrossJudgement) -> None:
        """A suspect judged on its first runs only, counted under that verdict for now, kept
        to be judged in full after the fuzzing; past DEFER_PER_FAILURE of one failure, the
        rest stay counted as they are (their failure is judged on the ones kept)."""
        failure = (cross.key, *((s.side, s.first.fingerprint) for s in (cross.base, cross.head) if s and s.bad))
        if self._deferred_per[failure] >= DEFER_PER_FAILURE:
            return
        self._deferred_per[failure] += 1
        level = case_level(case.seed, self.levels)
        found_s, persistent = round(self._fuzzing_s(), 3), self.two_sided and cross.verdict is CrossVerdict.persistent
        sighting = self._deferred_per[failure]
        self._deferred.append(Deferred(case, results, level, self._count_key(cross), found_s, sighting, persistent))

    def _judge_deferred(self) -> None:
        """The suspects the judging budget made wait, judged in full now on lane 0's
        workers, and kept with the time they were first seen: what could change the PR's
        verdict first, then each failure's first sighting, then the order they came. A
        failure both builds share says nothing of the change, and on a buggy compiler there
        are many (an onnx2torch mutant's campaign deferred 117 suspects in 300 s and judged
        them in 150 s more): those get the runs of the judging share again, of the fuzzing's
        first runs (JudgingBudget.after_room), and the rest stay counted on their first runs
        (summary.json: judging.unjudged)."""
        waiting, self._deferred = self._deferred, []
        waiting.sort(key=lambda d: (d.persistent, d.sighting, d.found_s))
        during = self.judging.judging
        room = self.judging.after_room()
        for d in waiting:
            if d.persistent and self.judging.judging - during + self.triage.cost(self.lanes[0]) > room:
                self.judging.unjudged += 1
                continue
            lane = self.lane_sets[0].at(d.level)
            t0 = time.perf_counter()
            lineage = self.source.lineage(d.case)
            judge = partial(self.triage.triage, d.case, lane, d.results, deferrable=False, lineage=lineage)
            judged = self._within_bound(judge)
            if judged is None:
                continue  # counted on its first runs, and as dropped
            cross = judged
            with self._lock:
                self.state.times.triage += time.perf_counter() - t0
                self.counts[d.key] -= 1
                self.counts[self._count_key(cross)] += 1
                if cross.verdict.is_reported:
                    self.keeping.keep(d.case, d.results, cross, found_s=d.found_s)
                elif cross.verdict is CrossVerdict.flaky or (
                    cross.verdict in SET_ASIDE and self.cfg.oracles.keep_filtered
                ):
                    self.keeping.keep_aside(d.case, d.results, cross)
        self.judging.after += self.judging.judging - during
        self.judging.judging = during

    def _diverged(self, case: Prepared, results: list[RunResult], cross: CrossJudgement) -> float:
        """Count where the builds differed on this case, and teach generation its features;
        what it yielded: 1 for a divergence never seen before, PAIR_GAIN for new bits. A case
        that shows a bug already known teaches nothing: onnxruntime 1.30.0's "wrap" Pad, fixed
        in 1.31.1, is a divergence in every model that holds one, and a campaign between them
        steered toward it until 737 of 8,005 cases were that one fixed bug."""
        if self.divergence is None:
            return 0.0
        seen = self.divergence.observe(case, results, cross)
        if cross.verdict.is_reported:
            self._shown_keys.setdefault(cross.failing.first.fingerprint, set()).update(seen.keys)
            if self.source.shows_known(case.model):
                return 0.0
        if seen.weight and self.cfg.guide.divergence and case.features is not None:
            self.source.note_divergence(case.features, seen.weight, seen.rewrites)
        if seen.rare:
            self.source.add_parent(case, "divergent")
        return 1.0 if seen.new else PAIR_GAIN if seen.new_bits else 0.0

    def _count_known(self, case: Prepared, cross: CrossJudgement) -> None:
        """One more test after each bug known so far, and whether it showed that bug: a
        reported case named after it, or holding its trigger."""
        named = self.reduction.aliases.get(cross.failing.first.fingerprint) if cross.verdict.is_reported else None
        for name, share in self.state.known_share.items():
            share.tests_after += 1
            bug = self.reduction.known.get(name)
            shown = name == named or (
                cross.verdict.is_reported and bug is not None and holds(case.model, [bug.trigger()])
            )
            share.shown_after += shown

    def _reached(self, case: Prepared, head: RunResult, cross: CrossJudgement) -> float:
        """What head's code coverage says the case yielded (bot.campaign.code_feedback): the
        first to execute lines of the change yields 1, becomes a parent of the strongest kind
        and teaches the focus its features; new arcs elsewhere yield CODE_GAIN and a weaker
        parent. A case that shows a bug already known teaches nothing, as for divergences."""
        if not (self.cfg.guide.code_coverage and self.code.measures(case.seed) and self.lanes[0][-1].client.measures):
            return 0.0
        reach = self.code.observe(head)
        if not reach.arcs or (cross.verdict.is_reported and self.source.shows_known(case.model)):
            return 0.0
        if reach.changed:
            self.source.add_parent(case, "diff_coverage")
            if case.features is not None:
                self.source.note_divergence(case.features, 1.0)
            return 1.0
        self.source.add_parent(case, "code_coverage")
        return CODE_GAIN

    def _near_miss(self, cross: CrossJudgement, head: RunResult) -> bool:
        """Head got it right, but a float output came within NEAR_MISS of its dtype's tolerance.
        Only two-build campaigns take these as parents: in one build a near miss points at no
        change, and on onnxruntime:all their mutants yielded 0.04 per test against fresh
        generation's 0.09, so a nightly found 13% fewer distinct bugs per hour with them."""
        j = cross.head.first
        if cross.verdict is not CrossVerdict.pass_ or j.comparison is None:
            return False
        for o in j.comparison.outputs:
            out = head.outputs.get(o.name)
            if out is None or out.dtype.kind != "f" or out.dtype.itemsize < 4:  # float16 rounds that far
                continue
            bounds = self.cfg.tolerances.base(out.dtype.name, head.backend.name if head.backend else None)
            if o.max_abs >= NEAR_MISS * bounds.atol and o.max_rel >= NEAR_MISS * bounds.rtol:
                return True
        return False

    def _count_key(self, cross: CrossJudgement) -> str:
        """One build: a reported case counts by its symptom (crash, wrong_result, ...);
        two builds: by the verdict across them (new_regression, fixed, persistent, ...)."""
        if cross.verdict.is_reported and not self.two_sided:
            return cross.failing.first.verdict.value
        return cross.key

    def bisect_regressions(self) -> None:
        if not (self.cfg.bisect and self.two_sided):
            return
        for ref in self.state.kept.findings:
            if ref.across in (CrossVerdict.new_regression, CrossVerdict.new_in_head):
                result = bisect_finding(self.cfg, in_output(Path(self.cfg.out), ref.path))
                if result is not None and result.first_bad is not None:
                    ref.first_bad = f"{result.first_bad.sha} {result.first_bad.subject}"

    def _side_run(self, index: int) -> SideRun:
        setup = self.setups[index]
        fault = self.cfg.test_fault.spec() if self.cfg.test_fault and setup.name == SideName.head else None
        return SideRun(str(setup.spec), setup.python, self.cfg.timeout, fault)

    def check_perf(self, case: Prepared, lane: Lane) -> None:
        """Time a passing case on both builds; a slower head is a perf regression, kept apart."""
        base, head = lane[0].client, lane[1].client
        judgements = compare_perf(base, head, case.model_bytes, case.inputs, self.cfg.oracles.perf)
        if not any(j.regression for j in judgements):
            return
        with self._lock, interrupts_deferred():
            dest = Path(self.cfg.out) / PERF_FOLDER / f"seed{case.seed}"
            write_bundle(dest, case.model, case.inputs, case.reference)
            (dest / "perf.json").write_text("[" + ",".join(j.model_dump_json() for j in judgements) + "]\n")
            self.counts[PERF_REGRESSION] += 1
            path = relative_to_root(dest, Path(self.cfg.out))
            self.state.perf.append(PerfFinding(path=path, seed=case.seed, judgements=judgements))
