"""Convolution and pooling templates: what a compiler folds into a Conv or a ConvTranspose
(a batch norm, a per-channel affine, an activation, a residual sum) or into any window op's
pads (a zero Pad in front of a pool or a conv-like op)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from generator.dtypes import FLOAT_TYPES, DType
from generator.emit import draw_values
from generator.ops.base import Emitter
from generator.ops.pool import AveragePool
from generator.patterns.base import EXACT, Pattern, Writer
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, numel

CONV_ACTIVATIONS = ("Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Clip")
"""What onnxruntime's FusedConv takes as a fused activation."""
UNFUSED_ACTIVATION = "Elu"
"""An activation FusedGemm takes and FusedConv does not: the activation near miss, where
a table shared by two fusions would let it through."""


class RuntimeWeights:
    """An Emitter that writes every weight a spec draws as a graph input instead (a near
    miss whose weight is no constant), and the rest as the emitter it wraps."""

    def __init__(self, em: Emitter) -> None:
        self.em = em
        self.opset = em.opset
        self.values = em.values

    def ival(self, term: Dim) -> int:
        return self.em.ival(term)

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any) -> None:
        self.em.node(op_type, inputs, outputs, **attrs)

    def const_i64(self, values: Sequence[int]) -> str:
        return self.em.const_i64(values)

    def const(self, array: np.ndarray) -> str:
        return self.em.const(array)

    def weight(self, shape: Sequence[int], dtype: DType, fan_in: int = 1) -> str:
        return self.em.runtime(draw_values(self.em.values, shape, dtype, fan_in))

    def runtime(self, array: np.ndarray) -> str:
        return self.em.runtime(array)

    def shape_operand(self, values: Sequence[int] | np.ndarray, dtype: type = np.int64) -> str:
        return self.em.shape_operand(values, dtype)


class WindowPattern(Pattern):
    """A window op over [N, C, *spatial] (1-D or 2-D spatial): the template's consumer, a
    member of its family written as that op's registered spec with its own attributes
    (strides, dilations, pads or auto_pad, groups...), after `pre` pads the template may
    put in front of it."""

    dtypes = FLOAT_TYPES
    min_rank = 3
    max_rank = 4
    consumers: ClassVar[tuple[str, ...]] = ("Conv", "ConvTranspose")

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.pre = [0] * (2 * (ins[0].rank - 2))
        self.channel_pad = 0
        self.window = self.consumer_op(ins)
        self.made: list[AbsTensor] = []
        """The window op's outputs, once bound."""

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        return None

    def inner(self, ins: list[AbsTensor]) -> AbsTensor:
        """What the window op reads: the input with the template's pads in front."""
        x, n = ins[0].shape, ins[0].rank - 2
        spatial = [d + self.pre[i] + self.pre[n + i] for i, d in enumerate(x[2:])]
        return AbsTensor(ins[0].dtype, [x[0], x[1] + 2 * self.channel_pad, *spatial])

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        cons, self.made = self.window.bind([self.inner(ins)])
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = list(self.made[0].shape)
        return self.outputs(AbsTensor(ins[0].dtype, shape), AbsTensor(ins[0].dtype, list(shape)))

    def work(self, val: Callable[[Dim], int]) -> int:
        return self.window.work(val)

    def made_dims(self, em: Emitter) -> list[int]:
        """The window op's output dims, as emitted."""
        return [em.ival(d) for d in self.made[0].shape]

    def write_window(self, w: Writer, em: Emitter, x: str, out: str | None = None, runtime_weight: bool = False) -> str:
        """The window op over `x`, written by its spec; its weights graph inputs if asked."""
        name = w.fresh(out)
        self.window.emit(RuntimeWeights(em) if runtime_weight else em, [x], [name])
        return name


def activation(w: Writer, op_type: str, x: str, out: str, runtime_bounds: bool = False) -> None:
    """One activation node; Clip's bounds are constants, or graph inputs when asked."""
    if op_type != "Clip":
        w.op(op_type, [x], out)
        return
    bounds = [w.array(-0.5), w.array(0.5)]
    names = [w.runtime(b) for b in bounds] if runtime_bounds else [w.const(b) for b in bounds]
    w.op("Clip", [x, *names], out)


class ConvActivation(WindowPattern):
    """A Conv (or a ConvTranspose) followed by an activation the fused kernel applies."""

    template = "ConvActivation"
    source = "onnxruntime ConvActivationFusion; TVM FuseOps"
    fires = ("+com.microsoft::FusedConv",)
    uses = (*CONV_ACTIVATIONS, UNFUSED_ACTIVATION)
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {
        "activation": f"the activation is {UNFUSED_ACTIVATION}, which the fused kernel does not take",
        "runtime_clip": "Clip's bounds are graph inputs, not constants",
        "second_consumer": "the convolution's output is also an output",
    }

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.activation = {"activation": UNFUSED_ACTIVATION, "runtime_clip": "Clip"}.get(
            self.variant, self.rng.choice(CONV_ACTIVATIONS)
        )

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        product = self.write_window(w, em, ins[0], self.exposed(outs))
        activation(w, self.activation, product, outs[0], runtime_bounds=self.variant == "runtime_clip")


class ConvBatchNorm(WindowPattern):
    """A Conv (or a ConvTranspose) then an inference BatchNormalization over its output
    channels."""

    template = "ConvBatchNorm"
    source = "onnxruntime ConvBNFusion; TVM FoldScaleAxis"
    fires = ("-ai.onnx::BatchNormalization",)
    uses = ("BatchNormalization",)
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {
        "runtime_weight": "the convolution's weight is a graph input, not a constant",
        "second_consumer": "the convolution's output is also an output",
    }

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        product = self.write_window(w, em, ins[0], self.exposed(outs), runtime_weight=self.variant == "runtime_weight")
        f = self.made_dims(em)[1]
        stats = [em.weight([f], w.dtype) for _ in range(3)]
        w.op("BatchNormalization", [product, *stats, w.const(em.values.uniform(0.5, 2.0, size=[f]))], outs[0])


