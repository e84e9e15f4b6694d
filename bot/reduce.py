"""Reduce a finding (or any ONNX model with an external check) to a minimal repro.

Two ways in:

- `reduce_bundle(path, ...)`: a fuzzbot finding bundle. A candidate counts only if it
  is still the same bug (`SameBug`): same verdict class, and for crashes a similar
  normalized message; for wrong results, still wrong against the torch reference
  recomputed for the candidate (finite, outside the unstable-margin filter), with no
  kind of mismatch the original did not have. The reduced bundle is written to `<bundle>/reduced/`
  (inside the original, so the pair moves, archives and deletes together, and
  `load_bundle` of the original ignores it): model.onnx, inputs.npz, reference.npz,
  finding.json (judgement of the reduced model), repro.py, model.txt (ONNX text
  form) and reduction.json (the `ReductionResult`).
- `reduce_model_file(path, command, out, ...)`: C-Reduce/Polygraphy style. `command`
  is run through the shell with `{model}` replaced by a candidate's file path; a
  non-zero exit status means "still failing", so the candidate is kept; exit 0 means
  the failure is gone. A check that exceeds its time limit counts as exit 0 (gone):
  a hang is not the failure being reduced unless the command itself says so.

Bug identity is a `BugIdentity` object, so a two-sided check (base still passes, head
still fails) can later be added beside `SameBug` without touching the reducer.
"""

from __future__ import annotations

import difflib
import queue
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnx

from backends.client import WorkerClient
from backends.reference import ReferenceError, run_reference
from backends.spec import BackendSpec, BackendSpecError, parse_backend
from bot.bundle import Bundle, BundleError, Finding, load_bundle, load_model, write_bundle
from bot.repro import render_repro
from oracles.margin import UnsupportedModel, is_unstable
from oracles.signature import normalize, op_signature
from oracles.tolerances import ToleranceConfig
from oracles.verdict import Judgement, Verdict, judge
from reducers.case import Case, onnx_reference_values, with_all_outputs
from reducers.driver import NotInteresting, Progress, ReductionResult, reduce_case
from reducers.tester import ReduceConfig

MESSAGE_SIMILARITY = 0.85
"""Crash messages match when their normalized forms are equal, or at least this similar
(difflib ratio). Normalization erases names, numbers and paths; the ratio lets a
message that mentions one more or one fewer dimension or op name still count as the
same crash, while a different error class or different wording does not."""

REDUCED_DIR = "reduced"


class BugIdentity(Protocol):
    """Decides whether a candidate still shows the bug being reduced."""

    def holds(self, case: Case) -> bool: ...


class ClientPool:
    """One long-lived worker per parallel job, lent out per test, so a backend is
    started once per job rather than once per candidate."""

    def __init__(self, make: Callable[[], WorkerClient], size: int) -> None:
        self._free: queue.Queue[WorkerClient] = queue.Queue()
        self._all = [make() for _ in range(size)]
        for c in self._all:
            self._free.put(c)

    @contextmanager
    def lend(self) -> Iterator[WorkerClient]:
        client = self._free.get()
        try:
            yield client
        finally:
            self._free.put(client)

    def close(self) -> None:
        for c in self._all:
            c.close()


