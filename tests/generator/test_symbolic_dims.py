"""Symbolic input dims (GenConfig.symbolic_dims), on real builds: generated models that
declare `batch`/`sequence` as dim_param are valid (checker, strict shape inference), run
right on onnxruntime and TVM at the feeds' sizes, leave every other case byte for byte as
it was, and reduce to a static model unless the bug needs the dims unknown (a real TVM
0.25-0.27 crash does)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from backends.client import WorkerClient
from backends.faults import FaultSpec
from backends.reference import ReferenceError, run_reference
from backends.results import Status
from backends.spec import parse_backend
from bot.cases.input_check import InputMismatch, check_inputs
from bot.findings.bundle import Finding, load_bundle, write_bundle
from bot.findings.summary import Summary, symbolic_share
from bot.merge.outputs import merge_summaries
from generator.api import GenConfig, GeneratedCase, generate
from generator.coverage import Coverage
from generator.emit import is_runtime_constant, symbolic_dims
from oracles.signature import op_signature
from oracles.verdict import Verdict, judge
from reducers import edit
from reducers.candidate import Candidate
from tests.conftest import CliResult

pytestmark = [pytest.mark.worker, pytest.mark.campaign]

Cli = Callable[..., CliResult]

SEEDS = range(30)
ALWAYS = GenConfig(nodes=8, symbolic_dims=1.0)
TVM_CRASH = "emit_te now only supports Tensor that has ShapeExpr shape"
"""TVM 0.25-0.27 LegalizeOps on Sub([batch,1], [2,1]) then Div: the static model runs."""


@pytest.fixture(scope="module")
def symbolic_cases() -> list[GeneratedCase]:
    return [c for c in (generate(s, ALWAYS) for s in SEEDS) if c.symbolic]


def _static(case: GeneratedCase) -> onnx.ModelProto:
    made = edit.static_dims(Candidate(case.model, case.inputs))
    assert made is not None
    return made.model


def _names_hold(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> None:
    """Every dim_param is of size > 1 and has one size wherever it appears."""
    sizes: dict[str, set[int]] = {}
    for v in model.graph.input:
        for d, n in zip(v.type.tensor_type.shape.dim, inputs[v.name].shape, strict=True):
            if d.dim_param:
                sizes.setdefault(d.dim_param, set()).add(n)
    assert sizes, "no dim_param"
    assert all(len(held) == 1 and min(held) > 1 for held in sizes.values()), sizes


def _dims_of(v: onnx.ValueInfoProto) -> list[str | int | None]:
    """Declared dims, an unknown one (no value, no name, or inference's `unk__`) as None."""
    return [
        d.dim_value if d.HasField("dim_value") else (None if d.dim_param.startswith("unk__") else d.dim_param) or None
        for d in v.type.tensor_type.shape.dim
    ]


def test_symbolic_cases_are_valid_and_promise_only_true_equalities(symbolic_cases: list[GeneratedCase]) -> None:
    assert len(symbolic_cases) >= len(SEEDS) * 3 // 4
    roles: set[str] = set()
    for case in symbolic_cases:
        inferred = onnx.shape_inference.infer_shapes(case.model, check_type=True, strict_mode=True, data_prop=True)
        onnx.checker.check_model(inferred, full_check=True)
        _names_hold(case.model, case.inputs)
        check_inputs(case.model, case.inputs, "inputs.npz")
        declared = symbolic_dims(case.model)
        assert not any(is_runtime_constant(name) for name in declared)
        roles.update(p.rstrip("0123456789") for params in declared.values() for p in params)
        # The outputs claim what strict inference of the symbolic model gives, nothing static
        # beyond it, and name no dim inference could not tell (`unk__N`).
        by_name = {o.name: _dims_of(o) for o in inferred.graph.output}
        assert all(_dims_of(o) == by_name[o.name] for o in case.model.graph.output)
        outputs = case.model.graph.output
        assert not any(d.dim_param.startswith("unk__") for o in outputs for d in o.type.tensor_type.shape.dim)
    assert roles == {"batch", "sequence"}


def test_a_batch_output_is_declared_symbolic() -> None:
    x = helper.make_tensor_value_info("t0", TensorProto.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("t1", TensorProto.FLOAT, [3, 4])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["t0"], ["t1"])], "g", [x], [y]))
    from generator.emit import symbolic_names, with_symbolic_dims

    names = symbolic_names(model, {"t0": np.zeros((3, 4), np.float32)}, 2)
    made = with_symbolic_dims(model, names)
    assert made is not None
    dims = made.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims] == ["batch", "sequence"]


