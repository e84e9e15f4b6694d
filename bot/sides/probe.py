"""Per-backend support probing: which op x dtype combinations a backend implements.

Before a campaign generates for a backend, every (op type, key dtype) the generator
could draw is compiled and run as single-op models on that backend, on every side of a
two-build campaign. What a backend reports as unimplemented for every model tried is
left out of generation (one model it runs is enough to keep the pair: a 4-D Resize runs
where a 3-D one is declined), so "not implemented" can never become a finding. The
answers are cached per build: its identity (commit and recipe, pip spec, or interpreter),
name, version and commit, and the opset probed, so each build is probed once per opset and
two builds of one version never share a matrix. A campaign draws each case's opset from a
range (bot.cases.opsets) and probes a matrix at every opset of it (`probe_opsets`).

A probe that fails for any other reason (a crash, a timeout, an error that does not
say "unsupported") is a possible bug in the backend or in fuzzbot: it is shown to the
user and never cached as "unsupported", and the combination stays in generation. An
error the build raised is cached as `failed` (`lasting`), so that a build is not asked
again what it will only fail again. A crash or a timeout may be the machine's: it is asked
again next time, and cached as `failed` once it fails the same way twice.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx.defs
from pydantic import BaseModel, Field

from backends.client import WorkerClient
from backends.results import BackendInfo, RunResult, Status
from backends.spec import BackendSpec, adapter_class
from bot.files import write_whole
from bot.sides.probe_models import ProbeModel, ProbeModels
from generator.api import Support, op_specs
from generator.dtypes import DType
from generator.ops import registry

PROBE_MODELS = 3

UNSUPPORTED_FALLBACK = re.compile(
    r"NOT_IMPLEMENTED|Could not find an implementation|not supported|not implemented|unsupported", re.IGNORECASE
)
"""Used when the worker's adapter does not classify results itself."""


UNPLACEABLE = "fuzzbot: no seed writes this pair alone at this opset"
"""What a pair the generator cannot write on its own is recorded as: not the build's answer,
and said so, but cached like one, as every seed is tried before the generator gives up."""


class ProbeFailure(BaseModel):
    op: str
    dtype: DType
    status: str
    message: str


PROBE_FORMAT = 3
"""How the probe asks: a cached matrix of an older format is probed again. 2: every probe
model holds its own type (format 1 let a seed of the `wide_types` share ask about another);
3: Python's TypeError words are no declared limit (PYTHON_TYPE_ERRORS)."""


class SupportMatrix(BaseModel):
    backend: str
    version: str
    commit: str | None = None
    opset: int
    probe_format: int = 1
    """PROBE_FORMAT when the matrix was probed (a file without it: 1)."""
    supported: dict[str, list[DType]] = Field(default_factory=dict)
    unsupported: dict[str, dict[str, str]] = Field(default_factory=dict)
    """op -> dtype -> the backend's message, or UNPLACEABLE where the generator had no model."""
    failed: dict[str, dict[str, str]] = Field(default_factory=dict)
    """op -> dtype -> what went wrong, where a probe failed in a way that lasts: an error the
    build raised, which no rerun changes (`lasting`). A possible bug: kept in generation and
    shown every campaign, never `unsupported`; not asked again of this build. TVM 0.27
    raises on 1,026 pairs x opsets: asking them again took a two-build campaign 164 s before
    its first test, every time; cached, 4 s."""
    crashes: dict[str, dict[str, str]] = Field(default_factory=dict)
    """op -> dtype -> `crash` or `timeout`, where the last probe ended so. Seen once, the
    machine may be to blame: asked again next time, and `failed` when it ends the same way
    again (a crash restarts the worker, and a TVM worker takes 4 to 12 s to start); a probe
    that then passes clears it. A pair both here and in `failed` is shown with this status."""
    from_base: int = 0
    """Pairs taken from base's answers, unasked, since the change touched none of their ops
    (`FromBase`)."""

    def known(self, op: str, dtype: DType) -> bool:
        return (
            dtype in self.supported.get(op, [])
            or dtype.value in self.unsupported.get(op, {})
            or dtype.value in self.failed.get(op, {})
        )

    def copy_answer(self, into: SupportMatrix, op: str, dtype: DType) -> None:
        """This matrix's answer for (op, dtype), which it knows, written into `into`."""
        if dtype in self.supported.get(op, []):
            into.supported.setdefault(op, []).append(dtype)
        elif dtype.value in self.failed.get(op, {}):
            into.failed.setdefault(op, {})[dtype.value] = self.failed[op][dtype.value]
            if (status := self.crashes.get(op, {}).get(dtype.value)) is not None:
                into.crashes.setdefault(op, {})[dtype.value] = status
        else:
            into.unsupported.setdefault(op, {})[dtype.value] = self.unsupported[op][dtype.value]

    def declined(self) -> int:
        """How many pairs the build itself refused: the generator's UNPLACEABLE are no answer of it."""
        return sum(message != UNPLACEABLE for by_dtype in self.unsupported.values() for message in by_dtype.values())

    def support(self) -> Support:
        return {op: set(dtypes) for op, dtypes in self.supported.items() if dtypes}


