"""Quantization ops: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear.

They are where a quantized model's Q/DQ pairs come from, and the pairs are what
onnxruntime's QDQ transformers and DynamicQuantizeMatMulFusion rewrite into QLinear*
kernels. Quantizing rounds half to even after a division by the scale: a computed
operand next to a half-integer quantum lands on either side by backend, so the unsafe-op
table keeps it away from one (generator.values.unsafe).

Scales are owned by the op and chosen so that a unit-scale activation spans a few dozen
quanta: enough to be far from saturation, small enough for the margin to be cheap.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import torch

from generator.dtypes import DType
from generator.ops.base import Attrs, Emitter, OpSpec, register
from generator.ops.nn import QUANT, axis_of
from generator.symbolic import AbsTensor, Cond, SymCtx, TType

QUANT_RANGE: dict[torch.dtype, tuple[int, int]] = {torch.uint8: (0, 255), torch.int8: (-128, 127)}

SCALES = (1 / 8, 1 / 16, 1 / 32, 1 / 64)
"""Scales a Q or DQ draws: unit-scale values become ±8 to ±64 quanta. Powers of two, so
x / scale and x * (1 / scale) are the same float in every backend."""


def along(scale: torch.Tensor, attrs: Attrs, rank: int) -> torch.Tensor:
    """A per-tensor scale (or zero point) as is, a per-axis one shaped to broadcast on `axis`."""
    if scale.dim() == 0:
        return scale
    shape = [1] * rank
    shape[axis_of(attrs, "axis", 1, rank)] = -1
    return scale.reshape(shape)


def quantize(x: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """ONNX's saturate(round_half_even(x / scale) + zero_point), the division in float32 as
    every CPU kernel does it."""
    lo, hi = QUANT_RANGE[dtype]
    q = torch.round(x.float() / scale.float()) + zero.float()
    return q.clamp(lo, hi).to(dtype)


def dynamic_parameters(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """DynamicQuantizeLinear's uint8 scale and unrounded zero point: the range of x widened to
    hold 0, over 255 steps (scale 1 for an all-zero x), all in float32."""
    x = x.float()
    lo = torch.clamp(x.min(), max=0.0) if x.numel() else torch.zeros(())
    hi = torch.clamp(x.max(), min=0.0) if x.numel() else torch.zeros(())
    scale = torch.where(hi == lo, torch.ones(()), (hi - lo) / 255.0)
    return scale, (0.0 - lo / scale).clamp(0.0, 255.0)


class QuantOp(OpSpec):
    """A per-tensor or per-axis scale and zero point, owned by the op."""

    per_axis_share = 0.25

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.per_axis = ins[0].rank >= 2 and self.rng.random() < self.per_axis_share
        self.axis = self.rng.randrange(ins[0].rank) if self.per_axis else 1

    def scale_operands(self, em: Emitter, dtype: DType) -> list[str]:
        """The scale and zero point, one per element along `axis` when per-axis."""
        n = em.ival(self.inputs[0].shape[self.axis]) if self.per_axis else 1
        scales = np.asarray([SCALES[int(em.values.integers(len(SCALES)))] for _ in range(n)], np.float32)
        low, high = (120, 137) if dtype is DType.uint8 else (-8, 9)
        zeros = em.values.integers(low, high, size=n).astype(dtype.numpy)
        if not self.per_axis:
            return [em.const(scales.reshape(())), em.const(zeros.reshape(()))]
        return [em.const(scales), em.const(zeros)]

    def attrs(self) -> dict[str, int]:
        return {"axis": self.axis} if self.per_axis else {}

    def transfer_to(self, ins: list[AbsTensor], dtype: DType) -> list[AbsTensor]:
        return [AbsTensor(dtype, list(ins[0].shape))]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        return [list(out_shape)]


@register
class QuantizeLinear(QuantOp):
    """float32 to uint8 or int8 (the type drawn, or the backward target)."""

    op_type = "QuantizeLinear"
    dtypes = (DType.float32,)

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.to = out.dtype if out is not None else self.rng.choice(QUANT)

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype not in QUANT or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [TType(DType.float32, out.rank)]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return self.transfer_to(ins, self.to)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("QuantizeLinear", [ins[0], *self.scale_operands(em, self.to)], outs, **self.attrs())

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, scale = inputs[0], inputs[1]
        zero = inputs[2] if len(inputs) > 2 and inputs[2] is not None else torch.zeros((), dtype=torch.uint8)
        return [quantize(x, along(scale, attrs, x.dim()), along(zero, attrs, x.dim()), zero.dtype)]


@register
class DequantizeLinear(QuantOp):
    """uint8 or int8 to float32: (x - zero_point) * scale, one rounding."""

    op_type = "DequantizeLinear"
    dtypes = QUANT

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype is not DType.float32 or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [TType(rng.choice(QUANT), out.rank)]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return self.transfer_to(ins, DType.float32)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("DequantizeLinear", [ins[0], *self.scale_operands(em, self.inputs[0].dtype)], outs, **self.attrs())

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, scale = inputs[0], inputs[1]
        zero = inputs[2] if len(inputs) > 2 and inputs[2] is not None else torch.zeros((), dtype=x.dtype)
        steps = (x.int() - along(zero, attrs, x.dim()).int()).float()
        return [steps * along(scale, attrs, x.dim()).float()]


@register
class DynamicQuantizeLinear(OpSpec):
    """float32 to uint8 with the scale and zero point computed from the data's range; the
    scale and zero point are outputs too (named after the first), for a consumer that wants
    them (the DynamicQuantizeMatMul template)."""

    op_type = "DynamicQuantizeLinear"
    dtypes = (DType.float32,)
    since_opset = 11

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype is not DType.uint8 or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [TType(DType.float32, out.rank)]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(DType.uint8, list(ins[0].shape))]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        return [list(out_shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("DynamicQuantizeLinear", ins, dynamic_outputs(outs[0]))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        scale, zero = dynamic_parameters(inputs[0])
        zero = torch.round(zero)
        return [quantize(inputs[0], scale, zero, torch.uint8), scale, zero.to(torch.uint8)]


def dynamic_outputs(first: str) -> list[str]:
    """DynamicQuantizeLinear's three outputs: the data, its scale, its zero point."""
    return [first, f"{first}_scale", f"{first}_zero"]
