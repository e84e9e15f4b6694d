"""Insertions the generator refuses because no values could make them safe: constants that
come out of the graph's structure (a Softmax summed over its own axis, Sub(t, t)), values
pinned to a discontinuity, and sums over many elements shifted past a domain."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from generator.binning import Solution
from generator.dtypes import DType
from generator.feasibility import Feasibility
from generator.graph import GNode, Graph
from generator.ops import registry
from generator.ops.base import OpSpec
from generator.ranges import FULL, Range, output_range, tensor_ranges
from generator.symbolic import AbsTensor, SymCtx, TType
from generator.values import find_values, margin_hits
from generator.values.find import apply_values


def _op(op_type: str, *ins: tuple[DType, list[int]], **fields: object) -> OpSpec:
    sc = SymCtx(random.Random(0), max_elements=4096, opset=17)
    op = registry()[op_type](sc, [TType(d, len(s)) for d, s in ins])
    op.bind([AbsTensor(d, list(s)) for d, s in ins])
    for k, v in fields.items():
        setattr(op, k, v)
    return op


class Chain:
    """A graph grown one node at a time from one float32 placeholder."""

    def __init__(self, shape: list[int], dtype: DType = DType.float32) -> None:
        self.graph = Graph()
        self.x = self.graph.add_tensor(AbsTensor(dtype, shape))
        self.graph.placeholders.append(self.x)

    def add(self, op: OpSpec, inputs: list[int], shape: list[int], dtype: DType = DType.float32) -> int:
        out = self.graph.add_tensor(AbsTensor(dtype, shape))
        self.graph.add_node(GNode(op, inputs, [out], Solution(None)))
        return out

    def accepts(self, op: OpSpec, inputs: list[int]) -> bool:
        return Feasibility()(self.graph, op, inputs, None)


def test_softmax_over_one_element_is_exactly_one_and_pins_every_jump() -> None:
    c = Chain([4, 1])
    soft = c.add(_op("Softmax", (DType.float32, [4, 1]), axis=1), [c.x], [4, 1])
    assert tensor_ranges(c.graph)[soft] == Range(1.0, 1.0)
    one_col = (DType.float32, [4, 1])
    assert not c.accepts(_op("Ceil", one_col), [soft])
    assert not c.accepts(_op("Floor", one_col), [soft])
    assert c.accepts(_op("Round", one_col), [soft])  # 1 is no half-integer
    assert not c.accepts(_op("ArgMax", one_col, axis=0), [soft])  # four equal values
    assert not c.accepts(_op("Asin", one_col), [soft])
    assert c.accepts(_op("Ceil", one_col), [c.x])


def test_a_softmax_summed_over_its_axis_is_a_constant() -> None:
    shape = [5, 4, 6]
    c = Chain(shape)
    soft = c.add(_op("Softmax", (DType.float32, shape), axis=-2), [c.x], shape)
    total = c.add(_op("ReduceSum", (DType.float32, shape), axes=[0, 1, 2], noop=False), [soft], [1, 1, 1])
    mean = c.add(_op("ReduceMean", (DType.float32, shape), axes=[1, 2], noop=False), [soft], [5, 1, 1])
    other = c.add(_op("ReduceSum", (DType.float32, shape), axes=[2], noop=False), [soft], [5, 4, 1])
    ranges = tensor_ranges(c.graph)
    assert ranges[total] == Range(30.0, 30.0)  # 5 * 6 slices, each adding up to 1
    assert ranges[mean] == Range(0.25, 0.25)
    assert not ranges[other].point and ranges[other].lo == 0.0 and ranges[other].hi == 6.0
    f32 = (DType.float32, [1, 1, 1])
    assert not c.accepts(_op("Asin", f32), [total])
    assert not c.accepts(_op("Floor", f32), [total])
    assert c.accepts(_op("Asin", (DType.float32, [5, 4, 1])), [other])


def test_a_layout_change_forgets_which_axis_sums_to_one() -> None:
    shape = [3, 4]
    c = Chain(shape)
    soft = c.add(_op("Softmax", (DType.float32, shape), axis=1), [c.x], shape)
    moved = c.add(_op("Transpose", (DType.float32, shape)), [soft], [4, 3])
    kept = c.add(_op("Identity", (DType.float32, shape)), [soft], shape)
    ranges = tensor_ranges(c.graph)
    assert ranges[soft].unit_axis == 1 and ranges[kept].unit_axis == 1
    assert ranges[moved].unit_axis is None and (ranges[moved].lo, ranges[moved].hi) == (0.0, 1.0)


def test_one_tensor_on_both_sides_gives_a_constant() -> None:
    c = Chain([6])
    f = (DType.float32, [6])
    diff = c.add(_op("Sub", f, f), [c.x, c.x], [6])
    ratio = c.add(_op("Div", f, f), [c.x, c.x], [6])
    never = c.add(_op("Greater", f, f), [c.x, c.x], [6], DType.bool)
    ranges = tensor_ranges(c.graph)
    assert ranges[diff] == Range(0.0, 0.0) and ranges[ratio] == Range(1.0, 1.0) and ranges[never] == Range(0.0, 0.0)
    assert not c.accepts(_op("Reciprocal", f), [diff])
    assert not c.accepts(_op("Sign", f), [diff])
    assert not c.accepts(_op("Acosh", f), [ratio])
    assert not c.accepts(_op("Cast", f, to=DType.int32), [ratio])
    assert c.accepts(_op("Cast", f, to=DType.float64), [ratio])


def test_log_sum_exp_of_bounded_values_is_shifted_by_log_n() -> None:
    shape = [15, 13]
    c = Chain(shape)
    squashed = c.add(_op("Tanh", (DType.float32, shape)), [c.x], shape)
    lse = c.add(_op("ReduceLogSumExp", (DType.float32, shape), axes=[0, 1], noop=False), [squashed], [1, 1])
    r = tensor_ranges(c.graph)[lse]
    assert math.log(195) - 1 - 1e-2 <= r.lo <= math.log(195) - 1 and math.log(195) + 1 <= r.hi
    assert not c.accepts(_op("Atanh", (DType.float32, [1, 1])), [lse])
    small = Chain([2])
    squashed = small.add(_op("Tanh", (DType.float32, [2])), [small.x], [2])
    lse = small.add(_op("ReduceLogSumExp", (DType.float32, [2]), axes=[0], noop=False), [squashed], [1])
    assert small.accepts(_op("Atanh", (DType.float32, [1])), [lse])  # log 2 - 1 < 0 < 1


def test_scatter_keeps_the_hardmax_one_so_asin_after_it_is_refused() -> None:
    shape = [2, 3]
    c = Chain(shape)
    f = (DType.float32, shape)
    hard = c.add(_op("Hardmax", f, axis=1), [c.x], shape)
    scattered = c.add(_op("ScatterND", f, f, reduction="none"), [hard, hard], shape)
    summed = c.add(_op("ScatterND", f, f, reduction="add"), [hard, hard], shape)
    ranges = tensor_ranges(c.graph)
    assert ranges[scattered].high_floor == 1.0 and ranges[summed] == FULL
    assert not c.accepts(_op("Asin", f), [scattered])
    assert c.accepts(_op("Asin", f), [summed])


def test_one_hot_values_are_known_when_the_op_is_drawn() -> None:
    idx = (DType.int64, [4])
    for off_on, log_ok in (((0.0, 0.5), False), ((0.25, 0.75), True), ((-0.5, 0.5), False)):
        op = _op("OneHot", idx, off_on=off_on, depth=3)
        r = output_range(op, [FULL], DType.float32)
        assert (r.lo, r.hi) == (min(off_on), max(off_on))
        c = Chain([4], DType.int64)
        hot = c.add(op, [c.x], [4, 3])
        assert c.accepts(_op("Log", (DType.float32, [4, 3])), [hot]) is log_ok, off_on
    # With one class a slice may hold only the on value: nothing is refused for the off one.
    assert output_range(_op("OneHot", idx, off_on=(0.0, 0.5), depth=1), [FULL], DType.float32).cap == 0.5


def test_a_divisor_behind_not_of_a_boolean_input_is_repaired() -> None:
    """Mod(x, Cast(Not(b))): the divisor is 0 wherever b is True, so the search must set
    every element of b False, through the Not."""
    nodes = [
        helper.make_node("Not", ["b"], ["nb"]),
        helper.make_node("Cast", ["nb"], ["d"], to=TensorProto.INT32),
        helper.make_node("Mod", ["x", "d"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.INT32, [8]),
            helper.make_tensor_value_info("b", TensorProto.BOOL, [8]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    inputs = {"x": np.arange(8, dtype=np.int32), "b": np.array([True, False] * 4)}
    solved = 0
    for seed in range(10):
        found = find_values(model, inputs, ["x", "b"], seed)
        if found.outcome.found:
            m, ins = apply_values(model, inputs, found.values)
            assert not ins["b"].any() and not margin_hits(m, ins)
            solved += 1
    assert solved == 10


def test_trilu_masks_exact_zeros_and_all_of_it_past_the_edge() -> None:
    shape = [3, 4]
    f = (DType.float32, shape)
    cases = ((1, 0.0, "kept"), (1, 0.5, "some"), (1, 0.99, "none"), (0, 0.0, "none"), (0, 0.5, "some"))
    for upper, pick, expect in cases:
        c = Chain(shape)
        pos = c.add(_op("Exp", f), [c.x], shape)
        tri = _op("Trilu", f, upper=upper, k_input=True, k_pick=pick)
        out = c.add(tri, [pos], shape)
        r = tensor_ranges(c.graph)[out]
        k = tri.k(3, 4)  # type: ignore[attr-defined]
        assert {"kept": not r.zero and r.lo == 0.0, "some": r.zero and not r.point, "none": r == Range(0.0, 0.0)}[
            expect
        ], (upper, k, r)
        assert c.accepts(_op("Reciprocal", f), [out]) is (expect == "kept"), (upper, k)


def test_an_index_along_one_element_is_zero_and_never_an_integer_divisor() -> None:
    c = Chain([3, 1])
    idx = c.add(_op("ArgMax", (DType.float32, [3, 1]), axis=1), [c.x], [3, 1], DType.int64)
    wide = c.add(_op("ArgMax", (DType.float32, [3, 1]), axis=0), [c.x], [1, 1], DType.int64)
    i64 = (DType.int64, [3, 1])
    r = tensor_ranges(c.graph)[idx]
    assert (r.lo, r.hi, r.integral) == (0.0, 0.0, True)
    assert not c.accepts(_op("Div", i64, i64), [idx, idx])
    assert c.accepts(_op("Div", i64, i64), [wide, wide])


def test_a_product_over_a_wide_softmax_axis_underflows() -> None:
    for m, ok in ((30, False), (4, True)):
        shape = [2, m]
        c = Chain(shape)
        soft = c.add(_op("Softmax", (DType.float32, shape), axis=1), [c.x], shape)
        prod = c.add(_op("ReduceProd", (DType.float32, shape), axes=[1], noop=False), [soft], [2, 1])
        assert tensor_ranges(c.graph)[prod].hi <= float(m) ** -m * (1 + 1e-9)
        assert c.accepts(_op("Log", (DType.float32, [2, 1])), [prod]) is ok, m


def test_integer_valued_results_are_not_widened_and_keep_off_their_jumps() -> None:
    """Floor(Cos(x)) is an integer at most 1, and 1 only for a Cos a hair from 1, where
    Floor jumps: so at most 0, and Acosh (x >= 1 + δ) after it is refused."""
    c = Chain([4])
    f = (DType.float32, [4])
    cos = c.add(_op("Cos", f), [c.x], [4])
    floor = c.add(_op("Floor", f), [cos], [4])
    r = tensor_ranges(c.graph)[floor]
    assert (r.lo, r.hi, r.integral) == (-1.0, 0.0, True)
    assert not c.accepts(_op("Acosh", f), [floor])
    assert c.accepts(_op("Acosh", f), [c.x])


def test_an_integer_in_asin_can_only_be_zero() -> None:
    """Asin(Round(x)): the only integer inside (-1, 1) is 0, so Asin gives an exact 0, and a
    divisor made of it is refused; Asin(x) itself stays a fine divisor."""
    c = Chain([8])
    f = (DType.float32, [8])
    rounded = c.add(_op("Round", f), [c.x], [8])
    asin_int = c.add(_op("Asin", f), [rounded], [8])
    asin = c.add(_op("Asin", f), [c.x], [8])
    ranges = tensor_ranges(c.graph)
    assert ranges[asin_int].point and ranges[asin_int].lo == 0.0
    assert not c.accepts(_op("Div", f, f), [c.x, asin_int])
    assert c.accepts(_op("Div", f, f), [c.x, asin])
    assert ranges[asin].hi < math.pi / 2


def test_an_exact_zero_survives_a_product() -> None:
    c = Chain([3, 3])
    f = (DType.float32, [3, 3])
    eye = c.add(_op("EyeLike", f, k=0), [c.x], [3, 3])
    scaled = c.add(_op("Mul", f, f), [c.x, eye], [3, 3])
    assert tensor_ranges(c.graph)[scaled].zero
    assert not c.accepts(_op("Reciprocal", f), [scaled])


def _single_op_model(op: str, x: np.ndarray, out_type: int, **attrs: Any) -> onnx.ModelProto:
    """x -> Sin -> op: the operand is computed, so every margin of `op` is checked."""
    graph = helper.make_graph(
        [helper.make_node("Sin", ["x"], ["s"]), helper.make_node(op, ["s"], ["y"], **attrs)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", out_type, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_cast_to_int_has_no_jump_at_zero_but_has_one_at_one() -> None:
    near_zero = np.array([1e-6, -1e-6], dtype=np.float32)
    model = _single_op_model("Cast", near_zero, TensorProto.INT32, to=TensorProto.INT32)
    assert not margin_hits(model, {"x": near_zero})
    near_one = np.array([math.pi / 2], dtype=np.float32)  # Sin gives 1.0 up to rounding
    assert margin_hits(model, {"x": near_one})


def test_mean_variance_normalization_of_a_constant_slice_is_unsafe_and_never_built() -> None:
    """A zero variance, even an exact one: the spec's epsilon gives 0, onnxruntime 0/0."""
    x = np.array([[0.3], [0.7]], dtype=np.float32)
    assert margin_hits(_single_op_model("MeanVarianceNormalization", x, TensorProto.FLOAT, axes=[1]), {"x": x})
    flat = np.array([[0.3, 0.3]], dtype=np.float32)
    assert margin_hits(_single_op_model("MeanVarianceNormalization", flat, TensorProto.FLOAT, axes=[1]), {"x": flat})
    spread = np.array([[0.3, 0.9]], dtype=np.float32)
    assert not margin_hits(
        _single_op_model("MeanVarianceNormalization", spread, TensorProto.FLOAT, axes=[1]), {"x": spread}
    )
    mvn = _op("MeanVarianceNormalization", (DType.float32, [4, 1]), axes=[1])
    assert mvn.requires(mvn.inputs) == [False]
    mvn.axes = [0, 1]  # type: ignore[attr-defined]
    assert mvn.requires(mvn.inputs) == [True]


