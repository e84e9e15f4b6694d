"""Normalization templates: the LayerNorm and RMSNorm subgraphs exporters write, and
the residual Add in front of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from generator.dtypes import FLOAT_TYPES
from generator.ops.base import OLDEST_WRITTEN, Emitter
from generator.patterns.base import SameShapePattern, Writer
from generator.symbolic import SymCtx, TType

EPSILON = 1e-5
NEAR_EPSILON = 0.5
"""The epsilon of the near misses that put it where a fusion may not read it: far enough from
the default 1e-5 that a kernel falling back to the default is visibly wrong."""


class NormPattern(SameShapePattern):
    """Shared near misses of the normalizations written out as elementwise ops."""

    dtypes = FLOAT_TYPES
    lifts = True
    near_misses: ClassVar[dict[str, str]] = {
        "axis": "the variance is reduced over another axis than the mean (or the input)",
        "eps_position": "epsilon is added after the square root",
        "exponent": "the deviation is raised to the 4th power, not squared",
        "scalar_scale": "the scale has shape [1], broadcast, not the normalized dim's",
        "runtime_scale": "the scale is a graph input, not a constant",
        "second_consumer": "the squared or centred intermediate is also an output",
        "epsilon_first": "epsilon is Add's first operand, Add(eps, variance), and not the default 1e-5",
        "vector_epsilon": "epsilon is a vector of equal values over the normalized dim, not a scalar (nor 1e-5)",
    }

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.other_axis = self.rng.randrange(max(ins[0].rank - 1, 1))

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        return super().accepts(ins) and (cls.variant != "axis" or ins[0].rank >= 2)

    def variance_axes(self) -> list[int]:
        return [self.other_axis] if self.variant == "axis" else [-1]

    def root(self, w: Writer, em: Emitter, mean_square: str) -> str:
        """sqrt(v + eps), or sqrt(v) + eps for the eps_position near miss; an epsilon a fusion
        must read from elsewhere than a scalar second operand is NEAR_EPSILON, so that falling
        back to the default shows."""
        if self.variant == "eps_position":
            return w.op("Add", [w.op("Sqrt", [mean_square]), w.scalar(EPSILON, lift=True)])
        if self.variant == "epsilon_first":
            return w.op("Sqrt", [w.in_order("Add", [w.scalar(NEAR_EPSILON, lift=True), mean_square])])
        if self.variant == "vector_epsilon":
            eps = w.const(np.full([self.dims(em)[-1]], NEAR_EPSILON))
            return w.op("Sqrt", [w.op("Add", [mean_square, eps])])
        return w.op("Sqrt", [w.op("Add", [mean_square, w.scalar(EPSILON, lift=True)])])

    def scale(self, w: Writer, em: Emitter) -> str:
        d = self.dims(em)[-1]
        if self.variant == "runtime_scale":
            return w.runtime(em.values.uniform(0.5, 1.5, size=[d]).astype(w.dtype.numpy))
        return em.weight([1] if self.variant == "scalar_scale" else [d], w.dtype)

    def power(self) -> float:
        return 4.0 if self.variant == "exponent" else 2.0


class LayerNorm(NormPattern):
    """(x - mean) / sqrt(var + eps) * scale + bias over the last axis."""

    template = "LayerNorm"
    source = "onnxruntime LayerNormFusion; TVM FuseOps (reductions with their epilogue)"
    fires = ("+ai.onnx::LayerNormalization",)
    uses = ("ReduceMean", "Sub", "Pow", "Add", "Sqrt", "Div", "Mul")
    node_cost = 9

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        mean = w.reduce("ReduceMean", ins[0], [-1])
        centred = w.op("Sub", [ins[0], mean], self.exposed(outs))
        var = w.reduce("ReduceMean", w.op("Pow", [centred, w.scalar(self.power())]), self.variance_axes())
        normed = w.op("Div", [centred, self.root(w, em, var)])
        scaled = w.op("Mul", [normed, self.scale(w, em)])
        w.op("Add", [scaled, em.weight([self.dims(em)[-1]], w.dtype)], outs[0])


class RmsNorm(NormPattern):
    """x / sqrt(mean(x^2) + eps) * scale: T5's and LLaMA's normalization."""

    template = "RmsNorm"
    source = "onnxruntime SimplifiedLayerNormFusion"
    fires = ("+ai.onnx::SimplifiedLayerNormalization", "+com.microsoft::SimplifiedLayerNormalization")
    uses = ("Pow", "ReduceMean", "Add", "Sqrt", "Div", "Mul")
    node_cost = 6

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        square = w.op("Pow", [ins[0], w.scalar(self.power())], self.exposed(outs))
        normed = w.op("Div", [ins[0], self.root(w, em, w.reduce("ReduceMean", square, self.variance_axes()))])
        w.op("Mul", [normed, self.scale(w, em)], outs[0])


class SkipLayerNorm(SameShapePattern):
    """LayerNormalization(x + skip): a transformer block's residual and its norm."""

    template = "SkipLayerNorm"
    source = "onnxruntime SkipLayerNormFusion"
    fires: ClassVar[tuple[str, ...]] = ("+com.microsoft::SkipLayerNormalization",)
    uses: ClassVar[tuple[str, ...]] = ("Add", "LayerNormalization")
    dtypes = FLOAT_TYPES
    since_opset = 17
    node_cost = 2
    min_rank = 2
    max_rank = 4
    near_misses: ClassVar[dict[str, str]] = {
        "rank": "the input is not 3-D (the fused kernel's [batch, sequence, hidden])",
        "axis": "the norm covers the last two axes, not the hidden one",
        "skip_broadcast": "the skip is broadcast from [1, ..., hidden], not the input's shape",
        "second_consumer": "the residual sum is also an output",
    }

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        return super().accepts(ins) and (ins[0].rank != 3) == (cls.variant == "rank")

    def residual(self, w: Writer, em: Emitter, ins: list[str], outs: list[str]) -> str:
        """x + skip, the skip a weight of x's shape (or broadcast from the last axis)."""
        dims = self.dims(em)
        skip = [1] * (len(dims) - 1) + dims[-1:] if self.variant == "skip_broadcast" else dims
        return w.op("Add", [ins[0], em.weight(skip, w.dtype)], self.exposed(outs))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        dims = self.dims(em)
        total = self.residual(w, em, ins, outs)
        axis = -2 if self.variant == "axis" else -1
        normed = dims[axis:]
        w.op("LayerNormalization", [total, em.weight(normed, w.dtype), em.weight(normed, w.dtype)], outs[0], axis=axis)


