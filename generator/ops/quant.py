"""Quantization ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, and the
QLinear kernels a quantized export writes directly (QLinearMatMul, QLinearConv).

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
from generator.ops.base import Attrs, Emitter, OpSpec, SameShapeOp, has_attribute, register
from generator.ops.conv import ConvInteger
from generator.ops.narrow import FLOAT8, FOUR_BIT, ONNX_OF, byte_values, quantize_to
from generator.ops.nn import QUANT, MatMulInteger, quant_zero_point
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
    """A per-tensor, per-axis or blocked scale and zero point, owned by the op."""

    per_axis_share = 0.25
    blocked_share = 0.3
    """Of the cases whose opset has `block_size` (21 on): a converter's blocked path (a scale
    of the input's rank, each entry repeated over a block of `axis`) is code of its own, and a
    per-axis draw never runs it."""
    big_blocks = (16, 32, 64, 128)
    """Block sizes of weight-only quantization, which kernels special-case: most dims drawn are
    smaller, so the whole axis is one block."""

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        # Per-axis scales from opset 13 (QuantizeLinear-10 has no axis).
        per_axis = rank >= 2 and self.rng.random() < self.per_axis_share
        self.per_axis = per_axis and has_attribute(self.op_type, "axis", sc.opset)
        self.blocked = (
            rank >= 1 and has_attribute(self.op_type, "block_size", sc.opset) and self.rng.random() < self.blocked_share
        )
        self.per_axis = self.per_axis or self.blocked
        self.axis = self.rng.randrange(rank) if self.per_axis else 1
        self.block_pick = self.rng.random() if self.blocked else 0.0
        self.block = 0

    def block_size(self, dim: int) -> int:
        """A block for an axis of `dim`: one in four of the big sizes, else 1 to `dim`, so that
        per-element, partial last blocks and one whole-axis block all come up."""
        if self.block_pick < 0.25:
            return self.big_blocks[int(self.block_pick * 4 * len(self.big_blocks))]
        return 1 + int((self.block_pick - 0.25) / 0.75 * max(dim, 1))

    def scale_operands(self, em: Emitter, dtype: DType) -> list[str]:
        """The scale and zero point: one per element along `axis` when per-axis; when blocked,
        the input's shape with `axis` cut to its number of blocks."""
        shape: tuple[int, ...] = ()
        if self.per_axis:
            dim = em.ival(self.inputs[0].shape[self.axis])
            shape = (dim,)
            if self.blocked:
                self.block = self.block_size(dim)
                dims = [em.ival(d) for d in self.inputs[0].shape]
                dims[self.axis] = -(-dim // self.block)
                shape = tuple(dims)
            if self.blocked and shape == (1,):
                # QuantizeLinear-21: "When the rank of the input is 1, per-tensor
                # quantization is applied"; a one-element scale is that, with no block.
                self.blocked = self.per_axis = False
                shape = ()
        n = int(np.prod(shape, dtype=np.int64))
        scales = np.asarray([SCALES[int(em.values.integers(len(SCALES)))] for _ in range(n)], np.float32)
        low, high = (120, 137) if dtype is DType.uint8 else (-8, 9)
        zeros = em.values.integers(low, high, size=n).astype(dtype.numpy)
        return [em.const(scales.reshape(shape)), em.const(zeros.reshape(shape))]

    def attrs(self) -> dict[str, int]:
        if not self.per_axis:
            return {}
        return {"axis": self.axis, "block_size": self.block} if self.blocked else {"axis": self.axis}

    @classmethod
    def refusal(cls, version: int, attrs: Attrs) -> str | None:
        if not int(attrs.get("saturate", 1)):
            return f"{cls.op_type}-{version} float8 without saturation is not computed"
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
        operands = self.scale_operands(em, self.to)  # before attrs(): it chooses the block
        em.node("QuantizeLinear", [ins[0], *operands], outs, **self.attrs())

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, scale = inputs[0], inputs[1]
        given = inputs[2] if len(inputs) > 2 else None
        to = int(attrs.get("output_dtype", 0)) or (ONNX_OF.get(given.dtype, 0) if given is not None else 0)
        if to in FOUR_BIT or to in FLOAT8:  # int4, uint4, float8 (generator.ops.narrow)
            zero = given if given is not None else torch.zeros(())
            saturate = bool(int(attrs.get("saturate", 1)))
            return [quantize_to(x, per_axis(scale, attrs, x.shape), per_axis(zero, attrs, x.shape), to, saturate)]
        zero = inputs[2] if len(inputs) > 2 and inputs[2] is not None else implied_zero_point(attrs)
        return [quantize(x, per_axis(scale, attrs, x.shape), per_axis(zero, attrs, x.shape), zero.dtype)]


def implied_zero_point(attrs: Attrs) -> torch.Tensor:
    """QuantizeLinear's zero point where the node gives none: 0 in the type its output then
    takes, output_dtype (opset 21) or else uint8 (a 4-bit type's held in its byte type). The
    reference and the value search (generator.values.jumps) both read it so: an int8 output
    saturates elsewhere than a uint8 one."""
    to = int(attrs.get("output_dtype", 0))
    if to in FLOAT8:
        return torch.zeros((), dtype=FLOAT8[to])
    if to in FOUR_BIT:
        return torch.zeros((), dtype=FOUR_BIT[to][3])
    return torch.from_numpy(np.zeros((), DType.from_onnx(to).numpy if to else np.uint8))


@register
class DequantizeLinear(QuantOp):
    """uint8 or int8 to float32: (x - zero_point) * scale, one rounding."""

    op_type = "DequantizeLinear"
    dtypes = QUANT
    makes = (DType.float32,)

    def result_dtype(self, ins: list[AbsTensor]) -> DType:
        return DType.float32

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        operands = self.scale_operands(em, self.inputs[0].dtype)  # before attrs(): it chooses the block
        em.node("DequantizeLinear", [ins[0], *operands], outs, **self.attrs())

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, scale = inputs[0], inputs[1]
        x = byte_values(x)
        zero = inputs[2] if len(inputs) > 2 and inputs[2] is not None else torch.zeros((), dtype=x.dtype)
        zero = byte_values(zero)
        if x.dtype.is_floating_point:  # float8: its value, the zero point 0
            steps = x.float() - per_axis(zero, attrs, x.shape).float()
        else:
            steps = (x.int() - per_axis(zero, attrs, x.shape).int()).float()
        return [steps * per_axis(scale, attrs, x.shape).float()]


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


def requantize_scales(em: Emitter, channels: int, inner: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Input, weight (one per channel) and output scales whose requantizing ratio
    x_scale * w_scale / y_scale is 2^k / q for an odd q > 1. An integer accumulator times that
    ratio then lies a multiple of 1/q from an integer, never within 1/(2q) of a half: no
    build's rounding of the ratio can move it across one, and no tie arises for the rounding
    mode to decide. q grows with the dot product's length, so fewer results saturate."""
    x_exp = int(em.values.integers(0, 4))
    w_exps = em.values.integers(0, 4, size=channels)
    q = 2 * int(em.values.integers(1, 2 + 2 * int(np.sqrt(inner)))) + 1
    y_scale = q * 2.0 ** -(x_exp + int(w_exps.max()))
    return (
        np.asarray(2.0**-x_exp, np.float32),
        (2.0 ** -w_exps.astype(np.float64)).astype(np.float32),
        np.asarray(y_scale, np.float32),
    )


def requantize(acc: torch.Tensor, ratio: torch.Tensor, zero: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """round(acc * ratio) + zero, half to even, saturated to the output type (the QLinear
    kernels' arithmetic, on an exact integer accumulator)."""
    info = torch.iinfo(dtype)
    y = torch.round(acc.double() * ratio) + zero.double()
    return y.clamp(info.min, info.max).to(dtype)


def _weight_types(x: DType) -> tuple[DType, ...]:
    """onnxruntime's kernels take int8 weights beside uint8 data, never uint8 beside int8."""
    return (DType.uint8, DType.int8) if x is DType.uint8 else (DType.int8,)


class Requantized(OpSpec):
    """A QLinear kernel: its output has its input's quantized type."""

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype not in cls.dtypes or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [out]

    def qlinear_operands(
        self, em: Emitter, x: str, weight: tuple[list[int], DType], channels: int, inner: int, w_zero: np.ndarray
    ) -> list[str]:
        """x, its scale and zero point, the owned weight with its scales (one per channel when
        `channels` > 1) and zero points, then the output's scale and zero point."""
        dtype = self.inputs[0].dtype
        x_scale, w_scales, y_scale = requantize_scales(em, channels, inner)
        return [
            x,
            em.const(x_scale),
            em.const(quant_zero_point(em, dtype)),
            em.weight(*weight),
            em.const(w_scales if channels > 1 else w_scales.reshape(())),
            em.const(w_zero),
            em.const(y_scale),
            em.const(quant_zero_point(em, dtype)),
        ]


@register
class QLinearMatMul(Requantized, MatMulInteger):
    """A quantized matmul with its output requantized: B, its scales and zero points (one per
    column at times) are owned by the op, the output takes A's type."""

    op_type = "QLinearMatMul"
    since_opset = 10

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.b_type = self.rng.choice(_weight_types(ins[0].dtype))
        self.per_column = self.rng.random() < 0.3

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, [*ins[0].shape[:-1], self.n])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        k, n = em.ival(self.inputs[0].shape[-1]), em.ival(self.n)
        columns = n if self.per_column else 1
        zero = np.stack([quant_zero_point(em, self.b_type) for _ in range(columns)])
        weight = ([k, n], self.b_type)
        operands = self.qlinear_operands(em, ins[0], weight, columns, k, zero if self.per_column else zero[0])
        em.node(self.op_type, operands, outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = inputs[:8]
        acc = torch.matmul(a.long() - a_zero.long(), b.long() - b_zero.long())
        ratio = a_scale.double() * b_scale.double() / y_scale.double()
        return [requantize(acc, ratio, y_zero, y_zero.dtype)]


@register
class QLinearConv(Requantized, ConvInteger):
    """A quantized convolution with an int32 bias and its output requantized: the weight (per
    output channel scales at times) and bias are owned by the op."""

    op_type = "QLinearConv"
    since_opset = 10

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.w_type = self.rng.choice(_weight_types(ins[0].dtype))
        self.per_channel = self.rng.random() < 0.4
        self.bias = self.rng.random() < 0.5

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, [ins[0].shape[0], self.out_channels, *self.spatial_out(ins)])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        shape = self.kernel_weight_shape(em)
        channels = shape[0] if self.per_channel else 1
        zero = np.zeros(shape[0] if self.per_channel else (), self.w_type.numpy)
        operands = self.qlinear_operands(em, ins[0], (shape, self.w_type), channels, int(np.prod(shape[1:])), zero)
        if self.bias:
            operands.append(em.const(em.values.integers(-64, 65, size=shape[0]).astype(np.int32)))
        group = {"group": self.group} if self.group != 1 or self.explicit else {}
        em.node(self.op_type, operands, outs, **group, **self.window_attrs(em))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero = inputs[:8]
        acc = ConvInteger.reference(attrs, [x, w, x_zero, w_zero])[0].long()
        channel = [1, -1, *[1] * (x.dim() - 2)]
        if len(inputs) > 8 and inputs[8] is not None:
            acc = acc + inputs[8].long().reshape(channel)
        ratio = (x_scale.double() * w_scale.double() / y_scale.double()).reshape(-1)
        return [requantize(acc, ratio.reshape(channel) if ratio.numel() > 1 else ratio, y_zero, y_zero.dtype)]