def test_a_reciprocal_of_a_softmax_product_is_at_least_one() -> None:
    """1/ReduceProd(Softmax(x)) is at least 1 (every factor is at most 1): Atanh refuses it,
    and a one-signed divisor gives a bounded quotient."""
    shape = [4, 3]
    c = Chain(shape)
    f = (DType.float32, shape)
    soft = c.add(_op("Softmax", f, axis=1), [c.x], shape)
    prod = c.add(_op("ReduceProd", f, axes=[0], noop=False), [soft], [1, 3])
    inv = c.add(_op("Reciprocal", (DType.float32, [1, 3])), [prod], [1, 3])
    r = tensor_ranges(c.graph)[inv]
    assert (r.lo, r.hi) == (1.0, math.inf)
    assert not c.accepts(_op("Atanh", (DType.float32, [1, 3])), [inv])
    assert c.accepts(_op("Atanh", (DType.float32, [1, 3])), [prod])
    assert output_range(_op("Div", f, f), [Range(-1.0, 1.0), Range(-4.0, -2.0)], DType.float32) == Range(-0.5, 0.5)


def test_minus_log_softmax_over_two_has_an_element_below_log_two() -> None:
    """The largest LogSoftmax element is at least -log(n); Neg makes that the smallest
    element's cap, and Acosh (x >= 1 + δ for every element) is refused for n = 2 only."""
    for n, ok in ((2, False), (3, True)):
        shape = [5, n]
        c = Chain(shape)
        f = (DType.float32, shape)
        ls = c.add(_op("LogSoftmax", f, axis=1), [c.x], shape)
        neg = c.add(_op("Neg", f), [ls], shape)
        assert tensor_ranges(c.graph)[neg].cap <= math.log(n) * 1.01
        assert c.accepts(_op("Acosh", f), [neg]) is ok, n


