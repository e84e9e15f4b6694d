"""int16, uint16, uint32 and uint64, the element types a case draws only when it starts from
them (generator.dtypes.WIDE): their share, the cases they leave alone, their probe, their
models on real onnxruntime and TVM, and the signed stand-ins the reference computes the
unsigned ones on (generator.ops.unsigned), checked against numpy's own unsigned arithmetic."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import torch
from onnx.reference import ReferenceEvaluator

from backends.client import WorkerClient
from backends.reference import run_reference
from backends.results import Status
from backends.spec import parse_backend
from bot.sides.probe import ProbeFailure, probe_support
from generator.api import GenConfig, GeneratedCase, generate
from generator.dtypes import WIDE, WIDE_INTS, DType
from generator.ops import registry
from generator.ops.unsigned import carried
from generator.start import wide_draw

pytestmark = [pytest.mark.worker]

MOVES = ["Concat", "Transpose", "Gather", "Slice", "Tile", "Reshape", "Expand"]
WIDE_OPS: dict[DType, list[str]] = {
    DType.int16: ["Add", "Sub", "Mul", "Abs", "Neg", "Less", "Equal", "Concat", "Transpose", "Gather", "Slice", "Tile"],
    DType.uint16: ["Add", "Sub", "Mul", "Abs", "Less", "Greater", "Equal", "Div", *MOVES],
    DType.uint32: ["Add", "Sub", "Mul", "Max", "Min", "Less", "Equal", "Where", "Pad", *MOVES],
    DType.uint64: ["Add", "Sub", "Mul", "Equal", "Pad", "BitShift", *MOVES],
}
"""Ops onnxruntime 1.31.1 runs at each type on the CPU (its probe says so; Max not at int16 or
uint16, no ordering op at uint64, where fuzzbot writes none: generator.dtypes.ORDERED_WIDE).
Shape operands stay initializers (runtime_shapes 0): TVM 0.27 imports no Slice, Reshape, Pad
or Tile whose shape operand is a graph input, at any type."""
WIDE_CODES = {d.onnx for d in WIDE}


def _types(model: onnx.ModelProto) -> set[int]:
    inferred = onnx.shape_inference.infer_shapes(model)
    g = inferred.graph
    return {v.type.tensor_type.elem_type for v in [*g.input, *g.output, *g.value_info]} | {
        t.data_type for t in g.initializer
    }


def test_a_share_of_cases_starts_from_a_wide_type_and_no_other_case_changes() -> None:
    wide = [seed for seed in range(400) if wide_draw(seed, 0.1)]
    assert 20 <= len(wide) <= 60, len(wide)
    started: set[int] = set()
    for seed in range(80):
        case = generate(seed, GenConfig(nodes=4))
        if seed in wide:
            assert _types(case.model) & WIDE_CODES, seed
            started |= _types(case.model) & WIDE_CODES
        else:
            assert not _types(case.model) & WIDE_CODES, seed
            same = generate(seed, GenConfig(nodes=4, wide_types=0.0))
            assert same.model.SerializeToString() == case.model.SerializeToString(), seed
    assert len(started) >= 2, started  # the wide seeds start from several of the types
    assert all(not _types(generate(s, GenConfig(nodes=4, wide_types=0.0)).model) & WIDE_CODES for s in wide)


def _cases(dtype: DType) -> list[GeneratedCase]:
    cfg = GenConfig(nodes=4, ops=WIDE_OPS[dtype], dtypes=[dtype], symbolic_dims=0.0, wide_types=0.0, runtime_shapes=0.0)
    return [generate(seed, cfg) for seed in range(30 if dtype is DType.int16 else 15)]


@pytest.fixture(scope="module")
def ort() -> Iterator[WorkerClient]:
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=60) as client:
        yield client


@pytest.fixture(scope="module")
def tvm() -> Iterator[WorkerClient]:
    with WorkerClient(parse_backend("tvm:default"), timeout_s=120, compile_timeout_s=300) as client:
        yield client


@pytest.mark.parametrize("dtype", WIDE_INTS, ids=str)  # bfloat16: tests/generator/test_bfloat16.py
def test_wide_models_are_valid_and_the_reference_agrees_with_onnxruntime_and_tvm(
    dtype: DType, ort: WorkerClient, tvm: WorkerClient
) -> None:
    compared = 0
    for case in _cases(dtype):
        onnx.checker.check_model(case.model, full_check=True)
        assert dtype.onnx in _types(case.model)
        expected = run_reference(case.model, case.inputs)
        for client in (ort, tvm):
            result = client.run(case.model.SerializeToString(), case.inputs)
            assert result.status is Status.ok, (client.spec, result.message)
            for name, want in expected.items():
                got = result.outputs[name]
                assert got.dtype == want.dtype and np.array_equal(got, want), (client.spec, name, case.seed)
            compared += 1
    assert compared >= 20


def test_the_probe_learns_which_ops_a_build_runs_at_the_wide_types(ort: WorkerClient, tmp_path: Path) -> None:
    failures: list[ProbeFailure] = []
    assert ort.info is not None
    matrix = probe_support(ort, ort.info, 17, tmp_path, failures.append, ops=["Add", "MatMul", "Max", "Neg"])
    assert set(WIDE_INTS) <= set(matrix.supported["Add"]) and DType.int16 in matrix.supported["Neg"]
    assert {"int16", "uint16"} <= set(matrix.unsupported["Max"])  # its schema takes them, this build does not
    assert DType.uint32 in matrix.supported["Max"]
    assert "uint64" not in matrix.unsupported["Max"]  # its spec never takes uint64 (it orders): never asked
    assert "uint32" not in matrix.unsupported.get("Neg", {})  # no unsigned Neg in the spec: never asked
    assert "int16" not in matrix.unsupported.get("MatMul", {})
    assert DType.int32 in matrix.supported["MatMul"]  # the other types are probed as before
    assert not failures


CARRIED: list[tuple[str, Callable[..., np.ndarray], dict[str, object]]] = [
    ("Add", np.add, {}),
    ("Sub", np.subtract, {}),
    ("Mul", np.multiply, {}),
    ("BitwiseAnd", np.bitwise_and, {}),
    ("BitwiseXor", np.bitwise_xor, {}),
    ("BitwiseNot", np.invert, {}),
    ("Equal", np.equal, {}),
    ("Div", np.floor_divide, {}),
    ("Max", np.maximum, {}),
    ("Less", np.less, {}),
    ("Greater", np.greater, {}),
    ("Abs", np.abs, {}),
    ("Sign", np.sign, {}),
    ("Where", lambda a, b: np.maximum(a, b), {}),
    ("Transpose", np.transpose, {"perm": [1, 0]}),
    ("Concat", lambda a, b: np.concatenate([a, b], axis=1), {"axis": 1}),
    ("EyeLike", lambda a: np.eye(*a.shape, dtype=a.dtype), {}),  # no dtype attribute: the input's type
]
"""Each op the wide types reach, by its reference on the signed stand-ins and by numpy's
unsigned arithmetic; Where selects by a comparison made here, so it is the larger one."""


@pytest.mark.parametrize("dtype", [DType.uint16, DType.uint32, DType.uint64], ids=str)
@pytest.mark.parametrize(("op", "want", "attrs"), CARRIED, ids=[c[0] for c in CARRIED])
def test_the_reference_computes_the_unsigned_types_as_they_wrap(
    dtype: DType, op: str, want: Callable[..., np.ndarray], attrs: dict[str, object]
) -> None:
    """Operands past the signed stand-in's half (2**15, 2**31, 2**63) and wrapping results;
    uint64 only where its stand-in is exact (generator.dtypes.EXACT_WIDE)."""
    spec = registry()[op]
    if dtype not in spec.dtypes:
        assert dtype is DType.uint64 and op in {"Div", "Max", "Less", "Greater", "Abs", "Sign"}
        return
    top = np.iinfo(dtype.numpy).max
    a = np.array([[0, 1, 7, top], [top // 2 + 3, top - 1, 5, 2]], dtype=dtype.numpy)
    b = np.array([[3, top, 2, 9], [2, top // 2 + 1, 5, 1]], dtype=dtype.numpy)
    args = [a] if op in {"BitwiseNot", "Abs", "Sign", "Transpose", "EyeLike"} else [a, b]
    torch_args = [torch.from_numpy(x.copy()) for x in args]
    if op == "Where":
        torch_args = [torch.from_numpy(a > b), *torch_args]
    got = carried(op, spec.reference)(attrs, torch_args)[0].numpy()
    expected = want(*args)
    assert got.dtype == expected.dtype and np.array_equal(got, expected), (got, expected)


def _declared(model: onnx.ModelProto) -> dict[str, int]:
    return {o.name: o.type.tensor_type.elem_type for o in model.graph.output}


@pytest.mark.parametrize("dtype", [DType.uint16, DType.uint32, DType.uint64], ids=str)
def test_every_op_that_takes_an_unsigned_type_computes_the_type_its_model_declares(dtype: DType) -> None:
    """Each op spec that takes the type, alone in a model started from it: the reference's
    outputs have the element types the graph declares (a stand-in leaking out as int64
    would be a false "dtype" report against every build)."""
    checked = set()
    for op, spec in sorted(registry().items()):
        if dtype not in spec.dtypes:
            continue
        cfg = GenConfig(nodes=1, ops=[op], dtypes=[dtype], opset=26, symbolic_dims=0.0, wide_types=0.0, edges=0.0)
        for seed in range(3):
            try:
                case = generate(seed, cfg)
            except RuntimeError:  # the op cannot start a model alone at this type (it reads another)
                break
            if op not in {n.op_type for n in case.model.graph.node} or dtype.onnx not in _types(case.model):
                continue
            got = run_reference(case.model, case.inputs)
            declared = _declared(case.model)
            for name, value in got.items():
                assert DType.from_numpy(value.dtype).onnx == declared[name], (op, seed, name, value.dtype)
            checked.add(op)
    assert {"Add", "Gather", "EyeLike", "BitShift", "Where", "Concat"} & checked, checked
    assert len(checked) >= 25, sorted(checked)


def test_tvm_fails_to_compile_sign_of_an_unsigned_type_which_onnxruntime_computes(
    ort: WorkerClient, tvm: WorkerClient
) -> None:
    """A real TVM bug the wide types found (0.25, 0.26 and 0.27): Sign of a uint32 tensor
    lowers through a constant -1 of the unsigned type and fails to compile ("cannot make
    uint from negative value -1"). onnxruntime and the reference agree on 0 and 1."""
    x = np.array([[0, 7, 4294967295]], np.uint32)
    node = onnx.helper.make_node("Sign", ["x"], ["y"])
    io = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.UINT32, [1, 3]) for n in "xy"]
    model = onnx.helper.make_model(
        onnx.helper.make_graph([node], "g", [io[0]], [io[1]]), opset_imports=[onnx.helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    expected = run_reference(model, {"x": x})["y"]
    assert expected.dtype == np.uint32 and expected.tolist() == [[0, 1, 1]]
    ours = ort.run(model.SerializeToString(), {"x": x})
    assert ours.status is Status.ok and np.array_equal(ours.outputs["y"], expected)
    theirs = tvm.run(model.SerializeToString(), {"x": x})
    assert theirs.status is Status.error and "cannot make uint from negative value" in theirs.message


def test_a_branch_computes_an_unsigned_tensor_it_captures_as_it_wraps() -> None:
    """An If hands its branch the outer uint16 tensor as it is, and each op of the branch is
    carried on its own: the If's result is uint16, wrapped (65535 + 1 is 0), never a stand-in
    leaking out as int32."""
    helper, tp = onnx.helper, onnx.TensorProto
    then = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y_then"])],
        "then",
        [],
        [helper.make_tensor_value_info("y_then", tp.UINT16, [3])],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y_else"])],
        "else",
        [],
        [helper.make_tensor_value_info("y_else", tp.UINT16, [3])],
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
        "g",
        [helper.make_tensor_value_info("c", tp.BOOL, []), helper.make_tensor_value_info("x", tp.UINT16, [3])],
        [helper.make_tensor_value_info("y", tp.UINT16, [3])],
        [onnx.numpy_helper.from_array(np.array(65535, np.uint16), "one")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = np.array([1, 2, 65535], np.uint16)
    for cond, want in ((True, [0, 1, 65534]), (False, [1, 2, 65535])):
        got = run_reference(model, {"c": np.array(cond), "x": x})["y"]
        assert got.dtype == np.uint16 and got.tolist() == want, (cond, got)


def _evaluated(op: str, attrs: dict[str, Any], args: list[np.ndarray], n_out: int) -> list[np.ndarray]:
    """onnx.reference's answer: one node over `args`, at opset 18."""
    names = [f"x{i}" for i in range(len(args))]
    outs = [f"y{j}" for j in range(n_out)]
    ins = [
        onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for n, a in zip(names, args, strict=True)
    ]
    results = [onnx.helper.make_value_info(o, onnx.TypeProto()) for o in outs]
    graph = onnx.helper.make_graph([onnx.helper.make_node(op, names, outs, **attrs)], "g", ins, results)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, dict(zip(names, args, strict=True)))]


ORDERING_CASES: list[tuple[str, dict[str, Any]]] = [
    ("ScatterElements", {"axis": 1, "reduction": "max"}),
    ("ScatterElements", {"axis": 1, "reduction": "min"}),
    ("ScatterND", {"reduction": "max"}),
    ("ScatterND", {"reduction": "min"}),
    ("ScatterElements", {"axis": 1, "reduction": "add"}),
    ("Unique", {"sorted": 1}),
]


@pytest.mark.parametrize("dtype", [DType.uint16, DType.uint32, DType.uint64], ids=str)
@pytest.mark.parametrize(
    ("op", "attrs"), ORDERING_CASES, ids=[f"{o}-{a.get('reduction', 'sorted')}" for o, a in ORDERING_CASES]
)
def test_an_op_that_picks_by_order_orders_the_unsigned_types_as_unsigned(
    dtype: DType, op: str, attrs: dict[str, Any]
) -> None:
    """Values past the signed stand-in's half: uint64 read bit for bit as int64 put 2**63 and
    up below 0, and a ScatterElements max over uint64 was reported as a bug of a build that
    agreed with onnx.reference. The reference must agree with onnx.reference here."""
    spec = registry()[op]
    assert dtype in spec.dtypes
    top = int(np.iinfo(dtype.numpy).max)
    half = top // 2 + 1
    data = np.array([[1, half + 5, 7], [top, 0, half]], dtype=dtype.numpy)
    updates = np.array([[half + 1, 3, top], [2, half + 9, 4]], dtype=dtype.numpy)
    if op == "Unique":
        args = [np.array([5, half + 2, 1, top, 5, half + 2], dtype=dtype.numpy)]
    elif op == "ScatterND":
        args = [data, np.array([[0], [1]], dtype=np.int64), updates]
    else:
        args = [data, np.array([[0, 1, 2], [2, 0, 1]], dtype=np.int64), updates]
    got = [o.numpy() for o in carried(op, spec.reference)(attrs, [torch.from_numpy(a.copy()) for a in args])]
    want = _evaluated(op, attrs, args, len(got))
    assert [g.dtype for g in got] == [w.dtype for w in want]
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)), (got, want)