def build_stem(info: BackendInfo, build_id: str = "") -> str:
    """What names one build in the cache. `build_id` (workspace.PreparedSide.build_id) keys a
    build fuzzbot made; without it the interpreter's path stands for the build, so two venvs
    of one release stay apart."""
    where = build_id or f"python-{hashlib.sha256(info.executable.encode()).hexdigest()[:10]}"
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{info.name}-{info.version}-{info.commit or 'release'}-{where}")


def cache_path(cache_dir: Path, info: BackendInfo, opset: int, build_id: str = "") -> Path:
    return cache_dir / "support" / f"{build_stem(info, build_id)}-opset{opset}.json"


def shared_support(matrices: list[SupportMatrix]) -> tuple[Support, dict[str, list[str]]]:
    """What every side runs, and what only the last (head) does: op -> its dtypes."""
    supports = [m.support() for m in matrices]
    both: Support = {}
    for op, dtypes in supports[-1].items():
        common = set(dtypes).intersection(*(s.get(op, set()) for s in supports[:-1]))
        if common:
            both[op] = common
    return both, only_in(supports[-1], both)


def beyond(support: Support, both: Support) -> Support:
    """What `support` runs that `both` does not, op by op."""
    return {op: dtypes - both.get(op, set()) for op, dtypes in support.items() if dtypes - both.get(op, set())}


def only_in(support: Support, both: Support) -> dict[str, list[str]]:
    """op -> the dtypes `support` runs beyond `both`, by name (summary.json)."""
    return {op: sorted(d.value for d in dtypes) for op, dtypes in beyond(support, both).items()}


PYTHON_TYPE_ERRORS = re.compile(r"unsupported operand type|not supported between instances|unsupported format")
"""Python's own words for a TypeError, which the fallback's "unsupported" would take for a
declared limit: a converter that divides two strings (a mutant of onnx2torch's node naming)
is broken, not limited, and a probe that took it so left nothing to generate."""


EXPANDED_OP = re.compile(r"operator \((\w+)\)")
"""How onnxruntime names the op a type error is in: where that op is not in the probe's model,
the build expanded the probed op's function body for want of a kernel, and the body did not
type (a bfloat16 Clip at opsets 13 to 15 becomes a Where that takes no bfloat16 before
Where-16). The build has no form of the op for that dtype: a limit, as a missing kernel is."""


def is_unsupported(result: RunResult, written: frozenset[str] = frozenset()) -> bool:
    """`written`: the op types of the model that gave `result`, when known."""
    if result.status is Status.unsupported:
        return True
    if result.status is not Status.error or PYTHON_TYPE_ERRORS.search(result.message):
        return False
    named = EXPANDED_OP.search(result.message)
    if written and named is not None and named.group(1) not in written:
        return True
    return bool(UNSUPPORTED_FALLBACK.search(result.message))


def _probe_one(
    client: WorkerClient, op: str, dtype: DType, opset: int, asked: ProbeModels
) -> list[tuple[RunResult, frozenset[str]]]:
    """Run up to PROBE_MODELS single-op models of this combination, until one runs; one
    model is not enough, as arity, rank and attributes change which kernel is needed (a
    one-input Mean is optimized away, a two-input one needs a kernel; TVM declines a 3-D
    Resize and runs a 4-D one). Each result comes with the op types its model writes."""
    results: list[tuple[RunResult, frozenset[str]]] = []
    for case in asked.asking(op, dtype, opset):
        client.submit(case.model, case.inputs)
        results.append((client.collect(), case.ops))
        if len(results) == PROBE_MODELS or results[-1][0].status is Status.ok:
            break
    return results


def probe_models(op: str, dtype: DType, opset: int) -> Iterator[ProbeModel]:
    """The single-op models that ask a build about (op, dtype), in the order asked."""
    return ProbeModels(None).asking(op, dtype, opset)


def declared_lossy(spec: BackendSpec) -> dict[str, str]:
    """The dtypes a built-in adapter narrows by design (dtype -> why): recorded as unsupported
    without a probe; a plugin is never imported here, so it declares none."""
    return {} if spec.plugin else dict(getattr(adapter_class(spec.adapter), "lossy_dtypes", {}))