def test_dropout_is_the_identity_and_keeps_an_exact_zero() -> None:
    shape = [6, 2]
    c = Chain(shape)
    f = (DType.float32, shape)
    hard = c.add(_op("Hardmax", f, axis=0), [c.x], shape)
    dropped = c.add(_op("Dropout", f), [hard], shape)
    assert tensor_ranges(c.graph)[dropped] == tensor_ranges(c.graph)[hard]
    assert not c.accepts(_op("Log", f), [dropped])


def test_a_conv_without_bias_over_a_window_of_padding_writes_zeros() -> None:
    """Conv's first window along H lies wholly in 5 rows of padding: exact 0s, so Log after
    it is refused; with a bias, or padding the window reaches into, it is not."""
    x = (DType.float32, [1, 2, 4, 4])
    for pad, bias, ok in ((5, False, False), (2, False, True), (5, True, True)):
        c = Chain([1, 2, 4, 4])
        fields = {"kernel": [3, 3], "strides": [1, 1], "dilations": [1, 1], "pads": [pad, 0, 0, 0]}
        conv = _op("Conv", x, (DType.float32, [3, 2, 3, 3]), bias=bias, auto_pad="NOTSET", ceil_mode=False, **fields)
        out_shape = [1, 3, 4 + pad - 2, 2]
        y = c.add(conv, [c.x], out_shape)
        assert tensor_ranges(c.graph)[y].zero is not ok, (pad, bias)
        assert c.accepts(_op("Log", (DType.float32, out_shape)), [y]) is ok, (pad, bias)


