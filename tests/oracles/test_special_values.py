"""+-Inf, NaN and -0.0 only where the spec defines what they give: right on the real
onnxruntime and onnx.reference, never into an op that leaves them open, and finding real
TVM bugs there."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from backends.client import WorkerClient
from backends.reference import run_reference
from backends.spec import parse_backend
from generator.api import GenConfig, GeneratedCase, generate
from generator.specials import NAN_UNSAFE, special_draw
from generator.values.special import NAN_SAFE, with_specials
from oracles.compare import compare
from oracles.references import onnx_reference
from oracles.signature import op_signature
from oracles.verdict import Verdict, judge

pytestmark = [pytest.mark.worker]


def _special_cases(count: int) -> list[GeneratedCase]:
    found = []
    for seed in range(count * 4):
        case = generate(seed, GenConfig(nodes=4, special_values=1.0, edges=0.0, symbolic_dims=0.0))
        if case.edge == "special_values":
            found.append(case)
        if len(found) == count:
            return found
    raise AssertionError(f"only {len(found)} special cases in {count * 4} seeds")


@pytest.fixture(scope="module")
def cases() -> list[GeneratedCase]:
    return _special_cases(30)


@pytest.fixture(scope="module")
def ort() -> Iterator[WorkerClient]:
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=60) as client:
        yield client


def _specials(case: GeneratedCase) -> np.ndarray:
    return next(v for v in case.inputs.values() if v.dtype.kind == "f" and not np.isfinite(v).all())


def test_a_case_not_drawn_is_byte_for_byte_what_it_was() -> None:
    for seed in range(60):
        on, off = (generate(seed, GenConfig(special_values=s, symbolic_dims=0.0)) for s in (0.05, 0.0))
        if special_draw(seed, 0.05):
            continue
        assert on.model.SerializeToString() == off.model.SerializeToString(), seed
        assert on.inputs.keys() == off.inputs.keys()
        assert all(np.array_equal(on.inputs[k], off.inputs[k]) for k in on.inputs)


def test_special_cases_are_valid_and_onnxruntime_and_onnx_reference_agree(
    cases: list[GeneratedCase], ort: WorkerClient
) -> None:
    checked = 0
    for case in cases:
        assert not np.isfinite(_specials(case)).all()
        onnx.checker.check_model(onnx.shape_inference.infer_shapes(case.model, strict_mode=True), full_check=True)
        reference = run_reference(case.model, case.inputs)
        second, _ = onnx_reference(case.model, case.inputs)
        probed = {k: v for k, v in reference.items() if k.startswith("special")}  # onnx.reference's own
        grown = {k: v for k, v in reference.items() if k not in probed}
        # Its defects elsewhere are listed in the parity test; a probe reads a grown output,
        # so it is compared where the evaluator computed that output right.
        if second is not None and probed and compare(grown, {k: second[k] for k in grown}).ok:
            assert compare(probed, second).ok, (case.seed, compare(probed, second).summary())
            checked += 1
        result = ort.run(case.model.SerializeToString(), case.inputs)
        if result.status.value == "unsupported":
            continue
        j = judge(result, reference, op_signature(case.model))
        assert j.verdict is Verdict.pass_, (case.seed, j.message)
    assert checked >= len(cases) // 2


def test_nan_never_reaches_an_op_that_leaves_it_open(cases: list[GeneratedCase]) -> None:
    with_nan = [c for c in cases if np.isnan(_specials(c)).any()]
    assert with_nan, "some cases carry NaN"
    for case in with_nan:
        probe = [n.op_type for n in case.model.graph.node if n.name.startswith("n_special")]
        assert not set(probe) & NAN_UNSAFE, (case.seed, probe)


def _one_input(nodes: list[onnx.NodeProto], outputs: list[tuple[str, int]]) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    outs = [helper.make_tensor_value_info(name, t, None) for name, t in outputs]
    graph = helper.make_graph(nodes, "g", [x], outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_grown_input_takes_the_specials_only_where_every_reader_defines_them() -> None:
    x = {"x": np.array([0.5, -0.25, 1.0, 2.0], np.float32)}
    rng = np.random.default_rng(0)
    through = _one_input(
        [helper.make_node("Abs", ["x"], ["a"]), helper.make_node("IsInf", ["a"], ["b"])], [("b", TensorProto.BOOL)]
    )
    placed = with_specials(through, x, rng, ["x"])
    assert placed is not None and not np.isfinite(placed[1]["x"]).all()
    assert "IsInf" in NAN_SAFE and "Abs" in NAN_SAFE
    arithmetic = _one_input([helper.make_node("Sub", ["x", "x"], ["y"])], [("y", TensorProto.FLOAT)])
    assert with_specials(arithmetic, x, rng, ["x"]) is None, "inf - inf is no value to compare"


def test_real_tvm_bugs_on_special_values_are_reported() -> None:
    """TVM 0.27 on values the spec defines: IsInf ignores detect_positive=0, Max and Min of
    -Inf and +Inf give -FLT_MAX and FLT_MAX, ArgMax of a slice of -Inf gives -1."""
    x = {"x": np.array([np.inf, -np.inf, -0.0, 0.5], np.float32)}
    models = {
        "IsInf": _one_input([helper.make_node("IsInf", ["x"], ["y"], detect_positive=0)], [("y", TensorProto.BOOL)]),
        "Max": _one_input([helper.make_node("Max", ["x", "x"], ["y"])], [("y", TensorProto.FLOAT)]),
        "Min": _one_input([helper.make_node("Min", ["x", "x"], ["y"])], [("y", TensorProto.FLOAT)]),
    }
    ninf = {"x": np.full(4, -np.inf, np.float32)}
    argmax = _one_input([helper.make_node("ArgMax", ["x"], ["y"], keepdims=0)], [("y", TensorProto.INT64)])
    with WorkerClient(parse_backend("tvm:default"), timeout_s=120) as tvm:
        for name, model in models.items():
            j = judge(tvm.run(model.SerializeToString(), x), run_reference(model, x), name)
            assert j.verdict is Verdict.wrong_result, (name, j.message)
        j = judge(tvm.run(argmax.SerializeToString(), ninf), run_reference(argmax, ninf), "ArgMax")
        assert j.verdict is Verdict.wrong_result, j.message


def _self_equality(case: GeneratedCase) -> bool:
    last = [n for n in case.model.graph.node if n.name.startswith("n_special")][-1]
    return bool(last.op_type == "Equal" and last.input[0] == last.input[1])


def test_tvm_folds_a_computed_tensors_equality_with_itself_to_true() -> None:
    """TVM 0.25 to 0.27: Equal(f(x), f(x)) is true where f(x) is NaN, for f = Neg, Abs, Exp,
    Tanh, ...; Equal(x, x) on the graph input itself is right. The specials' probes met it."""
    x = {"x": np.array([np.nan, 1.0, -np.inf, np.nan], np.float32)}
    for op in ("Neg", "Exp"):
        nodes = [helper.make_node(op, ["x"], ["a"]), helper.make_node("Equal", ["a", "a"], ["y"])]
        model = _one_input(nodes, [("y", TensorProto.BOOL)])
        assert run_reference(model, x)["y"].tolist() == [False, True, True, False]
        with WorkerClient(parse_backend("tvm:default"), timeout_s=120) as tvm:
            j = judge(tvm.run(model.SerializeToString(), x), run_reference(model, x), op)
        assert j.verdict is Verdict.wrong_result, j.message


