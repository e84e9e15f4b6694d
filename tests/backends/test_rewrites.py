"""Rewrite coverage read off each system's optimized graph, in real workers: the keys
onnxruntime, TVM and OpenVINO report for graphs whose rewrites are known, nothing at the
levels that rewrite nothing, a hook that fails never failing the run, and a campaign
counting what head reported into summary.json."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from backends.adapters.rewrites import message_parser, onnx_op_counts, rewrite_keys, wire_op_counts
from backends.adapters.tvm import fused_functions
from backends.client import WorkerClient
from backends.results import Status
from backends.spec import parse_backend
from tests.backends.test_tvm_releases import TVM_025
from tests.cases import stable_cases
from tests.conftest import CliResult
from tests.oracle_cases import old_ort_python
from tests.venvs import cached_venv

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

X = {"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)}


def _weights(name: str, shape: list[int]) -> onnx.TensorProto:
    values = np.linspace(-0.5, 0.5, int(np.prod(shape)), dtype=np.float32)
    return helper.make_tensor(name, TensorProto.FLOAT, shape, values)


def _matmul_then(*tail: onnx.NodeProto, extra: tuple[onnx.TensorProto, ...] = ()) -> bytes:
    """x[2,4] @ w[4,3], then `tail`, whose last node writes `y`."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), *tail]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [_weights("w", [4, 3]), *extra],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    data: bytes = model.SerializeToString()
    return data


MATMUL_ADD = _matmul_then(helper.make_node("Add", ["m", "b"], ["y"]), extra=(_weights("b", [3]),))
MATMUL_SCALE = _matmul_then(
    helper.make_node("Mul", ["m", "s"], ["y"]), extra=(helper.make_tensor("s", TensorProto.FLOAT, [], [0.5]),)
)
MATMUL_ADD_RELU = _matmul_then(
    helper.make_node("Add", ["m", "b"], ["a"]), helper.make_node("Relu", ["a"], ["y"]), extra=(_weights("b", [3]),)
)


class Workers:
    """One worker per (backend, interpreter) for the module: TVM takes seconds to start."""

    def __init__(self) -> None:
        self.clients: dict[tuple[str, str], WorkerClient] = {}

    def __call__(self, backend: str, python: str | None = None) -> WorkerClient:
        key = (backend, python or "")
        if key not in self.clients:
            spec = parse_backend(backend)
            self.clients[key] = WorkerClient(spec, python, timeout_s=120) if python else WorkerClient(spec)
            self.clients[key].start()
        return self.clients[key]


@pytest.fixture(scope="module")
def workers() -> Iterator[Workers]:
    pool = Workers()
    yield pool
    for client in pool.clients.values():
        client.close()


def _rewrites(workers: Workers, backend: str, model: bytes, python: str | None = None) -> dict[str, int]:
    result = workers(backend, python).run(model, X)
    assert result.status is Status.ok, (backend, result.message, result.stderr_tail[-500:])
    return result.rewrites


def test_onnxruntime_reports_the_gemm_it_makes_of_matmul_and_bias(workers: Workers) -> None:
    keys = _rewrites(workers, "onnxruntime:extended", MATMUL_ADD)
    assert keys["+ai.onnx::Gemm"] == 1 and keys["-ai.onnx::MatMul"] == 1 and keys["-ai.onnx::Add"] == 1
    assert _rewrites(workers, "onnxruntime:disable", MATMUL_ADD) == {}


def test_onnxruntime_reports_fused_matmul_for_a_scaled_matmul(workers: Workers) -> None:
    keys = _rewrites(workers, "onnxruntime:all", MATMUL_SCALE)
    assert keys.get("+com.microsoft::FusedMatMul") == 1, keys


def test_an_onnxruntime_release_without_onnx_reports_rewrites_too(workers: Workers) -> None:
    """Release venvs hold onnxruntime and numpy only: the optimized graph is read without onnx."""
    python = str(old_ort_python())
    keys = _rewrites(workers, "onnxruntime:extended", MATMUL_ADD, python)
    assert keys.get("+ai.onnx::Gemm") == 1, keys


