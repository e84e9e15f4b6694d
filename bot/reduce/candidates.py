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

Whether a candidate still shows the bug is a `ShowsBug` object, so a two-sided check
(base still passes, head still fails) sits beside `SameBug` without touching the reducer.
What counts as the same bug, on this build, on the other build and at another commit of a
bisection, is one definition: oracles.bug_identity.
"""

from __future__ import annotations

import queue
import re
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import numpy as np
import onnx

from backends.client import WorkerClient
from backends.faults import FaultSpec
from backends.memory import out_of_memory
from backends.reference import ReferenceError, RefusedForm, run_reference
from backends.spec import BackendSpec, BackendSpecError, parse_backend
from bot.findings.bundle import Bundle, BundleError, Finding, load_bundle, load_model, write_bundle
from bot.findings.repro import render_repro
from oracles.bug_identity import Distance, same_bug
from oracles.judging import Judging
from oracles.references import Validity, read_reference
from oracles.tolerances import ToleranceConfig
from oracles.verdict import Judgement, Verdict
from reducers.candidate import Candidate, onnx_reference_values, with_all_outputs
from reducers.driver import NotInteresting, Progress, ReductionResult, reduce_case
from reducers.tester import ReduceConfig

REDUCED_DIR = "reduced"


class ShowsBug(Protocol):
    """Decides whether a candidate model still shows the bug being reduced (the build stays
    fixed and the model changes)."""

    def holds(self, case: Candidate) -> bool: ...


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

    @property
    def lowest_level(self) -> str | None:
        """The build's least optimizing level, as its worker's handshake says (a plugin's
        too: the worker alone knows it), the worker started for it if it was not."""
        with self.lend() as client:
            client.start()
            return client.lowest_level

    def close(self) -> None:
        for c in self._all:
            c.close()


def reference_values(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor's value from fuzzbot's torch reference (onnx's evaluator for ops it lacks)."""
    try:
        values = run_reference(with_all_outputs(model), inputs)
    except RefusedForm:
        raise  # a form no reading may stand for (a Loop that never ends: onnx.reference runs it without bound)
    except ReferenceError:
        return onnx_reference_values(model, inputs)
    return {**{i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}, **inputs, **values}


class CandidateJudge:
    """A candidate judged as a campaign judges a case, by the same pipeline
    (oracles.judging: the config's tolerances and rules, the second reference, the float16
    envelope, undefined inputs), so a reduction step never turns a case into one the
    campaign would set aside (an epsilon polished to 0, a divisor left at rounding noise).

    With `validity` from a computed original, a candidate the reference cannot compute, or
    computes into outputs of other shapes or types than the graph declares, is no
    candidate: it is not valid ONNX, whatever the checker says (a Slice step of 0, a Tile
    whose repeats miss a dim, a Gemm whose C does not broadcast), and a crash on it is not
    the original's bug. Nor is one with an empty output the original did not have."""

    def __init__(self, pool: ClientPool, judging: Judging, validity: Validity | None = None) -> None:
        self.pool = pool
        self.judging = judging
        self.validity = validity or Validity()

    def judge(self, case: Candidate) -> Judgement | None:
        """The candidate's judgement after the rules and the confirmation (None: they set it
        aside, or it is invalid)."""
        ev = self.judging.compute(case.model, case.inputs)
        if self.validity.refuses(case.model, ev.reference) is not None:
            return None
        with self.pool.lend() as client:
            result = client.run(case.model.SerializeToString(), case.inputs)
        runs = self.judging.run(ev, result)
        return None if runs.rule is not None else runs.first


class StillPasses:
    """The other side of a regression (or the failing side's own lowest level, for a bug that
    needs the optimizer): the candidate must still pass there, or the reduction could drift
    onto a bug both builds share, or onto one the optimizer has no part in."""

    def __init__(self, pool: ClientPool, side: str, judging: Judging) -> None:
        self.judge = CandidateJudge(pool, judging)
        self.side = side

    def holds(self, case: Candidate) -> bool:
        j = self.judge.judge(case)
        return j is not None and j.verdict is Verdict.pass_


class StillFails:
    """The other side of a persistent bug: the candidate must still fail there the same
    way, or the reduction drifts onto what only the failing build gets wrong, and the
    reduced repro passes on a build the label says fails (one of a 1.22-to-1.23 campaign's
    persistent RMSNorm findings did)."""

    def __init__(self, original: Judgement, pool: ClientPool, side: str, judging: Judging) -> None:
        self.judge = CandidateJudge(pool, judging)
        self.original = original
        self.side = side
        self.verdict = original.verdict

    def holds(self, case: Candidate) -> bool:
        """The same kind of failure (verdict, stage, symptom): the other build's message is
        its own release's wording, which a reworded release must not turn into "passes"."""
        j = self.judge.judge(case)
        return j is not None and same_bug(self.original, j, Distance.build)