def test_a_constant_pad_holds_its_value_once_it_grows_a_side() -> None:
    """The constant is drawn with the op: Log of a Pad with a negative one that grows a side
    is refused; cropping only, or a positive constant, is not."""
    shape = [3, 4]
    f = (DType.float32, shape)
    for value_at, begin, ok in ((0.1, [2, 0], False), (0.1, [0, 0], True), (0.9, [2, 0], True)):
        c = Chain(shape)
        pos = c.add(_op("Exp", f), [c.x], shape)
        pad = _op("Pad", f, mode="constant", value_input=True, value_at=value_at, begin=begin, end=[0, 0])
        pad.signs = [(1, 1), (1, 1)] if begin[0] else [(-1, -1), (1, 1)]  # type: ignore[attr-defined]
        out_shape = [3 + begin[0], 4]
        y = c.add(pad, [pos], out_shape)
        r = tensor_ranges(c.graph)[y]
        grown = min(0.0, pad.value or 0.0)  # type: ignore[attr-defined]
        assert r.lo == (grown if begin[0] else 0.0), (value_at, begin)
        assert c.accepts(_op("Log", (DType.float32, out_shape)), [y]) is ok, (value_at, begin)


def test_an_l1_normalization_over_one_element_is_a_sign() -> None:
    """x/|x| is exactly -1, 0 or 1: Asin of it can only be given 0s, so Asin's result is an
    exact 0 and never a divisor; over two elements it can be."""
    for n, ok in ((1, False), (2, True)):
        shape = [3, n]
        c = Chain(shape)
        f = (DType.float32, shape)
        norm = c.add(_op("LpNormalization", f, axis=1, p=1), [c.x], shape)
        asin = c.add(_op("Asin", f), [norm], shape)
        assert c.accepts(_op("Reciprocal", f), [asin]) is ok, n


