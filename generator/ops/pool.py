"""Pooling: MaxPool, AveragePool, LpPool and their global forms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from generator.dtypes import FLOATS_32_FIRST, DType
from generator.ops.base import Attrs, Emitter, OpSpec, register
from generator.ops.nn import widen
from generator.ops.windows import (
    WindowOp,
    _pool_padding,
    _window_sum_1d,
    pad_dim,
    window_argmax,
    window_max,
    window_params,
    window_sum,
)
from generator.symbolic import AbsTensor, Cond, SymCtx, TType


class PoolOp(WindowOp):
    pads_below_kernel = True

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return self.window_requires(ins)

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        x = ins[0].shape
        return [AbsTensor(ins[0].dtype, [x[0], x[1], *self.spatial_out(ins)])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node(self.op_type, ins, outs[:1], **self.pool_attrs(), **self.window_attrs(em))

    def pool_attrs(self) -> dict[str, Any]:
        return {}


@register
class MaxPool(PoolOp):
    op_type = "MaxPool"
    dtypes = (*FLOATS_32_FIRST, DType.int8, DType.uint8)
    max_dilation = 2
    dilations_since = 10
    ceil_since = 10

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        kernel, strides, dil, _ = window_params(attrs, x)
        pads = _pool_padding(attrs, x, kernel, strides, dil)
        # float32 holds every 8-bit integer exactly; -inf padding never wins a window with a real cell.
        xf = widen(x) if x.dtype.is_floating_point else x.float()
        y = window_max(xf, kernel, strides, dil, pads)
        # The optional Indices output: where each maximum sits in the flattened input, the N and
        # C dims row-major and the spatial ones in storage_order (1: the first dim varies fastest).
        spatial = list(x.shape[2:])
        order = range(len(spatial)) if attrs.get("storage_order", 0) else reversed(range(len(spatial)))
        flat = torch.zeros((), dtype=torch.long)
        step = 1
        coords = window_argmax(xf.detach(), kernel, strides, dil, pads)
        for i in order:
            flat, step = flat + coords[i] * step, step * spatial[i]
        planes = torch.arange(x.shape[0] * x.shape[1]).reshape(x.shape[0], x.shape[1], *[1] * len(spatial))
        return [y.to(x.dtype), flat + planes * step]


@register
class AveragePool(PoolOp):
    op_type = "AveragePool"
    max_dilation = 2
    dilations_since = 19
    ceil_since = 10

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.count_include_pad = int(self.rng.random() < 0.5)

    def pool_attrs(self) -> dict[str, Any]:
        return {"count_include_pad": self.count_include_pad} if self.count_include_pad or self.explicit else {}

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        n = x.dim() - 2
        kernel, strides, dil, pads = window_params(attrs, x)
        full = _pool_padding(attrs, x, kernel, strides, dil)
        xw = widen(x)
        total = window_sum(xw, kernel, strides, dil, full)
        # The divisor counts the cells of each window inside the input, plus its pads when
        # count_include_pad is set; a ceil-mode overhang never counts. The counted region is a
        # box, so a window's count is the product of its per-dim counts.
        counted = pads if attrs.get("count_include_pad", 0) else [0] * 2 * n
        count = torch.ones([1, 1, *[1] * n], dtype=torch.float64)
        for i, size in enumerate(x.shape[2:]):
            line = torch.ones(size, dtype=torch.float64)
            line = pad_dim(
                pad_dim(line, 0, counted[i], counted[i + n], 1.0), 0, full[i] - counted[i], full[i + n] - counted[i + n]
            )
            per_dim = _window_sum_1d(line, kernel[i], strides[i], dil[i])
            count = count * per_dim.reshape([-1 if j == i else 1 for j in range(n)])
        count = count.to(xw.dtype)
        return [(total / count).to(x.dtype)]


@register
class LpPool(PoolOp):
    op_type = "LpPool"
    max_dilation = 2
    dilations_since = 18
    ceil_since = 18

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.p = self.rng.choice((1, 2, 2, 3))

    def pool_attrs(self) -> dict[str, Any]:
        return {"p": self.p} if self.p != 2 or self.explicit else {}

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        p = int(attrs.get("p", 2))
        kernel, strides, dil, _ = window_params(attrs, x)
        pads = _pool_padding(attrs, x, kernel, strides, dil)
        return [(window_sum(widen(x).abs() ** p, kernel, strides, dil, pads) ** (1.0 / p)).to(x.dtype)]


class GlobalPool(OpSpec):
    """Pools over all spatial dims; the output keeps them as ones."""

    min_rank = 3
    max_rank = 5
    dtypes = FLOATS_32_FIRST

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        x = ins[0].shape
        return [AbsTensor(ins[0].dtype, [x[0], x[1], *[1] * (len(x) - 2)])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node(self.op_type, ins, outs)

    @classmethod
    def reference(cls, attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        return [cls.pool(widen(x), list(range(2, x.dim())), attrs).to(x.dtype)]

    @staticmethod
    def pool(x: torch.Tensor, dims: list[int], attrs: Attrs) -> torch.Tensor:
        raise NotImplementedError


@register
class GlobalAveragePool(GlobalPool):
    op_type = "GlobalAveragePool"

    @staticmethod
    def pool(x: torch.Tensor, dims: list[int], attrs: Attrs) -> torch.Tensor:
        return x.mean(dim=dims, keepdim=True)


@register
class GlobalMaxPool(GlobalPool):
    op_type = "GlobalMaxPool"

    @staticmethod
    def pool(x: torch.Tensor, dims: list[int], attrs: Attrs) -> torch.Tensor:
        return x.amax(dim=dims, keepdim=True)


@register
class GlobalLpPool(GlobalPool):
    op_type = "GlobalLpPool"

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.p = self.rng.choice((1, 2, 2, 3))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node(self.op_type, ins, outs, **({"p": self.p} if self.p != 2 else {}))

    @staticmethod
    def pool(x: torch.Tensor, dims: list[int], attrs: Attrs) -> torch.Tensor:
        p = int(attrs.get("p", 2))
        return (x.abs() ** p).sum(dim=dims, keepdim=True) ** (1.0 / p)
