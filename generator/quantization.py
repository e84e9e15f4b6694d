"""ONNX's quantization arithmetic, once: what QuantizeLinear and DynamicQuantizeLinear
compute (generator.ops.quant, the torch reference) is also where they jump (the unsafe-op
table, generator.values.unsafe), so both read it from here rather than from each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

QUANT_RANGE: dict[torch.dtype, tuple[int, int]] = {torch.uint8: (0, 255), torch.int8: (-128, 127)}


def per_axis(scale: torch.Tensor, attrs: Mapping[str, Any], shape: Sequence[int]) -> torch.Tensor:
    """A scale (or zero point) shaped to broadcast against an operand of `shape`: a per-tensor
    one as is, a per-axis one along `axis`, and a blocked one (opset 21's `block_size`) with
    each entry repeated over its block along `axis`, the last block cut to what is left."""
    rank = len(shape)
    if scale.dim() == 0 or rank == 0:
        return scale.reshape(()) if scale.numel() == 1 else scale
    axis = int(attrs.get("axis", 1)) % rank
    block = int(attrs.get("block_size", 0))
    if block > 0:
        return scale.repeat_interleave(block, dim=axis).narrow(axis, 0, int(shape[axis]))
    along = [1] * rank
    along[axis] = -1
    return scale.reshape(along)


def quantize(x: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """saturate(round_half_even(x / scale) + zero_point), the division in float32 as every
    CPU kernel does it."""
    lo, hi = QUANT_RANGE[dtype]
    q = torch.round(x.float() / scale.float()) + zero.float()
    return q.clamp(lo, hi).to(dtype)


def dynamic_range(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """DynamicQuantizeLinear's uint8 scale and unrounded zero point: the range of x widened to
    hold 0, over 255 steps (scale 1 for an all-zero or empty x), in float32; differentiable,
    so the value search can move x off the zero point's rounding jump."""
    x = x.float()
    lo = x.min().clamp_max(0.0) if x.numel() else torch.zeros(())
    hi = x.max().clamp_min(0.0) if x.numel() else torch.zeros(())
    scale = torch.where(hi == lo, torch.ones_like(hi), (hi - lo) / 255.0)
    return scale, (0.0 - lo / scale).clamp(0.0, 255.0)
