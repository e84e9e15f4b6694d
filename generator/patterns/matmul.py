"""Matrix-product templates: MatMul with a bias, a scale, a transpose, an activation or
a batch norm behind it, and scaled dot-product attention."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np

from generator.dtypes import FLOAT_TYPES, DType
from generator.ops.base import Emitter
from generator.patterns.base import LIFTED, Pattern, Writer
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType

MATMUL_TYPES: tuple[DType, ...] = (*FLOAT_TYPES, DType.int32, DType.int64)
"""Integer products are valid ONNX; a fusion into a float-only kernel must check the type."""
GEMM_ACTIVATIONS = ("Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Softsign", "Softplus", "Elu", "Selu")
"""What onnxruntime's FusedGemm takes as a fused activation (its MLAS activations)."""
UNFUSED_ACTIVATION = "Abs"
"""An activation no fused kernel takes: the activation near miss."""


class MatMulPattern(Pattern):
    """x [..., K] @ W [K, N] (W a weight) followed by what the template adds; N is solved."""

    dtypes = MATMUL_TYPES
    min_rank = 2
    max_rank = 4
    ranks: ClassVar[tuple[int, ...]] = (2,)
    """Input ranks of the exact form; a `rank` near miss takes the others up to 4."""

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.n = sc.var("n", lo=1, hi=64)

    @classmethod
    def slot_ok(cls, slot: int, t: TType) -> bool:
        if t.dtype not in cls.dtypes or not 2 <= t.rank <= 4:
            return False
        return (t.rank not in cls.ranks) == (cls.variant == "rank")

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        """The input has the output's rank (the solver finds its last dim)."""
        return [out] if cls.slot_ok(0, out) and cls.variant != "bias_broadcast" else None

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [self.n * ins[0].shape[-1] <= self.sc.max_elements]

    def out_shape(self, ins: list[AbsTensor]) -> list[Dim]:
        return [*ins[0].shape[:-1], self.n]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        product = AbsTensor(ins[0].dtype, [*ins[0].shape[:-1], self.n])
        return self.outputs(AbsTensor(ins[0].dtype, self.out_shape(ins)), product)

    def work(self, val: Callable[[Dim], int]) -> int:
        return math.prod(val(d) for d in self.inputs[0].shape) * val(self.n)

    def matmul(self, w: Writer, em: Emitter, x: str, out: str | None = None) -> str:
        k, n = em.ival(self.inputs[0].shape[-1]), em.ival(self.n)
        return w.op("MatMul", [x, em.weight([k, n], w.dtype, fan_in=k)], out)


class MatMulAdd(MatMulPattern):
    """MatMul then Add of a bias that broadcasts to [M, N]: a Gemm."""

    template = "MatMulAdd"
    source = "onnxruntime MatMulAddFusion; TVM FuseOps"
    fires = ("+ai.onnx::Gemm",)
    uses = ("MatMul", "Add")
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {
        "rank": "the input has 3 or 4 dims (Gemm takes 2)",
        "bias_broadcast": "the bias has a leading dim of 2, so the sum grows a dim Gemm cannot make",
        "second_consumer": "the product is also an output",
    }

    def out_shape(self, ins: list[AbsTensor]) -> list[Dim]:
        shape = super().out_shape(ins)
        return [2, *shape] if self.variant == "bias_broadcast" else shape

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        product = self.matmul(w, em, ins[0], self.exposed(outs))
        n = em.ival(self.n)
        bias = [2, 1, n] if self.variant == "bias_broadcast" else [n]
        w.op("Add", [product, em.weight(bias, w.dtype)], outs[0])


