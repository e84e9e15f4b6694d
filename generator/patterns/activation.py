"""Activation templates: the Gelu family as exporters spell it out in elementwise ops."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from generator.dtypes import FLOAT_TYPES
from generator.ops.base import Emitter
from generator.patterns.base import SameShapePattern, Writer
from generator.symbolic import TType

SQRT2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
FAST_GELU_COEFFICIENT = 0.044715
QUICK_GELU_ALPHA = 1.702


class Gelu(SameShapePattern):
    """x * 0.5 * (1 + erf(x / sqrt(2)))."""

    template = "Gelu"
    source = "onnxruntime GeluFusion"
    fires = ("+com.microsoft::Gelu",)
    uses = ("Div", "Erf", "Add", "Mul")
    dtypes = FLOAT_TYPES
    node_cost = 5
    lifts = True
    near_misses: ClassVar[dict[str, str]] = {
        "constant": "x is divided by 1.5, not sqrt(2)",
        "runtime_constant": "sqrt(2) is a graph input, not a constant",
        "second_consumer": "erf's output is also an output",
    }

    def gelu(self, w: Writer, x: str, outs: list[str]) -> None:
        runtime = self.variant == "runtime_constant"
        divisor = w.scalar(1.5 if self.variant == "constant" else SQRT2, runtime=runtime)
        erf = w.op("Erf", [w.op("Div", [x, divisor])], self.exposed(outs))
        half = w.op("Mul", [x, w.op("Add", [erf, w.scalar(1.0)])])
        w.op("Mul", [half, w.scalar(0.5, lift=True)], outs[0])

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        self.gelu(self.writer(em, outs), ins[0], outs)


class BiasGelu(Gelu):
    """Gelu(x + bias), the bias over the last axis."""

    template = "BiasGelu"
    fires = ("+com.microsoft::BiasGelu",)
    source = "onnxruntime BiasGeluFusion (after GeluFusion)"
    node_cost = 6
    near_misses: ClassVar[dict[str, str]] = {
        "bias_rank": "the bias is [1, hidden] (2-D), not the 1-D bias the fused kernel takes",
        "bias_axis": "the bias runs along the first axis, not the last",
        "second_consumer": "erf's output is also an output",
    }

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        """A [1, hidden] bias keeps the shape only of an input of rank 2 or more (on a 1-D
        input the sum is 2-D: a model whose declared output is wrong)."""
        return super().accepts(ins) and (cls.variant != "bias_rank" or ins[0].rank >= 2)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        dims = self.dims(em)
        shape = {"bias_rank": [1, dims[-1]], "bias_axis": [dims[0]] + [1] * (len(dims) - 1)}
        bias = em.weight(shape.get(self.variant, dims[-1:]), w.dtype)
        self.gelu(w, w.op("Add", [ins[0], bias]), outs)


class FastGelu(SameShapePattern):
    """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))."""

    template = "FastGelu"
    source = "onnxruntime FastGeluFusion"
    fires = ("+com.microsoft::FastGelu",)
    uses = ("Pow", "Mul", "Add", "Tanh")
    dtypes = FLOAT_TYPES
    node_cost = 8
    lifts = True
    near_misses: ClassVar[dict[str, str]] = {
        "coefficient": "the cubic's coefficient is 0.05",
        "exponent": "x is squared, not cubed",
        "second_consumer": "tanh's output is also an output",
    }

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        x = ins[0]
        power = w.op("Pow", [x, w.scalar(2.0 if self.variant == "exponent" else 3.0)])
        coefficient = 0.05 if self.variant == "coefficient" else FAST_GELU_COEFFICIENT
        inner = w.op("Add", [x, w.op("Mul", [power, w.scalar(coefficient)])])
        tanh = w.op("Tanh", [w.op("Mul", [inner, w.scalar(SQRT_2_OVER_PI)])], self.exposed(outs))
        w.op("Mul", [w.op("Mul", [x, w.scalar(0.5, lift=True)]), w.op("Add", [tanh, w.scalar(1.0)])], outs[0])


class QuickGelu(SameShapePattern):
    """x * sigmoid(1.702 * x)."""

    template = "QuickGelu"
    source = "onnxruntime QuickGeluFusion"
    fires = ("+com.microsoft::QuickGelu",)
    uses = ("Mul", "Sigmoid")
    dtypes = FLOAT_TYPES
    node_cost = 3
    near_misses: ClassVar[dict[str, str]] = {
        "scale_outside": "1.702 multiplies the product, not sigmoid's input",
        "second_consumer": "the sigmoid's output is also an output",
    }

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        x = ins[0]
        if self.variant == "scale_outside":
            w.op("Mul", [w.op("Mul", [x, w.op("Sigmoid", [x])]), w.scalar(QUICK_GELU_ALPHA)], outs[0])
            return
        gate = w.op("Sigmoid", [w.op("Mul", [x, w.scalar(QUICK_GELU_ALPHA)])], self.exposed(outs))
        w.op("Mul", [x, gate], outs[0])


TEMPLATES = (Gelu, BiasGelu, FastGelu, QuickGelu)