def reference_values(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor's value from fuzzbot's torch reference (onnx's evaluator for ops it lacks)."""
    try:
        values = run_reference(with_all_outputs(model), inputs)
    except ReferenceError:
        return onnx_reference_values(model, inputs)
    return {**{i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}, **inputs, **values}


def _finite(arrays: dict[str, np.ndarray]) -> bool:
    return all(a.dtype.kind not in "fc" or bool(np.isfinite(a).all()) for a in arrays.values())


def similar_messages(a: str, b: str) -> bool:
    na, nb = normalize(a), normalize(b)
    return na == nb or difflib.SequenceMatcher(None, na, nb).ratio() >= MESSAGE_SIMILARITY


class StillPasses:
    """The other side of a regression: the candidate must still pass there, or the
    reduction could drift onto a bug both builds share."""

    def __init__(self, pool: ClientPool) -> None:
        self.pool = pool

    def holds(self, case: Case) -> bool:
        try:
            reference = run_reference(case.model, case.inputs)
        except ReferenceError:
            return False
        with self.pool.lend() as client:
            result = client.run(case.model.SerializeToString(), case.inputs)
        bounds = ToleranceConfig().for_outputs(case.model, result.backend.name if result.backend else None)
        return judge(result, reference, op_signature(case.model), per_output=bounds).verdict is Verdict.pass_


class SameBug:
    """One-sided identity: the candidate fails on `pool`'s backend the way `original` did."""

    def __init__(self, original: Judgement, pool: ClientPool) -> None:
        self.original = original
        self.pool = pool

    def judge(self, case: Case) -> Judgement | None:
        """The candidate's judgement, or None when the reference cannot vouch for it."""
        try:
            reference = run_reference(case.model, case.inputs)
        except ReferenceError:
            return None
        if not _finite(reference):
            return None
        with self.pool.lend() as client:
            result = client.run(case.model.SerializeToString(), case.inputs)
        bounds = ToleranceConfig().for_outputs(case.model, result.backend.name if result.backend else None)
        return judge(result, reference, op_signature(case.model), per_output=bounds)

    def holds(self, case: Case) -> bool:
        j = self.judge(case)
        if j is None or j.verdict is not self.original.verdict:
            return False
        if j.verdict is Verdict.wrong_result:
            if not set(j.symptom.split("+")) <= set(self.original.symptom.split("+")):
                return False  # a new kind of mismatch (say, shape where values differed) is another bug
            try:
                return not is_unstable(case.model, case.inputs)
            except UnsupportedModel:
                return False
        if self.original.stage and j.stage != self.original.stage:
            return False
        if j.symptom != self.original.symptom:
            return False
        return j.symptom != "exception" or similar_messages(j.message, self.original.message)


def _spec(bundle: Bundle, backend: str | None) -> BackendSpec:
    if backend:
        return parse_backend(backend)
    assert bundle.finding is not None
    info = bundle.finding.backend
    try:
        return parse_backend(bundle.finding.spec or (f"{info.name}:{info.level}" if info.level else info.name))
    except BackendSpecError as e:
        raise BundleError(f"{bundle.path}: cannot tell the backend from finding.json ({e}); pass --backend") from e


def reduce_bundle(
    path: Path,
    budget_s: float | None = 300.0,
    jobs: int = 1,
    max_tests: int | None = None,
    out: Path | None = None,
    *,
    backend: str | None = None,
    python: str = sys.executable,
    timeout_s: float = 10.0,
    fault: dict[str, Any] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    also: BugIdentity | None = None,
) -> Path:
    """Reduce the finding at `path`; returns the reduced bundle folder (`path/reduced`
    unless `out` says otherwise). `fault` is the test-only fault injection. `also` must
    hold too: for a regression, the other build still gets the candidate right."""
    bundle = load_bundle(path)
    if bundle.finding is None or not bundle.inputs:
        raise BundleError(f"{path} is not a finding bundle (needs finding.json and inputs.npz)")
    spec = _spec(bundle, backend)
    pool = ClientPool(lambda: WorkerClient(spec, python, timeout_s, fault=fault), jobs)
    try:
        identity = SameBug(bundle.finding, pool)

        def holds(case: Case) -> bool:
            return identity.holds(case) and (also is None or also.holds(case))

        config = ReduceConfig(jobs=jobs, max_tests=max_tests, budget_s=budget_s)
        start = Case(bundle.model, bundle.inputs)
        try:
            reduced, result = reduce_case(start, holds, config, reference_values, on_progress=on_progress)
        except NotInteresting as e:
            raise BundleError(f"{path}: the finding does not reproduce ({bundle.finding.verdict.value})") from e
        final = identity.judge(reduced)
        if final is None or final.verdict is not bundle.finding.verdict:  # a flaky last run keeps the original's
            final = bundle.finding
    finally:
        pool.close()
    return write_reduced(out or path / REDUCED_DIR, reduced, bundle.finding, final, spec, result)


def write_reduced(
    dest: Path, case: Case, original: Finding, final: Judgement, spec: BackendSpec, result: ReductionResult
) -> Path:
    reference = run_reference(case.model, case.inputs)
    model = _without_value_info(case.model)
    finding = original.model_copy(update={**dict(final), "created": ""})
    title = f"{final.verdict.value} in {spec}: {final.signature} (reduced)"
    repro = render_repro(model, case.inputs, reference, spec, title)
    write_bundle(dest, model, case.inputs, reference, finding, repro)
    (dest / "model.txt").write_text(onnx.printer.to_text(model) + "\n")
    (dest / "reduction.json").write_text(result.model_dump_json(indent=2) + "\n")
    return dest


def _without_value_info(model: onnx.ModelProto) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.value_info[:]
    return m


class ExternalCheck:
    """`command` with `{model}` replaced by a candidate's path; non-zero exit = still failing."""

    def __init__(self, command: str, timeout_s: float = 60.0) -> None:
        if "{model}" not in command:
            raise ValueError("the check command must contain {model}")
        self.command = command
        self.timeout_s = timeout_s
        self._dir = tempfile.TemporaryDirectory(prefix="fuzzbot-reduce-")
        self._lock = threading.Lock()
        self._count = 0

    def _path(self) -> Path:
        with self._lock:
            self._count += 1
            return Path(self._dir.name) / f"candidate-{self._count}.onnx"

    def holds(self, case: Case) -> bool:
        path = self._path()
        path.write_bytes(case.model.SerializeToString())
        cmd = self.command.replace("{model}", shlex.quote(str(path)))
        try:
            done = subprocess.run(cmd, shell=True, capture_output=True, timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return False
        finally:
            path.unlink(missing_ok=True)
        return done.returncode != 0

    def close(self) -> None:
        self._dir.cleanup()


def reduce_model_file(
    path: Path,
    command: str,
    out: Path,
    budget_s: float | None = 300.0,
    jobs: int = 1,
    max_tests: int | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> ReductionResult:
    """Reduce the model at `path` while `command` keeps failing on it; writes `out`
    (and `out` with .txt, the ONNX text form). Raises NotInteresting when the
    command does not fail on the original model."""
    model = load_model(path)
    check = ExternalCheck(command)
    try:
        config = ReduceConfig(jobs=jobs, max_tests=max_tests, budget_s=budget_s)
        reduced, result = reduce_case(Case(model), check.holds, config, on_progress=on_progress)
    finally:
        check.close()
    final = _without_value_info(reduced.model)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(final.SerializeToString())
    out.with_suffix(".txt").write_text(onnx.printer.to_text(final) + "\n")
    return result