class MatMulScale(MatMulPattern):
    """MatMul whose product (or first operand) is multiplied by a scalar constant."""

    template = "MatMulScale"
    source = "onnxruntime MatMulScaleFusion"
    fires = ("+com.microsoft::FusedMatMul",)
    uses = ("MatMul", "Mul")
    dtypes = FLOAT_TYPES
    ranks = (2, 3, 4)
    max_rank = 4
    node_cost = 2
    lifts = True
    near_misses: ClassVar[dict[str, str]] = {
        "vector_scale": "the scale is a vector over N, not a scalar",
        "runtime_scale": "the scale is a graph input, not a constant",
        "second_consumer": "the unscaled product is also an output",
    }

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.before = not self.second_output and self.rng.random() < 0.3
        self.value = self.rng.choice((0.125, 0.5, 2.0, 1 / math.sqrt(8)))

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        """The lifted near miss's input has a rank less than its output."""
        if cls.variant != LIFTED:
            return super().backward_inputs(out, rng)
        below = TType(out.dtype, out.rank - 1)
        return [below] if cls.slot_ok(0, below) else None

    def out_shape(self, ins: list[AbsTensor]) -> list[Dim]:
        return self.lifted(super().out_shape(ins))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        if self.variant == "vector_scale":
            scale = w.const([self.value * (1 + i % 3) for i in range(em.ival(self.n))])
        else:
            scale = w.scalar(self.value, lift=True, runtime=self.variant == "runtime_scale")
        if self.before and self.variant != "vector_scale":
            self.matmul(w, em, w.op("Mul", [ins[0], scale]), outs[0])
            return
        w.op("Mul", [self.matmul(w, em, ins[0], self.exposed(outs)), scale], outs[0])


class TransposeMatMul(MatMulPattern):
    """Transpose of the last two axes, then MatMul: a MatMul with transA."""

    template = "TransposeMatMul"
    source = "onnxruntime MatmulTransposeFusion; TVM SimplifyExpr"
    fires = ("+com.microsoft::FusedMatMul",)
    uses = ("Transpose", "MatMul")
    dtypes = FLOAT_TYPES
    ranks = (2, 3, 4)
    max_rank = 4
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {
        "perm": "the transpose swaps the first two axes of a 3-D input, not the last two",
        "second_consumer": "the transposed input is also an output",
    }

    @classmethod
    def slot_ok(cls, slot: int, t: TType) -> bool:
        ok = t.dtype in cls.dtypes and 2 <= t.rank <= 4
        return ok and (t.rank == 3 if cls.variant == "perm" else True)

    def perm(self) -> list[int]:
        rank = self.inputs[0].rank
        if self.variant == "perm":
            return [1, 0, 2]
        return [*range(rank - 2), rank - 1, rank - 2]

    def moved(self, ins: list[AbsTensor]) -> list[Dim]:
        return [ins[0].shape[p] for p in self.perm()]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [self.n * self.moved(ins)[-1] <= self.sc.max_elements]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        moved = self.moved(ins)
        return self.outputs(AbsTensor(ins[0].dtype, [*moved[:-1], self.n]), AbsTensor(ins[0].dtype, moved))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        moved = w.op("Transpose", ins, self.exposed(outs), perm=self.perm())
        k, n = em.ival(self.moved(self.inputs)[-1]), em.ival(self.n)
        w.op("MatMul", [moved, em.weight([k, n], w.dtype, fan_in=k)], outs[0])


class GemmActivation(MatMulPattern):
    """Gemm followed by an activation its fused kernel can apply."""

    template = "GemmActivation"
    source = "onnxruntime GemmActivationFusion"
    fires = ("+com.microsoft::FusedGemm",)
    uses = ("Gemm", *GEMM_ACTIVATIONS, UNFUSED_ACTIVATION)
    dtypes = FLOAT_TYPES
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {
        "activation": f"the activation is {UNFUSED_ACTIVATION}, which the fused kernel does not take",
        "second_consumer": "the Gemm's output is also an output",
    }

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.activation = UNFUSED_ACTIVATION if self.variant == "activation" else self.rng.choice(GEMM_ACTIVATIONS)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        k, n = em.ival(self.inputs[0].shape[-1]), em.ival(self.n)
        operands = [ins[0], em.weight([k, n], w.dtype, fan_in=k), em.weight([n], w.dtype)]
        product = w.op("Gemm", operands, self.exposed(outs))
        w.op(self.activation, [product], outs[0])


class MatMulBatchNorm(MatMulPattern):
    """MatMul then an inference BatchNormalization over its N columns: foldable into a Gemm."""

    template = "MatMulBatchNorm"
    source = "onnxruntime MatMulBnFusion"
    fires = ("+ai.onnx::Gemm",)
    uses = ("MatMul", "BatchNormalization")
    dtypes = FLOAT_TYPES
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {
        "rank": "a 3-D product, whose BatchNormalization channels are its rows, not its columns",
        "second_consumer": "the product is also an output",
    }

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        product = self.matmul(w, em, ins[0], self.exposed(outs))
        channels = em.ival(self.out_shape(self.inputs)[1])
        stats = [em.weight([channels], w.dtype) for _ in range(3)]
        variance = w.const(em.values.uniform(0.5, 2.0, size=[channels]))
        w.op("BatchNormalization", [product, *stats, variance], outs[0])


