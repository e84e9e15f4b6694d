"""The integer/bool repair: value sets for leaves behind a computed operand (value search)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto

from generator.values import UNSAFE, find_values, margin_hits
from generator.values.interp import Program
from generator.values.leaves import Leaves
from generator.values.trace import traced_marks
from tests.generator.test_values import build, node


def solve(model: onnx.ModelProto, inputs: dict[str, np.ndarray], seeds: range = range(4)) -> None:
    """The model starts unsafe, and the search makes it safe for every one of `seeds`."""
    assert margin_hits(model, inputs), "the model must start out unsafe"
    for seed in seeds:
        found = find_values(model, inputs, set(inputs), seed=seed)
        assert found.outcome.found, (seed, found.outcome)
        assert margin_hits(model, {k: found.values[k] for k in inputs}) == []


def test_an_overflowing_product_is_repaired_from_nonzero_values() -> None:
    safe = UNSAFE["ReduceProd"][0].safe_values
    assert safe is not None
    for dtype in (torch.int8, torch.uint8, torch.int32, torch.int64):
        assert safe(dtype) and 0 not in safe(dtype) and min(safe(dtype)) > 0


def test_an_index_into_a_one_hot_of_depth_1_can_be_drawn_0() -> None:
    """Div by OneHot(i, depth 1, {0, 7}) is nonzero only where i == 0: the divisor's own
    safe set (nonzero) never gets there."""
    a = np.full((6, 1), 7, np.int64)
    i = np.array([3, 1, 0, 4, 5, 2], np.uint8)
    depth, values = np.array(1, np.int64), np.array([0, 7], np.int64)
    m = build(
        [node("OneHot", ["i", "depth", "values"], "h", axis=-1), node("Div", ["a", "h"], "y")],
        {"a": a, "i": i},
        {"depth": depth, "values": values},
    )
    solve(m, {"a": a, "i": i})


def test_a_boolean_behind_a_not_can_be_drawn_false() -> None:
    """Log(Cast(Not(b))) needs b all False; a float predicate redraws booleans too."""
    b = np.ones((3, 5), bool)
    m = build(
        [node("Not", ["b"], "n"), node("Cast", ["n"], "f", to=TensorProto.FLOAT), node("Log", ["f"], "y")], {"b": b}
    )
    solve(m, {"b": b})


def test_an_integer_mod_feeding_a_divisor_gets_a_divisor_larger_than_its_dividend() -> None:
    """Div by Relu(fmod(x, y)): every x of a row must be positive and not a multiple of its y."""
    a = np.full((1, 1), 5, np.int64)
    x = np.random.default_rng(0).integers(-8, 9, size=(16, 140)).astype(np.int64)
    yv = np.random.default_rng(1).integers(1, 9, size=(16, 1)).astype(np.int64)
    m = build(
        [node("Mod", ["x", "y"], "r", fmod=1), node("Relu", ["r"], "p"), node("Div", ["a", "p"], "z")],
        {"x": x, "y": yv},
        {"a": a},
    )
    solve(m, {"x": x, "y": yv})


def _asin_of_sum() -> tuple[onnx.ModelProto, np.ndarray]:
    """Asin(Cast(ReduceSum(x))) over integer x: needs every x == 0, and the full reduction
    hides which elements are wrong."""
    x = np.random.default_rng(2).integers(-8, 9, size=(4, 30)).astype(np.int32)
    nodes = [
        node("ReduceSum", ["x"], "s", keepdims=1),
        node("Cast", ["s"], "f", to=TensorProto.FLOAT),
        node("Asin", ["f"], "y"),
    ]
    return build(nodes, {"x": x}), x


def test_untraceable_integer_leaves_are_redrawn_whole_from_one_set() -> None:
    m, x = _asin_of_sum()
    solve(m, {"x": x})


def test_the_overflow_repair_keeps_a_product_nonzero() -> None:
    """Div by ReduceProd(x + y) over 48 sums: the overflow repair must not draw 0 or -1
    (a sum 0 is a zero divisor, whose own repair then overflows the product again)."""
    a = np.full((1,), 7, np.int64)
    x = np.full((48,), 1000, np.int64)
    yv = np.full((48,), 1000, np.int64)
    m = build(
        [node("Add", ["x", "y"], "s"), node("ReduceProd", ["s"], "p", keepdims=1), node("Div", ["a", "p"], "z")],
        {"x": x, "y": yv},
        {"a": a},
    )
    solve(m, {"x": x, "y": yv})


@pytest.mark.parametrize("seed", range(2))
def test_repairs_are_deterministic(seed: int) -> None:
    m, x = _asin_of_sum()
    runs = [find_values(m, {"x": x}, {"x"}, seed=seed) for _ in range(2)]
    assert np.array_equal(runs[0].values["x"], runs[1].values["x"])
    assert runs[0].outcome.steps == runs[1].outcome.steps


def _gathered_log_and_acos() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Log(Cast(x[0:8])) + Acos(Cast(x[8:16])) through Gathers: the first half of x must be
    >= 1 and the second half 0, which no one value set redrawn over all of x satisfies."""
    x = np.full(16, -3, np.int64)
    i1, i2 = np.arange(8, dtype=np.int64)[::-1].copy(), np.arange(8, 16, dtype=np.int64)
    m = build(
        [
            node("Gather", ["x", "i1"], "a"),
            node("Cast", ["a"], "af", to=TensorProto.FLOAT),
            node("Log", ["af"], "l"),
            node("Gather", ["x", "i2"], "b"),
            node("Cast", ["b"], "bf", to=TensorProto.FLOAT),
            node("Acos", ["bf"], "c"),
            node("Add", ["l", "c"], "y"),
        ],
        {"x": x},
        {"i1": i1, "i2": i2},
    )
    return m, {"x": x}