def test_an_exact_zero_survives_a_concat_and_zeroes_a_product() -> None:
    """Concat keeps every element; a product over the group holding an exact 0 is 0, so an
    integer Mod by ReduceProd(Concat(EyeLike, x)) is refused, whatever the signs."""
    c = Chain([3, 3])
    f = (DType.float32, [3, 3])
    eye = c.add(_op("EyeLike", f, k=0), [c.x], [3, 3])
    joined = c.add(_op("Concat", f, f, axis=0), [eye, c.x], [6, 3])
    prod = c.add(_op("ReduceProd", (DType.float32, [6, 3]), axes=[0], noop=False), [joined], [1, 3])
    plain = c.add(_op("ReduceProd", (DType.float32, [3, 3]), axes=[0], noop=False), [c.x], [1, 3])
    ranges = tensor_ranges(c.graph)
    assert ranges[joined].zero and ranges[prod].zero and not ranges[plain].zero
    one = (DType.float32, [1, 3])
    assert not c.accepts(_op("Reciprocal", one), [prod])
    assert c.accepts(_op("Reciprocal", one), [plain])


def test_an_inexact_zero_sits_on_floor_and_sign_jumps() -> None:
    """An exclusive CumSum's first element is 0, but CumSum's bits may differ between
    backends, so Ceil or Sign of it is never safe; Hardmax's literal 0s are."""
    shape = [4, 3]
    f = (DType.float32, shape)
    c = Chain(shape)
    cum = c.add(_op("CumSum", f, (DType.int64, []), attrs={"exclusive": 1}), [c.x], shape)
    hard = c.add(_op("Hardmax", f, axis=1), [c.x], shape)
    assert tensor_ranges(c.graph)[cum].inexact and not tensor_ranges(c.graph)[hard].inexact
    for op_type in ("Ceil", "Floor", "Sign"):
        assert not c.accepts(_op(op_type, f), [cum]), op_type
        assert c.accepts(_op(op_type, f), [hard]), op_type
    assert c.accepts(_op("Round", f), [cum])


def test_a_sum_of_a_tensor_with_itself_keeps_its_exact_zero() -> None:
    shape = [4, 3]
    f = (DType.float32, shape)
    c = Chain(shape)
    cum = c.add(_op("CumSum", f, (DType.int64, []), attrs={"exclusive": 1}), [c.x], shape)
    twice = c.add(_op("Sum", f, f), [cum, cum], shape)
    mixed = c.add(_op("Sum", f, f), [cum, c.x], shape)
    assert not c.accepts(_op("Ceil", f), [twice])
    assert c.accepts(_op("Ceil", f), [mixed])


