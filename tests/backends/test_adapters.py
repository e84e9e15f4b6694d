"""Every installable adapter on real generated models, in real worker processes:
onnxruntime, TVM (Relax), OpenVINO, torch.compile and the example plugin. TensorRT
runs only where a CUDA device exists; elsewhere it must say why in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from backends.adapters.base import adapter_snippet
from backends.client import BackendUnavailable, WorkerClient
from backends.reference import run_reference
from backends.results import Stage, Status
from backends.spec import BackendSpecError, adapter_class, parse_backend
from bot.findings.bundle import write_bundle
from oracles.verdict import Verdict, judge
from tests.cases import stable_cases
from tests.conftest import CliResult
from tests.paths import ROOT

pytestmark = [pytest.mark.worker]

PLUGIN = "examples/plugin_backend.py:OnnxReferenceAdapter"
"""A plugin given as a file: copied alone into each worker's scratch folder."""
PLUGIN_NAME = f"{ROOT / 'examples' / 'plugin_backend.py'}:OnnxReferenceAdapter"


class Pool:
    """One worker per backend spec for the whole module: starting TVM or torch costs seconds."""

    def __init__(self) -> None:
        self.clients: dict[str, WorkerClient] = {}

    def __call__(self, backend: str) -> WorkerClient:
        if backend not in self.clients:
            self.clients[backend] = WorkerClient(parse_backend(backend), timeout_s=120)
            self.clients[backend].start()
        return self.clients[backend]


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    p = Pool()
    yield p
    for client in p.clients.values():
        client.close()


def _model(node: onnx.NodeProto, dtype: int, shape: list[int], domain: str = "") -> bytes:
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", dtype, shape)],
        [helper.make_tensor_value_info("y", dtype, shape)],
    )
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    data: bytes = helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()
    return data


@pytest.mark.parametrize(
    ("backend", "count"),
    [
        ("onnxruntime:disable", 3),
        ("tvm:O0", 3),
        ("tvm:default", 3),
        ("openvino:performance", 3),
        ("openvino:accuracy", 3),
        ("torch.compile:aot_eager", 3),
        ("torch.compile:default", 1),
        (f"{PLUGIN}:checked", 3),
    ],
)
def test_adapter_runs_generated_models_and_agrees_with_the_reference(pool: Pool, backend: str, count: int) -> None:
    client = pool(backend)
    info = client.info
    assert info is not None and info.version and info.protocol == 2
    for case in stable_cases(count):
        result = client.run(case.model.SerializeToString(), case.inputs)
        assert result.status is Status.ok, (backend, case.seed, result.message, result.stderr_tail[-500:])
        assert result.backend == info
        assert result.compile_s is not None and result.run_s is not None
        j = judge(result, run_reference(case.model, case.inputs), "stable ops")
        assert j.verdict is Verdict.pass_, (backend, case.seed, j.message)