def test_same_seed_same_bytes_and_unchosen_cases_are_the_models_of_old() -> None:
    kinds = set()
    for seed in range(10):
        on = generate(seed, GenConfig(nodes=6))
        off = generate(seed, GenConfig(nodes=6, symbolic_dims=0))
        always = generate(seed, GenConfig(nodes=6, symbolic_dims=1.0))
        assert on.model.SerializeToString() == generate(seed, GenConfig(nodes=6)).model.SerializeToString()
        assert (
            always.model.SerializeToString()
            == generate(seed, GenConfig(nodes=6, symbolic_dims=1.0)).model.SerializeToString()
        )
        kinds.add(on.symbolic)
        if not on.symbolic:
            assert on.model.SerializeToString() == off.model.SerializeToString()
        if not always.symbolic:  # no leading dim above 1 to relax
            assert always.model.SerializeToString() == off.model.SerializeToString()
            continue
        # A symbolic model is the static one with its input dims relaxed: same nodes, weights, inputs.
        assert always.model.graph.node == off.model.graph.node
        assert always.model.graph.initializer == off.model.graph.initializer
        assert _static(always).graph.input == off.model.graph.input
        assert all(np.array_equal(always.inputs[k], off.inputs[k]) for k in off.inputs)
    assert kinds == {True, False}


def test_symbolic_cases_run_right_on_onnxruntime_and_tvm(symbolic_cases: list[GeneratedCase]) -> None:
    """Where a build runs the static twin right, the symbolic model never computes a wrong
    value; onnxruntime runs every one, TVM a share (the rest are its symbolic-dim bugs)."""
    static_passes = {"onnxruntime": 0, "tvm": 0}
    symbolic_passes = {"onnxruntime": 0, "tvm": 0}
    with (
        WorkerClient(parse_backend("onnxruntime"), timeout_s=60) as ort,
        WorkerClient(parse_backend("tvm"), timeout_s=120, compile_timeout_s=120) as tvm,
    ):
        for case in symbolic_cases[:16]:
            try:
                reference = run_reference(case.model, case.inputs)
            except ReferenceError:
                continue
            sig = op_signature(case.model)
            for name, client in (("onnxruntime", ort), ("tvm", tvm)):
                static = judge(client.run(_static(case).SerializeToString(), case.inputs), reference, sig)
                if static.verdict is not Verdict.pass_:
                    continue
                symbolic = judge(client.run(case.model.SerializeToString(), case.inputs), reference, sig)
                assert symbolic.verdict is not Verdict.wrong_result, (name, case.seed, symbolic.message)
                if name == "onnxruntime":
                    assert symbolic.verdict is Verdict.pass_, (case.seed, symbolic.message)
                static_passes[name] += 1
                symbolic_passes[name] += symbolic.verdict is Verdict.pass_
    assert static_passes["onnxruntime"] >= 10
    assert static_passes["tvm"] >= 4
    assert symbolic_passes["tvm"] >= max(2, static_passes["tvm"] // 3)


def _sub_div(batch: int | str, extra: bool = False) -> onnx.ModelProto:
    """The reduced TVM crash; `extra` adds a node the bug does not need."""
    nodes = [helper.make_node("Sub", ["x0", "x1"], ["t0"]), helper.make_node("Div", ["t0", "x2"], ["t1"])]
    outputs = [helper.make_tensor_value_info("t1", TensorProto.FLOAT, [2, 1])]
    if extra:
        nodes.append(helper.make_node("Neg", ["x1"], ["t2"]))
        outputs.append(helper.make_tensor_value_info("t2", TensorProto.FLOAT, [2, 1]))
    inputs = [
        helper.make_tensor_value_info("x0", TensorProto.FLOAT, [batch, 1]),
        helper.make_tensor_value_info("x1", TensorProto.FLOAT, [2, 1]),
        helper.make_tensor_value_info("x2", TensorProto.FLOAT, [1, 1]),
    ]
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


SUB_DIV_INPUTS = {
    "x0": np.full((2, 1), 3.0, np.float32),
    "x1": np.ones((2, 1), np.float32),
    "x2": np.full((1, 1), 2.0, np.float32),
}


def test_tvm_crashes_on_the_symbolic_model_only_and_it_is_a_bug() -> None:
    with WorkerClient(parse_backend("tvm"), timeout_s=120, compile_timeout_s=120) as tvm:
        static = tvm.run(_sub_div(2).SerializeToString(), SUB_DIV_INPUTS)
        symbolic = tvm.run(_sub_div("batch").SerializeToString(), SUB_DIV_INPUTS)
    assert static.status is Status.ok
    assert np.allclose(static.outputs["t1"], 1.0)
    assert symbolic.status is Status.error, symbolic.status  # not a declared limit
    assert TVM_CRASH in symbolic.message


def _bundle(
    tmp_path: Path, model: onnx.ModelProto, inputs: dict[str, np.ndarray], backend: str, fault: FaultSpec | None
) -> Path:
    with WorkerClient(parse_backend(backend), timeout_s=120, compile_timeout_s=120, fault=fault) as client:
        result = client.run(model.SerializeToString(), inputs)
    reference = run_reference(model, inputs)
    j = judge(result, reference, op_signature(model))
    assert j.verdict is Verdict.crash and result.backend is not None, j.message
    return write_bundle(tmp_path / "crash", model, inputs, reference, Finding(**dict(j), backend=result.backend))


def test_reducer_keeps_the_dims_a_real_tvm_crash_needs(cli: Cli, tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, _sub_div("batch", extra=True), SUB_DIV_INPUTS, "tvm", None)
    r = cli("reduce", str(bundle), "--budget", "120s", "--out", str(tmp_path / "small"))
    assert r.code == 0, r.err
    small = load_bundle(tmp_path / "small")
    assert [n.op_type for n in small.model.graph.node] == ["Sub", "Div"]
    assert symbolic_dims(small.model) == {small.model.graph.input[0].name: ["batch"]}
    repro = subprocess.run(
        [sys.executable, str(tmp_path / "small" / "repro.py")], capture_output=True, text=True, timeout=300
    )
    assert repro.returncode == 1 and "BUG:" in repro.stdout, repro.stdout + repro.stderr[-2000:]


def test_reducer_makes_dims_static_when_the_bug_ignores_them(cli: Cli, tmp_path: Path) -> None:
    case = next(c for c in (generate(s, GenConfig(nodes=4, symbolic_dims=1.0)) for s in range(3, 20)) if c.symbolic)
    fault: FaultSpec = {"kind": "segv", "every": 1}
    bundle = _bundle(tmp_path, case.model, case.inputs, "onnxruntime:all", fault)
    r = cli("reduce", str(bundle), "--test-fault", "segv", "--budget", "60s", "--out", str(tmp_path / "small"))
    assert r.code == 0, r.err
    small = load_bundle(tmp_path / "small")
    assert symbolic_dims(small.model) == {}
    assert len(small.model.graph.node) == 1


def _two_batches() -> Candidate:
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4]) for n in ("x", "y")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4]) for n in ("a", "b")]
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["y"], ["b"])]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs))
    return Candidate(model, {n: np.ones((3, 4), np.float32) for n in ("x", "y")})