def test_positions_behind_a_gather_are_redrawn_where_they_come_from() -> None:
    m, inputs = _gathered_log_and_acos()
    solve(m, inputs)


def test_unsafe_positions_are_traced_through_data_movement_ops() -> None:
    """Transpose, Slice, Concat and Tile map each position to the exact leaf element."""
    x = np.ones((2, 3), np.float32)
    x[1, 2] = -1.0  # only this element is unsafe under Log
    starts, ends = np.array([1], np.int64), np.array([3], np.int64)
    reps, z = np.array([2, 1], np.int64), np.ones((3, 1), np.float32)
    m = build(
        [
            node("Transpose", ["x"], "t", perm=[1, 0]),
            node("Slice", ["t", "s", "e"], "u"),
            node("Concat", ["u", "z"], "v", axis=1),
            node("Tile", ["v", "r"], "w"),
            node("Log", ["w"], "y"),
        ],
        {"x": x},
        {"s": starts, "e": ends, "r": reps, "z": z[1:]},
    )
    assert _traced(m, x) == [(1, 2)]


def test_unsafe_positions_are_traced_through_pad_and_a_broadcast_add() -> None:
    """Pad (its padding comes from no leaf element) and an Add with a constant keep the trace."""
    x = np.ones((2, 3), np.float32)
    x[0, 1] = -5.0
    m = build(
        [
            node("Pad", ["x", "p"], "q"),
            node("Add", ["q", "c"], "a"),
            node("Log", ["a"], "y"),
        ],
        {"x": x},
        {"p": np.array([0, 1, 0, 0], np.int64), "c": np.ones((1, 4), np.float32)},
    )
    assert _traced(m, x) == [(0, 1)]


def _traced(m: onnx.ModelProto, x: np.ndarray) -> list[tuple[int, ...]]:
    """The elements of leaf `x` the first unsafe op's bad positions trace back to."""
    program = Program(m, {"x": x}, {"x"})
    leaves = Leaves(program.initial)
    failure = program.first_failure(program.env(leaves.tensors(False)))
    assert failure is not None and failure.bad is not None
    marks = traced_marks(program, failure, ["x"])
    return [tuple(int(i) for i in idx) for idx in np.argwhere(marks["x"].numpy())]
