"""Neural-network ops: MatMul, Gemm, Conv, pooling and softmax.

Weights that an op owns (conv kernels, Gemm's B and C) are emitted as initializers
so that a model's data-flow graph only contains the activations the generator grew.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from generator.ops.base import Attrs, Emitter, OpSpec, full_and_lower_rank, register
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, numel

SPATIAL = 2
"""v0 emits 2-D convolutions and pools; the references accept any spatial rank."""


def _torch_pads(pads: Sequence[int]) -> list[int]:
    """ONNX [b0, b1, ..., e0, e1, ...] to F.pad's last-axis-first (b, e) pairs."""
    n = len(pads) // 2
    out: list[int] = []
    for i in reversed(range(n)):
        out += [int(pads[i]), int(pads[i + n])]
    return out


@register
class MatMul(OpSpec):
    op_type = "MatMul"
    arity = 2
    min_rank = 2

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        return full_and_lower_rank(out, cls.min_rank, rng)

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        a, b = ins[0].shape, ins[1].shape
        batch = min(len(a), len(b)) - 2
        cons: list[Cond] = [a[-1] == b[-2]]
        cons += [a[-3 - i] == b[-3 - i] for i in range(batch)]
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        a, b = ins[0].shape, ins[1].shape
        longer = a if len(a) >= len(b) else b
        return [AbsTensor(ins[0].dtype, [*list(longer[:-2]), a[-2], b[-1]])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("MatMul", ins, outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [torch.matmul(inputs[0], inputs[1])]


@register
class Gemm(OpSpec):
    op_type = "Gemm"
    min_rank = 2
    max_rank = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.n = sc.var("gemm_n")
        self.trans_a = self.rng.random() < 0.3
        self.trans_b = self.rng.random() < 0.5
        self.alpha = round(self.rng.uniform(0.25, 2.0), 3)
        self.beta = round(self.rng.uniform(0.25, 2.0), 3)

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        k = ins[0].shape[0] if self.trans_a else ins[0].shape[1]
        return [self.n >= 1, self.n * k <= self.sc.max_elements]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        m = ins[0].shape[1] if self.trans_a else ins[0].shape[0]
        return [AbsTensor(ins[0].dtype, [m, self.n])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        a = self.inputs[0]
        k, n = em.ival(a.shape[0] if self.trans_a else a.shape[1]), em.ival(self.n)
        b = em.weight([n, k] if self.trans_b else [k, n], a.dtype, fan_in=k)
        c = em.weight([n], a.dtype)
        attrs = {"alpha": self.alpha, "beta": self.beta, "transA": int(self.trans_a), "transB": int(self.trans_b)}
        em.node("Gemm", [ins[0], b, c], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        a, b = inputs[0], inputs[1]
        a = a.T if attrs.get("transA", 0) else a
        b = b.T if attrs.get("transB", 0) else b
        y = attrs.get("alpha", 1.0) * (a @ b)
        if len(inputs) > 2 and inputs[2] is not None:
            y = y + attrs.get("beta", 1.0) * inputs[2]
        return [y]


class WindowOp(OpSpec):
    """Shared window arithmetic of Conv and the pools: kernel, stride, dilation, pads."""

    min_rank = SPATIAL + 2
    max_rank = SPATIAL + 2
    max_stride = 3
    max_dilation = 1

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.kernel = [sc.var("kernel") for _ in range(SPATIAL)]
        self.strides = [sc.var("stride") for _ in range(SPATIAL)]
        self.dilations = [sc.var("dilation") for _ in range(SPATIAL)]
        self.pads = [sc.var("pad", zero_ok=True) for _ in range(2 * SPATIAL)]

    def window_requires(self, ins: list[AbsTensor]) -> list[Cond]:
        cons: list[Cond] = []
        for i in range(SPATIAL):
            k, s, d = self.kernel[i], self.strides[i], self.dilations[i]
            cons += [k >= 1, s >= 1, s <= self.max_stride, d >= 1, d <= self.max_dilation]
            cons += [self.pads[i] >= 0, self.pads[i + SPATIAL] >= 0]
            cons.append(self._padded(ins, i) >= d * (k - 1) + 1)
        return cons

    def _padded(self, ins: list[AbsTensor], i: int) -> Dim:
        return ins[0].shape[2 + i] + self.pads[i] + self.pads[i + SPATIAL]

    def spatial_out(self, ins: list[AbsTensor]) -> list[Dim]:
        return [
            (self._padded(ins, i) - self.dilations[i] * (self.kernel[i] - 1) - 1) / self.strides[i] + 1
            for i in range(SPATIAL)
        ]

    def window_attrs(self, em: Emitter) -> dict[str, list[int]]:
        attrs = {
            "kernel_shape": [em.ival(k) for k in self.kernel],
            "strides": [em.ival(s) for s in self.strides],
            "pads": [em.ival(p) for p in self.pads],
        }
        if self.max_dilation > 1:
            attrs["dilations"] = [em.ival(d) for d in self.dilations]
        return attrs


@register
class Conv(WindowOp):
    op_type = "Conv"
    max_dilation = 3

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.group = self.rng.choice((1, 1, 1, 2, 3))
        self.out_channels = sc.var("out_channels")
        self.bias = self.rng.random() < 0.5

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        g, c = self.group, ins[0].shape[1]
        weight = numel([self.out_channels, c / g, *self.kernel])
        cons = [c % g == 0, self.out_channels % g == 0, self.out_channels >= 1, weight <= self.sc.max_elements]
        return self.window_requires(ins) + cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        x = ins[0].shape
        return [AbsTensor(ins[0].dtype, [x[0], self.out_channels, *self.spatial_out(ins)])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        oc, c = em.ival(self.out_channels), em.ival(x.shape[1])
        kernel = [em.ival(k) for k in self.kernel]
        fan_in = c // self.group * kernel[0] * kernel[1]
        operands = [ins[0], em.weight([oc, c // self.group, *kernel], x.dtype, fan_in=fan_in)]
        if self.bias:
            operands.append(em.weight([oc], x.dtype, fan_in=fan_in))
        em.node("Conv", operands, outs, group=self.group, **self.window_attrs(em))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        n = w.dim() - 2
        pads = attrs.get("pads", [0] * 2 * n)
        x = F.pad(x, _torch_pads(pads))
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]
        stride = attrs.get("strides", [1] * n)
        dilation = attrs.get("dilations", [1] * n)
        return [conv(x, w, bias, stride=stride, dilation=dilation, groups=int(attrs.get("group", 1)))]


class PoolOp(WindowOp):
    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        # onnxruntime rejects pads that reach a whole kernel width.
        cons = self.window_requires(ins)
        cons += [self.pads[i] < self.kernel[i % SPATIAL] for i in range(2 * SPATIAL)]
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        x = ins[0].shape
        return [AbsTensor(ins[0].dtype, [x[0], x[1], *self.spatial_out(ins)])]


@register
class MaxPool(PoolOp):
    op_type = "MaxPool"

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("MaxPool", ins, outs[:1], **self.window_attrs(em))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        n = x.dim() - 2
        if attrs.get("ceil_mode", 0) or attrs.get("storage_order", 0):
            raise NotImplementedError("MaxPool ceil_mode/storage_order")
        x = F.pad(x, _torch_pads(attrs.get("pads", [0] * 2 * n)), value=float("-inf"))
        pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
        kernel = attrs["kernel_shape"]
        return [pool(x, kernel, stride=attrs.get("strides", [1] * n), dilation=attrs.get("dilations", [1] * n))]


@register
class AveragePool(PoolOp):
    op_type = "AveragePool"

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.count_include_pad = int(self.rng.random() < 0.5)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("AveragePool", ins, outs, count_include_pad=self.count_include_pad, **self.window_attrs(em))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        n = x.dim() - 2
        if attrs.get("ceil_mode", 0) or any(d != 1 for d in attrs.get("dilations", [1] * n)):
            raise NotImplementedError("AveragePool ceil_mode/dilations")
        pads = _torch_pads(attrs.get("pads", [0] * 2 * n))
        pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[n]
        kernel, stride = attrs["kernel_shape"], attrs.get("strides", [1] * n)
        total = pool(F.pad(x, pads), kernel, stride=stride)
        if attrs.get("count_include_pad", 0):
            return [total]
        # Averages over the same window share a divisor, so their ratio is sum(x)/count(real cells).
        cells = pool(F.pad(torch.ones_like(x), pads), kernel, stride=stride)
        return [total / cells]


class SoftmaxOp(OpSpec):
    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axis = self.rng.randint(-rank, rank - 1)

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, list(ins[0].shape))]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node(self.op_type, ins, outs, axis=self.axis)


@register
class Softmax(SoftmaxOp):
    op_type = "Softmax"

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [torch.softmax(inputs[0], dim=int(attrs.get("axis", -1)))]


@register
class LogSoftmax(SoftmaxOp):
    op_type = "LogSoftmax"

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [torch.log_softmax(inputs[0], dim=int(attrs.get("axis", -1)))]
