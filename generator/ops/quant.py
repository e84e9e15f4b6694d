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
from typing import ClassVar

import numpy as np
import torch

from generator.dtypes import DType, classic
from generator.ops.base import Attrs, Emitter, SameShapeOp, register
from generator.ops.nn import QUANT
from generator.quantization import dynamic_range, per_axis, quantize
from generator.symbolic import AbsTensor, SymCtx, TType

SCALES = (1 / 8, 1 / 16, 1 / 32, 1 / 64)
"""Scales a Q or DQ draws: unit-scale values become ±8 to ±64 quanta. Powers of two, so
x / scale and x * (1 / scale) are the same float in every backend."""


class Converting(SameShapeOp):
    """Same shape, another element type: reads one of `dtypes`, writes one of `makes`."""

    makes: ClassVar[tuple[DType, ...]]

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype not in cls.makes or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [TType(rng.choice(classic(cls.dtypes)) if len(cls.dtypes) > 1 else cls.dtypes[0], out.rank)]


class QuantOp(Converting):
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

    @classmethod
    def refusal(cls, version: int, attrs: Attrs) -> str | None:
        if int(attrs.get("block_size", 0)):
            return f"{cls.op_type}-{version} blocked quantization (block_size) is not computed"
        return super().refusal(version, attrs)


@register
class QuantizeLinear(QuantOp):
    """float32 to uint8 or int8 (the type drawn, or the backward target)."""

    op_type = "QuantizeLinear"
    dtypes = (DType.float32,)
    makes = QUANT

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.to = out.dtype if out is not None else self.rng.choice(QUANT)

    def result_dtype(self, ins: list[AbsTensor]) -> DType:
        return self.to

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("QuantizeLinear", [ins[0], *self.scale_operands(em, self.to)], outs, **self.attrs())

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, scale = inputs[0], inputs[1]
        zero = inputs[2] if len(inputs) > 2 and inputs[2] is not None else torch.zeros((), dtype=_output_dtype(attrs))
        return [quantize(x, per_axis(scale, attrs, x.dim()), per_axis(zero, attrs, x.dim()), zero.dtype)]


def _output_dtype(attrs: Attrs) -> torch.dtype:
    """QuantizeLinear's type without a zero point: output_dtype (opset 21), else uint8."""
    to = int(attrs.get("output_dtype", 0))
    return torch.from_numpy(np.zeros(0, DType.from_onnx(to).numpy)).dtype if to else torch.uint8


@register
class DequantizeLinear(QuantOp):
    """uint8 or int8 to float32: (x - zero_point) * scale, one rounding."""

    op_type = "DequantizeLinear"
    dtypes = QUANT
    makes = (DType.float32,)

    def result_dtype(self, ins: list[AbsTensor]) -> DType:
        return DType.float32

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("DequantizeLinear", [ins[0], *self.scale_operands(em, self.inputs[0].dtype)], outs, **self.attrs())

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, scale = inputs[0], inputs[1]
        zero = inputs[2] if len(inputs) > 2 and inputs[2] is not None else torch.zeros((), dtype=x.dtype)
        steps = (x.int() - per_axis(zero, attrs, x.dim()).int()).float()
        return [steps * per_axis(scale, attrs, x.dim()).float()]


@register
class DynamicQuantizeLinear(Converting):
    """float32 to uint8 with the scale and zero point computed from the data's range; the
    scale and zero point are outputs too (named after the first), for a consumer that wants
    them (the DynamicQuantizeMatMul template)."""

    op_type = "DynamicQuantizeLinear"
    dtypes = (DType.float32,)
    makes = (DType.uint8,)
    since_opset = 11

    def result_dtype(self, ins: list[AbsTensor]) -> DType:
        return DType.uint8

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("DynamicQuantizeLinear", ins, dynamic_outputs(outs[0]))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        scale, zero = dynamic_range(inputs[0])
        zero = torch.round(zero)
        return [quantize(inputs[0], scale, zero, torch.uint8), scale, zero.to(torch.uint8)]


def dynamic_outputs(first: str) -> list[str]:
    """DynamicQuantizeLinear's three outputs: the data, its scale, its zero point."""
    return [first, f"{first}_scale", f"{first}_zero"]