def _dims(case: Candidate, name: str) -> list[str | int]:
    v = next(v for v in case.model.graph.input if v.name == name)
    return [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]


def test_a_cut_keeps_a_dim_param_only_where_its_dims_stay_equal() -> None:
    case = _two_batches()
    both = edit.crop_inputs(case, {"x": [(0, 2), (0, 4)], "y": [(1, 3), (0, 4)]})
    assert both is not None and _dims(both, "x") == ["batch", 4] and _dims(both, "y") == ["batch", 4]
    one = edit.crop_inputs(case, {"x": [(0, 2), (0, 4)]})
    assert one is not None and _dims(one, "x") == [2, 4] and _dims(one, "y") == [3, 4]
    unit = edit.crop_inputs(case, {"x": [(0, 1), (0, 4)], "y": [(0, 1), (0, 4)]})
    assert unit is not None and _dims(unit, "x") == [1, 4]
    # A kept name cut to a size its static partner does not broadcast with: strict inference
    # cannot see it through the name, the model at its feeds' sizes can.
    weight = onnx.numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
    add = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["a"])],
        "g",
        [case.model.graph.input[0]],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4])],
        [weight],
    )
    broadcast = Candidate(helper.make_model(add), {"x": case.inputs["x"]})
    assert edit.crop_inputs(broadcast, {"x": [(0, 3), (0, 2)]}) is None
    assert edit.crop_inputs(broadcast, {"x": [(0, 2), (0, 4)]}) is None
    static = edit.static_dims(case)
    assert static is not None and _dims(static, "x") == [3, 4]
    assert [d.dim_value for d in static.model.graph.output[0].type.tensor_type.shape.dim] == [3, 4]
    assert edit.static_dims(static) is None


def test_one_name_at_two_sizes_is_a_one_line_input_mismatch() -> None:
    case = _two_batches()
    check_inputs(case.model, case.inputs, "inputs.npz")
    with pytest.raises(InputMismatch, match="dim 'batch' is 3 in input 'x' but 2 in input 'y'"):
        check_inputs(case.model, {**case.inputs, "y": np.ones((2, 4), np.float32)}, "inputs.npz")


def test_coverage_counts_symbolic_models_for_the_summary() -> None:
    coverage = Coverage()
    made = [generate(seed, GenConfig(nodes=4), coverage=coverage) for seed in range(12)]
    assert coverage.models == 12
    assert coverage.symbolic == sum(c.symbolic for c in made) > 0
    stats = coverage.stats()
    assert stats.symbolic == coverage.symbolic
    assert symbolic_share(stats) == f"symbolic dims: {stats.symbolic} of 12 models ({stats.symbolic / 12:.0%})"
    assert symbolic_share(Coverage().stats()) is None
    merged = merge_summaries([Summary(coverage=stats), Summary(coverage=stats)])
    assert (merged.coverage.models, merged.coverage.symbolic) == (24, 2 * stats.symbolic)


def test_a_share_out_of_range_is_a_one_line_error(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("generator:\n  symbolic_dims: 1.5\n")
    r = cli("fuzz", "--config", str(bad))
    assert r.code == 1 and len(r.err_lines) == 1 and "Traceback" not in r.err, r.err
    assert r.err_lines[0].startswith("error:") and "generator.symbolic_dims" in r.err_lines[0]