class SameBug:
    """One-sided identity: the candidate fails on `pool`'s backend the way `original` did."""

    def __init__(
        self, original: Judgement, pool: ClientPool, judging: Judging, validity: Validity | None = None
    ) -> None:
        self.original = original
        self.candidates = CandidateJudge(pool, judging, validity)

    def judge(self, case: Candidate) -> Judgement | None:
        """The candidate's judgement, or None when a false-positive rule explains it."""
        return self.candidates.judge(case)

    def holds(self, case: Candidate) -> bool:
        j = self.judge(case)
        return j is not None and self.matches(j)

    def matches(self, j: Judgement) -> bool:
        """Whether a judgement is the original's failure, on the same build (oracles.bug_identity)."""
        return same_bug(self.original, j, Distance.run)


def _spec(bundle: Bundle, backend: str | None) -> BackendSpec:
    if backend:
        return parse_backend(backend)
    assert bundle.finding is not None
    try:
        return parse_backend(bundle.finding.spec_text)
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
    fault: FaultSpec | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    also: Sequence[ShowsBug] = (),
    pool: ClientPool | None = None,
    judging: Judging,
) -> Path:
    """Reduce the finding at `path`; returns the reduced bundle folder (`path/reduced`
    unless `out` says otherwise). `fault` is the test-only fault injection. Each of `also`
    must hold too: for a regression, the other build still gets the candidate right; for a
    bug that needs the optimizer, the lowest level does. A `pool` given is the failing
    build's workers, lent and left running (a campaign reduces many findings on one pool: a
    TVM worker takes seconds to start). `judging`: the campaign's pipeline (its config's
    rules and tolerances). When the reference computes
    the original, every candidate must be computed by it too (CandidateJudge)."""
    bundle = load_bundle(path)
    if bundle.finding is None or not bundle.inputs:
        raise BundleError(f"{path} is not a finding bundle (needs finding.json and inputs.npz)")
    spec = _spec(bundle, backend)
    owned = pool is None
    if pool is None:
        pool = ClientPool(lambda: WorkerClient(spec, python, timeout_s, fault=fault), jobs)
    try:
        validity = Validity.of(bundle.model, read_reference(bundle.model, bundle.inputs).outputs)
        identity = SameBug(bundle.finding, pool, judging, validity)

        def holds(case: Candidate) -> bool:
            try:
                return identity.holds(case) and all(other.holds(case) for other in also)
            except (MemoryError, RuntimeError) as e:
                if not out_of_memory(e):
                    raise
                return False  # a candidate past the bot's memory bound (backends.memory) is no candidate

        config = ReduceConfig(jobs=jobs, max_tests=max_tests, budget_s=budget_s)
        start = Candidate(bundle.model, bundle.inputs)
        if not judging.asking.shown_once(lambda: holds(start)):
            why = _why_not(start, identity, also)
            raise BundleError(f"{path}: the finding does not reproduce ({bundle.finding.verdict.value}): {why}")
        # the start is shown: the reducer's own first check takes it as it is
        reduced, result = reduce_case(
            start, lambda c: c is start or holds(c), config, reference_values, on_progress=on_progress
        )
        # the reduced model's own judgement (its outputs, its mismatch), asked like the start;
        # the original's only when every ask flakes
        final = judging.asking.first_showing(lambda: identity.judge(reduced), identity.matches) or bundle.finding
    finally:
        if owned:
            pool.close()
    kept = {bundle.finding.side: bundle.finding.verdict.value}
    kept |= {other.side: Verdict.pass_.value for other in also if isinstance(other, StillPasses)}
    kept |= {other.side: other.verdict.value for other in also if isinstance(other, StillFails)}
    dest = out or path / REDUCED_DIR
    return write_reduced(dest, reduced, bundle.finding, final, spec, result, kept, judging.tolerances)


def _why_not(start: Candidate, identity: SameBug, also: Sequence[ShowsBug]) -> str:
    """Which of a reduction's conditions the original itself failed, asked once more: a
    maintainer (and a flaky-case recheck) needs to know whether the failing side stopped failing
    or the other side stopped passing."""
    j = identity.judge(start)
    if j is None:
        return "a rule explains it now, or the reference refuses it"
    if not identity.matches(j):
        return f"the build now gives {j.verdict.value} ({j.symptom or j.stage})"
    sides = [getattr(other, "side", "another side") for other in also if not other.holds(start)]
    return f"{', '.join(sides)} no longer as required" if sides else "it held when asked again (flaky)"


