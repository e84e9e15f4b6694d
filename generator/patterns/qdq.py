"""Q/DQ templates around the ops a static quantization tool quantizes one by one: Add, Mul,
Concat, Sigmoid, LeakyRelu, Softmax and the average pools. onnxruntime's QDQ transformer
turns each DequantizeLinear -> op -> QuantizeLinear into one QLinear kernel of its own
(com.microsoft::QLinearAdd, ...), a family no op-by-op growth reaches.

Scales are powers of two on the way in, so every dequantized value is exact in float32; the
output scale of Add and Concat is an odd multiple of the input scale, and Mul's of the
product of the two, so that the requantized value of an exact result is never a
half-integer, where round-half-to-even could go either way. The inexact ops (Sigmoid,
Softmax, the average of three or nine cells) are kept off the half-integers by the value
search, which knows QuantizeLinear's step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

import ml_dtypes
import numpy as np
from onnx import TensorProto

from generator.dtypes import DType
from generator.ops.base import Emitter
from generator.patterns.base import Pattern, SameShapePattern, Writer
from generator.patterns.shape import ShapedPattern
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType

IN_SCALE = 2.0**-5
ZERO = 128
ODD = 3


def _qdq(w: Writer, x: str, scale: float | np.ndarray, out: str | None = None, zero: int = ZERO, **attrs: int) -> str:
    """Quantize to uint8 and dequantize back."""
    return _typed_qdq(w, x, np.asarray(scale, np.float32), np.full(np.shape(scale), zero, np.uint8), out, **attrs)


class QdqOp(Pattern):
    """What every Q/DQ template shares: its near misses and how it writes its ends."""

    dtypes: ClassVar[tuple[DType, ...]] = (DType.float32,)
    uses: ClassVar[tuple[str, ...]] = ("QuantizeLinear",)
    fixed_uses: ClassVar[dict[str, DType]] = {"DequantizeLinear": DType.uint8}
    near_misses: ClassVar[dict[str, str]] = {
        "float_output": "no Q after the op: its result stays float",
        "per_axis_output": "the result is quantized per channel (axis 1), which the QLinear kernel's scalar"
        " scale cannot hold",
        "second_consumer": "the float result of the op is also an output",
    }
    variant_needs: ClassVar[dict[str, tuple[str, str]]] = {"per_axis_output": ("QuantizeLinear", "axis")}
    variant: ClassVar[str]
    out_scale: ClassVar[float] = ODD * IN_SCALE
    out_zero: ClassVar[int] = ZERO
    """Sigmoid and Softmax give [0, 1]: their outputs take zero point 0, the whole range."""

    def channels(self, ins: list[AbsTensor]) -> list[Cond]:
        """Per-channel scales need two channels at least: one is a scalar's case."""
        return [ins[0].shape[1] >= 2] if self.variant == "per_axis_output" else []

    def target(self, outs: list[str]) -> str | None:
        """Where the op writes its float result: the output itself when nothing follows it."""
        return outs[0] if self.variant == "float_output" else outs[1] if self.second_output else None

    def finish(self, w: Writer, em: Emitter, result: str, outs: list[str], channels: int) -> None:
        """The op's float result quantized and dequantized into the template's output."""
        if self.variant == "float_output":  # the op wrote the output itself (`target`)
            return
        if self.variant == "per_axis_output":
            scales = np.array([(ODD + 2 * (i % 3)) for i in range(channels)], np.float32) * np.float32(
                self.out_scale / ODD
            )
            _qdq(w, result, scales, outs[0], self.out_zero, axis=1)
            return
        _qdq(w, result, self.out_scale, outs[0], self.out_zero)


class QdqSameShape(QdqOp, SameShapePattern):
    """x quantized and dequantized, one op, its result quantized and dequantized."""

    op: ClassVar[str]
    min_rank = 2
    node_cost = 5

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return self.channels(ins)

    def compute(self, w: Writer, em: Emitter, x: str, out: str | None) -> str:
        return w.op(self.op, [x], out)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs, DType.float32)
        x = _qdq(w, ins[0], IN_SCALE)
        result = self.compute(w, em, x, self.target(outs))
        self.finish(w, em, result, outs, self.dims(em)[1])


