"""Interval propagation in the generator: the range table, and insertions it refuses."""

from __future__ import annotations

import math
import random

import pytest

from generator.api import GenConfig, generate
from generator.binning import Solution
from generator.dtypes import DType
from generator.feasibility import Feasibility
from generator.graph import GNode, Graph
from generator.ops import registry
from generator.ops.base import OpSpec
from generator.ranges import FULL, Range, output_range, tensor_ranges
from generator.symbolic import AbsTensor, SymCtx, TType


def _op(op_type: str, *ins: tuple[DType, list[int]]) -> OpSpec:
    sc = SymCtx(random.Random(0), max_elements=4096, opset=17)
    op = registry()[op_type](sc, [TType(d, len(s)) for d, s in ins])
    op.bind([AbsTensor(d, list(s)) for d, s in ins])
    return op


F32 = (DType.float32, [2, 3])


def test_bounded_ops_map_any_input_into_their_range() -> None:
    assert output_range(_op("Sigmoid", F32), [FULL], DType.float32) == Range(0.0, 1.0)
    assert output_range(_op("Cosh", F32), [FULL], DType.float32) == Range(1.0, math.inf)
    assert output_range(_op("Acos", F32), [FULL], DType.float32) == Range(0.0, math.pi)
    assert output_range(_op("LogSoftmax", F32), [FULL], DType.float32).hi == 0.0
    relu = output_range(_op("Relu", F32), [Range(-3.0, 2.0)], DType.float32)
    assert relu.lo == 0.0 and relu.hi == pytest.approx(2.0, rel=1e-2)


def test_interval_arithmetic() -> None:
    a, b = Range(1.0, 2.0), Range(-3.0, 4.0)
    assert output_range(_op("Add", F32, F32), [a, b], DType.float32) == Range(-2.0, 6.0)
    assert output_range(_op("Sub", F32, F32), [a, b], DType.float32) == Range(-3.0, 5.0)
    assert output_range(_op("Mul", F32, F32), [a, b], DType.float32) == Range(-6.0, 8.0)
    assert output_range(_op("Div", F32, F32), [b, a], DType.float32) == Range(-3.0, 4.0)
    assert output_range(_op("Div", F32, F32), [a, b], DType.float32) == FULL  # divisor spans 0
    assert output_range(_op("Neg", F32), [a], DType.float32) == Range(-2.0, -1.0)
    assert output_range(_op("Abs", F32), [b], DType.float32) == Range(0.0, 4.0)
    assert output_range(_op("Max", F32, F32), [a, b], DType.float32) == Range(1.0, 4.0)


def test_unknown_ops_and_dtypes_are_conservative() -> None:
    assert (
        output_range(_op("MatMul", (DType.float32, [2, 2]), (DType.float32, [2, 2])), [FULL, FULL], DType.float32)
        == FULL
    )
    assert output_range(_op("Tan", F32), [Range(0.0, 1.0)], DType.float32) == FULL
    assert output_range(_op("Cast", F32), [FULL], DType.bool).hi == 1.0


def test_softmax_bounds_its_smallest_element_by_one_over_n() -> None:
    r = output_range(_op("Softmax", (DType.float16, [2, 100])), [FULL], DType.float16)
    assert r.lo == 0.0 and r.hi == 1.0 and r.cap <= 1 / 100 + 1e-12


def _grown(op_types: list[str], seeds: range) -> list[list[str]]:
    """Per model, the (producer op, consumer op) pairs over every tensor."""
    pairs: list[list[str]] = []
    for seed in seeds:
        case = generate(seed, GenConfig(nodes=6, ops=op_types, feedback=False, values="none"))
        producer = {o: n.op_type for n in case.model.graph.node for o in n.output}
        pairs.append([f"{producer[i]}>{n.op_type}" for n in case.model.graph.node for i in n.input if i in producer])
    return pairs


def test_acosh_is_never_inserted_after_a_bounded_op() -> None:
    pairs = [p for model in _grown(["Sigmoid", "Tanh", "Sin", "Acosh"], range(40)) for p in model]
    assert not [p for p in pairs if p.endswith(">Acosh") and not p.startswith("Acosh")]
    assert any(p.startswith("Acosh>") or p.endswith(">Sigmoid") for p in pairs)  # growth still happens


def test_asin_is_never_inserted_after_cosh() -> None:
    pairs = [p for model in _grown(["Cosh", "Asin", "Exp"], range(40)) for p in model]
    assert "Cosh>Asin" not in pairs
    assert "Asin>Cosh" in pairs or "Exp>Asin" in pairs


def test_feasibility_refuses_backward_sigmoid_in_front_of_acosh_and_forward_acosh_after_it() -> None:
    graph = Graph()
    x = graph.add_tensor(AbsTensor(DType.float32, [2, 3]))
    y = graph.add_tensor(AbsTensor(DType.float32, [2, 3]))
    z = graph.add_tensor(AbsTensor(DType.float32, [2, 3]))
    graph.placeholders.append(x)
    graph.add_node(GNode(_op("Acosh", F32), [x], [y], Solution(None)))
    graph.add_node(GNode(_op("Sigmoid", F32), [y], [z], Solution(None)))
    check = Feasibility()
    assert not check(graph, _op("Sigmoid", F32), [], x)
    assert check(graph, _op("Exp", F32), [], x)
    ranges = tensor_ranges(graph)
    assert ranges[y] == Range(0.0, math.inf) and ranges[z].hi == 1.0
    assert check(graph, _op("Acosh", F32), [y], None)
    assert not check(graph, _op("Acosh", F32), [z], None)