def test_a_contraction_with_an_all_zero_operand_is_zero() -> None:
    c = Chain([3, 1])
    f = (DType.float32, [3, 1])
    off = c.add(_op("EyeLike", f, k=1), [c.x], [3, 1])  # k past the one column: all 0
    row = c.add(_op("Transpose", f), [c.x], [1, 3])
    prod = c.add(_op("MatMul", f, (DType.float32, [1, 3])), [off, row], [3, 3])
    assert tensor_ranges(c.graph)[prod] == Range(0.0, 0.0)
    assert not c.accepts(_op("Reciprocal", (DType.float32, [3, 3])), [prod])


def test_thresholded_relu_of_a_hardmax_is_zero_or_one() -> None:
    """ThresholdedRelu keeps x > alpha (alpha drawn in [-0.5, 1]) and writes 0 elsewhere:
    of a Hardmax, never an Acosh operand; of a plain input, it can be."""
    shape = [4, 3]
    f = (DType.float32, shape)
    c = Chain(shape)
    hard = c.add(_op("Hardmax", f, axis=1), [c.x], shape)
    thr = c.add(_op("ThresholdedRelu", f), [hard], shape)
    free = c.add(_op("ThresholdedRelu", f), [c.x], shape)
    assert tensor_ranges(c.graph)[thr].hi == 1.0
    assert not c.accepts(_op("Acosh", f), [thr])
    assert c.accepts(_op("Acosh", f), [free])


def test_reduce_max_keeps_the_largest_elements_floor() -> None:
    """Every Hardmax slice holds a 1, so ReduceMax of it over other axes still has one: its
    Reciprocal is never an Asin operand... but a ReduceMin's largest can be anything."""
    shape = [4, 3]
    f = (DType.float32, shape)
    c = Chain(shape)
    hard = c.add(_op("Hardmax", f, axis=1), [c.x], shape)
    hi = c.add(_op("ReduceMax", f, (DType.int64, [1]), axes=[0], noop=False), [hard], [1, 3])
    lo = c.add(_op("ReduceMin", f, (DType.int64, [1]), axes=[0], noop=False), [hard], [1, 3])
    ranges = tensor_ranges(c.graph)
    assert ranges[hi].high_floor == 1.0 and ranges[lo].high_floor == -math.inf
    one = (DType.float32, [1, 3])
    # Every element below 1 - δ: not with a 1 among them.
    assert not c.accepts(_op("Atanh", one), [hi])
    assert c.accepts(_op("Atanh", one), [lo])


def test_an_inexact_integer_sits_on_floor_jumps() -> None:
    """x/|x| over one element is an integer but not same-bits: Floor or Ceil of it is always
    next to a jump; Round's jumps are at half-integers."""
    shape = [3, 1]
    f = (DType.float32, shape)
    c = Chain(shape)
    norm = c.add(_op("LpNormalization", f, axis=1, p=1), [c.x], shape)
    assert tensor_ranges(c.graph)[norm].integral and tensor_ranges(c.graph)[norm].inexact
    assert not c.accepts(_op("Floor", f), [norm])
    assert not c.accepts(_op("Ceil", f), [norm])
    assert c.accepts(_op("Round", f), [norm])
    assert c.accepts(_op("Floor", f), [c.x])


def test_cosh_is_even_and_lp_pools_are_at_least_the_smallest_magnitude() -> None:
    """Cosh of Ceil's exact 1s is cosh(1) (> 1), an LpPool over it at least that: never an
    Asin operand. Cosh of a free x, and LpPool of it, can be."""
    shape = [1, 1, 4, 4]
    f = (DType.float32, shape)
    c = Chain(shape)
    sig = c.add(_op("Sigmoid", f), [c.x], shape)
    ceil = c.add(_op("Ceil", f), [sig], shape)
    cosh = c.add(_op("Cosh", f), [ceil], shape)
    ranges = tensor_ranges(c.graph)
    assert ranges[ceil] == Range(1.0, 1.0, integral=True)
    assert ranges[cosh].lo > 1.5 and ranges[cosh].hi < 1.55
    assert not c.accepts(_op("Asin", f), [cosh])
    pooled = _op("LpPool", f)
    out = [1, 1, *pooled.transfer([AbsTensor(DType.float32, shape)])[0].shape[2:]]
    lp = c.add(pooled, [cosh], out)
    glp = c.add(_op("GlobalLpPool", f, p=2), [cosh], [1, 1, 1, 1])
    ranges = tensor_ranges(c.graph)
    assert ranges[lp].lo > 1.5 and ranges[glp].lo > 4 * 1.5
    assert not c.accepts(_op("Asin", (DType.float32, out)), [lp])
    free = c.add(_op("LpPool", f), [c.x], out)
    assert c.accepts(_op("Asin", (DType.float32, out)), [free])