class ConvAffine(WindowPattern):
    """A Conv (or a ConvTranspose) then a per-channel Mul and Add, both foldable into its
    weight and bias."""

    template = "ConvAffine"
    source = "onnxruntime ConvMulFusion and ConvAddFusion"
    fires = ("-ai.onnx::Mul", "-ai.onnx::Add")
    uses = ("Mul", "Add")
    node_cost = 3
    near_misses: ClassVar[dict[str, str]] = {
        "per_column": "the factors vary along the last spatial axis, not per channel",
        "second_consumer": "the convolution's output is also an output",
    }

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        product = self.write_window(w, em, ins[0], self.exposed(outs))
        made = self.made_dims(em)
        spatial = len(made) - 2
        shape = [1] * spatial + made[-1:] if self.variant == "per_column" else [made[1]] + [1] * spatial
        scaled = w.op("Mul", [product, w.const(em.values.uniform(0.5, 1.5, size=shape))])
        w.op("Add", [scaled, em.weight(shape, w.dtype)], outs[0])


class ConvResidual(Pattern):
    """Relu(Conv(x) + x): a residual block, fused into a Conv that adds its Z input. The
    Conv keeps x's shape (a kernel of 1 or 3, "same" pads, stride 1), so it stays a Conv
    of its own rather than a drawn member of the family."""

    template = "ConvResidual"
    source = "onnxruntime ConvAddActivationFusion"
    fires = ("+com.microsoft::FusedConv",)
    uses = ("Conv", "Add", "Relu")
    dtypes = FLOAT_TYPES
    min_rank = 3
    max_rank = 4
    node_cost = 3
    near_misses: ClassVar[dict[str, str]] = {"second_consumer": "the residual sum is also an output"}

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.kernel = [self.rng.choice((1, 3)) for _ in range(ins[0].rank - 2)]
        self.pads = [(k - 1) // 2 for k in self.kernel] * 2

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        return None

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        c = ins[0].shape[1]
        return [c * c * math.prod(self.kernel) <= self.sc.max_elements]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return self.outputs(AbsTensor(ins[0].dtype, list(ins[0].shape)), AbsTensor(ins[0].dtype, list(ins[0].shape)))

    def work(self, val: Callable[[Dim], int]) -> int:
        c = val(self.inputs[0].shape[1])
        return math.prod(val(d) for d in self.inputs[0].shape) * c * math.prod(self.kernel)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        c = self.dims(em)[1]
        fan_in = c * math.prod(self.kernel)
        operands = [ins[0], em.weight([c, c, *self.kernel], w.dtype, fan_in=fan_in), em.weight([c], w.dtype)]
        product = w.op("Conv", operands, kernel_shape=self.kernel, pads=self.pads)
        total = w.op("Add", [product, ins[0]], self.exposed(outs))
        w.op("Relu", [total], outs[0])


FOLDABLE = ("Conv", "AveragePool", "LpPool")
"""Window ops whose own zero padding a zero Pad in front can merge into (an AveragePool only
when it counts the padding)."""
PADLESS = ("ConvTranspose", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
"""Window ops whose pads cannot take a Pad in front: ConvTranspose's crop its output, a
global pool has none."""


class PadWindow(WindowPattern):
    """A zero constant Pad on the spatial axes in front of a window op, which a compiler
    merges into the window op's own pads; the window op ranges over every pool and
    conv-like op, each with its own attributes."""

    template = "PadWindow"
    source = "onnxruntime PadFusion; TVM SimplifyExpr"
    fires = ("-ai.onnx::Pad",)
    uses = ("Pad",)
    consumers = (*FOLDABLE, "MaxPool", *PADLESS)
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {
        "pad_value": "the pad value is 0.5, not 0",
        "edge_mode": "the pad repeats the edge instead of writing zeros",
        "channel_pad": "the channel axis is padded too",
        "count_include_pad": "an AveragePool that leaves padding out of its average (count_include_pad=0)",
        "max_pool": "a MaxPool, whose own padding is -inf, after a zero Pad",
        "no_pads": "a window op whose pads cannot take the Pad's: ConvTranspose's crop its output, a global"
        " pool has none",
    }

    @classmethod
    def admits(cls, variant: str, consumer: str) -> bool:
        only = {EXACT: FOLDABLE, "count_include_pad": ("AveragePool",), "max_pool": ("MaxPool",), "no_pads": PADLESS}
        return consumer in only.get(variant, cls.consumers)

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.pre = [self.rng.choice((1, 1, 2)) for _ in self.pre]
        self.channel_pad = 1 if self.variant == "channel_pad" else 0
        if isinstance(self.window, AveragePool) and self.variant in (EXACT, "count_include_pad"):
            # Merging zeros into the pads keeps the average only where the pads count.
            self.window.count_include_pad = int(self.variant == EXACT)

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        padded = numel(self.inner(ins).shape)
        return [*super().requires(ins), padded <= self.sc.max_elements]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        n = len(self.pre) // 2
        pads = [0, self.channel_pad, *self.pre[:n], 0, self.channel_pad, *self.pre[n:]]
        operands = [ins[0], em.const_i64(pads)]
        mode = {"mode": "edge"} if self.variant == "edge_mode" else {}
        if not mode:
            operands.append(w.const(0.5 if self.variant == "pad_value" else 0.0))
        self.write_window(w, em, w.op("Pad", operands, **mode), outs[0])


TEMPLATES = (ConvActivation, ConvBatchNorm, ConvAffine, ConvResidual, PadWindow)