def test_reciprocal_of_a_wide_float16_softmax_is_refused_a_narrow_one_is_not() -> None:
    for n, ok in ((100, False), (4, True)):
        graph = Graph()
        x = graph.add_tensor(AbsTensor(DType.float16, [n, n]))
        y = graph.add_tensor(AbsTensor(DType.float16, [n, n]))
        graph.placeholders.append(x)
        graph.add_node(GNode(_op("Softmax", (DType.float16, [n, n])), [x], [y], Solution(None)))
        assert Feasibility()(graph, _op("Reciprocal", (DType.float16, [n, n])), [y], None) is ok
        assert Feasibility()(graph, _op("Log", (DType.float16, [n, n])), [y], None) is ok


def test_hardmax_bounds_its_largest_element_so_asin_after_it_is_refused() -> None:
    graph = Graph()
    x = graph.add_tensor(AbsTensor(DType.float32, [2, 3]))
    y = graph.add_tensor(AbsTensor(DType.float32, [2, 3]))
    z = graph.add_tensor(AbsTensor(DType.float32, [2, 3]))
    graph.placeholders.append(x)
    graph.add_node(GNode(_op("Hardmax", F32), [x], [y], Solution(None)))
    graph.add_node(GNode(_op("Celu", F32), [y], [z], Solution(None)))
    ranges = tensor_ranges(graph)
    assert ranges[y].high_floor == 1.0 and ranges[z].high_floor >= 1.0 - 1e-9
    check = Feasibility()
    assert not check(graph, _op("Asin", F32), [z], None)
    assert check(graph, _op("Sin", F32), [z], None)
    assert check(graph, _op("Asin", F32), [x], None)


def test_elu_family_keeps_positive_values_and_bounds_negative_ones() -> None:
    pos, neg = Range(1.0, 2.0), Range(-math.inf, -1.0)
    for op in ("LeakyRelu", "Elu", "Celu"):
        assert output_range(_op(op, F32), [pos], DType.float32) == Range(1.0, 2.0), op
        r = output_range(_op(op, F32), [neg], DType.float32)
        assert r.hi < 0 or (op == "Celu" and r.hi == 0.0), op
    assert output_range(_op("Elu", F32), [neg], DType.float32).lo == -2.0
    assert output_range(_op("Selu", F32), [pos], DType.float32) == Range(0.5, 3.0)


def test_eye_like_holds_a_zero_so_it_is_never_a_divisor() -> None:
    shape = (DType.float32, [3, 4])
    eye = _op("EyeLike", shape)
    for k, ones in ((0, True), (3, True), (-2, True), (4, False), (-3, False)):
        eye.k = k  # type: ignore[attr-defined]
        r = output_range(eye, [FULL], DType.float32)
        assert (r.lo, r.hi, r.cap) == ((0.0, 1.0, 0.0) if ones else (0.0, 0.0, 0.0)), k
    graph = Graph()
    x = graph.add_tensor(AbsTensor(DType.float32, [3, 4]))
    y = graph.add_tensor(AbsTensor(DType.float32, [3, 4]))
    graph.placeholders.append(x)
    graph.add_node(GNode(eye, [x], [y], Solution(None)))
    assert not Feasibility()(graph, _op("Reciprocal", shape), [y], None)
    assert Feasibility()(graph, _op("Reciprocal", shape), [x], None)


def test_backward_insertion_is_checked_against_every_unsafe_op_downstream() -> None:
    """Sign inserted in front of Mean(x) feeding Acosh: Mean alone is no unsafe op, but
    Acosh(Mean(Sign(.))) can never reach 1 + δ."""
    graph = Graph()
    x, m, y = (graph.add_tensor(AbsTensor(DType.float32, [2, 3])) for _ in range(3))
    graph.placeholders.append(x)
    graph.add_node(GNode(_op("Mean", F32), [x], [m], Solution(None)))
    graph.add_node(GNode(_op("Acosh", F32), [m], [y], Solution(None)))
    check = Feasibility()
    assert not check(graph, _op("Sign", F32), [], x)
    assert not check(graph, _op("Sigmoid", F32), [], x)
    assert check(graph, _op("Exp", F32), [], x)


def test_an_exclusive_cumsum_holds_an_exact_zero_so_it_is_never_a_divisor() -> None:
    i64 = (DType.int64, [2, 5])
    for exclusive in (True, False):
        graph = Graph()
        x, c, n = (graph.add_tensor(AbsTensor(DType.int64, [2, 5])) for _ in range(3))
        graph.placeholders.append(x)
        cum = _op("CumSum", i64)
        cum.attrs = {"exclusive": 1} if exclusive else {}  # type: ignore[attr-defined]
        graph.add_node(GNode(cum, [x], [c], Solution(None)))
        graph.add_node(GNode(_op("Neg", i64), [c], [n], Solution(None)))
        ranges = tensor_ranges(graph)
        assert ranges[c].zero is exclusive and ranges[n].zero is exclusive
        assert Feasibility()(graph, _op("Div", i64, i64), [x, n], None) is not exclusive