class QdqAdd(QdqSameShape):
    template = "QdqAdd"
    source = "onnxruntime QDQSelectorActionTransformer (Add)"
    fires = ("+com.microsoft::QLinearAdd",)
    op = "Add"

    def compute(self, w: Writer, em: Emitter, x: str, out: str | None) -> str:
        near_zero = ZERO + em.values.integers(-8, 9, size=self.dims(em))
        other = em.const(near_zero.astype(np.uint8))
        s, z = em.const(np.asarray(IN_SCALE, np.float32)), em.const(np.asarray(ZERO, np.uint8))
        return w.op(self.op, [x, w.op("DequantizeLinear", [other, s, z])], out)


class QdqMul(QdqAdd):
    template = "QdqMul"
    source = "onnxruntime QDQSelectorActionTransformer (Mul)"
    fires = ("+com.microsoft::QLinearMul",)
    op = "Mul"
    out_scale = ODD * IN_SCALE * IN_SCALE


class QdqSigmoid(QdqSameShape):
    template = "QdqSigmoid"
    source = "onnxruntime QDQSelectorActionTransformer (Sigmoid)"
    fires = ("+com.microsoft::QLinearSigmoid",)
    op = "Sigmoid"
    out_scale = 2.0**-8
    out_zero = 0


class QdqLeakyRelu(QdqSameShape):
    template = "QdqLeakyRelu"
    source = "onnxruntime QDQSelectorActionTransformer (LeakyRelu)"
    fires = ("+com.microsoft::QLinearLeakyRelu",)
    op = "LeakyRelu"
    out_scale = ODD * 2.0**-8
    """x's quanta times 1/8 over an odd multiple of 2^-8: never a half-integer."""

    def compute(self, w: Writer, em: Emitter, x: str, out: str | None) -> str:
        return w.op(self.op, [x], out, alpha=0.125)


class QdqSoftmax(QdqSameShape):
    template = "QdqSoftmax"
    source = "onnxruntime QDQSelectorActionTransformer (Softmax)"
    fires = ("+com.microsoft::QLinearSoftmax",)
    op = "Softmax"
    out_scale = 2.0**-8
    out_zero = 0


class QdqAround(QdqOp, ShapedPattern):
    """One op of the template's family between Q/DQ pairs, written as the op's registered
    spec with its own attributes: its constraints and shapes are the template's."""

    node_cost = 5

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.window = self.consumer_op(ins)
        self.made: list[AbsTensor] = []

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        cons, self.made = self.window.bind([ins[0]])
        return [*cons, *self.channels(ins)]

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        out = list(self.made[0].shape)
        return out, list(out), DType.float32

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        out, middle, dtype = self.shapes(ins)
        return self.outputs(AbsTensor(dtype, out), AbsTensor(dtype, middle))

    def work(self, val: Callable[[Dim], int]) -> int:
        return self.window.work(val)


class QdqPool(QdqAround):
    """A pool over a 4-D x between Q/DQ pairs: each template's pool ranges over its family
    (AveragePool, MaxPool, LpPool; the global three), written as the pool's registered spec
    with its own attributes. The inexact ones (an average, an Lp norm) are kept off the
    requantization's half-integers by the value search, as Sigmoid's are."""

    min_rank = 4
    max_rank = 4

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs, DType.float32)
        x = _qdq(w, ins[0], IN_SCALE)
        result = w.fresh(self.target(outs))
        self.window.emit(em, [x], [result])
        self.finish(w, em, result, outs, self.dims(em)[1])


class QdqAveragePool(QdqPool):
    template = "QdqAveragePool"
    source = "onnxruntime QDQSelectorActionTransformer (AveragePool; MaxPool's Q/DQ are dropped)"
    fires = ("+com.microsoft::QLinearAveragePool",)
    consumers = ("AveragePool", "MaxPool", "LpPool")
    out_scale = ODD * IN_SCALE / 4


class QdqGlobalAveragePool(QdqPool):
    template = "QdqGlobalAveragePool"
    source = "onnxruntime QDQSelectorActionTransformer (GlobalAveragePool)"
    fires = ("+com.microsoft::QLinearGlobalAveragePool",)
    consumers = ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
    out_scale = 2.0**-8


