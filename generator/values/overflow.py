"""Integer overflow (generator.values.unsafe): int32/int64 products, sums of squares, sums
and scans whose exact result leaves the type. Backends saturate or wrap, so the repair
shrinks the values behind the result.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from generator.values.predicate import Attrs, Operands, Predicate, Violation, operand, reduce_axes

OVERFLOW_DTYPES = (torch.int32, torch.int64)
"""Where onnxruntime saturates or traps and torch wraps: overflow is undefined, so neither
is a bug. Narrower integers are left alone (their products overflow at once, and the
backends agree on wrapping them)."""


def _log2_mag(x: torch.Tensor) -> torch.Tensor:
    return torch.log2(x.double().abs().clamp_min(1.0))


def _overflow(log2_mag: torch.Tensor, has_zero: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Positive where an exact product of magnitude 2**log2_mag leaves the type's range."""
    f = log2_mag - (torch.iinfo(dtype).bits - 1) + 0.5
    return torch.where(has_zero, torch.full_like(f, -1.0), f)


def mul_overflow(ops: Operands, attrs: Attrs) -> torch.Tensor:
    a, b = operand(ops, 0), operand(ops, 1)
    return _overflow(_log2_mag(a) + _log2_mag(b), (a == 0) | (b == 0), a.dtype)


def prod_overflow(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """ReduceProd's exact product, in log space (so a long slice cannot overflow float64)."""
    x = operand(ops)
    axes = reduce_axes(ops, attrs, x.dim())
    if axes is None or x.dim() == 0:
        return _overflow(_log2_mag(x), x == 0, x.dtype)
    mag = _log2_mag(x).sum(dim=axes, keepdim=True)
    return _overflow(mag, (x == 0).any(dim=axes, keepdim=True) if axes else x == 0, x.dtype)


def sum_square_overflow(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """ReduceSumSquare's exact sum of squares (in float64: its log2 is all that matters)."""
    x = operand(ops)
    axes = reduce_axes(ops, attrs, x.dim())
    sq = x.double() ** 2
    total = sq if axes is None or x.dim() == 0 else sq.sum(dim=axes, keepdim=True)
    return _overflow(torch.log2(total.clamp_min(1.0)), total == 0, x.dtype)


WIDEST_INT_BITS = 63
"""The magnitude bits of int64, the widest accumulator any backend has for an integer op."""


def l2_overflow(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Integer ReduceL2: undefined where its result leaves the type, or where its sum of
    squares leaves int64, so that no backend could compute it. Inside those bounds it is
    defined: onnxruntime up to 1.26.0 summed int32 squares in int32 and returned INT32_MIN
    for sqrt(30000**2 + 40000**2) = 50000; 1.27.0 fixed it (a real bug, kept reported)."""
    x = operand(ops)
    axes = reduce_axes(ops, attrs, x.dim())
    sq = x.double() ** 2
    total = sq if axes is None or x.dim() == 0 else sq.sum(dim=axes, keepdim=True)
    limit = min(2 * (torch.iinfo(x.dtype).bits - 1), WIDEST_INT_BITS)
    return torch.where(total == 0, torch.full_like(total, -1.0), torch.log2(total.clamp_min(1.0)) - limit + 0.5)


def log_sum_exp_overflow(ops: Operands, attrs: Attrs) -> torch.Tensor:
    """Integer ReduceLogSumExp: its result (about the largest element) always fits, but the
    exponentials it is defined through leave int64 from x = 44 on. ONNX names no
    intermediate type, so past that a backend that computes exp(x) in the input's type and
    one that computes it in float64 are both right: undefined."""
    x = operand(ops)
    axes = reduce_axes(ops, attrs, x.dim())
    log2e = x.double() * math.log2(math.e)
    biggest = (
        log2e
        if axes is None or x.dim() == 0
        else torch.logsumexp(log2e * math.log(2), dim=axes, keepdim=True) / math.log(2)
    )
    return biggest - WIDEST_INT_BITS + 0.5


def _small_ints(dtype: torch.dtype) -> list[int]:
    """What an overflowing product's factors are redrawn from: small, and never 0 or of
    mixed signs, so a repaired product or sum never becomes a zero divisor downstream (whose
    own repair would then undo this one, back and forth)."""
    return [1, 2]


def overflow_check(f: Violation) -> Predicate:
    return Predicate(
        "exact integer result fits its type",
        (0,),
        f,
        integer=True,
        repair=0,
        safe_values=_small_ints,
        applies=lambda ops, a: operand(ops).dtype in OVERFLOW_DTYPES,
        undefined=True,
    )


def exact_overflow(compute: Callable[[list[torch.Tensor], Attrs], torch.Tensor]) -> Violation:
    """The op's exact result, computed in float64 (integers of the operands' magnitude are
    exact there, and an overflow of int64 is still far beyond its range), against the
    operand type's range: where the reference wraps, a backend may saturate or trap."""

    def f(ops: Operands, attrs: Attrs) -> torch.Tensor:
        args = [t.double() for t in ops if t is not None]
        exact = compute(args, attrs)
        dtype = operand(ops).dtype
        return _overflow(torch.log2(exact.abs().clamp_min(1.0)), exact == 0, dtype)

    return f


def _axis_sum(args: list[torch.Tensor], attrs: Attrs) -> torch.Tensor:
    x = args[0]
    axes = reduce_axes([x, *args[1:2]], attrs, x.dim())
    return x if axes is None or x.dim() == 0 else x.sum(dim=axes, keepdim=True)


def _cumsum(args: list[torch.Tensor], attrs: Attrs) -> torch.Tensor:
    """The partial sums in either direction (`reverse`); `exclusive` only drops one."""
    x = args[0]
    if not x.dim():
        return x
    axis = int(args[1].reshape(-1)[0]) % x.dim()
    return torch.maximum(x.cumsum(axis).abs(), x.flip(axis).cumsum(axis).abs())


def _cumprod(args: list[torch.Tensor], attrs: Attrs) -> torch.Tensor:
    """The partial products in either direction; an integer's magnitude never shrinks along
    them (until a zero), so the full products bound every one."""
    x = args[0]
    if not x.dim():
        return x
    axis = int(args[1].reshape(-1)[0]) % x.dim()
    return torch.maximum(x.cumprod(axis).abs(), x.flip(axis).cumprod(axis).abs())


INT_OVERFLOW: dict[str, Callable[[list[torch.Tensor], Attrs], torch.Tensor]] = {
    "Add": lambda a, attrs: a[0] + a[1],
    "Sub": lambda a, attrs: a[0] - a[1],
    "Sum": lambda a, attrs: torch.stack(torch.broadcast_tensors(*a)).sum(dim=0),
    "Neg": lambda a, attrs: -a[0],
    "Abs": lambda a, attrs: a[0].abs(),
    "ReduceSum": _axis_sum,
    "ReduceL1": lambda a, attrs: _axis_sum([a[0].abs(), *a[1:]], attrs),
    "CumSum": _cumsum,
    "CumProd": _cumprod,
    "MatMul": lambda a, attrs: a[0] @ a[1] if a[0].dim() and a[1].dim() else a[0] * a[1],
}
"""Integer ops whose exact result can leave int32/int64 (overflow is undefined in ONNX)."""
