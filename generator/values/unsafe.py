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
±lambd, OneHot's float indices) keep a computed operand `JUMP_MARGIN` (relative) away from
the jump: a backend that rounds the operand differently lands on the other side.
Comparisons are left out: campaigns showed no false positive from them, and their margin
made many models unsolvable.

The table reads nothing from the generator's op specs: it describes ONNX semantics, so it
applies equally to models fuzzbot did not generate (reduced models, user bundles).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from generator.values.jumps import (
    _arg_applies,
    _arg_gap,
    _dynamic_gap,
    _dynamic_zero_gap,
    _half_gap,
    _int_gap,
    _mod_gap,
    _nonempty_float,
    _quant_gap,
    _shrink_gap,
    _shrink_jumps,
    _threshold_gap,
    _topk_count,
    _topk_gap,
    _trunc_gap,
    _zero_gap,
)
from generator.values.overflow import (
    INT_OVERFLOW,
    _exact_overflow,
    _l2_overflow,
    _log_sum_exp_overflow,
    _mul_overflow,
    _overflow_check,
    _prod_overflow,
    _sum_square_overflow,
)
from generator.values.predicate import (
    FLOAT16_MAX,
    JUMP_MARGIN,
    Attrs,
    Operands,
    Predicate,
    Violation,
    _abs_nz,
    _cast_range,
    _cast_target,
    _cosh_growth,
    _exp_growth,
    _int_info,
    _int_pow,
    _is_float,
    _log_sum,
    _lp_norm,
    _mvn_variance,
    _nonzero_ints,
    _pow_base,
    _pow_base_computed,
    _pow_growth,
    _shift_amounts,
    _tan_conditioning,
    _tan_pole,
    _to_float16,
    _trig_bound,
    _x,
)