QUANT_TYPES: tuple[tuple[int, type, tuple[int, ...], float], ...] = (
    (TensorProto.UINT8, np.uint8, (0, 128), 2.0**-5),
    (TensorProto.INT8, np.int8, (-128, 0), 2.0**-5),
    (TensorProto.UINT4, ml_dtypes.uint4, (0, 8), 2.0**-3),
    (TensorProto.INT4, ml_dtypes.int4, (-8, 0), 2.0**-3),
    (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn, (0,), 2.0**-4),
    (TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2, (0,), 2.0**-4),
)
"""The types a QdqRelu quantizes to (opset 21 has them all), the zero points drawn (the
type's least value, where a Relu before the quantization changes nothing, and the middle,
where it does; float8 has only 0), and a power-of-two scale."""


class QdqRelu(QdqOp, SameShapePattern):
    """x quantized and dequantized, a Relu, its result quantized and dequantized, in one of
    QUANT_TYPES: the 4-bit and float8 types of opset 21 reach the quantization paths of a
    compiler that 8-bit models never take. onnxruntime drops the Relu where the zero point
    is the type's least value, so that the quantization clamps as the Relu would; from
    1.18.1 (float8) and 1.19.0 (int4, uint4) to 1.32.0 it also drops it at an int4 zero
    point 0, a uint4 one of 8 and every float8 one, and negative values come through."""

    template = "QdqRelu"
    source = "onnxruntime ReluQuantFusion (QDQ Relu removal)"
    fires = ("-ai.onnx::Relu",)
    uses = ("QuantizeLinear", "Relu")
    since_opset = 21
    min_rank = 2
    node_cost = 5

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return self.channels(ins)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs, DType.float32)
        _, numpy_type, zeros, scale = QUANT_TYPES[int(em.values.integers(len(QUANT_TYPES)))]
        zero = zeros[int(em.values.integers(len(zeros)))]
        x = _typed_qdq(w, ins[0], np.float32(scale), np.array(zero, numpy_type))
        result = w.op("Relu", [x], self.target(outs))
        if self.variant == "float_output":
            return
        if self.variant == "per_axis_output":
            channels = self.dims(em)[1]
            scales = np.array([scale * (1 + i % 3) for i in range(channels)], np.float32)
            _typed_qdq(w, result, scales, np.full(channels, zero, numpy_type), outs[0], axis=1)
            return
        _typed_qdq(w, result, np.float32(scale), np.array(zero, numpy_type), outs[0])


QUANT_SINCE: dict[int, int] = {
    TensorProto.UINT8: 10,
    TensorProto.INT8: 10,
    TensorProto.FLOAT8E4M3FN: 19,
    TensorProto.FLOAT8E5M2: 19,
    TensorProto.UINT4: 21,
    TensorProto.INT4: 21,
}
"""The opset from which QuantizeLinear writes each of QUANT_TYPES."""
MOVES: dict[str, tuple[int, int]] = {
    "Reshape": (1, 4),
    "Transpose": (2, 4),
    "Squeeze": (2, 4),
    "Unsqueeze": (1, 3),
    "Gather": (1, 4),
    "Flatten": (1, 4),
    "Slice": (1, 4),
    "Expand": (1, 4),
    "Tile": (1, 4),
    "GatherElements": (1, 4),
    "DepthToSpace": (4, 4),
    "SpaceToDepth": (4, 4),
    "MaxPool": (3, 4),
    "ReduceMax": (1, 4),
    "ReduceMin": (1, 4),
}
"""The ops that move or pick values without computing new ones, with the ranks their specs
take: the QDQ transformers drop a DQ -> op -> Q pair of equal scale and zero point around
them (the op then runs on the quantized type), or move a DQ past them. onnxruntime began
with Gather, Reshape, Transpose, Squeeze and Unsqueeze (and MaxPool), and added Flatten,
Expand, Tile, Slice, GatherElements, ReduceMin and ReduceMax in 1.19."""
ORDERED = ("MaxPool", "ReduceMax", "ReduceMin")
"""Members that pick by order: on the quantized type they pick the same element only where
the scale is positive."""


