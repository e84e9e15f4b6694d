"""The distances to a discontinuity (generator.values.unsafe): rounding to an integer or a
quantum, a threshold, a winner among ties. A backend that rounds the operand differently
lands on the other side of the jump, so the value search keeps operands JUMP_MARGIN away.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from generator.ops.narrow import float8_spacing
from generator.ops.quant import implied_zero_point
from generator.quantization import dynamic_range, per_axis
from generator.values.predicate import (
    Attrs,
    Operands,
    Violation,
    abs_nz,
    is_float,
    operand,
    periodic_unit,
    rounding_unit,
)


def int_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance to the nearest integer, where Floor, Ceil and a cast to
    an integer jump by 1: an operand a few ulps from it lands on either side by backend."""
    x = operand(ops)
    return -abs_nz(x - torch.round(x).detach()) / periodic_unit(x)


def trunc_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """`int_gap` for a cast to an integer, which truncates toward zero: continuous at 0
    (-0.3 and 0.3 both give 0), so only the nonzero integers are jumps."""
    x = operand(ops)
    r = torch.round(x).detach()
    r = torch.where(r == 0, torch.where(x < 0, -1.0, 1.0).to(x.dtype), r)
    return -abs_nz(x - r) / periodic_unit(x)


def mod_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance of x / divisor to the nearest nonzero integer, where a
    float Mod (C's fmod) jumps by the divisor: fmod(1.505863, elu(-0.0223939)) is 0.0221 or
    0 depending on how the backend rounds Elu's exp(x) - 1, a quotient 5e-5 from 68."""
    x, d = operand(ops, 0), operand(ops, 1)
    q = x / torch.where(d == 0, torch.ones_like(d), d)
    return trunc_gap([q], attrs)


def threshold_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance to alpha, where ThresholdedRelu jumps from 0 to x."""
    x = operand(ops)
    return -abs_nz(x - float(attrs.get("alpha", 1.0))) / rounding_unit(x)


def shrink_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance to ±lambd, where Shrink jumps by lambd - bias."""
    x, lambd = operand(ops), float(attrs.get("lambd", 0.5))
    return -torch.minimum(abs_nz(x - lambd), abs_nz(x + lambd)) / rounding_unit(x)


def shrink_jumps(ops: Operands, attrs: Attrs) -> bool:
    return is_float(ops[0]) and float(attrs.get("bias", 0.0)) != float(attrs.get("lambd", 0.5))


def half_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance to the nearest half-integer, where Round jumps."""
    return _half_gap_of(operand(ops))


def _half_gap_of(v: torch.Tensor) -> torch.Tensor:
    return -abs_nz(v - torch.floor(v).detach() - 0.5) / periodic_unit(v)


def quant_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus the relative distance of x / scale to the nearest half-integer, where
    QuantizeLinear's round-half-to-even jumps by one quantum; far (-1) where the result
    saturates whichever way it rounds."""
    x = operand(ops)
    v = x / per_axis(operand(ops, 1), attrs, x.shape).to(x.dtype)
    zero = ops[2] if len(ops) > 2 and ops[2] is not None else implied_zero_point(attrs)
    if zero.dtype.is_floating_point:  # float8: a tie between two neighbours, at any binade
        return torch.where(v.isfinite(), _half_gap_of(v / float8_spacing(v, zero.dtype)), -torch.ones_like(v))
    info = torch.iinfo(zero.dtype)
    q = v.detach() + per_axis(zero, attrs, x.shape).to(x.dtype)
    gap = _half_gap_of(v)
    return torch.where((q < info.min - 1) | (q > info.max + 1), -torch.ones_like(gap), gap)


def dynamic_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """`quant_gap` under DynamicQuantizeLinear's computed scale."""
    x = operand(ops)
    return _half_gap_of(x / dynamic_range(x)[0])


def dynamic_zero_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """The zero point is rounded too: -min / scale must not sit next to a half-integer."""
    return _half_gap_of(dynamic_range(operand(ops))[1]).reshape(1)


def nonempty_float(ops: Operands, attrs: Attrs) -> bool:
    return is_float(ops[0]) and operand(ops).numel() > 0


def zero_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Minus |x|: Sign (and a cast to bool) jump at 0."""
    return -abs_nz(operand(ops))


def _winner_gap(x: torch.Tensor, k: int, axis: int, largest: bool) -> torch.Tensor:
    """Minus the relative gaps between the `k` best elements along `axis`, best first.

    An exact tie (-1: far from the margin) mostly comes from duplicated values (Expand,
    Tile), which every backend breaks the same way (first index), and the search could never
    pull the copies apart: counting it cost 3.5 points of 10-node success. It can also come
    from rounding (float16 Sigmoid saturating onto 1.0 in one backend only): those false
    positives remain."""
    v = torch.topk(x, k, dim=axis, largest=largest, sorted=True).values
    hi, lo = v.narrow(axis, 0, k - 1), v.narrow(axis, 1, k - 1)
    gap = -abs_nz(hi - lo) / rounding_unit(hi, lo)
    return torch.where(hi == lo, -torch.ones_like(gap), gap)


def arg_gap(largest: bool, default_axis: int = 0) -> Violation:
    """ArgMax/ArgMin/Hardmax: the winner must beat the runner-up, or the index (the 1's
    position) depends on rounding."""

    def f(ops: Operands, attrs: Attrs) -> torch.Tensor:
        x = operand(ops)
        return _winner_gap(x, 2, int(attrs.get("axis", default_axis)) % x.dim(), largest)

    return f


def arg_applies(default_axis: int = 0) -> Callable[[Operands, Attrs], bool]:
    def applies(ops: Operands, attrs: Attrs) -> bool:
        x = operand(ops)
        return x.dim() > 0 and x.shape[int(attrs.get("axis", default_axis)) % x.dim()] >= 2

    return applies


def topk_count(ops: Operands, attrs: Attrs) -> int:
    """How many leading elements decide TopK's indices: the k chosen and the first left out."""
    if len(ops) < 2 or ops[1] is None:
        return 0
    x, k = operand(ops, 0), operand(ops, 1)
    n = x.shape[int(attrs.get("axis", -1)) % x.dim()] if x.dim() else 0
    return min(int(k.reshape(-1)[0]) + 1, n) if k.numel() else 0


def topk_gap(ops: Operands, attrs: Attrs) -> torch.Tensor:
    x = operand(ops)
    axis = int(attrs.get("axis", -1)) % x.dim()
    return _winner_gap(x, topk_count(ops, attrs), axis, bool(attrs.get("largest", 1)))
