"""Edge-input cases (generator.edges): aimed at what compilers mishandle, seeded, and
judged as the oracles judge undefined inputs (values never compared)."""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

from generator.api import GenConfig, generate
from generator.coverage import Coverage
from generator.dtypes import DType
from generator.edges import KINDS, UNDEFINED, aim, edge_kind
from oracles.undefined import undefined_inputs
from tests.conftest import CliResult
from tests.release_cases import reducel2_int32_overflow

pytestmark = [pytest.mark.release]


def _cases(count: int, share: float = 1.0) -> list:  # type: ignore[type-arg]
    cfg = GenConfig(edges=share)
    return [generate(s, cfg) for s in range(count)]


def test_the_share_and_the_kind_are_functions_of_the_seed() -> None:
    kinds = collections.Counter(edge_kind(s, 0.05) for s in range(4000))
    assert 0.03 < 1 - kinds[None] / 4000 < 0.07
    assert set(kinds) == {None, *KINDS}
    assert [edge_kind(s, 0.05) for s in range(200)] == [edge_kind(s, 0.05) for s in range(200)]
    assert all(edge_kind(s, 0.0) is None for s in range(200))


def test_undefined_edges_are_set_on_graph_inputs_and_the_oracle_sees_them() -> None:
    cases = [c for c in _cases(60) if c.edge in UNDEFINED]
    kinds = {c.edge for c in cases}
    assert len(cases) >= 20 and kinds == set(UNDEFINED), kinds
    for case in cases:
        assert undefined_inputs(case.model, case.inputs), f"seed {case.seed}: {case.edge} left nothing undefined"


def test_unit_dims_cases_have_size_one_dims_and_stay_defined() -> None:
    cases = [c for c in _cases(80) if c.edge == "unit_dims"]
    assert cases
    dims = [d.dim_value for c in cases for i in c.model.graph.input for d in i.type.tensor_type.shape.dim]
    assert dims.count(1) / len(dims) > 0.3
    assert not any(undefined_inputs(c.model, c.inputs) for c in cases)


def test_a_case_is_the_same_with_edges_whatever_else_ran() -> None:
    first = _cases(30, 0.3)
    again = _cases(30, 0.3)
    for a, b in zip(first, again, strict=True):
        assert a.edge == b.edge and a.model.SerializeToString() == b.model.SerializeToString()
        assert all(np.array_equal(a.inputs[k], b.inputs[k]) for k in a.inputs)
    cov = Coverage()
    for s in range(300):
        generate(s, GenConfig(), coverage=cov)
    assert sum(cov.edges.values()) >= 5 and cov.stats().edges == dict(sorted(cov.edges.items()))


def test_an_edge_never_touches_the_shapes_and_axes_that_keep_the_model_valid() -> None:
    """A campaign once died on an int64 overflow aimed at a ReduceSum's axes input."""
    aimed = 0
    for seed in range(80):
        case = generate(seed, GenConfig(edges=0.0, runtime_shapes=1.0, dtypes=[DType.int32, DType.int64]))
        for kind in UNDEFINED:
            found = aim(kind, case.model, case.inputs, seed)
            if found is None:
                continue
            aimed += 1
            changed = {k for k in case.inputs if not np.array_equal(case.inputs[k], found[1][k])}
            assert changed and not any(k.startswith("r") for k in changed), (seed, kind, changed)
    assert aimed >= 10


def test_fuzzbot_gen_writes_an_edge_case_the_torch_reference_refuses(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    """`fuzzbot gen` once died on a zero divisor: torch raises on integer division by zero."""
    seed = next(s for s in range(2000) if generate(s, GenConfig()).edge == "zero_divisor")
    r = cli("gen", "--seed", str(seed), "--count", "1", "--out", str(tmp_path))
    assert r.code == 0, r.err
    bundle = tmp_path / f"seed-{seed}"
    assert (bundle / "model.onnx").is_file() and (bundle / "inputs.npz").is_file()


def test_an_undefined_edge_stays_on_a_graph_input_whatever_grows_after_it() -> None:
    """The target's input is kept from backward insertion, proposals included."""
    cases = [c for c in _cases(120) if c.edge in ("zero_divisor", "cast_out_of_range")]
    assert cases
    for case in cases:
        reads = {i for n in case.model.graph.node if n.op_type in ("Div", "Mod", "Cast") for i in n.input}
        assert reads & set(case.inputs), case.seed


def test_an_integer_reduction_is_undefined_only_where_no_accumulator_holds_it() -> None:
    """ReduceL2 of [30000, 40000] is 50000: its int32 sum of squares overflows, but the
    result fits and onnxruntime 1.27.0 fixed the wrap (a real bug that must stay reported).
    Squares past int64, or a ReduceLogSumExp whose exponentials pass int64, are undefined:
    a hand triage found the first reported as a bug."""
    model, inputs = reducel2_int32_overflow()
    assert undefined_inputs(model, inputs) == []
    big = {"x": np.array([[2**31 - 1, 2**31 - 1]], np.int32)}
    assert any("ReduceL2" in r for r in undefined_inputs(model, big))
    node = onnx.helper.make_node("ReduceLogSumExp", ["x"], ["y"], keepdims=0)
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.INT32, [1, 2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.INT32, [])],
    )
    lse = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8)
    assert undefined_inputs(lse, {"x": np.array([[3, 1]], np.int32)}) == []
    assert any("ReduceLogSumExp" in r for r in undefined_inputs(lse, {"x": np.array([[50, 1]], np.int32)}))


def test_an_integer_shrink_that_adds_a_fractional_bias_is_undefined() -> None:
    """Shrink(-5, bias=0.326) on int64: onnxruntime and TVM give -5 (the bias cast first),
    onnx.reference and the torch reference -4; the spec says neither. Both campaigns of a
    hand triage reported it. A float Shrink, whose float64 onnxruntime computes in float32
    (a real bug), stays defined."""

    def shrink(elem: int) -> onnx.ModelProto:
        node = onnx.helper.make_node("Shrink", ["x"], ["y"], bias=0.326)
        value = [onnx.helper.make_tensor_value_info(n, elem, [3]) for n in ("x", "y")]
        graph = onnx.helper.make_graph([node], "g", value[:1], value[1:])
        return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8)

    assert undefined_inputs(shrink(onnx.TensorProto.INT64), {"x": np.array([-5, 0, 3])})
    assert undefined_inputs(shrink(onnx.TensorProto.INT64), {"x": np.array([0, 0, 0])}) == []
    assert undefined_inputs(shrink(onnx.TensorProto.DOUBLE), {"x": np.array([-5.0, 0.1, 3.0])}) == []
