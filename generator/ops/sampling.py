"""Sampling ops: GridSample and AffineGrid (a spatial transformer's two halves), MaxUnpool
and Col2Im (scatters back into an image).

GridSample's grid is owned: a constant mostly inside [-1, 1] with some positions outside,
where the padding modes differ, or (from opset 20) an AffineGrid over a near-identity theta.
Nearest-mode positions are drawn away from rounding ties; generator.values.unsafe keeps a
computed grid there. Padding reads as torch.nn.functional.grid_sample, which the spec names,
and onnxruntime: border clamps each tap, never the position (onnx.reference clamps the
position, which differs for bicubic only), reflection mirrors the position, then each tap.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from generator.dtypes import FLOATS_32_FIRST, DType
from generator.ops.base import Attrs, Emitter, OpSpec, register
from generator.ops.narrow import as_torch
from generator.ops.nn import widen
from generator.ops.shape import int_list
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, floordiv, numel

PADDING_MODES = ("zeros", "border", "reflection")
OLD_MODES = {"bilinear": "linear", "bicubic": "cubic"}
"""GridSample-16's mode names for what GridSample-20 calls linear and cubic."""
TAPS = {"nearest": 1, "linear": 2, "cubic": 4}
JUMP_GAP = 0.05
"""How far (in input cells) a drawn nearest-mode position stays from a rounding tie."""


def unnormalize(g: torch.Tensor, length: int, align_corners: bool) -> torch.Tensor:
    """A normalized grid coordinate in [-1, 1] as a position in input cells."""
    return (g + 1) / 2 * (length - 1) if align_corners else ((g + 1) * length - 1) / 2


def bounds(length: int, align_corners: bool) -> tuple[float, float]:
    """The positions the grid's -1 and 1 name: corner centres, or the corners' outer edges."""
    return (0.0, length - 1.0) if align_corners else (-0.5, length - 0.5)


