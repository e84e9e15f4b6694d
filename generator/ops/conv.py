"""Convolutions: Conv, ConvInteger and ConvTranspose, grouped and dilated, with their kernels
emitted as initializers.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from generator.dtypes import FLOATS_32_FIRST, DType, classic
from generator.ops.base import Attrs, Emitter, OpSpec, register
from generator.ops.nn import CONV, CONV_T, QUANT, quant_zero_point, torch_pads, widen
from generator.ops.windows import UNPADDED_SHARE, WindowOp, window_params
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, floordiv, numel


class GroupedConv(WindowOp):
    """Conv's channel grouping: one group, a few, or depthwise (one group per input channel)."""

    kernel_attr_optional = True
    max_dilation = 3

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.group_mode = self.rng.choice(("one", "one", "one", "few", "depthwise"))
        self.group = self.rng.choice((2, 3, 4)) if self.group_mode != "one" else 1
        self.out_channels = sc.var("out_channels", lo=1)

    def group_requires(self, ins: list[AbsTensor]) -> list[Cond]:
        """Fixes `group` once the channel count is known: depthwise takes it from a concrete count,
        or ties a symbolic one (backward insertion) to the drawn group."""
        c = ins[0].shape[1]
        cons: list[Cond] = []
        if self.group_mode == "depthwise":
            if isinstance(c, int):
                self.group = c
            else:
                cons.append(c == self.group)
        g = self.group
        weight = numel([self.out_channels, floordiv(c, g), *self.kernel])
        return [*cons, c % g == 0, self.out_channels % g == 0, weight <= self.sc.max_elements]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return self.window_requires(ins) + self.group_requires(ins)

    def work(self, val: Callable[[Dim], int]) -> int:
        # Output channels replace the input's: per output cell, C/group channels of the window.
        c = val(self.inputs[0].shape[1])
        return self.window_cells(val) // c * val(self.out_channels) * (c // self.group)

    def kernel_weight_shape(self, em: Emitter) -> list[int]:
        c = em.ival(self.inputs[0].shape[1])
        return [em.ival(self.out_channels), c // self.group, *(em.ival(k) for k in self.kernel)]


@register
class Conv(GroupedConv):
    op_type = "Conv"

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.bias = self.rng.random() < 0.5

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        x = ins[0].shape
        return [AbsTensor(ins[0].dtype, [x[0], self.out_channels, *self.spatial_out(ins)])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        shape = self.kernel_weight_shape(em)
        dtype = self.inputs[0].dtype
        operands = [ins[0], em.weight(shape, dtype, fan_in=math.prod(shape[1:]))]
        if self.bias:
            operands.append(em.weight(shape[:1], dtype, fan_in=math.prod(shape[1:])))
        group = {"group": self.group} if self.group != 1 or self.explicit else {}
        em.node("Conv", operands, outs, **group, **self.window_attrs(em))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, w = inputs[0], inputs[1]
        bias = widen(inputs[2]) if len(inputs) > 2 and inputs[2] is not None else None
        _, strides, dil, pads = window_params(attrs, x, list(w.shape[2:]))
        xp = F.pad(widen(x), torch_pads(pads))
        y = CONV[x.dim() - 2](xp, widen(w), bias, stride=strides, dilation=dil, groups=int(attrs.get("group", 1)))
        return [y.to(x.dtype)]


@register
class ConvInteger(GroupedConv):
    """Quantised convolution: (x - x_zero_point) * (w - w_zero_point) summed in int32."""

    op_type = "ConvInteger"
    dtypes = QUANT
    max_dilation = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.zero_points = self.rng.choice(("none", "x", "both", "w"))

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype is not DType.int32 or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [TType(rng.choice(classic(cls.dtypes)), out.rank)]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        x = ins[0].shape
        return [AbsTensor(DType.int32, [x[0], self.out_channels, *self.spatial_out(ins)])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        dtype = self.inputs[0].dtype
        operands = [ins[0], em.weight(self.kernel_weight_shape(em), dtype)]
        if self.zero_points != "none":
            operands.append(em.const(quant_zero_point(em, dtype)) if self.zero_points in ("x", "both") else "")
        if self.zero_points in ("w", "both"):
            operands.append(em.const(quant_zero_point(em, dtype)))
        group = {"group": self.group} if self.group != 1 or self.explicit else {}
        em.node("ConvInteger", operands, outs, **group, **self.window_attrs(em))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, w = inputs[0], inputs[1]
        x_zp, w_zp = (inputs[i] if len(inputs) > i and inputs[i] is not None else None for i in (2, 3))
        xd = x.double() - (x_zp.double() if x_zp is not None else 0.0)
        wd = w.double()
        if w_zp is not None:
            wd = wd - w_zp.double().reshape(-1, *[1] * (w.dim() - 1))
        _, strides, dil, pads = window_params(attrs, x, list(w.shape[2:]))
        xp = F.pad(xd, torch_pads(pads))
        # float64 convolutions are slow on CPU (1 ms for a small 3-D one); float32 is exact
        # too whenever every partial sum stays below 2^24.
        if xd.numel() and wd.numel() and float(xd.abs().max() * wd.abs().max()) * wd[0].numel() < 2.0**24:
            xp, wd = xp.float(), wd.float()
        y = CONV[x.dim() - 2](xp, wd, None, stride=strides, dilation=dil, groups=int(attrs.get("group", 1)))
        return [torch.round(y).to(torch.int32)]


@register
class ConvTranspose(OpSpec):
    """Transposed convolution with groups, dilations, asymmetric pads and output_padding."""

    op_type = "ConvTranspose"
    min_rank = 3
    max_rank = 5
    dtypes = FLOATS_32_FIRST

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.n = n = ins[0].rank - 2
        self.kernel = [sc.var("kernel", lo=1) for _ in range(n)]
        self.strides = [sc.var("stride", lo=1, hi=3) for _ in range(n)]
        self.dilations = [sc.var("dilation", lo=1, hi=2) for _ in range(n)]
        unpadded = self.rng.random() < UNPADDED_SHARE
        self.pads: list[Dim] = [0 if unpadded else sc.var("pad", zero_ok=True, lo=0) for _ in range(2 * n)]
        self.output_padding = [sc.var("output_padding", zero_ok=True, lo=0, hi=2) for _ in range(n)]
        self.group = self.rng.choice((1, 1, 1, 2, 3))
        self.out_channels = sc.var("out_channels", lo=1)
        self.bias = self.rng.random() < 0.5
        self.explicit = self.rng.random() < 0.5

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        c, g, m = ins[0].shape[1], self.group, self.out_channels
        cons: list[Cond] = [c % g == 0, m % g == 0, m >= 1]
        cons.append(numel([c, floordiv(m, g), *self.kernel]) <= self.sc.max_elements)
        for i in range(self.n):
            k, s, d, op = self.kernel[i], self.strides[i], self.dilations[i], self.output_padding[i]
            extent = d * (k - 1) + 1
            cons += [k >= 1, s >= 1, d >= 1, op >= 0, op < s]  # torch needs output_padding < stride
            cons += [self.pads[i] >= 0, self.pads[i + self.n] >= 0]
            cons += [self.pads[i] < extent, self.pads[i + self.n] < extent]
        return cons

    def work(self, val: Callable[[Dim], int]) -> int:
        """Every input cell meets M/group output channels of the whole kernel."""
        x = self.inputs[0].shape
        kernel = math.prod(val(k) for k in self.kernel)
        return math.prod(val(d) for d in x) * (val(self.out_channels) // self.group) * kernel

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        x = ins[0].shape
        spatial = [
            (x[2 + i] - 1) * self.strides[i]
            + self.dilations[i] * (self.kernel[i] - 1)
            + 1
            + self.output_padding[i]
            - self.pads[i]
            - self.pads[i + self.n]
            for i in range(self.n)
        ]
        return [AbsTensor(ins[0].dtype, [x[0], self.out_channels, *spatial])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        dtype = self.inputs[0].dtype
        c, m = em.ival(self.inputs[0].shape[1]), em.ival(self.out_channels)
        kernel = [em.ival(k) for k in self.kernel]
        fan_in = c // self.group * math.prod(kernel)
        operands = [ins[0], em.weight([c, m // self.group, *kernel], dtype, fan_in=fan_in)]
        if self.bias:
            operands.append(em.weight([m], dtype, fan_in=fan_in))
        attrs: dict[str, Any] = {"kernel_shape": kernel} if self.explicit else {}
        defaults = {"strides": 1, "dilations": 1, "pads": 0, "output_padding": 0}
        for key, values in (
            ("strides", self.strides),
            ("dilations", self.dilations),
            ("pads", self.pads),
            ("output_padding", self.output_padding),
        ):
            ints = [em.ival(v) for v in values]
            if self.explicit or any(v != defaults[key] for v in ints):
                attrs[key] = ints
        if self.group != 1 or self.explicit:
            attrs["group"] = self.group
        em.node("ConvTranspose", operands, outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, w = inputs[0], inputs[1]
        n = x.dim() - 2
        strides = [int(v) for v in attrs.get("strides", [1] * n)]
        dil = [int(v) for v in attrs.get("dilations", [1] * n)]
        out_pad = [int(v) for v in attrs.get("output_padding", [0] * n)]
        spatial = [int(d) for d in x.shape[2:]]
        full = [
            s * (d - 1) + p + (k - 1) * r + 1
            for d, s, p, k, r in zip(spatial, strides, out_pad, w.shape[2:], dil, strict=True)
        ]
        pads = _transpose_pads(attrs, spatial, full, strides)
        conv, group = CONV_T[n], int(attrs.get("group", 1))
        if min(pads, default=0) >= 0 and all(o < max(s, r) for o, s, r in zip(out_pad, strides, dil, strict=True)):
            y = conv(widen(x), widen(w), None, stride=strides, output_padding=out_pad, groups=group, dilation=dil)
            # ONNX pads crop the full result, possibly asymmetrically; torch's padding is symmetric.
            for i in range(n):
                y = y.narrow(2 + i, pads[i], y.shape[2 + i] - pads[i] - pads[i + n])
        else:
            # output_padding's cells lie past every kernel tap, so they are zeros (torch takes only
            # paddings below the stride or dilation); a negative pad (an output_shape beyond the
            # full result) extends it with zeros.
            y = conv(widen(x), widen(w), None, stride=strides, groups=group, dilation=dil)
            ends = [o - p for o, p in zip(out_pad, pads[n:], strict=True)]
            y = F.pad(y, torch_pads([-p for p in pads[:n]] + ends))
        if len(inputs) > 2 and inputs[2] is not None:
            y = y + widen(inputs[2]).reshape(-1, *[1] * n)
        return [y.to(x.dtype)]


def _transpose_pads(attrs: Attrs, spatial: list[int], full: list[int], strides: list[int]) -> list[int]:
    """ConvTranspose's [begin..., end...] crops of the full result: the `pads` written, or those
    that give `output_shape` (its spatial dims) or, under SAME_*, input size times stride. An odd
    total puts the extra cell at the end for SAME_UPPER and at the start otherwise, and halves
    round toward zero, as onnxruntime does."""
    auto = attrs.get("auto_pad", "NOTSET")
    n = len(spatial)
    if "output_shape" not in attrs and auto not in ("SAME_UPPER", "SAME_LOWER"):
        return [0] * 2 * n if auto == "VALID" else [int(v) for v in attrs.get("pads", [0] * 2 * n)]
    if "output_shape" in attrs:
        out = [int(v) for v in attrs["output_shape"]][-n:]
    else:
        out = [d * s for d, s in zip(spatial, strides, strict=True)]
    total = [f - o for f, o in zip(full, out, strict=True)]
    half = [int(t / 2) for t in total]
    rest = [t - h for t, h in zip(total, half, strict=True)]
    return half + rest if auto == "SAME_UPPER" else rest + half