def _int_shrink_biased(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Positive where an integer Shrink adds its float bias: the spec does not say whether
    the bias is cast to the integer type first (onnxruntime and TVM: -5 + 0.326 is -5) or
    the sum is (onnx.reference: -4), so both are right."""
    x = _x(ops)
    lambd = float(attrs.get("lambd", 0.5))
    return torch.where(x.double().abs() > lambd, 1.0, -1.0)


def _jump(name: str, f: Violation, slots: tuple[int, ...] = (0,), **kw: Any) -> Predicate:
    """A discontinuity: only a computed operand (see `same_bits`) can round across it."""
    return Predicate(name, slots, f, inexact_only=True, margins=JUMP_MARGIN, **kw)


def _to_bool(ops: Operands, attrs: Attrs) -> bool:
    return _cast_target(ops, attrs) in (torch.bool, ONNX_BOOL)


ONNX_BOOL = 9


def _float_divisor(name: str) -> Predicate:
    return Predicate(f"{name} != 0", (1,), lambda ops, a: -_abs_nz(_x(ops, 1)), strict=True)


def _int_divisor(name: str) -> Predicate:
    return Predicate(
        f"{name} != 0",
        (1,),
        lambda ops, a: -_x(ops, 1).abs().double(),
        strict=True,
        integer=True,
        repair=1,
        safe_values=_nonzero_ints,
        undefined=True,
    )


CAST: tuple[Predicate, ...] = (
    Predicate(
        "float fits the integer target",
        (0,),
        _cast_range,
        strict=True,
        fixed_margin=0.5,
        applies=lambda ops, a: _int_info(ops, a) is not None,
        undefined=True,
    ),
    Predicate(
        "|x| <= float16 max",
        (0,),
        lambda ops, a: _x(ops).abs() - FLOAT16_MAX,
        fixed_margin=504.0,
        applies=_to_float16,
    ),
    _jump("float not near a nonzero integer", _trunc_gap, applies=lambda ops, a: _int_info(ops, a) is not None),
    _jump("float not near 0", _zero_gap, applies=_to_bool),
)
"""Cast and CastLike: a float must fit an integer target after truncation, or float16."""


UNSAFE: dict[str, tuple[Predicate, ...]] = {
    "Log": (Predicate("x > 0", (0,), lambda ops, a: -_x(ops), strict=True),),
    "Sqrt": (Predicate("x >= 0", (0,), lambda ops, a: -_x(ops)),),
    "Reciprocal": (Predicate("x != 0", (0,), lambda ops, a: -_abs_nz(_x(ops)), strict=True),),
    "Div": (_float_divisor("divisor"), _int_divisor("divisor")),
    "Mul": (_overflow_check(_mul_overflow),),
    "Mod": (
        _float_divisor("divisor"),
        _int_divisor("divisor"),
        _jump("x / divisor not near a nonzero integer", _mod_gap, (0, 1), applies=lambda ops, a: _is_float(ops[0])),
    ),
    "Pow": (
        Predicate("base > 0, or != 0 under an integer exponent", (0,), _pow_base, strict=True),
        Predicate("exponent * ln(base) <= limit", (0, 1), _pow_growth, applies=lambda ops, a: _is_float(ops[0])),
        Predicate("base > 0 under a computed exponent", (1,), _pow_base_computed, strict=True, inexact_only=True),
        Predicate(
            "integer exponent >= 0 and no overflow",
            (0, 1),
            _int_pow,
            integer=True,
            repair=1,
            safe_values=lambda dt: [0, 1, 2],
            undefined=True,
        ),
    ),
    "Asin": (Predicate("|x| <= 1", (0,), lambda ops, a: _x(ops).abs() - 1),),
    "Acos": (Predicate("|x| <= 1", (0,), lambda ops, a: _x(ops).abs() - 1),),
    "Atanh": (Predicate("|x| < 1", (0,), lambda ops, a: _x(ops).abs() - 1, strict=True),),
    "Acosh": (Predicate("x >= 1", (0,), lambda ops, a: 1 - _x(ops)),),
    "Exp": (Predicate("x <= growth limit", (0,), _exp_growth),),
    "Softplus": (Predicate("x <= growth limit", (0,), _exp_growth),),
    "Mish": (Predicate("x <= growth limit", (0,), _exp_growth),),
    "Sinh": (Predicate("|x| <= growth limit", (0,), _cosh_growth),),
    "Cosh": (Predicate("|x| <= growth limit", (0,), _cosh_growth),),
    "Tan": (
        Predicate("|x| <= trig limit", (0,), _trig_bound),
        Predicate("cos(x) != 0", (0,), _tan_pole, strict=True),
        Predicate("rounding of x stays within tolerance", (0,), _tan_conditioning, fixed_margin=1.0, inexact_only=True),
    ),
    "Sin": (Predicate("|x| <= trig limit", (0,), _trig_bound),),
    "Cos": (Predicate("|x| <= trig limit", (0,), _trig_bound),),
    "Cast": CAST,
    "CastLike": CAST,
    "BitShift": (
        Predicate(
            "0 <= shift < bits",
            (1,),
            lambda ops, a: torch.maximum(-_x(ops, 1).double(), _x(ops, 1).double() - (_bits(ops[0]) - 1)),
            integer=True,
            repair=1,
            safe_values=_shift_amounts,
            undefined=True,
        ),
    ),
    "BatchNormalization": (Predicate("variance >= 0", (4,), lambda ops, a: -_x(ops, 4)),),
    "ReduceLogSum": (Predicate("sum > 0", (0,), _log_sum, strict=True),),
    "ReduceLogSumExp": (
        Predicate("x <= growth limit", (0,), _exp_growth),
        _overflow_check(_log_sum_exp_overflow),
    ),
    "ReduceL2": (_overflow_check(_l2_overflow),),
    "ReduceProd": (_overflow_check(_prod_overflow),),
    "Floor": (_jump("x not near an integer", _int_gap),),
    "ThresholdedRelu": (_jump("x not near alpha", _threshold_gap),),
    "Shrink": (
        _jump("x not near ±lambd", _shrink_gap, applies=_shrink_jumps),
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
    "OneHot": (_jump("float index not near an integer", _int_gap, applies=lambda ops, a: _is_float(ops[0])),),
    "Ceil": (_jump("x not near an integer", _int_gap),),
    "Round": (_jump("x not near a half-integer", _half_gap),),
    "QuantizeLinear": (_jump("x / scale not near a half-integer", _quant_gap, (0, 1), applies=_nonempty_float),),
    "DynamicQuantizeLinear": (
        _jump("x / scale not near a half-integer", _dynamic_gap, applies=_nonempty_float),
        _jump("zero point not near a half-integer", _dynamic_zero_gap, applies=_nonempty_float),
    ),
    "Sign": (_jump("x not near 0", _zero_gap),),
    "ReduceSumSquare": (_overflow_check(_sum_square_overflow),),
    "ArgMax": (_jump("a clear maximum", _arg_gap(True), applies=_arg_applies()),),
    "ArgMin": (_jump("a clear minimum", _arg_gap(False), applies=_arg_applies()),),
    "Hardmax": (_jump("a clear maximum", _arg_gap(True, -1), applies=_arg_applies(-1)),),
    "TopK": (_jump("no near-ties among the k + 1 best", _topk_gap, applies=lambda o, a: _topk_count(o, a) >= 2),),
    "LpNormalization": (Predicate("norm > 0 or exactly 0", (0,), _lp_norm),),
    "MeanVarianceNormalization": (Predicate("variance > 0", (0,), _mvn_variance, strict=True),),
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
    }
)  # fmt: skip
"""Ops that only move, select or negate values: their results are exact when their inputs are
(OneHot selects its off/on constants, at positions its indices decide)."""


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
    UNSAFE[_op] = (*UNSAFE.get(_op, ()), _overflow_check(_exact_overflow(_compute)))


def predicates(op_type: str) -> tuple[Predicate, ...]:
    return UNSAFE.get(op_type, ())