def reflect(x: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """`x` mirrored at lo and hi until it lies between them (a triangle wave of period 2 * span)."""
    span = hi - lo
    if span <= 0:
        return torch.full_like(x, lo)
    t = torch.remainder(x - lo, 2 * span)
    return lo + torch.where(t > span, 2 * span - t, t)


def _cubic(t: torch.Tensor) -> list[torch.Tensor]:
    """Keys' weights (a = -0.75) of the taps at floor - 1 .. floor + 2 for fraction t."""
    a = -0.75

    def near(s: torch.Tensor) -> torch.Tensor:
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s: torch.Tensor) -> torch.Tensor:
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps(x: torch.Tensor, mode: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(index, weight) of every tap a position reads along one dim."""
    if mode == "nearest":
        return [(x.long(), torch.ones_like(x))]
    f = torch.floor(x)
    t = x - f
    if mode == "linear":
        return [(f.long(), 1 - t), (f.long() + 1, t)]
    return [(f.long() + k - 1, w) for k, w in enumerate(_cubic(t))]


def _pad_index(i: torch.Tensor, length: int, padding: str, lo: float, hi: float) -> tuple[torch.Tensor, torch.Tensor]:
    """A tap's index inside the input, and whether it reads the input at all (zeros pads)."""
    inside = (i >= 0) & (i < length)
    if padding == "border":
        return i.clamp(0, length - 1), torch.ones_like(inside)
    if padding == "reflection":
        return reflect(i.double(), lo, hi).long().clamp(0, length - 1), torch.ones_like(inside)
    return i.clamp(0, length - 1), inside


def grid_sample(x: torch.Tensor, grid: torch.Tensor, mode: str, padding: str, align_corners: bool) -> torch.Tensor:
    """GridSample in float64: positions unnormalized, rounded half to even (nearest), reflected
    when out of bounds (reflection), then each tap padded on its own."""
    n, c, sizes = x.shape[0], x.shape[1], list(x.shape[2:])
    r = len(sizes)
    g = grid.double()
    coords = [unnormalize(g[..., r - 1 - i], sizes[i], align_corners) for i in range(r)]
    if mode == "nearest":
        coords = [torch.round(p) for p in coords]
    lims = [bounds(s, align_corners) for s in sizes]
    if padding == "reflection":
        coords = [reflect(p, lo, hi) for p, (lo, hi) in zip(coords, lims, strict=True)]
    flat = x.double().reshape(n, c, -1)
    y = torch.zeros(n, c, *coords[0].shape[1:], dtype=torch.float64)
    strides = [math.prod(sizes[i + 1 :]) for i in range(r)]
    for combo in itertools.product(*(_taps(p, mode) for p in coords)):
        index = torch.zeros_like(combo[0][0])
        weight = torch.ones_like(coords[0])
        for i, (tap, w) in enumerate(combo):
            at, valid = _pad_index(tap, sizes[i], padding, *lims[i])
            index = index + at * strides[i]
            weight = weight * torch.where(valid, w, 0.0)
        picked = flat.gather(2, index.reshape(n, 1, -1).expand(n, c, -1)).reshape(y.shape)
        y = y + torch.where(weight.unsqueeze(1) != 0, picked * weight.unsqueeze(1), 0.0)
    return y


def base_grid(sizes: Sequence[int], align_corners: bool) -> torch.Tensor:
    """AffineGrid's positions before the transform: [*sizes, r + 1], homogeneous, x first."""
    axes = []
    for length in sizes:
        i = torch.arange(length, dtype=torch.float64)
        axes.append(-1 + 2 * i / (length - 1) if align_corners else (2 * i + 1) / length - 1)
    mesh = torch.meshgrid(*axes, indexing="ij")
    return torch.stack([*reversed(mesh), torch.ones(list(sizes), dtype=torch.float64)], dim=-1)


def affine_grid(theta: torch.Tensor, sizes: Sequence[int], align_corners: bool) -> torch.Tensor:
    """theta [N, r, r + 1] applied to every position of `sizes`: [N, *sizes, r]."""
    base = base_grid(sizes, align_corners)
    return torch.einsum("nij,...j->n...i", theta.double(), base)


def tie_gaps(grid: torch.Tensor, sizes: Sequence[int], align_corners: bool) -> torch.Tensor:
    """Per position and dim, the distance (in cells) to the nearest rounding tie (a half-integer
    position), where nearest-mode GridSample jumps from one cell to the next."""
    r = len(sizes)
    p = torch.stack([unnormalize(grid.double()[..., r - 1 - i], sizes[i], align_corners) for i in range(r)], -1)
    return (p - torch.floor(p) - 0.5).abs()


@register
class GridSample(OpSpec):
    """X [N, C, *spatial] sampled at an owned grid [N, *out, r]; 3-D spatial inputs from opset 20."""

    op_type = "GridSample"
    since_opset = 16
    reference_since = 16
    min_rank = 4
    max_rank = 5
    dtypes = FLOATS_32_FIRST

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.r = ins[0].rank - 2
        self.mode = self.rng.choice(("linear", "linear", "nearest", "cubic") if self.r == 2 else ("linear", "nearest"))
        self.padding = self.rng.choice(PADDING_MODES)
        self.align = self.rng.random() < 0.5
        self.explicit = self.rng.random() < 0.4
        # Nearest mode reads drawn grids only: a whole AffineGrid lattice rarely clears every tie.
        # Nor float16: a grid computed in float16 is a few ulps off in one build or another, and
        # GridSample multiplies that by half the input's extent (0.02 cells over 85).
        self.affine = sc.opset >= 20 and self.mode != "nearest" and ins[0].dtype is not DType.float16
        self.affine = self.affine and self.rng.random() < 0.4
        self.out_sizes = [sc.var("grid", lo=1) for _ in range(self.r)]

    @classmethod
    def schema_allows(cls, opset: int, ins: Sequence[TType]) -> bool:
        """GridSample-16 takes 4-D inputs only; 20 any spatial rank."""
        return (ins[0].rank == 4 or opset >= 20) and super().schema_allows(opset, ins)

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        if self.r == 3 and self.sc.opset < 20:
            return [False]
        cons: list[Cond] = [d >= 1 for d in self.out_sizes]
        if self.align:
            # Corner centres of a one-cell axis coincide: nothing to reflect between (the
            # evaluator divides by zero), and AffineGrid's lone position is 0 / 0.
            cons += [d >= 2 for d in ins[0].shape[2:]]
            cons += [d >= 2 for d in self.out_sizes] if self.affine else []
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        x = ins[0].shape
        return [AbsTensor(ins[0].dtype, [x[0], x[1], *self.out_sizes])]

    def work(self, val: Callable[[Dim], int]) -> int:
        x = self.inputs[0].shape
        cells = val(x[0]) * val(x[1]) * math.prod(val(d) for d in self.out_sizes)
        return int(cells * TAPS[self.mode] ** self.r)

    def attrs(self, opset: int) -> Attrs:
        mode = {"linear": "bilinear", "cubic": "bicubic"}.get(self.mode, self.mode) if opset < 20 else self.mode
        attrs: Attrs = {}
        if mode not in ("linear", "bilinear") or self.explicit:
            attrs["mode"] = mode
        if self.padding != "zeros" or self.explicit:
            attrs["padding_mode"] = self.padding
        if self.align or self.explicit:
            attrs["align_corners"] = int(self.align)
        return attrs

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        n, sizes = em.ival(x.shape[0]), [em.ival(d) for d in x.shape[2:]]
        out = [em.ival(d) for d in self.out_sizes]
        attrs = self.attrs(em.opset)
        if self.affine:
            eye = np.concatenate([np.eye(self.r), np.zeros((self.r, 1))], axis=1)[None]
            theta = (eye + em.values.uniform(-0.3, 0.3, (n, self.r, self.r + 1))).astype(x.dtype.numpy)
            size = em.const_i64([n, em.ival(x.shape[1]), *out])
            em.node("AffineGrid", [em.const(theta), size], [f"{outs[0]}_grid"], align_corners=int(self.align))
            em.node("GridSample", [ins[0], f"{outs[0]}_grid"], outs, **attrs)
            return
        grid = _safe_grid(em.values, [n, *out, self.r], sizes, x.dtype, attrs)
        em.node("GridSample", [ins[0], em.const(grid)], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, grid = inputs[0], inputs[1]
        mode = str(attrs.get("mode", "linear"))
        mode = OLD_MODES.get(mode, mode)
        if mode not in TAPS:
            raise NotImplementedError(f"GridSample mode {mode}")
        padding = str(attrs.get("padding_mode", "zeros"))
        y = grid_sample(widen(x), grid, mode, padding, bool(attrs.get("align_corners", 0)))
        return [y.to(x.dtype)]


def _unsafe(grid: np.ndarray, sizes: Sequence[int], attrs: Attrs) -> np.ndarray:
    """Per position: whether nearest mode would read it next to a rounding tie."""
    if attrs.get("mode") != "nearest":
        return np.zeros(grid.shape[:-1], dtype=bool)
    return (tie_gaps(as_torch(grid), sizes, bool(attrs.get("align_corners", 0))) < JUMP_GAP).any(dim=-1).numpy()


def _safe_grid(
    rng: np.random.Generator, shape: list[int], sizes: Sequence[int], dtype: DType, attrs: Attrs
) -> np.ndarray:
    """A grid mostly inside [-1, 1], a sixth of it out to ±1.5, no position near a jump."""
    grid = rng.uniform(-1.0, 1.0, size=shape)
    wide = rng.random(size=shape[:-1]) < 1 / 6
    grid[wide] = rng.uniform(-1.5, 1.5, size=(int(wide.sum()), shape[-1]))
    grid = grid.astype(dtype.numpy)
    for _ in range(200):
        bad = _unsafe(grid, sizes, attrs)
        if not bad.any():
            return grid
        grid[bad] = rng.uniform(-1.0, 1.0, size=(int(bad.sum()), shape[-1])).astype(dtype.numpy)
    raise ValueError("GridSample: no grid away from its jumps")


@register
class AffineGrid(OpSpec):
    """A localisation head's affine grid, as spatial transformers build it: features X [N, F]
    through an owned linear layer (small weights, identity bias) reshaped to theta [N, r, r + 1],
    then AffineGrid over an owned size [N, C, *out]."""

    op_type = "AffineGrid"
    since_opset = 20
    reference_since = 20
    min_rank = 2
    max_rank = 2
    dtypes = FLOATS_32_FIRST
    node_cost = 4

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.r = self.rng.choice((2, 3))
        self.align = self.rng.random() < 0.5
        self.explicit = self.rng.random() < 0.5
        self.channels = self.rng.randint(1, 4)
        self.out_sizes = [sc.var("grid", lo=1) for _ in range(self.r)]

    @classmethod
    def support_ops(cls) -> tuple[str, ...]:
        return ("AffineGrid", "MatMul", "Add", "Reshape")

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        # One-cell axes under align_corners put a lone position at an undefined -1 + 2 * 0 / 0.
        lo = 2 if self.align else 1
        return [d >= lo for d in self.out_sizes]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, [ins[0].shape[0], *self.out_sizes, self.r])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        n, features, r = em.ival(x.shape[0]), em.ival(x.shape[1]), self.r
        w = (em.values.uniform(-0.2, 0.2, (features, r * (r + 1))) / math.sqrt(features)).astype(x.dtype.numpy)
        eye = np.concatenate([np.eye(r), np.zeros((r, 1))], axis=1).reshape(-1).astype(x.dtype.numpy)
        em.node("MatMul", [ins[0], em.const(w)], [f"{outs[0]}_0"])
        em.node("Add", [f"{outs[0]}_0", em.const(eye)], [f"{outs[0]}_1"])
        em.node("Reshape", [f"{outs[0]}_1", em.const_i64([n, r, r + 1])], [f"{outs[0]}_2"])
        size = [n, self.channels, *(em.ival(d) for d in self.out_sizes)]
        attrs = {"align_corners": int(self.align)} if self.align or self.explicit else {}
        em.node("AffineGrid", [f"{outs[0]}_2", em.const_i64(size)], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        theta, size = inputs[0], int_list(inputs[1])
        grid = affine_grid(widen(theta), size[2:], bool(attrs.get("align_corners", 0)))
        return [grid.to(theta.dtype)]


@register
class MaxUnpool(OpSpec):
    """X [N, C, *pooled] scattered into zeros at owned indices, one inside each pooling window
    (as a MaxPool's Indices output names them, flat over the whole unpooled tensor), with the
    output_shape input sometimes naming a larger output than the windows imply, as when the
    pooled input's length was not a whole number of strides. Indices are distinct: the spec
    leaves open which value a repeated index keeps."""

    op_type = "MaxUnpool"
    since_opset = 11
    reference_since = 11
    min_rank = 3
    max_rank = 5
    dtypes = FLOATS_32_FIRST

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        n = ins[0].rank - 2
        self.kernel = [sc.var("kernel", lo=1, hi=5) for _ in range(n)]
        self.strides = [sc.var("stride", lo=1, hi=3) for _ in range(n)]
        self.padded = self.rng.random() < 0.4
        self.pads: list[Dim] = [sc.var("pad", zero_ok=True, lo=0, hi=3) if self.padded else 0 for _ in range(2 * n)]
        self.explicit = self.rng.random() < 0.5
        self.extra = [self.rng.choice((0, 0, 1, 2)) for _ in range(n)] if self.rng.random() < 0.4 else None

    def unpooled(self, ins: list[AbsTensor]) -> list[Dim]:
        n = len(self.kernel)
        return [
            (ins[0].shape[2 + i] - 1) * self.strides[i] + self.kernel[i] - self.pads[i] - self.pads[i + n]
            for i in range(n)
        ]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        n = len(self.kernel)
        cons: list[Cond] = []
        for i in range(n):
            # Begin and end pads together under the kernel: every window keeps a real cell, and
            # the windows can each keep a different one.
            cons += [self.pads[i] >= 0, self.pads[i + n] >= 0, self.pads[i] + self.pads[i + n] < self.kernel[i]]
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        x = ins[0].shape
        spatial = self.unpooled(ins)
        if self.extra is not None:
            spatial = [d + e for d, e in zip(spatial, self.extra, strict=True)]
        return [AbsTensor(ins[0].dtype, [x[0], x[1], *spatial])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        shape = [em.ival(d) for d in x.shape]
        kernel, strides = [em.ival(k) for k in self.kernel], [em.ival(s) for s in self.strides]
        pads = [em.ival(p) for p in self.pads]
        out = [em.ival(d) for d in self.transfer(self.inputs)[0].shape]
        index = _unpool_indices(em.values, shape, out, kernel, strides, pads)
        attrs: Attrs = {"kernel_shape": kernel}
        if any(s != 1 for s in strides) or self.explicit:
            attrs["strides"] = strides
        if any(pads) or self.explicit:
            attrs["pads"] = pads
        operands = [ins[0], em.const(index)]
        if self.extra is not None:
            operands.append(em.const_i64(out))
        em.node("MaxUnpool", operands, outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, index = inputs[0], inputs[1]
        kernel = [int(k) for k in attrs["kernel_shape"]]
        n = len(kernel)
        strides = [int(s) for s in attrs.get("strides", [1] * n)]
        pads = [int(p) for p in attrs.get("pads", [0] * 2 * n)]
        if len(inputs) > 2 and inputs[2] is not None:
            shape = int_list(inputs[2])
        else:
            spatial = [(x.shape[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[i + n] for i in range(n)]
            shape = [x.shape[0], x.shape[1], *spatial]
        y = torch.zeros(math.prod(shape), dtype=x.dtype)
        y[index.reshape(-1).long()] = x.reshape(-1)
        return [y.reshape(shape)]


def _unpool_indices(
    rng: np.random.Generator,
    shape: list[int],
    out: list[int],
    kernel: list[int],
    strides: list[int],
    pads: list[int],
) -> np.ndarray:
    """Flat indices into an `out`-shaped tensor, one real cell of each pooling window, distinct
    within each (n, c) plane: random cells, or where those collide, one fixed offset into
    every window along each dim (pads under the kernel leave one that fits every window)."""
    n = len(kernel)
    pooled = shape[2:]
    starts = [np.arange(p) * s - pads[i] for i, (p, s) in enumerate(zip(pooled, strides, strict=True))]
    real = [
        (p - 1) * s + k - pads[i] - pads[i + n] for i, (p, s, k) in enumerate(zip(pooled, strides, kernel, strict=True))
    ]
    grids = np.meshgrid(*starts, indexing="ij")
    for attempt in range(12):
        cells = []
        for i in range(n):
            lo = np.maximum(grids[i], 0)
            hi = np.minimum(grids[i] + kernel[i], real[i])
            if attempt < 10:
                pick = lo + np.floor(rng.random(size=lo.shape) * (hi - lo)).astype(np.int64)
            else:  # one offset t with pads[i] <= t < kernel - end pad fits every window
                t = int(rng.integers(pads[i], kernel[i] - pads[i + n]))
                pick = grids[i] + t
            cells.append(np.broadcast_to(pick, shape[2:]))
        flat = np.ravel_multi_index(cells, out[2:])
        if np.unique(flat).size == flat.size:
            break
    plane = math.prod(out[2:])
    offsets = (np.arange(shape[0] * shape[1]) * plane).reshape(shape[0], shape[1], *[1] * n)
    return (flat.reshape(1, 1, *shape[2:]) + offsets).astype(np.int64)


@register
class Col2Im(OpSpec):
    """Column blocks [N, C * prod(block), L] summed back into an image [N, C, *image] (torch's
    fold), 1-D or 2-D, with owned image_shape and block_shape; L is the count of blocks."""

    op_type = "Col2Im"
    since_opset = 18
    reference_since = 18
    min_rank = 3
    max_rank = 3
    dtypes = FLOATS_32_FIRST

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        r = self.rng.choice((1, 2, 2))
        self.block = [sc.var("kernel", lo=1, hi=4) for _ in range(r)]
        self.strides = [sc.var("stride", lo=1, hi=3) for _ in range(r)]
        self.dilations = [sc.var("dilation", lo=1, hi=2) for _ in range(r)]
        self.pads = [sc.var("pad", zero_ok=True, lo=0, hi=2) for _ in range(2 * r)]
        self.image = [sc.var("image", lo=1) for _ in range(r)]
        self.channels = sc.var("channels", lo=1)
        self.explicit = self.rng.random() < 0.5

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        r = len(self.block)
        counts: list[Dim] = []
        cons: list[Cond] = []
        for i in range(r):
            extent = self.dilations[i] * (self.block[i] - 1) + 1
            padded = self.image[i] + self.pads[i] + self.pads[i + r]
            cons += [padded >= extent, self.pads[i] < extent, self.pads[i + r] < extent]
            counts.append(floordiv(padded - extent, self.strides[i]) + 1)
        return [*cons, ins[0].shape[1] == self.channels * numel(self.block), ins[0].shape[2] == numel(counts)]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, [ins[0].shape[0], self.channels, *self.image])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        attrs: Attrs = {}
        for key, values, unit in (
            ("strides", self.strides, 1),
            ("dilations", self.dilations, 1),
            ("pads", self.pads, 0),
        ):
            ints = [em.ival(v) for v in values]
            if self.explicit or any(v != unit for v in ints):
                attrs[key] = ints
        image, block = em.const_i64([em.ival(d) for d in self.image]), em.const_i64([em.ival(d) for d in self.block])
        em.node("Col2Im", [ins[0], image, block], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, image, block = inputs[0], int_list(inputs[1]), int_list(inputs[2])
        r = len(image)
        strides = [int(v) for v in attrs.get("strides", [1] * r)]
        dil = [int(v) for v in attrs.get("dilations", [1] * r)]
        pads = [int(v) for v in attrs.get("pads", [0] * 2 * r)]
        padded = [image[i] + pads[i] + pads[i + r] for i in range(r)]
        counts = [(padded[i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(r)]
        n, c = x.shape[0], x.shape[1] // math.prod(block)
        cols = x.double().reshape(n, c, *block, *counts)
        y = torch.zeros(n, c, *padded, dtype=torch.float64)
        for offset in itertools.product(*[range(b) for b in block]):
            cells = [
                slice(o * d, o * d + (m - 1) * s + 1, s)
                for o, d, m, s in zip(offset, dil, counts, strides, strict=True)
            ]
            block_at: tuple[int | slice, ...] = (slice(None), slice(None), *offset)
            y[(slice(None), slice(None), *cells)] += cols[block_at]
        crop = [slice(pads[i], pads[i] + image[i]) for i in range(r)]
        return [y[(slice(None), slice(None), *crop)].to(x.dtype)]
