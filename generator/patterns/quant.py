"""Quantized-product templates: a dynamically quantized MatMul, and a MatMul between Q/DQ
pairs as a quantization tool writes it.

Their scales are chosen so that the reference and an integer kernel compute the same
integers, not merely close floats: powers of two make every dequantized product exact in
float32, and an output scale an odd multiple of the input scales keeps the requantized
value a third, a fifth... of a quantum from any half-integer, where round-half-to-even
could go either way. A difference is then a bug, never a rounding.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from generator.dtypes import DType
from generator.ops.base import Emitter
from generator.ops.quant import dynamic_outputs
from generator.patterns.base import Writer
from generator.patterns.matmul import MatMulPattern
from generator.symbolic import AbsTensor


class QuantMatMulPattern(MatMulPattern):
    """A float32 x [..., K] times a quantized weight [K, N]; the int32 product (or its float
    form) is the fused intermediate a second-consumer variant exposes."""

    dtypes = (DType.float32,)
    ranks = (2, 3)

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = self.out_shape(ins)
        return self.outputs(AbsTensor(DType.float32, shape), AbsTensor(self.middle_dtype, list(shape)))

    middle_dtype: ClassVar[DType] = DType.float32

    def quant_weight(self, em: Emitter) -> tuple[str, str, int]:
        """The weight (uint8 or int8, drawn), its zero point, and K."""
        dtype = DType.uint8 if em.values.random() < 0.5 else DType.int8
        k, n = em.ival(self.inputs[0].shape[-1]), em.ival(self.n)
        zero = np.array(4 if dtype is DType.uint8 else 0, dtype=dtype.numpy)
        return em.weight([k, n], dtype), em.const(zero), k


class DynamicQuantizeMatMul(QuantMatMulPattern):
    """x quantized at run time (DynamicQuantizeLinear), its product with a quantized weight
    (MatMulInteger on x's zero point), cast to float and scaled by x's scale times the
    weight's: onnxruntime's DynamicQuantizeMatMul in five nodes."""

    template = "DynamicQuantizeMatMul"
    source = "onnxruntime DynamicQuantizeMatMulFusion"
    fires = ("+com.microsoft::DynamicQuantizeMatMul",)
    uses = ("DynamicQuantizeLinear",)
    fixed_uses: ClassVar[dict[str, DType]] = {"MatMulInteger": DType.uint8}
    middle_dtype = DType.int32
    node_cost = 5
    near_misses: ClassVar[dict[str, str]] = {
        "own_zero_point": "the product subtracts a zero point of its own, not x's",
        "weight_scale_only": "the product is scaled by the weight's scale alone, not times x's",
        "second_consumer": "the int32 product is also an output",
    }

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs, DType.float32)
        y, y_scale, y_zero = dynamic_outputs(f"{outs[0]}_q")
        em.node("DynamicQuantizeLinear", [ins[0]], [y, y_scale, y_zero])
        weight, weight_zero, k = self.quant_weight(em)
        zero = em.const(np.array(128, dtype=np.uint8)) if self.variant == "own_zero_point" else y_zero
        product = w.op("MatMulInteger", [y, weight, zero, weight_zero], self.exposed(outs))
        b_scale = em.const(np.array(1.0 / (2 * k), dtype=np.float32))
        factor = b_scale if self.variant == "weight_scale_only" else w.op("Mul", [y_scale, b_scale])
        w.op("Mul", [w.op("Cast", [product], to=DType.float32.onnx), factor], outs[0])


class QdqMatMul(QuantMatMulPattern):
    """Q/DQ around a MatMul as a static quantization tool writes it: x quantized and
    dequantized, times a dequantized weight, the product quantized and dequantized again.
    onnxruntime's QDQ transformer turns the middle into one QLinearMatMul."""

    template = "QdqMatMul"
    source = "onnxruntime QDQSelectorActionTransformer (MatMul)"
    fires = ("+ai.onnx::QLinearMatMul", "+com.microsoft::MatMulIntegerToFloat")
    uses = ("QuantizeLinear",)
    fixed_uses: ClassVar[dict[str, DType]] = {"DequantizeLinear": DType.uint8}
    node_cost = 6
    near_misses: ClassVar[dict[str, str]] = {
        "per_axis_output": "the product is quantized per column, which QLinearMatMul's scalar scale cannot hold",
        "float_output": "no Q after the MatMul: the product stays float",
        "second_consumer": "the float product is also an output",
    }
    variant_needs: ClassVar[dict[str, tuple[str, str]]] = {"per_axis_output": ("QuantizeLinear", "axis")}

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs, DType.float32)
        x_scale, w_scale = 2.0**-5, 2.0**-3
        x = self.qdq(w, ins[0], x_scale, 128)
        weight, weight_zero, k = self.quant_weight(em)
        weight = w.op("DequantizeLinear", [weight, em.const(np.array(w_scale, np.float32)), weight_zero])
        if self.variant == "float_output":
            w.op("MatMul", [x, weight], outs[0])
            return
        product = w.op("MatMul", [x, weight], self.exposed(outs))
        # An odd multiple of the input scales: the requantized value is never a half-integer.
        odd = 2 * round(math.sqrt(k)) + 1
        y_scale: np.ndarray = np.array(odd * x_scale * w_scale, np.float32)
        axis: dict[str, int] = {}
        if self.variant == "per_axis_output":
            n = em.ival(self.n)
            y_scale = np.array([odd + 2 * (i % 3) for i in range(n)], np.float32) * np.float32(x_scale * w_scale)
            axis = {"axis": -1}
        self.qdq(w, product, y_scale, 128, outs[0], **axis)

    @staticmethod
    def qdq(w: Writer, x: str, scale: float | np.ndarray, zero: int, out: str | None = None, **attrs: int) -> str:
        """Quantize to uint8 and dequantize back, with one scale and zero point."""
        s = w.em.const(np.asarray(scale, np.float32))
        z = w.em.const(np.full(np.shape(scale), zero, np.uint8))
        quantized = w.op("QuantizeLinear", [x, s, z], None, **attrs)
        return w.op("DequantizeLinear", [quantized, s, z], out, **attrs)


TEMPLATES = (DynamicQuantizeMatMul, QdqMatMul)
