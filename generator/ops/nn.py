"""Neural-network ops: matrix products, convolutions, pooling, softmax-like ops, Einsum, Dropout.

Weights an op owns (conv kernels, Gemm's B and C, zero points) are emitted as initializers, so a
model's data-flow graph only holds the activations the generator grew. Spatial ops take 1-D to 3-D
windows: the spatial rank is the input rank less two.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
import z3

from generator.dtypes import DType
from generator.ops.base import Attrs, Emitter, OpSpec, SameShapeOp, full_and_lower_rank, register
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, ceildiv, floordiv, numel

FLOAT_TYPES: tuple[DType, ...] = (DType.float32, DType.float64, DType.float16)
NUMERIC: tuple[DType, ...] = (*FLOAT_TYPES, DType.int32, DType.int64)
ORDERED: tuple[DType, ...] = (*NUMERIC, DType.int8, DType.uint8)
QUANT: tuple[DType, ...] = (DType.uint8, DType.int8)
AUTO_PADS = ("SAME_UPPER", "SAME_LOWER", "VALID")

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def widen(x: torch.Tensor) -> torch.Tensor:
    """float16 is computed in float32 and rounded once at the end: torch lacks several CPU half
    kernels, and a single rounding is what every backend's result approximates."""
    return x.float() if x.dtype == torch.float16 else x


def exact(x: torch.Tensor) -> torch.Tensor:
    """Integers as float64, where every sum the generator's small values reach is exact: float
    math on them then truncates on the cast back exactly as ONNX's float-scaled integer ops do."""
    return x if x.dtype.is_floating_point else x.double()


def axis_of(attrs: Attrs, key: str, default: int, rank: int) -> int:
    a = int(attrs.get(key, default))
    return a + rank if a < 0 else a


def any_of(*conds: Cond) -> Cond:
    """Disjunction of conditions, some of which may already be folded to Python bools."""
    if any(c is True for c in conds):
        return True
    rest = [c for c in conds if not isinstance(c, bool)]
    return z3.Or(*rest) if rest else False


def all_of(*conds: Cond) -> Cond:
    if any(c is False for c in conds):
        return False
    rest = [c for c in conds if not isinstance(c, bool)]
    return z3.And(*rest) if rest else True


def _torch_pads(pads: Sequence[int]) -> list[int]:
    """ONNX [b0, b1, ..., e0, e1, ...] to F.pad's last-axis-first (b, e) pairs."""
    n = len(pads) // 2
    out: list[int] = []
    for i in reversed(range(n)):
        out += [int(pads[i]), int(pads[i + n])]
    return out