def probe_support(
    client: WorkerClient,
    info: BackendInfo,
    opset: int,
    cache_dir: Path,
    on_failure: Callable[[ProbeFailure], None],
    on_progress: Callable[[int, int], None] | None = None,
    ops: list[str] | None = None,
    lossy: dict[str, str] | None = None,
    build_id: str = "",
) -> SupportMatrix:
    """The support matrix of the backend behind `client`, from the cache where it has it."""
    found = probe_opsets(client, info, [opset], cache_dir, on_failure, on_progress, ops, lossy, build_id)
    return found[opset]


@dataclass(frozen=True)
class FromBase:
    """Base's cached answers, and the op types the change between base and head can have
    touched (bot.campaign.hint.touched_ops): head is asked about those, and takes base's
    answer for every pair whose ops the change left alone. A PR's head is a new build, and a
    TVM build takes minutes to answer every pair."""

    matrices: dict[int, SupportMatrix]
    touched: frozenset[str]

    def lend(self, into: SupportMatrix, op: str, dtype: DType) -> bool:
        """Copy base's answer for (op, dtype) into head's matrix, if the change left its ops alone."""
        base = self.matrices.get(into.opset)
        if base is None or not base.known(op, dtype) or self.touched & set(registry()[op].support_ops()):
            return False
        base.copy_answer(into, op, dtype)
        into.from_base += 1
        return True


def cached_matrices(
    cache_dir: Path, info: BackendInfo, opsets: Sequence[int], build_id: str
) -> dict[int, SupportMatrix]:
    """A build's answers as its cache holds them: what it ran, refused or failed for good, and
    the crashes and timeouts seen once (`crashes`), which are asked again."""
    return {o: _cached(cache_path(cache_dir, info, o, build_id), info, o) for o in opsets}


def probe_opsets(
    client: WorkerClient,
    info: BackendInfo,
    opsets: Sequence[int],
    cache_dir: Path,
    on_failure: Callable[[ProbeFailure], None],
    on_progress: Callable[[int, int], None] | None = None,
    ops: list[str] | None = None,
    lossy: dict[str, str] | None = None,
    build_id: str = "",
    from_base: FromBase | None = None,
    asked: ProbeModels | None = None,
    stop: threading.Event | None = None,
) -> dict[int, SupportMatrix]:
    """The backend's support matrix at each of `opsets`, each cached as `probe_support` caches
    one. A combination is probed once per version of its ops (`kernels_at`): at another opset
    where every op the spec writes has the same version, the build looks up the same kernels,
    so the answer is lent; ops with a function body are probed at every opset. What failed
    unexpectedly is kept in generation, never cached as declined. `from_base`: head of a change takes
    base's answers for what the change did not touch. `asked`: the models, shared with a
    build probed at the same time; `stop`: set when that probe's caller gives up, and this one
    stops before its next pair."""
    matrices = cached_matrices(cache_dir, info, opsets, build_id)
    todo = {o: _todo(matrices[o], ops, lossy or {}) for o in opsets}
    asked = asked if asked is not None else ProbeModels(cache_dir)
    total, done = sum(len(t) for t in todo.values()), 0
    unexpected: dict[int, list[tuple[str, DType]]] = {o: [] for o in opsets}
    reported: set[tuple[int, str, str]] = set()
    for o in opsets:
        for op, dtype in todo[o]:
            if stop is not None and stop.is_set():
                return matrices
            if on_progress is not None:
                on_progress(done, total)
            done += 1
            if (from_base is not None and from_base.lend(matrices[o], op, dtype)) or _lend(matrices, o, op, dtype):
                continue
            failure = _probe_pair(client, matrices[o], op, dtype, asked)
            if failure is not None:
                on_failure(failure)
                reported.add((o, op, dtype.value))
            if not _settle(matrices[o], op, dtype, failure):
                unexpected[o].append((op, dtype))
        if todo[o]:
            _save(cache_path(cache_dir, info, o, build_id), matrices[o])
            asked.keep(o)
    for o in opsets:  # kept in generation: a possible bug, never a declined pair
        for op, by_dtype in matrices[o].failed.items():
            for d, message in by_dtype.items():
                if (o, op, d) not in reported:
                    status = matrices[o].crashes.get(op, {}).get(d, Status.error.value)
                    on_failure(ProbeFailure(op=op, dtype=DType(d), status=status, message=message))
                unexpected[o].append((op, DType(d)))
    for o, pairs in unexpected.items():
        for op, dtype in pairs:
            matrices[o].supported.setdefault(op, []).append(dtype)
    return matrices


def _settle(matrix: SupportMatrix, op: str, dtype: DType, failure: ProbeFailure | None) -> bool:
    """Whether the pair's answer is settled in `matrix` (cached): an answer, an error the build
    raised, or a crash or timeout seen a second time; else it is asked again next time."""
    crashes = matrix.crashes.setdefault(op, {})
    seen = crashes.pop(dtype.value, None)
    if failure is not None and failure.status in (Status.crash.value, Status.timeout.value):
        crashes[dtype.value] = failure.status
    if not crashes:
        del matrix.crashes[op]
    if failure is None:
        return True
    if lasting(failure) or seen == failure.status:
        matrix.failed.setdefault(op, {})[dtype.value] = failure.message
        return True
    return False


