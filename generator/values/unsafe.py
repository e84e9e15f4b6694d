"""The table of numerically unsafe operators, keyed by ONNX op_type.

Each entry is a conjunction of predicates in NNSmith's canonical form: an operand is in
the op's valid domain when `f(operands) <= 0` everywhere (`< 0` when the predicate is
strict). That one form gives three things at once: a domain loss that is positive exactly
when the domain is violated (what NNSmith optimises), a margin loss that is positive when
an operand is within `margin` of the invalid domain (what we optimise, so that a backend's
rounding cannot tip a value over the edge), and the margin check the oracles use to call a
difference numerically unstable rather than a bug.

Integer predicates are discrete: a zero divisor has no useful gradient, so they carry a
`repair` slot and the set of values it may be redrawn from instead. Integer overflow
(int32/int64 Mul, ReduceProd, ReduceSumSquare, Pow) is one of them: backends saturate or
wrap, and the repair shrinks the values behind the product.

Discontinuities (Floor, Ceil, Round, QuantizeLinear and DynamicQuantizeLinear, Sign, a cast
to an integer or bool, ArgMax, ArgMin, Hardmax, TopK, ThresholdedRelu at alpha, Shrink at
±lambd, OneHot's float indices, GridSample's nearest-mode positions, RoiAlign's samples at the
border's edge, MaxRoiPool's rounded box corners) keep a computed operand
`JUMP_MARGIN` (relative) away from the jump: a backend that rounds the operand differently
lands on the other side.
Comparisons are left out: campaigns showed no false positive from them, and their margin
made many models unsolvable.

The table reads nothing from the generator's op specs: it describes ONNX semantics, so it
applies equally to models fuzzbot did not generate (reduced models, user bundles).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from generator.values.jumps import (
    arg_applies,
    arg_gap,
    dynamic_gap,
    dynamic_zero_gap,
    half_gap,
    int_gap,
    mod_gap,
    nonempty_float,
    quant_gap,
    shrink_gap,
    shrink_jumps,
    threshold_gap,
    topk_count,
    topk_gap,
    trunc_gap,
    zero_gap,
)
from generator.values.overflow import (
    INT_OVERFLOW,
    exact_overflow,
    l2_overflow,
    log_sum_exp_overflow,
    mul_overflow,
    overflow_check,
    prod_overflow,
    sum_square_overflow,
)
from generator.values.predicate import (
    FLOAT16_MAX,
    JUMP_MARGIN,
    Attrs,
    Operands,
    Predicate,
    Violation,
    abs_nz,
    cast_range,
    cast_target,
    cosh_growth,
    det_conditioning,
    exp_growth,
    int_info,
    int_pow,
    is_float,
    log_sum,
    lp_norm,
    mvn_variance,
    nonzero_ints,
    operand,
    periodic_unit,
    pow_base,
    pow_base_computed,
    pow_growth,
    shift_amounts,
    tan_conditioning,
    tan_pole,
    to_float16,
    trig_bound,
)


def _int_shrink_biased(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Positive where an integer Shrink adds its float bias: the spec does not say whether
    the bias is cast to the integer type first (onnxruntime and TVM: -5 + 0.326 is -5) or
    the sum is (onnx.reference: -4), so both are right."""
    x = operand(ops)
    lambd = float(attrs.get("lambd", 0.5))
    return torch.where(x.double().abs() > lambd, 1.0, -1.0)


def _float_everywhere(ops: Operands) -> torch.Tensor:
    """Positive on every element of a float operand: reinterpreted as an integer, a computed
    float one ulp off in one build is another integer, so no margin makes it safe."""
    x = operand(ops)
    return (
        torch.ones_like(x, dtype=torch.float64) if x.is_floating_point() else -torch.ones_like(x, dtype=torch.float64)
    )