def test_an_exclusive_cumsums_zero_slice_survives_reductions_over_other_axes() -> None:
    """An exclusive CumSum along axis 0 has a first row of 0s: ReduceSum over axis 1 (in
    int64 too) then has an exact 0, never a divisor, and ReduceLogSum over axis 1 a group
    summing to 0; over axis 0 the row is summed with the others and either can be safe."""
    shape = [5, 4]
    f = (DType.float32, shape)
    c = Chain(shape)
    cum = c.add(_op("CumSum", f, (DType.int64, []), axis=0, attrs={"exclusive": 1}), [c.x], shape)
    other = c.add(_op("ReduceSum", f, axes=[1], keepdims=False), [cum], [5])
    along = c.add(_op("ReduceSum", f, axes=[0], keepdims=False), [cum], [4])
    ranges = tensor_ranges(c.graph)
    assert ranges[other].zero and not ranges[along].zero
    v = (DType.float32, [5])
    assert not c.accepts(_op("Reciprocal", v), [other])
    assert c.accepts(_op("Reciprocal", (DType.float32, [4])), [along])
    assert not c.accepts(_op("ReduceLogSum", f, axes=[1], keepdims=False), [cum])
    assert c.accepts(_op("ReduceLogSum", f, axes=[0], keepdims=False), [cum])
    i = (DType.int64, shape)
    ci = Chain(shape, DType.int64)
    cum_i = ci.add(_op("CumSum", i, (DType.int64, []), axis=0, attrs={"exclusive": 1}), [ci.x], shape, DType.int64)
    red_i = ci.add(_op("ReduceSum", i, axes=[1], keepdims=False), [cum_i], [5], DType.int64)
    iv = (DType.int64, [5])
    assert not ci.accepts(_op("Mod", iv, iv), [red_i, red_i])


def test_a_trilu_masking_a_whole_row_keeps_a_zero_through_a_row_sum() -> None:
    """Lower with k = -1 masks all of row 0: a sum over each row has an exact 0."""
    shape = [3, 4]
    f = (DType.float32, shape)
    c = Chain(shape)
    tri = c.add(_op("Trilu", f, upper=0, k_input=True, k_pick=0.3), [c.x], shape)
    assert tensor_ranges(c.graph)[tri].zero_axis == 0  # k = -4 + int(0.3 * 10) = -1
    rows = c.add(_op("ReduceMax", f, axes=[1], keepdims=True), [tri], [3, 1])
    free = c.add(_op("ReduceMax", f, axes=[1], keepdims=True), [c.x], [3, 1])
    assert not c.accepts(_op("Log", (DType.float32, [3, 1])), [rows])
    assert c.accepts(_op("Log", (DType.float32, [3, 1])), [free])


def test_a_clip_to_known_bounds_confines_its_output() -> None:
    """Clip's min and max are drawn with the op: Ceil of Clip(x, -1, -0.75) (kept off -1) is
    exactly 0, never a divisor; with a bound above 0 it can be 1."""
    shape = [4]
    f = (DType.float32, shape)
    c = Chain(shape)
    neg = c.add(_op("Clip", f, form="both", bounds=[-4, -3]), [c.x], shape)
    pos = c.add(_op("Clip", f, form="both", bounds=[-4, 2]), [c.x], shape)
    assert tensor_ranges(c.graph)[neg] == Range(-1.0, -0.75)
    up, up_pos = (c.add(_op("Ceil", f), [t], shape) for t in (neg, pos))
    assert not c.accepts(_op("Reciprocal", f), [up])
    assert c.accepts(_op("Reciprocal", f), [up_pos])


def test_a_mod_is_smaller_than_its_divisor() -> None:
    """fmod(x, 1) lies in (-1, 1): Acosh of it is never safe, of fmod(x, y) it can be."""
    shape = [4]
    f = (DType.float32, shape)
    c = Chain(shape)
    one = c.add(_op("Clip", f, form="both", bounds=[4, 4]), [c.x], shape)
    small = c.add(_op("Mod", f, f, fmod=1), [c.x, one], shape)
    free = c.add(_op("Mod", f, f, fmod=1), [c.x, c.add(_op("Exp", f), [c.x], shape)], shape)
    assert tensor_ranges(c.graph)[small] == Range(-1.0, 1.0)
    assert not c.accepts(_op("Acosh", f), [small])
    assert c.accepts(_op("Acosh", f), [free])
    pos = c.add(_op("Relu", f), [c.x], shape)
    pos_mod = c.add(_op("Mod", f, f, fmod=1), [pos, one], shape)
    assert tensor_ranges(c.graph)[pos_mod] == Range(0.0, 1.0)


