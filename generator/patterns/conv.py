"""Convolution and pooling templates: what a compiler folds into a Conv (a batch norm, a
per-channel affine, an activation, a residual sum, a zero Pad) or into a pool's pads."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import ClassVar

from generator.dtypes import FLOAT_TYPES
from generator.ops.base import Emitter
from generator.patterns.base import Pattern, Writer
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, numel

CONV_ACTIVATIONS = ("Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Clip")
"""What onnxruntime's FusedConv takes as a fused activation."""
UNFUSED_ACTIVATION = "Elu"
"""An activation FusedGemm takes and FusedConv does not: the activation near miss, where
a table shared by two fusions would let it through."""


class WindowPattern(Pattern):
    """A 1-D or 2-D window (kernel 1-3, stride 1) over [N, C, *spatial], with `pads`
    written on the window op itself and `pre` pads put in front of it by the template."""

    dtypes = FLOAT_TYPES
    min_rank = 3
    max_rank = 4
    pads_on_window: ClassVar[bool] = True

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        n = ins[0].rank - 2
        self.kernel = [self.rng.choice((1, 2, 3)) for _ in range(n)]
        self.pads = [self.rng.choice((0, 0, 1)) if self.pads_on_window else 0 for _ in range(2 * n)]
        self.pre = [0] * (2 * n)
        self.channels: Dim = sc.var("out_channels", lo=1, hi=16)

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        return None

    def padded(self, ins: list[AbsTensor]) -> list[Dim]:
        n = len(self.kernel)
        return [x + self.pre[i] + self.pre[i + n] for i, x in enumerate(ins[0].shape[2:])]

    def spatial_out(self, ins: list[AbsTensor]) -> list[Dim]:
        n = len(self.kernel)
        return [x + self.pads[i] + self.pads[i + n] - self.kernel[i] + 1 for i, x in enumerate(self.padded(ins))]

    def in_channels(self, ins: list[AbsTensor]) -> Dim:
        return ins[0].shape[1]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        weight = self.channels * self.in_channels(ins) * math.prod(self.kernel)
        return [*(o >= 1 for o in self.spatial_out(ins)), weight <= self.sc.max_elements]

    def out_channels(self, ins: list[AbsTensor]) -> Dim:
        return self.channels

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = [ins[0].shape[0], self.out_channels(ins), *self.spatial_out(ins)]
        return self.outputs(AbsTensor(ins[0].dtype, shape), AbsTensor(ins[0].dtype, list(shape)))

    def work(self, val: Callable[[Dim], int]) -> int:
        cells = math.prod(val(d) for d in self.spatial_out(self.inputs)) * val(self.inputs[0].shape[0])
        return cells * val(self.channels) * val(self.in_channels(self.inputs)) * math.prod(self.kernel)

    def conv(self, w: Writer, em: Emitter, x: str, out: str | None = None, runtime_weight: bool = False) -> str:
        c, f = em.ival(self.in_channels(self.inputs)), em.ival(self.channels)
        shape = [f, c, *self.kernel]
        fan_in = math.prod(shape[1:])
        if runtime_weight:
            weight = w.runtime(em.values.uniform(-1, 1, size=shape).astype(w.dtype.numpy) / math.sqrt(fan_in))
        else:
            weight = em.weight(shape, w.dtype, fan_in=fan_in)
        return w.op("Conv", [x, weight, em.weight([f], w.dtype)], out, kernel_shape=self.kernel, pads=self.pads)


def activation(w: Writer, op_type: str, x: str, out: str, runtime_bounds: bool = False) -> None:
    """One activation node; Clip's bounds are constants, or graph inputs when asked."""
    if op_type != "Clip":
        w.op(op_type, [x], out)
        return
    bounds = [w.array(-0.5), w.array(0.5)]
    names = [w.runtime(b) for b in bounds] if runtime_bounds else [w.const(b) for b in bounds]
    w.op("Clip", [x, *names], out)


class ConvActivation(WindowPattern):
    """Conv followed by an activation the fused Conv kernel applies."""

    template = "ConvActivation"
    source = "onnxruntime ConvActivationFusion; TVM FuseOps"
    fires = ("+com.microsoft::FusedConv",)
    uses = ("Conv", *CONV_ACTIVATIONS, UNFUSED_ACTIVATION)
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
        w = Writer(em, outs, self.inputs[0].dtype)
        product = self.conv(w, em, ins[0], self.exposed(outs))
        activation(w, self.activation, product, outs[0], runtime_bounds=self.variant == "runtime_clip")


class ConvBatchNorm(WindowPattern):
    """Conv then an inference BatchNormalization over its output channels."""

    template = "ConvBatchNorm"
    source = "onnxruntime ConvBNFusion; TVM FoldScaleAxis"
    fires = ("-ai.onnx::BatchNormalization",)
    uses = ("Conv", "BatchNormalization")
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {
        "runtime_weight": "the convolution's weight is a graph input, not a constant",
        "second_consumer": "the convolution's output is also an output",
    }

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = Writer(em, outs, self.inputs[0].dtype)
        product = self.conv(w, em, ins[0], self.exposed(outs), runtime_weight=self.variant == "runtime_weight")
        f = em.ival(self.channels)
        stats = [em.weight([f], w.dtype) for _ in range(3)]
        w.op("BatchNormalization", [product, *stats, w.const(em.values.uniform(0.5, 2.0, size=[f]))], outs[0])