def _probe_ops(case: GeneratedCase) -> list[str]:
    return [n.op_type for n in case.model.graph.node if n.name.startswith("n_special")]


def test_arithmetic_carries_the_specials_where_ieee_defines_it(cases: list[GeneratedCase]) -> None:
    """Add and Sub with a computed output, Exp and Reciprocal on the probe's own values: their
    IEEE results on the specials are what onnxruntime 1.31.1 and TVM 0.27 give (both judged
    pass on every such case). Exp and Reciprocal never read a computed tensor, and Sign never
    reads a sum, whose sign near zero the rounding decides."""
    probes = [_probe_ops(c) for c in cases]
    seen = {op for probe in probes for op in probe}
    assert {"Add", "Sub"} & seen and {"Exp", "Reciprocal"} & seen, seen
    for probe in probes:
        binary = [i for i, op in enumerate(probe) if op in ("Max", "Min", "Add", "Sub")]
        assert not any(op in ("Exp", "Reciprocal") and binary and i > binary[0] for i, op in enumerate(probe)), probe
        assert not ({"Add", "Sub"} & set(probe) and probe[-1] == "Sign"), probe
    arithmetic = [c for c, p in zip(cases, probes, strict=True) if {"Add", "Sub", "Exp", "Reciprocal"} & set(p)]
    # TVM bugs pinned in this file: self-equality folded, ArgMax over -inf.
    arithmetic = [c for c in arithmetic if not _self_equality(c) and _probe_ops(c)[-1] not in ("ArgMax", "ArgMin")]
    assert arithmetic
    with WorkerClient(parse_backend("tvm:default"), timeout_s=120, compile_timeout_s=300) as tvm:
        ran = 0
        for case in arithmetic:
            result = tvm.run(case.model.SerializeToString(), case.inputs)
            if result.status.value != "ok":  # TVM's known import crashes on the grown graph
                continue
            j = judge(result, run_reference(case.model, case.inputs), op_signature(case.model))
            assert j.verdict is Verdict.pass_, (case.seed, _probe_ops(case), j.message)
            ran += 1
    assert ran >= 3