def write_reduced(
    dest: Path,
    case: Candidate,
    original: Finding,
    final: Judgement,
    spec: BackendSpec,
    result: ReductionResult,
    kept: dict[str, str] | None = None,
    tolerances: ToleranceConfig | None = None,
) -> Path:
    """The reduced bundle. Its repro judges as the campaign judged the candidate: the
    bounds of the reduced model's own provenance at the campaign's `tolerances` (a Cast round
    trip exactly), never the dtype's defaults, which once hid a 2e-4 error under 1e-3 and
    made a `fixed` label's repro exit 0 on base."""
    reference = read_reference(case.model, case.inputs).outputs
    model = _without_value_info(case.model)
    finding = original.model_copy(update={**dict(final), "created": "", "kept": kept or {}})
    title = f"{final.verdict.value} in {spec}: {final.signature} (reduced)"
    bounds = (tolerances or ToleranceConfig()).for_outputs(case.model, finding.backend.name)
    repro = render_repro(model, case.inputs, reference or {}, spec, title, bounds, finding)
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
    """`command` with `{model}` replaced by a candidate's path. A candidate still fails
    only the way the original did, as Polygraphy's `debug reduce` asks: the same exit
    code (`fail_code`, learned from the original when not given) and, with `fail_regex`,
    output that matches it. Any other non-zero exit is the check breaking for its own
    reason (a missing file, a typo), not the bug, and must not steer the reduction."""

    def __init__(
        self, command: str, timeout_s: float = 60.0, fail_code: int | None = None, fail_regex: str | None = None
    ) -> None:
        if "{model}" not in command:
            raise ValueError("the check command must contain {model}")
        if fail_code == 0:
            raise ValueError("--fail-code 0 would keep every candidate that passes")
        self.command = command
        self.timeout_s = timeout_s
        self.fail_code = fail_code
        self.fail_regex = re.compile(fail_regex) if fail_regex else None
        self._dir = tempfile.TemporaryDirectory(prefix="fuzzbot-reduce-")
        self._lock = threading.Lock()
        self._count = 0

    def _path(self) -> Path:
        with self._lock:
            self._count += 1
            return Path(self._dir.name) / f"candidate-{self._count}.onnx"

    def run(self, case: Candidate) -> subprocess.CompletedProcess[bytes] | None:
        """The command's run on the candidate; None when it ran past its time limit."""
        path = self._path()
        path.write_bytes(case.model.SerializeToString())
        cmd = self.command.replace("{model}", shlex.quote(str(path)))
        try:
            return subprocess.run(cmd, shell=True, capture_output=True, timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return None
        finally:
            path.unlink(missing_ok=True)

    def learn(self, case: Candidate) -> None:
        """Take the original's failure as the one to keep; NotInteresting when it passes or
        does not fail the way the given code and regex say."""
        done = self.run(case)
        if done is None:
            raise NotInteresting(f"the command runs past {self.timeout_s:g}s on the original model")
        if done.returncode == 0:
            raise NotInteresting("the command exits 0 on the original model")
        if self.fail_code is None:
            self.fail_code = done.returncode
        if not self._same_failure(done):
            raise NotInteresting(f"the original fails with exit code {done.returncode}, not the one asked for")

    def _same_failure(self, done: subprocess.CompletedProcess[bytes]) -> bool:
        if done.returncode == 0 or (self.fail_code is not None and done.returncode != self.fail_code):
            return False
        if self.fail_regex is None:
            return True
        text = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        return self.fail_regex.search(text) is not None

    def holds(self, case: Candidate) -> bool:
        done = self.run(case)
        return done is not None and self._same_failure(done)

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
    fail_code: int | None = None,
    fail_regex: str | None = None,
) -> ReductionResult:
    """Reduce the model at `path` while `command` keeps failing on it the way it fails on
    the original (see ExternalCheck); writes `out` (and `out` with .txt, the ONNX text
    form). Raises NotInteresting when the command does not fail on the original model."""
    model = load_model(path)
    check = ExternalCheck(command, fail_code=fail_code, fail_regex=fail_regex)
    try:
        check.learn(Candidate(model))
        config = ReduceConfig(jobs=jobs, max_tests=max_tests, budget_s=budget_s)
        reduced, result = reduce_case(Candidate(model), check.holds, config, on_progress=on_progress)
    finally:
        check.close()
    final = _without_value_info(reduced.model)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(final.SerializeToString())
    out.with_suffix(".txt").write_text(onnx.printer.to_text(final) + "\n")
    return result