def test_an_integer_mod_by_a_sign_is_zero() -> None:
    """Mod(n, Sign(y)) of integers: the divisor can only be ±1, and the result only 0."""
    shape = [4]
    i = (DType.int64, shape)
    c = Chain(shape, DType.int64)
    sign = c.add(_op("Sign", i), [c.x], shape, DType.int64)
    zero = c.add(_op("Mod", i, i, fmod=1), [c.x, sign], shape, DType.int64)
    free = c.add(_op("Mod", i, i, fmod=1), [c.x, c.x], shape, DType.int64)
    assert tensor_ranges(c.graph)[zero] == Range(0.0, 0.0, integral=True)
    assert not c.accepts(_op("Mod", i, i, fmod=0), [c.x, zero])
    assert c.accepts(_op("Mod", i, i, fmod=0), [c.x, sign])
    assert tensor_ranges(c.graph)[free].point  # Mod(t, t)


def test_a_pad_that_crops_nothing_keeps_its_inputs_exact_zero() -> None:
    """Growing a side keeps every input element: an exclusive CumSum's 0 stays, whatever the
    constant; a Pad that also crops may drop it."""
    shape = [3, 4]
    f = (DType.float32, shape)
    for signs, ok in (([(1, 1), (1, 1)], False), ([(1, -1), (1, 1)], True)):
        c = Chain(shape)
        cum = c.add(_op("CumSum", f, (DType.int64, []), axis=0, attrs={"exclusive": 1}), [c.x], shape)
        pad = _op("Pad", f, mode="constant", value_input=True, value_at=0.9, begin=[2, 0], end=[2, 0])
        pad.signs = signs  # type: ignore[attr-defined]
        y = c.add(pad, [cum], [3 + 2 * signs[0][1], 4])
        assert c.accepts(_op("Reciprocal", (DType.float32, [3 + 2 * signs[0][1], 4])), [y]) is ok, signs


def test_a_pad_of_an_all_zero_tensor_keeps_a_zero() -> None:
    shape = [3, 4]
    f = (DType.float32, shape)
    c = Chain(shape)
    zeros = c.add(_op("Sub", f, f), [c.x, c.x], shape)
    pad = _op("Pad", f, mode="constant", value_input=True, value_at=0.9, begin=[2, 0], end=[0, 0])
    pad.signs = [(1, 1), (1, 1)]  # type: ignore[attr-defined]
    y = c.add(pad, [zeros], [5, 4])
    assert not c.accepts(_op("Reciprocal", (DType.float32, [5, 4])), [y])


def test_an_integer_mod_by_a_product_of_signs_is_zero() -> None:
    """A product of Signs is -1, 0 or 1: an integer Mod by it, if safe, is 0."""
    shape = [4]
    i = (DType.int64, shape)
    c = Chain(shape, DType.int64)
    sign = c.add(_op("Sign", i), [c.x], shape, DType.int64)
    prod = c.add(_op("ReduceProd", i, axes=[0], keepdims=True), [sign], [1], DType.int64)
    assert tensor_ranges(c.graph)[prod] == Range(-1.0, 1.0, integral=True)
    zero = c.add(_op("Mod", i, (DType.int64, [1]), fmod=1), [sign, prod], shape, DType.int64)
    assert not c.accepts(_op("Mod", i, i, fmod=0), [c.x, zero])


def test_thresholded_relu_shrink_and_one_hot_jumps_are_margins() -> None:
    """A computed operand a hair from ThresholdedRelu's alpha, Shrink's ±lambd (bias apart
    from lambd) or an integer OneHot index lands on either side by backend."""
    near = np.array([math.asin(0.5)], dtype=np.float32)  # Sin gives 0.5 up to rounding
    far = np.array([math.asin(0.7)], dtype=np.float32)
    for op, attrs in (("ThresholdedRelu", {"alpha": 0.5}), ("Shrink", {"lambd": 0.5, "bias": 0.2})):
        m = _single_op_model(op, near, TensorProto.FLOAT, **attrs)
        assert margin_hits(m, {"x": near}) and not margin_hits(m, {"x": far}), op
    smooth = _single_op_model("Shrink", near, TensorProto.FLOAT, lambd=0.5, bias=0.5)
    assert not margin_hits(smooth, {"x": near}), "bias == lambd: Shrink is continuous"
