"""Support probing against the real onnxruntime, its cache, and unexpected failures."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import onnx
import pytest

from backends.client import WorkerClient
from backends.faults import FaultSpec
from backends.results import BackendInfo
from backends.spec import parse_backend
from bot.files import write_whole
from bot.sides.probe import (
    PROBE_FORMAT,
    UNPLACEABLE,
    FromBase,
    ProbeFailure,
    SupportMatrix,
    cache_path,
    probe_models,
    probe_opsets,
    probe_support,
)
from bot.sides.probe_models import ProbeModels
from generator.api import GenConfig, generate
from generator.dtypes import DType
from generator.ops import registry

pytestmark = [pytest.mark.worker]


@pytest.fixture(scope="module")
def ort_matrix(tmp_path_factory: pytest.TempPathFactory) -> tuple[SupportMatrix, Path, list[ProbeFailure]]:
    cache = tmp_path_factory.mktemp("cache")
    failures: list[ProbeFailure] = []
    with WorkerClient(parse_backend("onnxruntime:all")) as client:
        assert client.info is not None
        matrix = probe_support(client, client.info, 17, cache, failures.append)
        (cache / "executable").write_text(client.info.executable)
    return matrix, cache, failures


def test_onnxruntime_runs_common_pairs_and_refuses_known_gaps(
    ort_matrix: tuple[SupportMatrix, Path, list[ProbeFailure]],
) -> None:
    matrix, _, failures = ort_matrix
    assert DType.float32 in matrix.supported["Add"]
    assert DType.float32 in matrix.supported["Conv"]
    # onnxruntime's CPU provider lacks kernels for many int8/uint8/float16 combinations.
    answers = [msg for by_dtype in matrix.unsupported.values() for msg in by_dtype.values()]
    refused = [msg for msg in answers if msg != UNPLACEABLE]  # those the build gave, not the generator
    assert len(refused) >= 5 and matrix.declined() == len(refused)
    # a missing kernel, or a recurrent kernel's own refusal ("GRU operator does not support double yet")
    assert all("NOT_IMPLEMENTED" in m or "implementation" in m or "does not support" in m for m in refused), refused
    assert not failures, failures


def test_the_cache_is_keyed_by_build_and_reused(ort_matrix: tuple[SupportMatrix, Path, list[ProbeFailure]]) -> None:
    matrix, cache, _ = ort_matrix
    files = list((cache / "support").glob("*.json"))
    assert len(files) == 1 and "onnxruntime-" in files[0].name and "opset17" in files[0].name
    stored = json.loads(files[0].read_text())
    assert stored["version"] == matrix.version
    # A client that was never started can answer only from the cache.
    idle = WorkerClient(parse_backend("onnxruntime:all"))
    try:
        from backends.results import BackendInfo

        python = (cache / "executable").read_text()
        info = BackendInfo(name=matrix.backend, level="all", version=matrix.version, commit=matrix.commit)
        info = info.model_copy(update={"executable": python})
        again = probe_support(idle, info, 17, cache, lambda f: pytest.fail(f"probed again: {f}"))
    finally:
        idle.close()
    assert again.supported == matrix.supported
    assert cache_path(cache, info, 17) == files[0]
    # Another interpreter of the same release is another build: it gets its own matrix.
    other = info.model_copy(update={"executable": python + "-other"})
    assert cache_path(cache, other, 17) != files[0]


def test_generation_draws_only_supported_pairs(ort_matrix: tuple[SupportMatrix, Path, list[ProbeFailure]]) -> None:
    matrix, _, _ = ort_matrix
    support = matrix.support()
    for seed in range(30):
        case = generate(seed, GenConfig(values="none"), support=support)
        assert all(n.op_type in support for n in case.model.graph.node)
    assert not any(n.op_type == "Mean" and False for n in case.model.graph.node)


def test_an_unexpected_probe_failure_is_reported_and_never_cached(tmp_path: Path) -> None:
    """A worker that segfaults on some models: those probes are crashes, shown to the
    caller, kept in generation, and absent from the cache file."""
    failures: list[ProbeFailure] = []
    fault: FaultSpec = {"kind": "segv", "every": 3}
    ops = ["Add", "Sub", "Relu", "Abs", "Transpose"]
    with WorkerClient(parse_backend("onnxruntime:all"), fault=fault) as client:
        assert client.info is not None
        matrix = probe_support(client, client.info, 17, tmp_path, failures.append, ops=ops)
    assert failures and all(f.status == "crash" for f in failures)
    stored = SupportMatrix.model_validate_json(next((tmp_path / "support").glob("*.json")).read_text())
    for f in failures:
        assert f.dtype in matrix.supported[f.op]
        assert f.dtype not in stored.supported.get(f.op, [])
        assert f.dtype.value not in stored.unsupported.get(f.op, {})


def test_a_crash_seen_again_at_the_next_probe_is_cached_and_one_not_seen_again_is_cleared(tmp_path: Path) -> None:
    """A crash may be the machine's, so one is asked again at the next campaign on the build;
    the same crash twice is the build's, cached as failed, so a third campaign does not pay
    a worker restart for it (a TVM worker takes 4 to 12 s to start). A crash that does not
    come back was the machine's: the second probe's answer is kept."""
    ops = ["Add", "Sub", "Relu", "Abs", "Transpose"]
    spec = parse_backend("onnxruntime:all")

    infos: list[BackendInfo] = []

    def probe(cache: Path, fault: FaultSpec | None) -> tuple[SupportMatrix, list[ProbeFailure]]:
        failures: list[ProbeFailure] = []
        with WorkerClient(spec, fault=fault) as client:
            assert client.info is not None
            infos.append(client.info)
            return probe_support(client, client.info, 17, cache, failures.append, ops=ops), failures

    def stored(cache: Path) -> SupportMatrix:
        return SupportMatrix.model_validate_json(next((cache / "support").glob("*.json")).read_text())

    segv: FaultSpec = {"kind": "segv", "every": 3}
    first, crashed = probe(tmp_path / "twice", segv)
    assert crashed and {(f.op, f.dtype.value) for f in crashed} == {
        (op, d) for op, by_dtype in stored(tmp_path / "twice").crashes.items() for d in by_dtype
    }
    assert not stored(tmp_path / "twice").failed
    again, crashed_again = probe(tmp_path / "twice", segv)
    assert sorted(crashed_again, key=str) == sorted(crashed, key=str)
    settled = stored(tmp_path / "twice")
    assert {(op, d) for op, by_dtype in settled.failed.items() for d in by_dtype} == {
        (f.op, f.dtype.value) for f in crashed
    }
    assert again.support() == first.support(), "kept in generation either way"
    idle = WorkerClient(spec)  # never started: it can answer from the cache only
    try:
        shown: list[ProbeFailure] = []
        probe_support(idle, infos[0], 17, tmp_path / "twice", shown.append, ops=ops)
    finally:
        idle.close()
    assert sorted(shown, key=lambda f: (f.op, f.dtype.value)) == sorted(crashed, key=lambda f: (f.op, f.dtype.value))

    probe(tmp_path / "once", segv)
    _, clean = probe(tmp_path / "once", None)
    once = stored(tmp_path / "once")
    assert not clean and not once.crashes and not once.failed
    assert all(once.known(f.op, f.dtype) for f in crashed), "answered: run or declined"


def test_an_error_the_build_raises_is_cached_as_failed_kept_in_generation_and_shown_again(tmp_path: Path) -> None:
    """A build that raises an internal error on some probe models (TVM raises on a thousand
    pairs x opsets): the failure is shown and kept in generation, as any unexpected one,
    and cached as such, so the next campaign on that build neither asks again nor reads
    it as a declined pair."""
    failures: list[ProbeFailure] = []
    fault: FaultSpec = {"kind": "raise", "every": 3}
    ops = ["Add", "Sub", "Relu", "Abs", "Transpose"]
    with WorkerClient(parse_backend("onnxruntime:all"), fault=fault) as client:
        assert client.info is not None
        info = client.info
        matrix = probe_support(client, info, 17, tmp_path, failures.append, ops=ops)
    assert failures and all(f.status == "error" and "InternalError" in f.message for f in failures)
    stored = SupportMatrix.model_validate_json(next((tmp_path / "support").glob("*.json")).read_text())
    for f in failures:
        assert f.dtype in matrix.supported[f.op]  # kept in generation
        assert stored.failed[f.op][f.dtype.value] == f.message
        assert f.dtype not in stored.supported.get(f.op, []) and f.dtype.value not in stored.unsupported.get(f.op, {})
    again: list[ProbeFailure] = []
    idle = WorkerClient(parse_backend("onnxruntime:all"))  # never started: it can answer from the cache only
    try:
        cached = probe_support(idle, info, 17, tmp_path, again.append, ops=ops)
    finally:
        idle.close()
    assert sorted(again, key=str) == sorted(failures, key=str)
    assert cached.support() == matrix.support()


def test_lossy_dtypes_are_declared_unsupported_without_a_probe(tmp_path: Path) -> None:
    """A type the backend narrows by design is left out of generation with the adapter's
    reason, even when an earlier cache says the backend ran it."""
    ops = ["Add", "Relu"]
    with WorkerClient(parse_backend("onnxruntime:all")) as client:
        assert client.info is not None
        first = probe_support(client, client.info, 17, tmp_path, lambda f: None, ops=ops)
        assert DType.float64 in first.supported["Add"]
        lossy = {"float64": "computed in float32"}
        again = probe_support(client, client.info, 17, tmp_path, lambda f: None, ops=ops, lossy=lossy)
    assert DType.float64 not in again.supported["Add"]
    assert again.unsupported["Add"]["float64"] == "computed in float32"
    assert "float64" not in {d.value for d in again.support()["Relu"]}


def test_every_probe_model_asks_about_its_own_type() -> None:
    """A seed of the `wide_types` share starts from int16 or an unsigned type: a probe drawn
    with it asked a build about (Add, float32) with a uint16 model, and kept the answer as
    float32's. Every probe model holds its type at the op's key input."""
    asked = 0
    for op in ("Add", "Relu", "Transpose", "Gather"):
        spec = registry()[op]
        for dtype in (DType.float32, DType.int8, DType.int16, DType.uint32):
            if dtype not in spec.dtypes:
                continue
            for case in probe_models(op, dtype, 17):
                graph = onnx.load_from_string(case.model).graph
                node = next(n for n in graph.node if n.op_type == op)
                types = {v.name: v.type.tensor_type.elem_type for v in graph.input}
                types |= {t.name: t.data_type for t in graph.initializer}
                assert types.get(node.input[0]) == dtype.onnx, (op, dtype, case.seed)
                asked += 1
    assert asked >= 20


def test_a_matrix_of_an_older_probe_format_is_probed_again(tmp_path: Path) -> None:
    """A cache written before every probe model held its own type is not trusted: the
    matrix is probed again and saved in the current format."""
    with WorkerClient(parse_backend("onnxruntime:all")) as client:
        assert client.info is not None
        first = probe_support(client, client.info, 17, tmp_path, lambda f: None, ops=["Relu"])
        path = next((tmp_path / "support").glob("*.json"))
        assert json.loads(path.read_text())["probe_format"] == PROBE_FORMAT == first.probe_format
        stale = json.loads(path.read_text())
        del stale["probe_format"]
        stale["supported"]["Relu"] = ["int64"]  # an answer the old format could have cached
        path.write_text(json.dumps(stale))
        again = probe_support(client, client.info, 17, tmp_path, lambda f: None, ops=["Relu"])
    assert DType.int64 not in again.supported["Relu"] and DType.float32 in again.supported["Relu"]
    assert json.loads(path.read_text())["probe_format"] == PROBE_FORMAT


def test_python_s_own_type_errors_are_no_declared_limit() -> None:
    """A converter that divides two strings is broken: "unsupported operand type(s)" is Python
    speaking, not the build declining an op (a mutant of onnx2torch's node naming once left
    its probe with nothing to generate)."""
    from backends.results import RunResult, Status
    from bot.sides.probe import is_unsupported

    def error(message: str) -> RunResult:
        return RunResult(status=Status.error, message=message)

    assert not is_unsupported(error("TypeError: unsupported operand type(s) for /: 'str' and 'str'"))
    assert not is_unsupported(error("TypeError: '<' not supported between instances of 'str' and 'int'"))
    assert is_unsupported(error("NotImplementedError: Converter is not implemented (Clip, 6)"))
    assert is_unsupported(error("onnx: op Foo unsupported at this opset"))


def test_an_expanded_function_body_that_does_not_type_is_a_limit_of_the_build(tmp_path: Path) -> None:
    """onnxruntime 1.31 has no bfloat16 Clip kernel and expands Clip-13's function body instead,
    whose Where takes no bfloat16 before Where-16: the model is refused as invalid, naming a
    Where the probe never wrote. That is the build lacking the form, so it is recorded
    unsupported at opset 13 and the campaign never draws it; at opset 16 the same expansion
    lacks a Less kernel, which already read as a limit. A type error in an op the model does
    write stays a possible bug."""
    from backends.results import RunResult, Status
    from bot.sides.probe import is_unsupported

    invalid = "INVALID_GRAPH : Type Error: Type 'tensor(bfloat16)' of input parameter (c0) of operator (Where)"
    assert is_unsupported(RunResult(status=Status.error, message=invalid), frozenset({"Cast", "Clip"}))
    assert not is_unsupported(RunResult(status=Status.error, message=invalid), frozenset({"Cast", "Where"}))
    with WorkerClient(parse_backend("onnxruntime:all")) as client:
        failures: list[object] = []
        assert client.info is not None
        matrices = probe_opsets(client, client.info, [13], tmp_path, failures.append, ops=["Clip"])
    assert not failures and DType.bfloat16 not in matrices[13].supported["Clip"]
    assert DType.float32 in matrices[13].supported["Clip"]


def test_a_pair_no_seed_writes_alone_is_kept_and_never_asked(tmp_path: Path) -> None:
    """Mod takes bfloat16 from Mod-13, yet no seed writes a bfloat16 Mod alone: the pair is
    recorded as the generator's answer, so the next campaign does not spend the seeds on it
    again, and the build is never asked (the client here is never started)."""
    from bot.sides.probe import _probe_pair

    matrix = SupportMatrix(backend="onnxruntime", version="x", opset=16)
    idle = WorkerClient(parse_backend("onnxruntime:all"))
    assert _probe_pair(idle, matrix, "Mod", DType.bfloat16, ProbeModels(None)) is None
    assert matrix.unsupported["Mod"] == {"bfloat16": UNPLACEABLE} and idle.info is None
    assert matrix.declined() == 0, "summary.json counts the build's refusals, not the generator's"


def test_campaigns_sharing_a_cache_never_rename_each_others_files(tmp_path: Path) -> None:
    """Two campaigns on one cache folder (a benchmark's two modes, two checks on one
    runner) write the same support file: each through a temporary file of its own, so
    neither dies renaming one the other already renamed, and none is left behind."""
    path = tmp_path / "support" / "tvm-opset13.json"
    errors: list[OSError] = []

    def write(n: int) -> None:
        try:
            for i in range(300):
                write_whole(path, json.dumps({"writer": n, "i": i}))
        except OSError as e:
            errors.append(e)

    writers = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    assert not errors, errors[0]
    assert json.loads(path.read_text())["i"] == 299
    assert not list(path.parent.glob("*.tmp"))


def test_head_takes_base_answers_of_every_kind_for_the_ops_the_change_left_alone() -> None:
    """Supported, declined and failed alike (bot.sides.probe.FromBase); an op the change
    touched is asked of head."""
    base = SupportMatrix(backend="b", version="1", opset=17)
    base.supported["Relu"] = [DType.float32]
    base.unsupported["Relu"] = {"int8": "NOT_IMPLEMENTED"}
    base.failed["Relu"] = {"float16": "compile: InternalError: unknown intrinsic"}
    base.supported["Add"] = [DType.float32]
    lender = FromBase({17: base}, frozenset({"Add"}))
    head = SupportMatrix(backend="b", version="1", opset=17)
    assert all(lender.lend(head, "Relu", d) for d in (DType.float32, DType.int8, DType.float16))
    assert not lender.lend(head, "Add", DType.float32)  # touched: asked of head
    assert not lender.lend(head, "Relu", DType.float64)  # base never answered it
    assert head.supported == {"Relu": [DType.float32]} and head.unsupported == {"Relu": {"int8": "NOT_IMPLEMENTED"}}
    assert head.failed == base.failed and head.from_base == 3
    other = SupportMatrix(backend="b", version="1", opset=18)
    assert not lender.lend(other, "Relu", DType.float32)  # no answer of base's at that opset
