"""What convolutions and pools share: a sliding window's pads (auto_pad included), output
sizes, and exact window sums and maxima for the torch reference.

Spatial ops take 1-D to 3-D windows: the spatial rank is the input rank less two.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from generator.dtypes import FLOATS_32_FIRST
from generator.ops.base import Attrs, Emitter, OpSpec
from generator.ops.nn import AUTO_PADS, all_of, any_of
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, ceildiv, floordiv


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


UNPADDED_SHARE = 0.2
"""The share of explicitly padded windows (auto_pad NOTSET) drawn with no padding at all."""


class WindowOp(OpSpec):
    """Shared window arithmetic of Conv, ConvInteger and the pools: kernel, stride, dilation,
    pads or auto_pad, ceil_mode. Which of them an op has, and from which opset, are class vars."""

    min_rank = 3
    max_rank = 5
    dtypes = FLOATS_32_FIRST
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
            # No padding at all is a form of its own (pads absent, or explicit zeros), which
            # independent draws per side would seldom make.
            unpadded = self.rng.random() < UNPADDED_SHARE
            self.pads = [0 if unpadded else sc.var("pad", zero_ok=True, lo=0) for _ in range(2 * self.n)]
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