class Attention(Pattern):
    """softmax(Q Kᵀ / sqrt(d)) V with Q, K and V projected from one [batch, seq, hidden] input."""

    template = "Attention"
    source = "onnxruntime AttentionFusion and MatMulScaleFusion; TVM FuseOps"
    fires = ("+com.microsoft::Attention", "+com.microsoft::MultiHeadAttention", "+com.microsoft::FusedMatMul")
    uses = ("MatMul", "Transpose", "Div", "Softmax")
    dtypes = FLOAT_TYPES
    min_rank = 3
    max_rank = 3
    node_cost = 8
    near_misses: ClassVar[dict[str, str]] = {
        "scale": "the scores are multiplied by sqrt(d), not divided",
        "softmax_axis": "softmax runs over the query axis",
        "second_consumer": "the attention probabilities are also an output",
    }

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.d = sc.var("head", lo=1, hi=32)

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        b, s, h = ins[0].shape
        return [self.d * h <= self.sc.max_elements, b * s * s <= self.sc.max_elements]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        b, s, _ = ins[0].shape
        return self.outputs(AbsTensor(ins[0].dtype, [b, s, self.d]), AbsTensor(ins[0].dtype, [b, s, s]))

    def work(self, val: Callable[[Dim], int]) -> int:
        b, s, h = (val(x) for x in self.inputs[0].shape)
        return b * s * val(self.d) * (3 * h + 2 * s)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        h, d = em.ival(self.inputs[0].shape[-1]), em.ival(self.d)
        q, k, v = (w.op("MatMul", [ins[0], em.weight([h, d], w.dtype, fan_in=h)]) for _ in range(3))
        scores = w.op("MatMul", [q, w.op("Transpose", [k], perm=[0, 2, 1])])
        root = w.scalar(math.sqrt(d))
        scaled = w.op("Mul" if self.variant == "scale" else "Div", [scores, root])
        axis = 1 if self.variant == "softmax_axis" else -1
        probabilities = w.op("Softmax", [scaled], self.exposed(outs), axis=axis)
        w.op("MatMul", [probabilities, v], outs[0])


class IntegerMatMulScale(MatMulPattern):
    """MatMulInteger, its int32 product cast to float and scaled by the product of the two
    operands' scales, A's a graph input: a dynamically quantized product."""

    template = "IntegerMatMulScale"
    source = "onnxruntime MatMulIntegerToFloatFusion"
    fires = ("+com.microsoft::MatMulIntegerToFloat",)
    uses = ("MatMulInteger",)
    dtypes = (DType.uint8, DType.int8)
    node_cost = 3
    near_misses: ClassVar[dict[str, str]] = {
        "constant_scale": "both scales are constants (folded into one before the fusion looks)",
        "second_consumer": "the int32 product is also an output",
    }

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        return None

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = self.out_shape(ins)
        return self.outputs(AbsTensor(DType.float32, shape), AbsTensor(DType.int32, list(shape)))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs, DType.float32)
        dtype = self.inputs[0].dtype
        k, n = em.ival(self.inputs[0].shape[-1]), em.ival(self.n)
        zero = np.array(3 if dtype is DType.uint8 else -2, dtype=dtype.numpy)
        operands = [ins[0], em.weight([k, n], dtype), em.const(zero), em.const(zero)]
        product = w.op("MatMulInteger", operands, self.exposed(outs))
        a_scale, b_scale = np.array(0.5, dtype=np.float32), np.array(1.0 / (2 * k), dtype=np.float32)
        first = em.const(a_scale) if self.variant == "constant_scale" else w.runtime(a_scale)
        factor = w.op("Mul", [first, em.const(b_scale)])
        w.op("Mul", [w.op("Cast", [product], to=DType.float32.onnx), factor], outs[0])


TEMPLATES = (IntegerMatMulScale, MatMulAdd, MatMulScale, TransposeMatMul, GemmActivation, MatMulBatchNorm, Attention)