@pytest.mark.parametrize("release", ["main", "0.25"])
def test_tvm_reports_fused_functions_at_default_and_none_at_o0(workers: Workers, release: str) -> None:
    python = str(cached_venv("tvm-0.25", TVM_025)) if release == "0.25" else None
    assert _rewrites(workers, "tvm:default", MATMUL_ADD_RELU, python) == {"tvm::fused_matmul_add_relu": 1}
    assert _rewrites(workers, "tvm:O0", MATMUL_ADD_RELU, python) == {}


def test_openvino_reports_the_layers_its_cpu_plugin_fused(workers: Workers) -> None:
    assert _rewrites(workers, "openvino:performance", MATMUL_ADD_RELU).get("+openvino::FullyConnected") == 1


def test_tvm_keys_drop_the_digits_that_keep_names_unique() -> None:
    text = (
        "@main:\n  call  fused_matmul1_add2 in: %0, c[1] dst: %2\n  call  fused_matmul_add in: %2, c[1] dst: %3\n"
        "  call  relu in: %3 dst: %4\n\n@fused_matmul1_add2 packed_func;\n\n@fused_matmul_add packed_func;\n"
        "\n@fused_strided_slice_tir_exp packed_func;\n"
    )
    assert fused_functions(text) == {"tvm::fused_matmul_add": 2, "tvm::fused_strided_slice_tir_exp": 1}


def _onnx_counts(model: onnx.ModelProto) -> Counter[str]:
    counts: Counter[str] = Counter()

    def walk(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            counts[f"{node.domain or 'ai.onnx'}::{node.op_type}"] += 1
            for a in node.attribute:
                for sub in [a.g] if a.HasField("g") else list(a.graphs):
                    walk(sub)

    walk(model.graph)
    return counts


def test_both_readers_count_what_onnx_counts_subgraphs_included() -> None:
    branch = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["o"], domain="")],
        "branch",
        [],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2, 4])],
    )
    cond = helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)
    graph = helper.make_graph(
        [cond],
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in (("c", TensorProto.BOOL, []), ("x", 1, [2, 4]))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
    )
    models = [helper.make_model(graph)] + [c.model for c in stable_cases(3)]
    assert message_parser() is not None  # this venv's protobuf builds the cut-down message class
    for model in models:
        assert onnx_op_counts(model.SerializeToString()) == _onnx_counts(model)
        assert wire_op_counts(model.SerializeToString()) == _onnx_counts(model)
    assert onnx_op_counts(models[0].SerializeToString())["ai.onnx::Relu"] == 2
    assert rewrite_keys({"a::X": 2, "a::Y": 1}, {"a::X": 1, "a::Z": 3}) == {"+a::Z": 3, "-a::X": 1, "-a::Y": 1}


FAILING_HOOK = """
from backends.adapters.base import Adapter


class Adapter_(Adapter):
    name = "failing-hook"
    levels = ("default",)
    default_level = "default"

    def info(self):
        return {"name": self.name, "version": "0", "commit": None}

    def compile(self, model, level):
        return model

    def rewrites(self, compiled):
        raise RuntimeError("no graph to read")

    def run(self, compiled, inputs):
        return {"y": inputs["x"] * 2}
"""


def test_a_failing_rewrites_hook_never_fails_the_run(tmp_path: Path) -> None:
    plugin = tmp_path / "failing_hook.py"
    plugin.write_text(FAILING_HOOK)
    with WorkerClient(parse_backend(f"{plugin}:Adapter_")) as client:
        result = client.run(MATMUL_ADD, X)
    assert result.status is Status.ok and result.rewrites == {}
    np.testing.assert_array_equal(result.outputs["y"], X["x"] * 2)


def test_a_campaign_counts_head_rewrites_into_summary_json(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    out = tmp_path / "out"
    r = cli("fuzz", "--out", str(out), "--max-tests", "8", "--no-probe", "--backend", "onnxruntime:all", "--json")
    assert r.code in (0, 2), r.err
    summary = json.loads((out / "summary.json").read_text())
    assert json.loads(r.out) == summary, "--json prints summary.json"
    assert sum(summary["coverage"]["patterns"].values()) > 0, "templates placed are counted"
    rewrites = summary["coverage"]["rewrites"]
    assert isinstance(rewrites, dict) and rewrites, summary["coverage"]
    assert all(k[0] in "+-" and "::" in k and 1 <= n <= summary["tests"] for k, n in rewrites.items())
    assert "rewrites fired:" in r.err
    assert "Rewrites fired:" in (out / "summary.md").read_text()