def lasting(failure: ProbeFailure) -> bool:
    """An error the build raised on the model, which asking again would only repeat: cached.
    A crash, a timeout or memory running out may be the machine's, and is asked again."""
    return failure.status == Status.error.value and "out of memory" not in failure.message


def _cached(path: Path, info: BackendInfo, opset: int) -> SupportMatrix:
    if path.exists():
        try:
            cached = SupportMatrix.model_validate_json(path.read_text())
            if cached.probe_format >= PROBE_FORMAT:
                return cached
        except ValueError:
            path.unlink()  # a damaged cache is re-probed, not trusted
    fresh = SupportMatrix(backend=info.name, version=info.version, commit=info.commit, opset=opset)
    return fresh.model_copy(update={"probe_format": PROBE_FORMAT})


def _todo(matrix: SupportMatrix, ops: list[str] | None, lossy: dict[str, str]) -> list[tuple[str, DType]]:
    """The combinations `matrix` does not know yet; the lossy dtypes are recorded unsupported."""
    todo: list[tuple[str, DType]] = []
    for spec in op_specs(ops, matrix.opset):
        for d in spec.dtypes:
            if d.value in lossy:  # narrowed by design: documented, not probed
                matrix.unsupported.setdefault(spec.op_type, {})[d.value] = lossy[d.value]
                if d in matrix.supported.get(spec.op_type, []):
                    matrix.supported[spec.op_type].remove(d)
            elif not matrix.known(spec.op_type, d):
                todo.append((spec.op_type, d))
    return todo


@functools.cache
def kernels_at(op: str, opset: int) -> tuple[int, ...] | None:
    """What decides whether a build runs a spec's single-op model at `opset`, where the model's
    opset alone does not: the versions of the ops it writes. None where that is not all: an op
    missing there, or one that has a function body, which a build without a kernel for the
    dtype may expand instead, in the ops of the model's opset (onnxruntime 1.31 runs a float64
    LeakyRelu-16 at opset 17 and refuses it at 21)."""
    versions = []
    for name in registry()[op].support_ops():
        try:
            schema = onnx.defs.get_schema(name, opset, "")
        except onnx.defs.SchemaError:
            return None
        # has_function and has_context_dependent_function are missing from onnx's type stubs
        if any(getattr(schema, flag) for flag in ("has_function", "has_context_dependent_function")):
            return None
        versions.append(schema.since_version)
    return tuple(versions)


def _lend(matrices: dict[int, SupportMatrix], opset: int, op: str, dtype: DType) -> bool:
    """Copy the answer another opset's matrix has for the same op versions, if any."""
    mine = kernels_at(op, opset)
    if mine is None:
        return False
    for other, donor in matrices.items():
        if other == opset or not donor.known(op, dtype) or kernels_at(op, other) != mine:
            continue
        if donor.unsupported.get(op, {}).get(dtype.value) == UNPLACEABLE:
            continue  # the generator's answer at that opset, not the build's: the kernels say nothing of it
        donor.copy_answer(matrices[opset], op, dtype)
        return True
    return False


def _probe_pair(
    client: WorkerClient, matrix: SupportMatrix, op: str, dtype: DType, asked: ProbeModels
) -> ProbeFailure | None:
    """Probe one combination into `matrix`; a failure that does not say "unsupported" is
    returned instead (a possible bug, never recorded)."""
    results = _probe_one(client, op, dtype, matrix.opset, asked)
    if not results:  # generation never draws it either; kept, so no later run spends the seeds again
        matrix.unsupported.setdefault(op, {})[dtype.value] = UNPLACEABLE
        return None
    result = results[-1][0]
    if result.status is Status.ok:
        matrix.supported.setdefault(op, []).append(dtype)
    elif all(is_unsupported(r, written) for r, written in results):
        matrix.unsupported.setdefault(op, {})[dtype.value] = result.message.strip().splitlines()[0][:300]
    else:
        result = next(r for r, written in results if not is_unsupported(r, written))
        return ProbeFailure(op=op, dtype=dtype, status=result.status.value, message=_summary(result))
    return None


def _save(path: Path, matrix: SupportMatrix) -> None:
    """Written whole: what the backend ran, refused or failed for good, and the crashes seen
    once, asked again next time (`crashes`)."""
    write_whole(path, matrix.model_dump_json(indent=1))


def _summary(result: RunResult) -> str:
    text = result.message or result.stderr_tail or (result.signal or "")
    lines = [line for line in text.strip().splitlines() if line.strip()]
    where = f"{result.stage.value}: " if result.stage else ""
    return where + (lines[0][:200] if lines else result.status.value)