class SkipRmsNorm(SkipLayerNorm):
    """RMSNorm(x + skip), the norm written out: LLaMA's residual and its norm."""

    template = "SkipRmsNorm"
    source = "onnxruntime SimplifiedLayerNormFusion, then SkipLayerNormFusion"
    fires = ("+ai.onnx::SimplifiedLayerNormalization", "+com.microsoft::SkipSimplifiedLayerNormalization")
    uses = ("Add", "Pow", "ReduceMean", "Sqrt", "Div", "Mul")
    since_opset = OLDEST_WRITTEN  # SkipLayerNorm's 17 is LayerNormalization's
    node_cost = 7
    lifts = True
    near_misses: ClassVar[dict[str, str]] = {
        "rank": "the input is not 3-D (the fused kernel's [batch, sequence, hidden])",
        "skip_broadcast": "the skip is broadcast from [1, ..., hidden], not the input's shape",
        "second_consumer": "the residual sum is also an output",
    }

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        dims = self.dims(em)
        total = self.residual(w, em, ins, outs)
        square = w.op("Pow", [total, w.scalar(2.0)])
        root = w.op("Sqrt", [w.op("Add", [w.reduce("ReduceMean", square, [-1]), w.scalar(EPSILON, lift=True)])])
        w.op("Mul", [w.op("Div", [total, root]), em.weight(dims[-1:], w.dtype)], outs[0])


TEMPLATES = (LayerNorm, RmsNorm, SkipLayerNorm, SkipRmsNorm)