@register
class MatMul(OpSpec):
    """numpy matmul: 1-D operands, and batch dims that are equal or broadcast from 1 on either side."""

    op_type = "MatMul"
    arity = 2
    dtypes = NUMERIC

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        batch = max(0, min(t.rank for t in ins) - 2)
        self.modes = [self.rng.choice(("eq", "eq", "eq", "lhs1", "rhs1")) for _ in range(batch)]

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        # Two vectors would give a rank-0 result, which the generator never makes.
        return super().accepts(ins) and max(t.rank for t in ins) >= 2

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        if out.rank == 1:
            vec, mat = TType(out.dtype, 1), TType(out.dtype, 2)
            return [vec, mat] if rng.random() < 0.5 else [mat, vec]
        return full_and_lower_rank(out, 2, rng)

    def _batches(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[tuple[str, Dim, Dim]]]:
        """The unaligned leading batch dims and the aligned (mode, lhs, rhs) ones."""
        a, b = ins[0].shape[:-2], ins[1].shape[:-2]
        n = len(self.modes)
        lead = list((a if len(a) >= len(b) else b)[: max(len(a), len(b)) - n])
        return lead, list(zip(self.modes, a[len(a) - n :], b[len(b) - n :], strict=True))

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        a, b = ins[0].shape, ins[1].shape
        cons: list[Cond] = [a[-1] == (b[-2] if len(b) >= 2 else b[0])]
        for mode, x, y in self._batches(ins)[1]:
            cons.append(x == y if mode == "eq" else (x if mode == "lhs1" else y) == 1)
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        a, b = ins[0].shape, ins[1].shape
        lead, aligned = self._batches(ins)
        shape = lead + [y if mode == "lhs1" else x for mode, x, y in aligned]
        shape += ([a[-2]] if len(a) >= 2 else []) + ([b[-1]] if len(b) >= 2 else [])
        return [AbsTensor(ins[0].dtype, shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("MatMul", ins, outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        a, b = inputs
        if a.dtype.is_floating_point:
            return [torch.matmul(widen(a), widen(b)).to(a.dtype)]
        # Integer matmul wraps around like the backends' integer accumulators.
        return [torch.matmul(a.long(), b.long()).to(a.dtype)]


GEMM_C_SHAPES = ("none", "n", "1n", "mn", "m1", "11", "1", "scalar")


@register
class Gemm(OpSpec):
    """A @ B with B (and the optional C, in any shape that broadcasts to [M, N]) owned by the op."""

    op_type = "Gemm"
    min_rank = 2
    max_rank = 2
    dtypes = NUMERIC

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.n = sc.var("gemm_n", lo=1)
        self.c_shape = self.rng.choice(GEMM_C_SHAPES)
        self.defaults = self.rng.random() < 0.2
        """Emit no alpha/beta/trans attributes at all (their defaults)."""
        self.trans_a = not self.defaults and self.rng.random() < 0.3
        self.trans_b = not self.defaults and self.rng.random() < 0.5
        if ins[0].dtype.is_float:
            self.alpha = round(self.rng.uniform(0.25, 2.0), 3)
            self.beta = round(self.rng.uniform(0.25, 2.0), 3)
        else:
            self.alpha, self.beta = self.rng.choice((1.0, 2.0, -1.0)), self.rng.choice((1.0, 3.0, -2.0))

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        k = ins[0].shape[0] if self.trans_a else ins[0].shape[1]
        return [self.n >= 1, self.n * k <= self.sc.max_elements]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        m = ins[0].shape[1] if self.trans_a else ins[0].shape[0]
        return [AbsTensor(ins[0].dtype, [m, self.n])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        a = self.inputs[0]
        m, k = (em.ival(d) for d in (a.shape[::-1] if self.trans_a else a.shape))
        n = em.ival(self.n)
        operands = [ins[0], em.weight([n, k] if self.trans_b else [k, n], a.dtype, fan_in=k)]
        c_shapes = {"n": [n], "1n": [1, n], "mn": [m, n], "m1": [m, 1], "11": [1, 1], "1": [1], "scalar": []}
        if self.c_shape in c_shapes:
            operands.append(em.weight(c_shapes[self.c_shape], a.dtype))
        if self.defaults:
            em.node("Gemm", operands, outs)
            return
        attrs = {"alpha": self.alpha, "beta": self.beta, "transA": int(self.trans_a), "transB": int(self.trans_b)}
        em.node("Gemm", operands, outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        a, b = inputs[0], inputs[1]
        c = inputs[2] if len(inputs) > 2 else None
        a = a.T if attrs.get("transA", 0) else a
        b = b.T if attrs.get("transB", 0) else b
        # Integers: float64 is exact here, and the cast back truncates as ONNX's float scaling does.
        up = widen if a.dtype.is_floating_point else exact
        y = float(attrs.get("alpha", 1.0)) * (up(a) @ up(b))
        if c is not None:
            y = y + float(attrs.get("beta", 1.0)) * up(c)
        return [y.to(a.dtype)]


def resolve_pads(
    attrs: Attrs, spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int]
) -> list[int]:
    """Explicit [begin..., end...] pads, with auto_pad resolved as the ONNX spec defines it."""
    auto = attrs.get("auto_pad", "NOTSET")
    n = len(spatial)
    if auto == "VALID":
        return [0] * 2 * n
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        total = [
            max(0, (-(-x // s) - 1) * s + d * (k - 1) + 1 - x)
            for x, k, s, d in zip(spatial, kernel, strides, dilations, strict=True)
        ]
        small, big = [t // 2 for t in total], [t - t // 2 for t in total]
        return small + big if auto == "SAME_UPPER" else big + small
    return [int(p) for p in attrs.get("pads", [0] * 2 * n)]


def window_params(attrs: Attrs, x: torch.Tensor, kernel: Sequence[int] | None = None) -> tuple[list[int], ...]:
    """(kernel, strides, dilations, pads) of a windowed op, defaults filled in."""
    n = x.dim() - 2
    k = [int(v) for v in attrs.get("kernel_shape", kernel or [])]
    s = [int(v) for v in attrs.get("strides", [1] * n)]
    d = [int(v) for v in attrs.get("dilations", [1] * n)]
    return k, s, d, resolve_pads(attrs, list(x.shape[2:]), k, s, d)


def pool_out_sizes(attrs: Attrs, x: torch.Tensor, kernel: list[int], strides: list[int], dil: list[int]) -> list[int]:
    """Output sizes under ONNX's ceil_mode rule: a window that would start past the input and the
    leading pad is dropped."""
    pads = resolve_pads(attrs, list(x.shape[2:]), kernel, strides, dil)
    n = len(kernel)
    out = []
    for i, size in enumerate(x.shape[2:]):
        num = size + pads[i] + pads[i + n] - dil[i] * (kernel[i] - 1) - 1
        o = (-(-num // strides[i]) if attrs.get("ceil_mode", 0) else num // strides[i]) + 1
        if attrs.get("ceil_mode", 0) and (o - 1) * strides[i] >= size + pads[i]:
            o -= 1
        out.append(o)
    return out


def _pool_padding(attrs: Attrs, x: torch.Tensor, kernel: list[int], strides: list[int], dil: list[int]) -> list[int]:
    """Pads plus the overhang a ceil-mode window needs past the end, so that floor-mode pooling
    of the padded tensor sees exactly ONNX's windows."""
    pads = resolve_pads(attrs, list(x.shape[2:]), kernel, strides, dil)
    n = len(kernel)
    out_sizes = pool_out_sizes(attrs, x, kernel, strides, dil)
    padded = list(pads)
    for i, size in enumerate(x.shape[2:]):
        need = (out_sizes[i] - 1) * strides[i] + dil[i] * (kernel[i] - 1) + 1
        padded[i + n] += max(0, need - (size + pads[i] + pads[i + n]))
    return padded


def window_sum(
    x: torch.Tensor, kernel: list[int], strides: list[int], dil: list[int], pads: Sequence[int] | None = None
) -> torch.Tensor:
    """Sum over every (dilated) window, one spatial dim at a time, after zero `pads` (ONNX
    [begin..., end...]).

    A box sum is separable, so it runs one dim at a time, and a huge window along one dim is
    a difference of prefix sums, so the cost stays linear in the input whatever the kernel:
    a 58x52x25 window as a convolution took the value search a quarter of a second per
    evaluation. Each dim is padded only when its turn
    comes, after the dims before it have shrunk to their output sizes: padding every dim up
    front made a 50x1x1 input with pads of 87 a ten-million-cell tensor. Sums run in float64;
    see `_window_sum_1d` for when a window is summed on its own.
    """
    n = len(kernel)
    y = x.double()
    for i, (k, s, d) in enumerate(zip(kernel, strides, dil, strict=True)):
        if pads is not None:
            y = pad_dim(y, 2 + i, pads[i], pads[i + n])
        y = _window_sum_1d(y.movedim(2 + i, -1), k, s, d).movedim(-1, 2 + i)
    return y.to(x.dtype)


def pad_dim(y: torch.Tensor, dim: int, before: int, after: int, value: float = 0.0) -> torch.Tensor:
    """`y` padded along one dim only."""
    if before == 0 and after == 0:
        return y
    spec = [0, 0] * (y.dim() - 1 - dim) + [before, after]
    return F.pad(y, spec, value=value)


DIRECT_SUM_CELLS = 1 << 22
"""Window sums that touch at most this many cells are summed window by window."""


def _window_sum_1d(y: torch.Tensor, k: int, s: int, d: int) -> torch.Tensor:
    """Along the last dim: sum of y[i*s + j*d] over j < k, for every window that fits.

    Each window is summed on its own where that stays cheap: a difference of float64 prefix
    sums loses a small window beside a huge one (LpPool's p=3 cubes 15252.9 to 3.5e12, and
    the next window's 1.25e-7 vanished into its ulp, so the reference said 0 where every
    backend said 0.005). Only a window too big for that falls back to prefix sums."""
    n = y.shape[-1]
    count = (n - (k - 1) * d - 1) // s + 1
    if y[..., :1].numel() * count * k <= DIRECT_SUM_CELLS:
        cells = (torch.arange(count) * s)[:, None] + torch.arange(k) * d
        return y[..., cells].sum(-1)
    rows = -(-n // d)
    # Prefix sums within each residue class mod d: p[m] = y[m] + y[m - d] + y[m - 2d] + ...
    grid = F.pad(y, (0, rows * d - n)).reshape(*y.shape[:-1], rows, d)
    prefix = grid.cumsum(-2).reshape(*y.shape[:-1], rows * d)
    last = torch.arange(count) * s + (k - 1) * d
    before = last - k * d
    head = prefix[..., before.clamp_min(0)] * (before >= 0).to(y.dtype)
    return prefix[..., last] - head


def window_max(
    x: torch.Tensor, kernel: list[int], strides: list[int], dil: list[int], pads: Sequence[int]
) -> torch.Tensor:
    """Max over every (dilated) window after -inf `pads` (ONNX [begin..., end...]), one spatial
    dim at a time: a box max is a max of maxes, so the cost is the output times the sum of the
    kernel sizes instead of their product (a 10x94x81 window took a fifth of a second).

    The last spatial dim goes first and the first last, so every window's result is the very
    element a row-major scan of the whole box keeps (first of equal maxima, NaN propagated),
    and the gradient flows to the same cell as max_poolNd's.
    """
    n = len(kernel)
    y = x
    for i in reversed(range(n)):
        y = pad_dim(y, 2 + i, pads[i], pads[i + n], float("-inf"))
        moved = y.movedim(2 + i, -1)
        flat = moved.reshape(-1, 1, moved.shape[-1])
        pooled = F.max_pool1d(flat, kernel[i], stride=strides[i], dilation=dil[i])
        y = pooled.reshape(*moved.shape[:-1], pooled.shape[-1]).movedim(-1, 2 + i)
    return y


def window_argmax(
    x: torch.Tensor, kernel: list[int], strides: list[int], dil: list[int], pads: Sequence[int]
) -> list[torch.Tensor]:
    """Per output cell of `window_max`, the input coordinates (one long tensor per spatial dim)
    of the element it keeps, found the same way: one spatial dim at a time, last first, each
    pass carrying the coordinates the earlier passes picked through its own choice."""
    n = len(kernel)
    y = x
    picked: dict[int, torch.Tensor] = {}
    for i in reversed(range(n)):
        y = pad_dim(y, 2 + i, pads[i], pads[i + n], float("-inf"))
        picked = {j: pad_dim(c, 2 + i, pads[i], pads[i + n]) for j, c in picked.items()}
        moved = y.movedim(2 + i, -1)
        pooled, at = F.max_pool1d(
            moved.reshape(-1, 1, moved.shape[-1]), kernel[i], stride=strides[i], dilation=dil[i], return_indices=True
        )
        at = at.reshape(*moved.shape[:-1], at.shape[-1])
        picked = {j: c.movedim(2 + i, -1).gather(-1, at).movedim(-1, 2 + i) for j, c in picked.items()}
        picked[i] = (at - pads[i]).movedim(-1, 2 + i)
        y = pooled.reshape(*moved.shape[:-1], pooled.shape[-1]).movedim(-1, 2 + i)
    return [picked[i] for i in range(n)]


class WindowOp(OpSpec):
    """Shared window arithmetic of Conv, ConvInteger and the pools: kernel, stride, dilation,
    pads or auto_pad, ceil_mode. Which of them an op has, and from which opset, are class vars."""

    min_rank = 3
    max_rank = 5
    dtypes = FLOAT_TYPES
    max_stride: ClassVar[int] = 3
    max_dilation: ClassVar[int] = 1
    dilations_since: ClassVar[int] = 1
    """The opset in which the op gained its `dilations` attribute."""
    ceil_since: ClassVar[int | None] = None
    """The opset in which the op gained `ceil_mode`; None: it has none."""
    pads_below_kernel: ClassVar[bool] = False
    """onnxruntime rejects pool pads that reach a whole kernel width."""
    kernel_attr_optional: ClassVar[bool] = False

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.n = ins[0].rank - 2
        self.explicit = self.rng.random() < 0.5
        """Write default-valued attributes out rather than leaving them implied."""
        self.auto_pad = self.rng.choice(AUTO_PADS) if self.rng.random() < 0.25 else "NOTSET"
        self.kernel = [sc.var("kernel", lo=1) for _ in range(self.n)]
        self.strides = [sc.var("stride", lo=1, hi=self.max_stride) for _ in range(self.n)]
        # onnxruntime refuses dilations together with SAME padding.
        dilated = self.max_dilation > 1 and sc.opset >= self.dilations_since and not self.auto_pad.startswith("SAME")
        self.dilations: list[Dim] = [
            sc.var("dilation", lo=1, hi=self.max_dilation) if dilated else 1 for _ in range(self.n)
        ]
        self.pads: list[Dim] = []
        if self.auto_pad == "NOTSET":
            self.pads = [sc.var("pad", zero_ok=True, lo=0) for _ in range(2 * self.n)]
        can_ceil = self.ceil_since is not None and sc.opset >= self.ceil_since
        self.ceil_mode = can_ceil and self.auto_pad == "NOTSET" and self.rng.random() < 0.35

    def _extent(self, i: int) -> Dim:
        return self.dilations[i] * (self.kernel[i] - 1) + 1

    def window_requires(self, ins: list[AbsTensor]) -> list[Cond]:
        cons: list[Cond] = []
        for i in range(self.n):
            k, s, d, x = self.kernel[i], self.strides[i], self.dilations[i], ins[0].shape[2 + i]
            cons += [k >= 1, s >= 1, s <= self.max_stride, d >= 1, d <= self.max_dilation]
            if self.auto_pad == "VALID":
                cons.append(x >= self._extent(i))
            elif self.auto_pad != "NOTSET":
                cons.append((ceildiv(x, s) - 1) * s + k >= x)  # SAME's total pad is not negative
            else:
                pb, pe = self.pads[i], self.pads[i + self.n]
                cons += [pb >= 0, pe >= 0, x + pb + pe >= self._extent(i)]
                if self.pads_below_kernel:
                    # Every window then holds a real cell: pads shorter than the kernel, and no
                    # pads where dilation could step a window over the input altogether.
                    cons += [pb < k, pe < k, any_of(d == 1, all_of(pb == 0, pe == 0))]
                if self.ceil_mode:
                    # The last ceil-mode window starts inside the input or its leading pad, so that
                    # backends which do and do not drop such windows agree on the output size.
                    cons.append((self._out_dim(i, x) - 1) * s < x + pb)
        return cons

    def _out_dim(self, i: int, x: Dim) -> Dim:
        s = self.strides[i]
        if self.auto_pad == "VALID":
            return floordiv(x - self._extent(i), s) + 1
        if self.auto_pad != "NOTSET":
            return ceildiv(x, s)
        num = x + self.pads[i] + self.pads[i + self.n] - self._extent(i)
        return (ceildiv(num, s) if self.ceil_mode else floordiv(num, s)) + 1

    def spatial_out(self, ins: list[AbsTensor]) -> list[Dim]:
        return [self._out_dim(i, ins[0].shape[2 + i]) for i in range(self.n)]

    def window_cells(self, val: Callable[[Dim], int]) -> int:
        """Output cells times window cells: what a direct pool visits (and a conv per input
        channel of its group)."""
        x = self.inputs[0].shape
        out = [val(x[0]), val(x[1]), *(val(d) for d in self.spatial_out(self.inputs))]
        return math.prod(out) * math.prod(val(k) for k in self.kernel)

    def work(self, val: Callable[[Dim], int]) -> int:
        return self.window_cells(val)

    def window_attrs(self, em: Emitter) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        kernel = [em.ival(k) for k in self.kernel]
        if self.explicit or not self.kernel_attr_optional:
            attrs["kernel_shape"] = kernel
        for key, values in (("strides", self.strides), ("dilations", self.dilations), ("pads", self.pads)):
            ints = [em.ival(v) for v in values]
            if ints and (any(v != (0 if key == "pads" else 1) for v in ints) or self.explicit):
                attrs[key] = ints
        if "dilations" in attrs and em.opset < self.dilations_since:
            del attrs["dilations"]
        if self.auto_pad != "NOTSET":
            attrs["auto_pad"] = self.auto_pad
        if self.ceil_mode:
            attrs["ceil_mode"] = 1
        return attrs


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
        xp = F.pad(widen(x), _torch_pads(pads))
        y = _CONV[x.dim() - 2](xp, widen(w), bias, stride=strides, dilation=dil, groups=int(attrs.get("group", 1)))
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
        return [TType(rng.choice(cls.dtypes), out.rank)]

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
        xp = F.pad(xd, _torch_pads(pads))
        # float64 convolutions are slow on CPU (1 ms for a small 3-D one); float32 is exact
        # too whenever every partial sum stays below 2^24.
        if xd.numel() and wd.numel() and float(xd.abs().max() * wd.abs().max()) * wd[0].numel() < 2.0**24:
            xp, wd = xp.float(), wd.float()
        y = _CONV[x.dim() - 2](xp, wd, None, stride=strides, dilation=dil, groups=int(attrs.get("group", 1)))
        return [torch.round(y).to(torch.int32)]


def quant_zero_point(em: Emitter, dtype: DType) -> np.ndarray:
    """A scalar zero point inside the small value range the generator draws quantised data from."""
    low = 0 if dtype is DType.uint8 else -4
    return np.asarray(em.values.integers(low, 5), dtype=dtype.numpy)


@register
class ConvTranspose(OpSpec):
    """Transposed convolution with groups, dilations, asymmetric pads and output_padding."""

    op_type = "ConvTranspose"
    min_rank = 3
    max_rank = 5
    dtypes = FLOAT_TYPES

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.n = n = ins[0].rank - 2
        self.kernel = [sc.var("kernel", lo=1) for _ in range(n)]
        self.strides = [sc.var("stride", lo=1, hi=3) for _ in range(n)]
        self.dilations = [sc.var("dilation", lo=1, hi=2) for _ in range(n)]
        self.pads = [sc.var("pad", zero_ok=True, lo=0) for _ in range(2 * n)]
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
        conv, group = _CONV_T[n], int(attrs.get("group", 1))
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
            y = F.pad(y, _torch_pads([-p for p in pads[:n]] + ends))
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
    dtypes = (*FLOAT_TYPES, DType.int8, DType.uint8)
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
    dtypes = FLOAT_TYPES

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


class AxisOp(SameShapeOp):
    """Shape-preserving ops along one drawn axis (negative half the time)."""

    dtypes = FLOAT_TYPES
    max_rank = 5

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axis = self.rng.randint(-rank, rank - 1)
        self.explicit = self.axis != -1 or self.rng.random() < 0.5

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node(self.op_type, ins, outs, **({"axis": self.axis} if self.explicit else {}))


@register
class Softmax(AxisOp):
    op_type = "Softmax"

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        return [torch.softmax(widen(x), dim=int(attrs.get("axis", -1))).to(x.dtype)]


@register
class LogSoftmax(AxisOp):
    op_type = "LogSoftmax"

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        return [torch.log_softmax(widen(x), dim=int(attrs.get("axis", -1))).to(x.dtype)]


@register
class Hardmax(AxisOp):
    op_type = "Hardmax"

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        axis = axis_of(attrs, "axis", -1, x.dim())
        # torch.argmax returns the first of tied maxima, as ONNX requires.
        first = torch.argmax(widen(x), dim=axis, keepdim=True)
        return [torch.zeros_like(x).scatter(axis, first, 1)]


@register
class Dropout(SameShapeOp):
    """Inference-mode Dropout: the identity, with the optional ratio and training_mode inputs
    sometimes spelled out."""

    op_type = "Dropout"
    dtypes = FLOAT_TYPES
    max_rank = 5

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.form = self.rng.choice(("bare", "ratio", "training_off"))
        self.seed = self.rng.random() < 0.3

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        operands = list(ins)
        if self.form != "bare":
            ratio = np.asarray(round(float(em.values.uniform(0.05, 0.9)), 3), dtype=self.inputs[0].dtype.numpy)
            operands.append(em.const(ratio))
        if self.form == "training_off":
            operands.append(em.const(np.asarray(False)))
        em.node("Dropout", operands, outs, **({"seed": 7} if self.seed else {}))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        training = len(inputs) > 2 and inputs[2] is not None and bool(inputs[2].item())
        ratio = float(inputs[1].item()) if len(inputs) > 1 and inputs[1] is not None else 0.5
        if training and ratio > 0:
            raise NotImplementedError("Dropout in training mode is random")
        # The optional mask output: nothing is dropped.
        return [inputs[0].clone(), torch.ones(inputs[0].shape, dtype=torch.bool)]


@register
class MatMulInteger(OpSpec):
    """Quantised matmul: (A - a_zero_point) @ (B - b_zero_point) in int32; B and the zero points
    (B's per column or scalar) are owned by the op."""

    op_type = "MatMulInteger"
    min_rank = 2
    dtypes = QUANT

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.n = sc.var("matmul_n", lo=1)
        self.zero_points = self.rng.choice(("none", "a", "both", "b", "b_cols"))

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype is not DType.int32 or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [TType(rng.choice(cls.dtypes), out.rank)]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [self.n * ins[0].shape[-1] <= self.sc.max_elements]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(DType.int32, [*ins[0].shape[:-1], self.n])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        dtype = self.inputs[0].dtype
        k, n = em.ival(self.inputs[0].shape[-1]), em.ival(self.n)
        operands = [ins[0], em.weight([k, n], dtype)]
        if self.zero_points != "none":
            operands.append(em.const(quant_zero_point(em, dtype)) if self.zero_points in ("a", "both") else "")
        if self.zero_points == "b_cols":
            operands.append(em.const(np.stack([quant_zero_point(em, dtype) for _ in range(n)])))
        elif self.zero_points in ("b", "both"):
            operands.append(em.const(quant_zero_point(em, dtype)))
        em.node("MatMulInteger", operands, outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        a, b = inputs[0].long(), inputs[1].long()
        if len(inputs) > 2 and inputs[2] is not None:  # scalar, or one per row of A
            a = a - inputs[2].long().reshape(-1, 1)
        if len(inputs) > 3 and inputs[3] is not None:
            b = b - inputs[3].long()
        return [torch.matmul(a, b).to(torch.int32)]


EINSUM_LETTERS = "abcdefghij"


@register
class Einsum(OpSpec):
    """An equation built from the input ranks: shared letters are batch or contracted dims, a
    unary equation transposes, reduces or takes a diagonal, two inputs without shared letters
    make an outer product. The implicit form (no `->`) is used now and then."""

    op_type = "Einsum"
    arity = 2
    dtypes = ORDERED

    @classmethod
    def draw_arity(cls, rng: random.Random) -> int:
        return rng.choice((1, 2, 2))

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        return (
            1 <= len(ins) <= 2
            and all(cls.slot_ok(i, t) for i, t in enumerate(ins))
            and len({t.dtype for t in ins}) == 1
        )

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype not in cls.dtypes or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        if rng.random() < 0.4:
            return [TType(out.dtype, rng.randint(out.rank, cls.max_rank))]
        first = rng.randint(1, cls.max_rank)
        return [TType(out.dtype, first), TType(out.dtype, rng.randint(max(1, out.rank - first), cls.max_rank))]

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.terms = self._draw_terms([t.rank for t in ins])
        letters = list(dict.fromkeys("".join(self.terms)))
        once = sorted(c for c in letters if "".join(self.terms).count(c) == 1)
        if out is None and once and len(once) <= self.max_rank and self.rng.random() < 0.2:
            self.output, self.implicit = "".join(once), True
        else:
            rank = out.rank if out is not None else self.rng.randint(1, min(len(letters), self.max_rank))
            self.output, self.implicit = "".join(self.rng.sample(letters, min(rank, len(letters)))), False

    def _draw_terms(self, ranks: list[int]) -> list[str]:
        first = list(EINSUM_LETTERS[: ranks[0]])
        if len(ranks) == 1:
            if ranks[0] >= 2 and self.rng.random() < 0.2:
                i, j = self.rng.sample(range(ranks[0]), 2)
                first[j] = first[i]  # a diagonal
            return ["".join(first)]
        fresh = iter(EINSUM_LETTERS[ranks[0] :])
        shareable = list(first)
        self.rng.shuffle(shareable)
        second = [shareable.pop() if shareable and self.rng.random() < 0.6 else next(fresh) for _ in range(ranks[1])]
        return ["".join(first), "".join(second)]

    @property
    def equation(self) -> str:
        lhs = ",".join(self.terms)
        return lhs if self.implicit else f"{lhs}->{self.output}"

    def _dims(self, ins: list[AbsTensor]) -> dict[str, Dim]:
        dims: dict[str, Dim] = {}
        for term, t in zip(self.terms, ins, strict=True):
            for c, d in zip(term, t.shape, strict=True):
                dims.setdefault(c, d)
        return dims

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        if len(self.output) != (self.out.rank if self.out is not None else len(self.output)):
            return [False]
        dims = self._dims(ins)
        return [
            d == dims[c] for term, t in zip(self.terms, ins, strict=True) for c, d in zip(term, t.shape, strict=True)
        ]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        dims = self._dims(ins)
        return [AbsTensor(ins[0].dtype, [dims[c] for c in self.output])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Einsum", ins, outs, equation=self.equation)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        eq = str(attrs["equation"]).replace(" ", "")
        dtype = inputs[0].dtype
        # Integer einsum accumulates in int64 and wraps on the way back, like integer hardware.
        up: Callable[[torch.Tensor], torch.Tensor] = widen if dtype.is_floating_point else (lambda t: t.long())
        return [torch.einsum(eq, *(up(t) for t in inputs)).to(dtype)]