@pytest.mark.parametrize("backend", ["tvm:O0", "openvino:performance", "onnxruntime:all"])
def test_shape_outputs_come_back_as_int64_tensors(pool: Pool, backend: str) -> None:
    """TVM's VM returns a Shape result as a tuple of ints, not a tensor; every adapter must
    still hand back the int64 tensor ONNX defines."""
    node = helper.make_node("Shape", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    result = pool(backend).run(model.SerializeToString(), {"x": np.zeros((3, 5), np.float32)})
    assert result.status is Status.ok, result.message
    assert result.outputs["y"].dtype == np.int64 and result.outputs["y"].tolist() == [3, 5]


@pytest.mark.parametrize(
    ("backend", "commit_len"), [("onnxruntime:disable", 7), ("tvm:O0", 9), ("openvino:performance", 11)]
)
def test_handshake_reports_the_build_commit(pool: Pool, backend: str, commit_len: int) -> None:
    client = pool(backend)
    assert client.info is not None
    assert client.info.commit is not None and len(client.info.commit) >= commit_len
    assert client.info.executable == sys.executable
    assert client.handshake["unsupported"] == list(adapter_class(parse_backend(backend).adapter).unsupported)


UNSUPPORTED = [
    # onnxruntime has no float64 Softplus kernel on CPU: NOT_IMPLEMENTED when the session is built
    ("onnxruntime:disable", _model(helper.make_node("Softplus", ["x"], ["y"]), TensorProto.DOUBLE, [3]), Stage.compile),
    # the Relax ONNX frontend has no converter for LpNormalization
    ("tvm:O0", _model(helper.make_node("LpNormalization", ["x"], ["y"]), TensorProto.FLOAT, [2, 3]), Stage.import_),
    # OpenVINO's ONNX frontend knows no custom-domain op
    (
        "openvino:performance",
        _model(helper.make_node("Frob", ["x"], ["y"], domain="x.y"), TensorProto.FLOAT, [3], "x.y"),
        Stage.import_,
    ),
]


@pytest.mark.parametrize(("backend", "model", "stage"), UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_declared_limitations_are_unsupported_never_bugs(pool: Pool, backend: str, model: bytes, stage: Stage) -> None:
    dtype = np.float64 if backend.startswith("onnxruntime") else np.float32
    shape = (2, 3) if backend.startswith("tvm") else (3,)
    result = pool(backend).run(model, {"x": np.ones(shape, dtype)})
    assert result.status is Status.unsupported, result.message
    assert result.stage is stage
    j = judge(result, {"y": np.ones(shape, dtype)}, "x")
    assert j.verdict is Verdict.unsupported and not j.verdict.is_bug


def test_a_model_newer_than_the_build_reads_is_unsupported(pool: Pool) -> None:
    """An IR version past what the build reads is its declared limit, not a crash of it."""
    model = onnx.load_model_from_string(_model(helper.make_node("Relu", ["x"], ["y"]), TensorProto.FLOAT, [3]))
    model.ir_version = 99
    result = pool("onnxruntime:disable").run(model.SerializeToString(), {"x": np.ones(3, np.float32)})
    assert result.status is Status.unsupported and "IR version" in result.message, result.message


def test_a_real_runtime_error_stays_an_error(pool: Pool) -> None:
    # Gather with an index far out of range is an invalid model input, not a declared limitation.
    node = helper.make_node("Gather", ["x", "i"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [helper.make_tensor("i", TensorProto.INT64, [1], [99])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    result = pool("onnxruntime:disable").run(model.SerializeToString(), {"x": np.ones(3, np.float32)})
    assert result.status is Status.error and result.stage is Stage.run
    assert judge(result, {"y": np.ones(1, np.float32)}, "Gather").verdict.is_bug


def test_tensorrt_is_unavailable_in_one_line_or_runs() -> None:
    spec = parse_backend("tensorrt")
    try:
        client = WorkerClient(spec, timeout_s=300)
        client.start()
    except BackendUnavailable as e:
        assert str(e).startswith("tensorrt: ") and "\n" not in str(e)
        pytest.skip(str(e))
    with client:
        for case in stable_cases(2):
            result = client.run(case.model.SerializeToString(), case.inputs)
            assert result.status is Status.ok, result.message
            assert judge(result, run_reference(case.model, case.inputs), "stable ops").verdict is Verdict.pass_


def test_spec_strings_for_every_backend() -> None:
    assert str(parse_backend("tvm:o0")) == "tvm:O0"
    assert str(parse_backend("tvm")) == "tvm:default"
    assert str(parse_backend("openvino")) == "openvino:performance"
    assert str(parse_backend("torch.compile:max-autotune")) == "torch.compile:max-autotune"
    assert parse_backend("onnxruntime:basic,threads=2").option_dict == {"threads": "2"}
    assert parse_backend("torch.compile").packages == ("generator",)
    plugin = parse_backend(f"{PLUGIN}:checked")
    assert plugin.plugin and plugin.level == "checked" and plugin.adapter == "plugin_backend:OnnxReferenceAdapter"
    assert str(plugin) == f"{PLUGIN_NAME}:checked" and parse_backend(str(plugin)) == plugin
    with pytest.raises(BackendSpecError, match=r"plugin file no/such\.py does not exist"):
        parse_backend("no/such.py:Adapter")
    with pytest.raises(BackendSpecError, match="valid levels: O0, default"):
        parse_backend("tvm:O3")
    with pytest.raises(BackendSpecError, match="valid options: provider, threads"):
        parse_backend("onnxruntime,gpu=1")
    with pytest.raises(BackendSpecError, match=r"valid backends: onnxruntime, openvino, tensorrt, torch\.compile, tvm"):
        parse_backend("onnxrutime:all")


def test_plugin_level_is_checked_by_its_worker() -> None:
    with pytest.raises(BackendSpecError, match="valid levels: default, checked"):
        WorkerClient(parse_backend(f"{PLUGIN}:fast")).start()
    with WorkerClient(parse_backend(PLUGIN)) as client:
        assert client.level == "default"
        assert client.info is not None and client.info.name == "onnx-reference"


REPRO_CHECK = """
import sys
import numpy as np
import onnx

{snippet}

model = open(sys.argv[1], "rb").read()
inputs = dict(np.load(sys.argv[2]))
expected = dict(np.load(sys.argv[3]))
got = run(model, inputs)
assert sorted(got) == sorted(expected), (sorted(got), sorted(expected))
for k in expected:
    np.testing.assert_allclose(np.asarray(got[k], dtype="f8"), expected[k].astype("f8"), rtol=1e-3, atol=1e-3)
print("same")
"""


@pytest.mark.parametrize(
    "backend",
    ["tvm:default", "tvm:inference", "onnxruntime:parallel,threads=3", "openvino:accuracy", f"{PLUGIN}:checked"],
)
def test_repro_snippets_run_standalone(backend: str, tmp_path: Path) -> None:
    spec = parse_backend(backend)
    (case,) = stable_cases(1)
    write_bundle(tmp_path, case.model, case.inputs, run_reference(case.model, case.inputs))
    script = tmp_path / "check.py"
    if spec.plugin_file:
        module, _, cls = spec.adapter.partition(":")
        snippet = adapter_snippet(module, cls, spec.level, str(Path(spec.plugin_file).parent))
    else:
        snippet = adapter_class(spec.adapter).repro_snippet(spec.level, spec.option_dict)
    script.write_text(REPRO_CHECK.format(snippet=textwrap.dedent(snippet)))
    files = [str(tmp_path / n) for n in ("model.onnx", "inputs.npz", "reference.npz")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the plugin's `backends`
    done = subprocess.run([sys.executable, str(script), *files], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0 and "same" in done.stdout, done.stderr[-2000:]


@pytest.mark.parametrize(
    ("backend", "intra", "inter"),
    [
        ("onnxruntime:all", 1, 1),
        ("onnxruntime:all,threads=4", 4, 1),
        ("onnxruntime:parallel", 2, 2),
        ("onnxruntime:parallel,threads=3", 3, 2),
    ],
)
def test_an_onnxruntime_repro_runs_the_threads_the_campaign_ran(backend: str, intra: int, inter: int) -> None:
    """The adapter runs one intra-op thread unless `threads` says more (`parallel`: at least
    two, beside two inter-op threads); onnxruntime's own default is every core, so a repro
    that left the counts unset would run another configuration than the one that failed."""
    spec = parse_backend(backend)
    snippet = adapter_class(spec.adapter).repro_snippet(spec.level, spec.option_dict)
    assert f"so.intra_op_num_threads = {intra}" in snippet and f"so.inter_op_num_threads = {inter}" in snippet
    adapter = adapter_class(spec.adapter)(spec.option_dict)
    session = adapter.compile(stable_cases(1)[0].model.SerializeToString(), spec.level)
    options = session.get_session_options()
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (intra, inter)


def test_run_prints_one_row_per_backend(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    (case,) = stable_cases(1)
    write_bundle(tmp_path, case.model, case.inputs, run_reference(case.model, case.inputs))
    backends = ["onnxruntime:all", "tvm:O0", "openvino", PLUGIN, "tensorrt"]
    r = cli("run", str(tmp_path), "--json", *[a for b in backends for a in ("--backend", b)])
    rows = json.loads(r.out)["results"]
    assert [row["backend"] for row in rows] == [
        "onnxruntime:all",
        "tvm:O0",
        "openvino:performance",
        f"{PLUGIN_NAME}:default",
        "tensorrt:default",
    ]
    for row in rows[:4]:
        assert row["status"] == "ok" and row["verdict"] == "pass", row
        assert row["max_abs"] is not None and row["max_abs"] < 1e-3 and row["seconds"] > 0
    if rows[4]["status"] == "unavailable":  # no GPU here: a row saying why, and exit 1
        assert rows[4]["message"] == "tensorrt: no CUDA device" and r.code == 1
    table = cli("run", str(tmp_path), "--backend", "onnxruntime:disable", "--backend", f"{PLUGIN}:checked")
    assert table.code == 0, table.err
    assert "OnnxReferenceAdapter:checked" in table.out and "max_abs" in table.out and table.out.count("pass") == 2


def test_torch_compile_runs_a_constant_of_shape_and_declines_4_bit_and_float8_weights(pool: Pool) -> None:
    """Two ways fuzzbot's own torch module builder, not torch, made a torch.compile finding:
    ConstantOfShape's value converted with numpy inside the traced forward (Dynamo asserts,
    "Expected np.nditer base": a 4-minute `dynamic` hunt's one finding), and a Q/DQ pair's
    int4 or float8 zero point, which a buffer cannot hold. The first now runs; the second is
    declined in the words the adapter reads as unsupported."""
    value = helper.make_tensor("v", TensorProto.INT64, [1], [7])
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], value=value)
    shape, out = (
        helper.make_tensor_value_info("s", TensorProto.INT64, [1]),
        helper.make_tensor_value_info("y", TensorProto.INT64, None),
    )
    graph = helper.make_graph([node], "g", [shape], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    result = pool("torch.compile:default").run(model, {"s": np.array([3], np.int64)})
    assert result.status is Status.ok, result.message
    assert result.outputs["y"].tolist() == [7, 7, 7]
    zero = numpy_helper.from_array(np.array(0, ml_dtypes.int4), "z")
    scale = numpy_helper.from_array(np.array(0.5, np.float32), "sc")
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sc", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "sc", "z"], ["y"]),
    ]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in "xy"]
    qdq = helper.make_model(
        helper.make_graph(nodes, "g", [io[0]], [io[1]], [zero, scale]), opset_imports=[helper.make_opsetid("", 21)]
    )
    qdq.ir_version = 10
    declined = pool("torch.compile:default").run(qdq.SerializeToString(), {"x": np.ones(3, np.float32)})
    assert declined.status is Status.unsupported and "INT4" in declined.message, declined.message