def _grid_tie_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance of each GridSample position (the grid unnormalized to input
    cells along its dim) to the nearest half-integer, where nearest mode picks the next cell."""
    x, grid = operand(ops), operand(ops, 1)
    sizes = x.shape[2:]
    r = len(sizes)
    corners = bool(attrs.get("align_corners", 0))
    cells = [
        (grid[..., r - 1 - i] + 1) / 2 * (n - 1) if corners else ((grid[..., r - 1 - i] + 1) * n - 1) / 2
        for i, n in enumerate(sizes)
    ]
    return half_gap([torch.stack(cells, -1)], attrs)


def _roi_align_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance of each RoiAlign sample position to -1 and to the extent, where
    a sample stops reading the border and reads 0, and (adaptive sampling) of each bin's size to
    a whole number of cells, where the sample count steps. Under both box readings: RoiAlign-10
    has no half-pixel shift, 16 shifts by default, and the node alone does not say which."""
    x, rois = operand(ops), operand(ops, 1)
    scale, ratio = float(attrs.get("spatial_scale", 1.0)), int(attrs.get("sampling_ratio", 0))
    axes = (
        (1, 3, x.shape[2], int(attrs.get("output_height", 1))),
        (0, 2, x.shape[3], int(attrs.get("output_width", 1))),
    )
    gaps = []
    for offset, lo, hi, length, bins in ((o, *axis) for o in (0.0, 0.5) for axis in axes):
        start = rois[:, lo] * scale - offset
        size = rois[:, hi] * scale - offset - start
        size = size.clamp_min(1.0) if offset == 0 else size
        per_bin = size / bins
        if ratio <= 0:
            gaps.append(-abs_nz(per_bin - torch.round(per_bin).detach()) / periodic_unit(per_bin))
        for k in range(rois.shape[0]):
            grid = ratio if ratio > 0 else max(math.ceil(float(per_bin[k])), 1)
            steps = torch.arange(bins * grid, dtype=rois.dtype)
            pos = start[k] + (steps // grid) * per_bin[k] + (steps % grid + 0.5) * per_bin[k] / grid
            edge = torch.minimum(abs_nz(pos + 1), abs_nz(pos - length))
            gaps.append(-edge / periodic_unit(pos))
    return torch.cat(gaps) if gaps else torch.zeros(1, dtype=rois.dtype)


def _roi_pool_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance of each scaled MaxRoiPool box corner to a half-integer, where its
    rounding to a cell jumps."""
    return half_gap([operand(ops, 1)[:, 1:] * float(attrs.get("spatial_scale", 1.0))], attrs)


def _jump(name: str, f: Violation, slots: tuple[int, ...] = (0,), **kw: Any) -> Predicate:
    """A discontinuity: only a computed operand (see `same_bits`) can round across it."""
    return Predicate(name, slots, f, inexact_only=True, margins=JUMP_MARGIN, **kw)


def _to_bool(ops: Operands, attrs: Attrs) -> bool:
    return cast_target(ops, attrs) in (torch.bool, ONNX_BOOL)


ONNX_BOOL = 9


def _float_divisor(name: str) -> Predicate:
    return Predicate(f"{name} != 0", (1,), lambda ops, a: -abs_nz(operand(ops, 1)), strict=True)


def _int_divisor(name: str) -> Predicate:
    return Predicate(
        f"{name} != 0",
        (1,),
        lambda ops, a: -operand(ops, 1).abs().double(),
        strict=True,
        integer=True,
        repair=1,
        safe_values=nonzero_ints,
        undefined=True,
    )


CAST: tuple[Predicate, ...] = (
    Predicate(
        "float fits the integer target",
        (0,),
        cast_range,
        strict=True,
        fixed_margin=0.5,
        applies=lambda ops, a: int_info(ops, a) is not None,
        undefined=True,
    ),
    Predicate(
        "|x| <= float16 max",
        (0,),
        lambda ops, a: operand(ops).abs() - FLOAT16_MAX,
        fixed_margin=504.0,
        applies=to_float16,
    ),
    _jump("float not near a nonzero integer", trunc_gap, applies=lambda ops, a: int_info(ops, a) is not None),
    _jump("float not near 0", zero_gap, applies=_to_bool),
)
"""Cast and CastLike: a float must fit an integer target after truncation, or float16."""


def _nan_in(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Violated (NaN) where x is NaN: TopK's spec orders values and says nothing of NaN, so
    which of k places a NaN takes is every build's own (onnxruntime's differed from the
    reference's on a user's input, and was reported as a bug on both builds)."""
    x = operand(ops)
    return torch.full(x.shape, -1.0, dtype=torch.float64).masked_fill(x.isnan(), float("nan"))


UNSAFE: dict[str, tuple[Predicate, ...]] = {
    "Log": (Predicate("x > 0", (0,), lambda ops, a: -operand(ops), strict=True),),
    "Sqrt": (Predicate("x >= 0", (0,), lambda ops, a: -operand(ops)),),
    "Reciprocal": (Predicate("x != 0", (0,), lambda ops, a: -abs_nz(operand(ops)), strict=True),),
    "Div": (_float_divisor("divisor"), _int_divisor("divisor")),
    "Mul": (overflow_check(mul_overflow),),
    "Mod": (
        _float_divisor("divisor"),
        _int_divisor("divisor"),
        _jump("x / divisor not near a nonzero integer", mod_gap, (0, 1), applies=lambda ops, a: is_float(ops[0])),
    ),
    "Pow": (
        Predicate("base > 0, or != 0 under an integer exponent", (0,), pow_base, strict=True),
        Predicate("exponent * ln(base) <= limit", (0, 1), pow_growth, applies=lambda ops, a: is_float(ops[0])),
        Predicate("base > 0 under a computed exponent", (1,), pow_base_computed, strict=True, inexact_only=True),
        Predicate(
            "integer exponent >= 0 and no overflow",
            (0, 1),
            int_pow,
            integer=True,
            repair=1,
            safe_values=lambda dt: [0, 1, 2],
            undefined=True,
        ),
    ),
    "Asin": (Predicate("|x| <= 1", (0,), lambda ops, a: operand(ops).abs() - 1),),
    "Acos": (Predicate("|x| <= 1", (0,), lambda ops, a: operand(ops).abs() - 1),),
    "Atanh": (Predicate("|x| < 1", (0,), lambda ops, a: operand(ops).abs() - 1, strict=True),),
    "Acosh": (Predicate("x >= 1", (0,), lambda ops, a: 1 - operand(ops)),),
    "Exp": (Predicate("x <= growth limit", (0,), exp_growth),),
    "Softplus": (Predicate("x <= growth limit", (0,), exp_growth),),
    "Mish": (Predicate("x <= growth limit", (0,), exp_growth),),
    "Sinh": (Predicate("|x| <= growth limit", (0,), cosh_growth),),
    "Cosh": (Predicate("|x| <= growth limit", (0,), cosh_growth),),
    "Tan": (
        Predicate("|x| <= trig limit", (0,), trig_bound),
        Predicate("cos(x) != 0", (0,), tan_pole, strict=True),
        Predicate("rounding of x stays within tolerance", (0,), tan_conditioning, fixed_margin=1.0, inexact_only=True),
    ),
    "Sin": (Predicate("|x| <= trig limit", (0,), trig_bound),),
    "Cos": (Predicate("|x| <= trig limit", (0,), trig_bound),),
    "Cast": CAST,
    "BitCast": (_jump("a float's bits the same in every build", lambda ops, a: _float_everywhere(ops)),),
    "CastLike": CAST,
    "BitShift": (
        Predicate(
            "0 <= shift < bits",
            (1,),
            lambda ops, a: torch.maximum(-operand(ops, 1).double(), operand(ops, 1).double() - (_bits(ops[0]) - 1)),
            integer=True,
            repair=1,
            safe_values=shift_amounts,
            undefined=True,
        ),
    ),
    "Det": (Predicate("det not small next to its rows", (0,), det_conditioning),),
    "BatchNormalization": (Predicate("variance >= 0", (4,), lambda ops, a: -operand(ops, 4)),),
    "ReduceLogSum": (Predicate("sum > 0", (0,), log_sum, strict=True),),
    "ReduceLogSumExp": (
        Predicate("x <= growth limit", (0,), exp_growth),
        overflow_check(log_sum_exp_overflow),
    ),
    "ReduceL2": (overflow_check(l2_overflow),),
    "ReduceProd": (overflow_check(prod_overflow),),
    "Floor": (_jump("x not near an integer", int_gap),),
    "ThresholdedRelu": (_jump("x not near alpha", threshold_gap),),
    "Shrink": (
        _jump("x not near ±lambd", shrink_gap, applies=shrink_jumps),
        Predicate(
            "integer x within ±lambd under a fractional bias",
            (0,),
            _int_shrink_biased,
            integer=True,
            repair=0,
            safe_values=lambda dtype: [0],
            applies=lambda ops, a: float(a.get("bias", 0.0)) != round(float(a.get("bias", 0.0))),
            undefined=True,
        ),
    ),
    "OneHot": (_jump("float index not near an integer", int_gap, applies=lambda ops, a: is_float(ops[0])),),
    "Ceil": (_jump("x not near an integer", int_gap),),
    "Round": (_jump("x not near a half-integer", half_gap),),
    "GridSample": (
        _jump(
            "nearest position not near a half-integer",
            _grid_tie_gap,
            (1,),
            applies=lambda ops, a: a.get("mode", "linear") == "nearest" and ops[0] is not None,
        ),
    ),
    "RoiAlign": (_jump("box samples not near where reading the border stops", _roi_align_gap, (1,)),),
    "MaxRoiPool": (_jump("scaled box corners not near a half-integer", _roi_pool_gap, (1,)),),
    "QuantizeLinear": (_jump("x / scale not near a half-integer", quant_gap, (0, 1), applies=nonempty_float),),
    "DynamicQuantizeLinear": (
        _jump("x / scale not near a half-integer", dynamic_gap, applies=nonempty_float),
        _jump("zero point not near a half-integer", dynamic_zero_gap, applies=nonempty_float),
    ),
    "Sign": (_jump("x not near 0", zero_gap),),
    "ReduceSumSquare": (overflow_check(sum_square_overflow),),
    "ArgMax": (_jump("a clear maximum", arg_gap(True), applies=arg_applies()),),
    "ArgMin": (_jump("a clear minimum", arg_gap(False), applies=arg_applies()),),
    "Hardmax": (_jump("a clear maximum", arg_gap(True, -1), applies=arg_applies(-1)),),
    "TopK": (
        _jump("no near-ties among the k + 1 best", topk_gap, applies=lambda o, a: topk_count(o, a) >= 2),
        Predicate("x has no NaN", (0,), _nan_in, applies=lambda ops, a: is_float(ops[0]), undefined=True),
    ),
    "LpNormalization": (Predicate("norm > 0 or exactly 0", (0,), lp_norm),),
    "MeanVarianceNormalization": (Predicate("variance > 0", (0,), mvn_variance, strict=True),),
}


EXACT_RESULT_OPS = frozenset(
    {"Relu", "Sign", "Clip", "Floor", "Ceil", "Round", "Shape", "Size", "ConstantOfShape", "Hardmax", "EyeLike"}
    | {"ThresholdedRelu", "Trilu"}
)
"""Ops whose results on a domain's boundary (0, ±1, a clip bound) are exact in every backend
(Hardmax and EyeLike write literal 0s and 1s, wherever they put them; ThresholdedRelu and
Trilu literal 0s where they drop a value)."""


PASSTHROUGH_OPS = frozenset(
    {
        "Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Slice", "Gather",
        "GatherElements", "GatherND", "Concat", "Split", "Tile", "Expand", "Pad", "Neg", "Abs",
        "Max", "Min", "Where", "ReduceMax", "ReduceMin", "DepthToSpace", "SpaceToDepth", "Compress",
        "ScatterElements", "ScatterND", "Dropout", "MaxPool", "GlobalMaxPool", "TopK", "OneHot",
        "NonZero", "Unique", "BitCast",
    }
)  # fmt: skip
"""Ops that only move, select or negate values: their results are exact when their inputs are
(OneHot selects its off/on constants, at positions its indices decide; NonZero and Unique
write positions and picked values that equality with zero or between elements decides.
NonMaxSuppression is not one: a rounded IoU on its threshold can keep another box)."""


BOUNDARY_ONLY_OPS = frozenset({"Relu", "Clip", "ThresholdedRelu", "Trilu"})
"""Exact on their boundary (0, a clip bound) only: elsewhere they pass their input through."""


CORRECTLY_ROUNDED_OPS = frozenset({"Cast", "CastLike"})
"""One correctly rounded conversion: the same bits everywhere when the input's bits are."""


def same_bits(op_type: str, inputs_same: Sequence[bool]) -> bool:
    """Whether every result of an op has the same bits in every backend, given its inputs':
    what a discontinuity (Floor, a comparison) needs before a value next to its jump is
    harmless. Stricter than `exact_output`: Relu(x) is only exact where it is 0."""
    if op_type in BOUNDARY_ONLY_OPS or op_type in CORRECTLY_ROUNDED_OPS:
        return all(inputs_same)
    return exact_output(op_type, inputs_same)


def exact_output(op_type: str, inputs_exact: Sequence[bool]) -> bool:
    """Whether an op's results are the same bits in every backend, given its inputs'."""
    return op_type in EXACT_RESULT_OPS or (op_type in PASSTHROUGH_OPS and all(inputs_exact))


def _bits(t: torch.Tensor | None) -> int:
    assert t is not None
    return torch.iinfo(t.dtype).bits


for _op, _compute in INT_OVERFLOW.items():
    UNSAFE[_op] = (*UNSAFE.get(_op, ()), overflow_check(exact_overflow(_compute)))


def predicates(op_type: str) -> tuple[Predicate, ...]:
    return UNSAFE.get(op_type, ())