class ConvAffine(WindowPattern):
    """Conv then a per-channel Mul and Add, both foldable into its weight and bias."""

    template = "ConvAffine"
    source = "onnxruntime ConvMulFusion and ConvAddFusion"
    fires = ("-ai.onnx::Mul", "-ai.onnx::Add")
    uses = ("Conv", "Mul", "Add")
    node_cost = 3
    near_misses: ClassVar[dict[str, str]] = {
        "per_column": "the factors vary along the last spatial axis, not per channel",
        "second_consumer": "the convolution's output is also an output",
    }

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = Writer(em, outs, self.inputs[0].dtype)
        product = self.conv(w, em, ins[0], self.exposed(outs))
        spatial = len(self.kernel)
        if self.variant == "per_column":
            shape = [1] * spatial + [em.ival(self.spatial_out(self.inputs)[-1])]
        else:
            shape = [em.ival(self.channels)] + [1] * spatial
        scaled = w.op("Mul", [product, w.const(em.values.uniform(0.5, 1.5, size=shape))])
        w.op("Add", [scaled, em.weight(shape, w.dtype)], outs[0])


class ConvResidual(WindowPattern):
    """Relu(Conv(x) + x): a residual block, fused into a Conv that adds its Z input."""

    template = "ConvResidual"
    source = "onnxruntime ConvAddActivationFusion"
    fires = ("+com.microsoft::FusedConv",)
    uses = ("Conv", "Add", "Relu")
    node_cost = 3
    pads_on_window = False
    near_misses: ClassVar[dict[str, str]] = {"second_consumer": "the residual sum is also an output"}

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.kernel = [self.rng.choice((1, 3)) for _ in self.kernel]
        self.pads = [(k - 1) // 2 for k in self.kernel] * 2

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        self.channels = ins[0].shape[1]
        return super().requires(ins)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = Writer(em, outs, self.inputs[0].dtype)
        total = w.op("Add", [self.conv(w, em, ins[0]), ins[0]], self.exposed(outs))
        w.op("Relu", [total], outs[0])


class PadWindow(WindowPattern):
    """A zero constant Pad on the spatial axes in front of a Conv or a pool, which a
    compiler merges into the window op's own pads."""

    template = "PadWindow"
    source = "onnxruntime PadFusion; TVM SimplifyExpr"
    fires = ("-ai.onnx::Pad",)
    uses = ("Pad", "Conv", "AveragePool", "MaxPool")
    pads_on_window = False
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {
        "pad_value": "the pad value is 0.5, not 0",
        "edge_mode": "the pad repeats the edge instead of writing zeros",
        "channel_pad": "the channel axis is padded too",
        "count_include_pad": "an AveragePool that leaves padding out of its average (count_include_pad=0)",
        "max_pool": "a MaxPool, whose own padding is -inf, after a zero Pad",
    }

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        n = len(self.kernel)
        self.pre = [self.rng.choice((1, 1, 2)) for _ in range(2 * n)]
        default = self.rng.choice(("Conv", "Conv", "AveragePool"))
        self.window = {"count_include_pad": "AveragePool", "max_pool": "MaxPool"}.get(self.variant, default)
        self.channel_pad = 1 if self.variant == "channel_pad" else 0

    def in_channels(self, ins: list[AbsTensor]) -> Dim:
        return ins[0].shape[1] + 2 * self.channel_pad

    def out_channels(self, ins: list[AbsTensor]) -> Dim:
        return self.channels if self.window == "Conv" else self.in_channels(ins)

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        if self.window != "Conv":
            self.channels = 1
        n = len(self.kernel)
        spatial = [d + self.pre[i] + self.pre[n + i] for i, d in enumerate(ins[0].shape[2:])]
        padded = numel([ins[0].shape[0], self.in_channels(ins), *spatial])
        return [*super().requires(ins), padded <= self.sc.max_elements]

    def work(self, val: Callable[[Dim], int]) -> int:
        cells = math.prod(val(d) for d in self.spatial_out(self.inputs)) * val(self.inputs[0].shape[0])
        return cells * val(self.in_channels(self.inputs)) * math.prod(self.kernel) * val(self.out_channels(self.inputs))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = Writer(em, outs, self.inputs[0].dtype)
        n = len(self.kernel)
        pads = [0, self.channel_pad, *self.pre[:n], 0, self.channel_pad, *self.pre[n:]]
        operands = [ins[0], em.const_i64(pads)]
        mode = {"mode": "edge"} if self.variant == "edge_mode" else {}
        if not mode:
            operands.append(w.const(0.5 if self.variant == "pad_value" else 0.0))
        padded = w.op("Pad", operands, **mode)
        if self.window == "Conv":
            self.conv(w, em, padded, outs[0])
            return
        include = {"count_include_pad": 0 if self.variant == "count_include_pad" else 1}
        attrs = include if self.window == "AveragePool" else {}
        w.op(self.window, [padded], outs[0], kernel_shape=self.kernel, **attrs)


TEMPLATES = (ConvActivation, ConvBatchNorm, ConvAffine, ConvResidual, PadWindow)
