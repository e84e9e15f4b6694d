"""A fuzzing campaign: generate, compute the reference, run the backend, judge, keep
findings, until the budget is spent.

Generation and the reference run in this process while the worker runs the
previous case, so the two cores are both busy.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from pydantic import BaseModel, Field

from backends.client import WorkerClient
from backends.reference import ReferenceError, run_reference
from backends.results import BackendInfo, RunResult
from backends.spec import BackendSpec, adapter_class, parse_backend
from bot.bundle import Finding, write_bundle
from bot.config import FuzzConfig
from bot.probe import ProbeFailure, SupportMatrix, probe_support
from bot.repro import render_repro
from generator.api import Support, generate
from generator.coverage import Coverage, CoverageStats
from generator.values import NoValidValues
from oracles.margin import is_unstable
from oracles.verdict import Judgement, Verdict, judge

UNSTABLE = "filtered:unstable"
"""Count key of wrong results on cases the margin check calls numerically unstable."""


def _is_bug(count_key: str) -> bool:
    try:
        return Verdict(count_key).is_bug
    except ValueError:  # a filter's key, such as UNSTABLE
        return False


class FindingRef(BaseModel):
    path: str
    verdict: Verdict
    fingerprint: str
    seed: int
    signature: str


class Timings(BaseModel):
    generation: float = 0.0
    reference: float = 0.0
    backend: float = 0.0
    """Wall time of backend requests, from submit to answer (overlaps generation)."""
    backend_compute: float = 0.0
    """Time the worker reported inside compile and run."""


class SupportSummary(BaseModel):
    supported: int
    unsupported: int
    unexpected: list[ProbeFailure] = Field(default_factory=list)
    """Probes that failed for another reason than "unsupported": shown, kept in generation."""


class Summary(BaseModel):
    tests: int = 0
    counts: dict[str, int] = Field(default_factory=dict)
    dropped: dict[str, int] = Field(default_factory=dict)
    findings: list[FindingRef] = Field(default_factory=list)
    occurrences: dict[str, int] = Field(default_factory=dict)
    wall_s: float = 0.0
    time_s: Timings = Field(default_factory=Timings)
    backend: BackendInfo | None = None
    seed_first: int = 0
    seed_last: int | None = None
    budget_s: float = 0.0
    worker_restarts: int = 0
    support: SupportSummary | None = None
    coverage: CoverageStats = Field(default_factory=CoverageStats)

    @property
    def finding_count(self) -> int:
        return sum(n for v, n in self.counts.items() if _is_bug(v))


@dataclass
class Prepared:
    seed: int
    model: onnx.ModelProto
    model_bytes: bytes
    inputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray]


def op_signature(model: onnx.ModelProto) -> str:
    return ",".join(sorted({n.op_type for n in model.graph.node}))


class Campaign:
    def __init__(self, cfg: FuzzConfig) -> None:
        self.cfg = cfg
        self.spec: BackendSpec = parse_backend(cfg.backend)
        self.on_test: Callable[[Summary], None] = lambda s: None
        fault = cfg.test_fault.model_dump() if cfg.test_fault else None
        self.client = WorkerClient(self.spec, cfg.python or sys.executable, cfg.timeout, fault=fault)
        self.summary = Summary(seed_first=cfg.seed, budget_s=cfg.budget)
        self.dropped: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()
        self.kept: Counter[str] = Counter()
        self.next_seed = cfg.seed
        self.issued = 0
        self.deadline = 0.0
        self.support: Support | None = None
        self.coverage = Coverage()
        self.on_probe_failure: Callable[[ProbeFailure], None] = lambda f: None
        self.on_probe_progress: Callable[[int, int], None] | None = None

    def prepare(self) -> Prepared | None:
        """The next runnable case, or None once the budget or test limit is reached."""
        while self._may_start():
            seed = self.next_seed
            self.next_seed += 1
            t0 = time.perf_counter()
            try:
                case = generate(seed, self.cfg.generator, support=self.support, coverage=self.coverage)
            except NoValidValues:
                # Never run: the value search found no inputs that keep every op finite and off its edge.
                self.dropped["no_valid_values"] += 1
                continue
            except RuntimeError:
                self.dropped["generation_failed"] += 1
                continue
            finally:
                self.summary.time_s.generation += time.perf_counter() - t0
            t1 = time.perf_counter()
            try:
                reference = run_reference(case.model, case.inputs)
            except ReferenceError as e:
                print(f"warning: seed {seed}: reference failed: {e}", file=sys.stderr)
                self.dropped["reference_error"] += 1
                continue
            finally:
                self.summary.time_s.reference += time.perf_counter() - t1
            if not all(np.isfinite(v).all() for v in reference.values()):
                self.dropped["nonfinite_reference"] += 1
                continue
            self.issued += 1
            return Prepared(seed, case.model, case.model.SerializeToString(), case.inputs, reference)
        return None

    def _may_start(self) -> bool:
        if self.cfg.max_tests is not None and self.issued >= self.cfg.max_tests:
            return False
        return time.monotonic() < self.deadline

    def start(self) -> BackendInfo:
        """Bring the worker up; a backend that cannot start fails here, before any test."""
        try:
            self.summary.backend = self.client.start()
            if self.cfg.probe and self._worth_probing():
                self.probe(self.summary.backend)
        except BaseException:
            self.client.close()
            raise
        return self.summary.backend

    def _worth_probing(self) -> bool:
        """Plugins are never imported here, so they are probed; built-ins say if it pays."""
        if self.spec.plugin:
            return True
        return bool(getattr(adapter_class(self.spec.adapter), "probe", True))

    def probe(self, info: BackendInfo) -> SupportMatrix:
        failures: list[ProbeFailure] = []

        def failed(f: ProbeFailure) -> None:
            failures.append(f)
            self.on_probe_failure(f)

        lossy = {} if self.spec.plugin else dict(getattr(adapter_class(self.spec.adapter), "lossy_dtypes", {}))
        matrix = probe_support(
            self.client, info, self.cfg.generator.opset, self.cfg.cache_dir, failed, self.on_probe_progress, lossy=lossy
        )
        self.support = matrix.support()
        self.summary.support = SupportSummary(
            supported=sum(len(v) for v in matrix.supported.values()),
            unsupported=sum(len(v) for v in matrix.unsupported.values()),
            unexpected=failures,
        )
        return matrix

    def run(self, on_test: Callable[[Summary], None] | None = None) -> Summary:
        if on_test is not None:
            self.on_test = on_test
        if self.summary.backend is None:
            self.start()
        client = self.client
        start = time.monotonic()
        self.deadline = start + self.cfg.budget
        try:
            case = self.prepare()
            while case is not None:
                client.submit(case.model_bytes, case.inputs)
                following = self.prepare()
                self.record(case, client.collect())
                case = following
        finally:
            # Also on Ctrl-C or an internal error: the counts so far are kept beside the findings.
            self.summary.worker_restarts = client.restarts
            client.close()
            self.summary.wall_s = time.monotonic() - start
            self.finish()
            write_summary(self.summary, Path(self.cfg.out))
        return self.summary

    def record(self, case: Prepared, result: RunResult) -> None:
        self.summary.time_s.backend += result.wall_s
        self.summary.time_s.backend_compute += (result.compile_s or 0.0) + (result.run_s or 0.0)
        j = judge(result, case.reference, op_signature(case.model), self.cfg.tolerances)
        if j.verdict is Verdict.wrong_result and is_unstable(case.model, case.inputs):
            # An operand within its op's margin: rounding alone explains the difference.
            self.counts[UNSTABLE] += 1
        elif j.verdict.is_bug:
            self.keep_finding(case, result, j)
            self.counts[j.verdict.value] += 1
        else:
            self.counts[j.verdict.value] += 1
        self.summary.tests += 1
        self.summary.seed_last = case.seed
        self.finish()
        self.on_test(self.summary)

    def keep_finding(self, case: Prepared, result: RunResult, j: Judgement) -> None:
        """Write the bundle first: nothing is counted or shown before it is on disk."""
        self.summary.occurrences[j.fingerprint] = self.summary.occurrences.get(j.fingerprint, 0) + 1
        if self.kept[j.fingerprint] >= self.cfg.keep_per_fingerprint:
            return
        assert result.backend is not None
        finding = Finding(
            **dict(j),
            backend=result.backend,
            seed=case.seed,
            generator=self.cfg.generator,
            stderr_tail=result.stderr_tail,
        )
        title = f"{j.verdict.value} in {self.spec}: {j.signature}"
        repro = render_repro(case.model, case.inputs, case.reference, self.spec, title)
        dest = Path(self.cfg.out) / "findings" / f"{j.verdict.value}-{j.fingerprint}-seed{case.seed}"
        write_bundle(dest, case.model, case.inputs, case.reference, finding, repro)
        self.kept[j.fingerprint] += 1
        self.summary.findings.append(
            FindingRef(
                path=str(dest), verdict=j.verdict, fingerprint=j.fingerprint, seed=case.seed, signature=j.signature
            )
        )

    def finish(self) -> None:
        self.summary.coverage = self.coverage.stats()
        self.summary.counts = dict(sorted(self.counts.items()))
        self.summary.dropped = dict(sorted(self.dropped.items()))


def write_summary(summary: Summary, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "summary.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(summary.model_dump_json(indent=2) + "\n")
    tmp.replace(path)
    return path