class QdqMove(QdqAround):
    """x quantized and dequantized, a data-movement op, its result quantized and dequantized
    with the same scale and zero point, in one of QUANT_TYPES the opset writes: the pair is
    dropped and the op runs on integers (or 4-bit, or float8) that plain growth never hands
    it. The op ranges over MOVES, each written as its registered spec with its own
    attributes. A near miss breaks what the drop needs: equal parameters on both sides, a
    per-tensor scale, and the op's float result read by the Q alone."""

    template = "QdqMove"
    source = (
        "onnxruntime QDQSelectorActionTransformer (DropQDQNodesRules: Gather, Reshape, Transpose, Squeeze,"
        " Unsqueeze, and more in later releases) and QDQPropagationTransformer"
    )
    fires = ("-ai.onnx::DequantizeLinear",)
    consumers = tuple(MOVES)
    near_misses: ClassVar[dict[str, str]] = {
        "other_scale": "the result is quantized at half the input's scale: the pair differs, and a drop that"
        " ignores it halves the result",
        "per_axis_input": "the input is quantized per channel (axis 1) and the result per tensor",
        "float_output": "no Q after the op: its result stays float",
        "second_consumer": "the float result of the op is also an output",
        "negative_scale": "both pairs share a negative scale, which reverses the order an op that picks the"
        " largest or least element sees on the quantized type",
    }
    variant_needs: ClassVar[dict[str, tuple[str, str]]] = {"per_axis_input": ("DequantizeLinear", "axis")}

    @classmethod
    def admits(cls, variant: str, consumer: str) -> bool:
        return variant != "negative_scale" or consumer in ORDERED

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Each member's variant takes the ranks the member's spec takes."""
        super().__init_subclass__(**kwargs)
        low, high = MOVES.get(cls.consumer, (1, 4))
        cls.min_rank, cls.max_rank = max(low, 2 if cls.variant == "per_axis_input" else 1), high

    def channels(self, ins: list[AbsTensor]) -> list[Cond]:
        return [ins[0].shape[1] >= 2] if self.variant == "per_axis_input" else []

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs, DType.float32)
        types = [q for q in QUANT_TYPES if QUANT_SINCE[q[0]] <= em.opset]
        _, numpy_type, zeros, scale = types[int(em.values.integers(len(types)))]
        zero: np.ndarray = np.array(zeros[int(em.values.integers(len(zeros)))], numpy_type)
        scale = -scale if self.variant == "negative_scale" else scale
        if self.variant == "per_axis_input":
            # Powers of two apart: a float8 value times one is still a float8 value.
            channels = self.dims(em)[1]
            scales = np.array([scale * 2 ** (i % 2) for i in range(channels)], np.float32)
            x = _typed_qdq(w, ins[0], scales, np.full(channels, zero, numpy_type), axis=1)
        else:
            x = _typed_qdq(w, ins[0], np.float32(scale), zero)
        result = w.fresh(self.target(outs))
        self.window.emit(em, [x], [result])
        if self.variant == "float_output":
            return
        out_scale = scale / 2 if self.variant == "other_scale" else scale
        _typed_qdq(w, result, np.float32(out_scale), zero, outs[0])


def _typed_qdq(
    w: Writer, x: str, scale: np.ndarray | np.float32, zero: np.ndarray, out: str | None = None, **attrs: int
) -> str:
    """Quantize to the zero point's type and dequantize back. No output_dtype: onnxruntime
    fails to load an int8 QuantizeLinear that writes it at the extended level (its int8 to
    uint8 rewrite leaves the attribute behind), a bug the QuantizeLinear op reaches already."""
    s, z = w.em.const(np.asarray(scale, np.float32)), w.em.const(zero)
    quantized = w.op("QuantizeLinear", [x, s, z], None, **attrs)
    return w.op("DequantizeLinear", [quantized, s, z], out, **attrs)


TEMPLATES = (
    QdqAdd,
    QdqMul,
    QdqSigmoid,
    QdqLeakyRelu,
    QdqSoftmax,
    QdqAveragePool,
    QdqGlobalAveragePool,
    QdqRelu,
    QdqMove,
)
