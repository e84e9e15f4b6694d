"""Ops that sample an image at boxed or computed positions: RoiAlign and MaxRoiPool (the region
heads of two-stage detectors) and DeformConv (a convolution whose taps move by learned offsets).

Boxes are owned constants, as a detector's proposals are to the head that pools them: valid
boxes in the image's coordinates (before spatial_scale), some reaching past its edges. Both box
ops jump somewhere along a box coordinate (RoiAlign where a sample leaves the zone it reads as
the border, or where an adaptive sample count steps; MaxRoiPool where a corner rounds, or a
float bin cut lands on a whole cell), so the boxes are drawn away from those places: the builds
compute positions in the input's float type, the reference in float64. generator.values.unsafe
keeps computed boxes (a user's detector) away from them too. DeformConv's bilinear taps read
zeros outside the image, which is continuous, so its offsets (constants, or a Conv of X) need no
such care.

RoiAlign's mode=max is the max of a bin's bilinearly interpolated samples, as the spec's
description (sampled values, then pooled) reads and TVM computes; onnxruntime and onnx.reference
take the max of each sample's weighted corners instead, so the generator writes mode=avg only
(nothing independent of torch would confirm a generated max node) while the reference still
computes a user's max node by the spec.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from generator.dtypes import FLOATS_32_FIRST, DType
from generator.ops.base import Attrs, Emitter, OpSpec, Reference, register
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, floordiv, numel

EDGE_GAP = 0.05
"""How far (in feature-map cells) a drawn box keeps every RoiAlign sample from the edges of
the zone read as border (-1 and the extent), and the adaptive sample counts from a step."""
ROUND_GAP = 0.1
"""How far a scaled MaxRoiPool coordinate stays from a rounding tie (a half-integer)."""
SCALES = (1.0, 0.5, 0.25, 0.625, 2.0)
"""spatial_scale values: a detector's feature strides, and a few that are not powers of two."""


def _axis_weights(pos: torch.Tensor, length: int) -> torch.Tensor:
    """[samples, length]: each sample position's bilinear weights over one axis, a row of
    zeros where the position lies outside [-1, length] (such a sample reads as 0). Positions in
    [-1, 0] read the first cell, positions past length - 1 the last."""
    inside = (pos >= -1) & (pos <= length)
    p = pos.clamp(min=0)
    low = torch.floor(p).long()
    last = low >= length - 1
    low = torch.where(last, length - 1, low)
    frac = torch.where(last, 0.0, p - low)
    cells = torch.arange(length)
    w = (cells == low[:, None]) * (1 - frac)[:, None] + (cells == (low + 1)[:, None]) * frac[:, None]
    return torch.where(inside[:, None], w, 0.0)


def roi_geometry(
    roi: Sequence[float], attrs: Attrs, pooled: tuple[int, int], legacy: bool
) -> tuple[list[torch.Tensor], list[int], list[float]]:
    """One box's sample positions along y and x (bin by bin, [pooled * grid] each), the sample
    grid per bin, and the box's scaled height and width (what an adaptive grid divides)."""
    scale = float(attrs.get("spatial_scale", 1.0))
    offset = 0.5 if not legacy else 0.0
    x1, y1, x2, y2 = (float(v) * scale - offset for v in roi)
    sizes = [y2 - y1, x2 - x1]
    if legacy:
        sizes = [max(s, 1.0) for s in sizes]
    ratio = int(attrs.get("sampling_ratio", 0))
    grids = [ratio if ratio > 0 else math.ceil(s / p) for s, p in zip(sizes, pooled, strict=True)]
    positions = []
    for start, size, bins, grid in zip((y1, x1), sizes, pooled, grids, strict=True):
        step = size / bins
        b = torch.arange(bins, dtype=torch.float64)[:, None]
        g = torch.arange(max(grid, 0), dtype=torch.float64)[None, :]
        positions.append((start + b * step + (g + 0.5) * step / max(grid, 1)).reshape(-1))
    return positions, grids, sizes


def roi_align(attrs: Attrs, inputs: list[torch.Tensor], legacy: bool) -> list[torch.Tensor]:
    """Every box's bins: the mean (avg) or max of its samples, each sample bilinear in float64.
    `legacy` is RoiAlign-10's reading, and output_half_pixel's: no half-pixel shift, and boxes
    at least one cell wide and high."""
    x, rois, batch = inputs[0], inputs[1], inputs[2]
    if not legacy:
        legacy = str(attrs.get("coordinate_transformation_mode", "half_pixel")) == "output_half_pixel"
    mode = str(attrs.get("mode", "avg"))
    pooled = (int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1)))
    h, w = x.shape[2], x.shape[3]
    xd = x.double()
    out = torch.zeros(rois.shape[0], x.shape[1], *pooled, dtype=torch.float64)
    for k in range(rois.shape[0]):
        (ys, xs), (gh, gw), _ = roi_geometry(rois[k].double().tolist(), attrs, pooled, legacy)
        if gh <= 0 or gw <= 0:
            continue
        samples = _axis_weights(ys, h) @ xd[int(batch[k])] @ _axis_weights(xs, w).T
        bins = samples.reshape(x.shape[1], pooled[0], gh, pooled[1], gw)
        out[k] = bins.amax(dim=(2, 4)) if mode == "max" else bins.mean(dim=(2, 4))
    return [out.to(x.dtype)]


def roi_align_unsafe(roi: Sequence[float], attrs: Attrs, pooled: tuple[int, int], shape: Sequence[int]) -> bool:
    """Whether a box puts a sample within EDGE_GAP of where it stops reading the border (-1 or
    the extent), or (adaptive sampling) its bins' sizes within EDGE_GAP of a whole number of
    cells, where the sample count steps."""
    legacy = str(attrs.get("coordinate_transformation_mode", "half_pixel")) == "output_half_pixel"
    positions, _, sizes = roi_geometry(roi, attrs, pooled, legacy)
    for pos, length in zip(positions, shape, strict=True):
        if ((pos + 1).abs().min() < EDGE_GAP) or ((pos - length).abs().min() < EDGE_GAP):
            return True
    if int(attrs.get("sampling_ratio", 0)) <= 0:
        ratios = [s / p for s, p in zip(sizes, pooled, strict=True)]
        return any(abs(r - round(r)) < EDGE_GAP for r in ratios)
    return False


def _draw_box(rng: np.random.Generator, length: int) -> tuple[float, float]:
    """One box side in feature-map cells: mostly inside [0, length], at times past an edge."""
    lo = rng.uniform(-1.5, length - 0.5)
    hi = rng.uniform(lo + 0.3, max(lo + 0.6, length + 1.5))
    return lo, hi


@register
class RoiAlign(OpSpec):
    """X [N, C, H, W] pooled over owned boxes [R, 4] of owned batch indices [R] into [R, C, oh, ow];
    half_pixel and output_half_pixel, fixed and adaptive sampling, a few spatial scales."""

    op_type = "RoiAlign"
    since_opset = 10
    reference_since = 10
    min_rank = 4
    max_rank = 4
    dtypes = FLOATS_32_FIRST

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.rois = sc.var("rois", lo=1, hi=6)
        self.pooled = [sc.var("pooled", lo=1, hi=4) for _ in range(2)]
        self.ratio = self.rng.choice((0, 0, 1, 2, 3))
        self.scale = self.rng.choice(SCALES)
        self.explicit = self.rng.random() < 0.4
        modes = (None, "half_pixel", "output_half_pixel") if sc.opset >= 16 else (None,)
        self.transform = self.rng.choice(modes)

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [self.rois >= 1, *(p >= 1 for p in self.pooled)]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        x = ins[0].shape
        return [AbsTensor(ins[0].dtype, [self.rois, x[1], *self.pooled])]

    def work(self, val: Callable[[Dim], int]) -> int:
        x = [val(d) for d in self.inputs[0].shape]
        oh, ow = (val(p) for p in self.pooled)
        # Drawn boxes span at most extent + 3 cells once scaled: the adaptive grid's bound.
        grid = [self.ratio or math.ceil((x[i + 2] * self.scale + 3) / p) for i, p in enumerate((oh, ow))]
        samples = oh * grid[0] * ow * grid[1]
        return val(self.rois) * x[1] * (samples + x[2] * x[3]) * 2

    def attrs(self, pooled: list[int]) -> Attrs:
        attrs: Attrs = {}
        for key, value, default in (
            ("output_height", pooled[0], 1),
            ("output_width", pooled[1], 1),
            ("sampling_ratio", self.ratio, 0),
            ("spatial_scale", self.scale, 1.0),
        ):
            if value != default or self.explicit:
                attrs[key] = value
        if self.explicit:
            attrs["mode"] = "avg"
        if self.transform is not None:
            attrs["coordinate_transformation_mode"] = self.transform
        return attrs

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        n, h, w = em.ival(x.shape[0]), em.ival(x.shape[2]), em.ival(x.shape[3])
        pooled = [em.ival(p) for p in self.pooled]
        attrs = self.attrs(pooled)
        legacy = em.opset < 16 and "coordinate_transformation_mode" not in attrs
        checked = dict(attrs, coordinate_transformation_mode="output_half_pixel") if legacy else attrs
        boxes = [
            _safe_box(em.values, (h, w), checked, (pooled[0], pooled[1]), x.dtype) for _ in range(em.ival(self.rois))
        ]
        rois = em.const(np.array(boxes, dtype=x.dtype.numpy))
        batch = em.const(em.values.integers(0, n, size=len(boxes)).astype(np.int64))
        em.node("RoiAlign", [ins[0], rois, batch], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return roi_align(attrs, inputs, legacy=False)

    @classmethod
    def reference_at(cls, version: int) -> Reference:
        """RoiAlign-10 has no coordinate_transformation_mode and reads boxes as
        output_half_pixel does."""
        return cls.reference if version >= 16 else functools.partial(roi_align, legacy=True)


def _safe_box(
    rng: np.random.Generator, shape: tuple[int, int], attrs: Attrs, pooled: tuple[int, int], dtype: DType
) -> list[float]:
    """[x1, y1, x2, y2] in image coordinates (feature cells over spatial_scale), as `dtype`
    holds them, with no sample near a jump."""
    scale = float(attrs.get("spatial_scale", 1.0))
    for _ in range(200):
        (y1, y2), (x1, x2) = (_draw_box(rng, length) for length in shape)
        box = np.array([x1, y1, x2, y2]) / scale
        stored = [float(v) for v in box.astype(dtype.numpy)]
        if not roi_align_unsafe(stored, attrs, pooled, shape):
            return stored
    raise ValueError("RoiAlign: no box away from its jumps")


def _round_away(v: float) -> int:
    """Half away from zero, as C's round."""
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def roi_pool_bins(
    roi: Sequence[float], scale: float, pooled: Sequence[int], shape: Sequence[int], slack: int = 0
) -> list[list[range]]:
    """Per axis (y, x), each bin's cells inside the image: the box's corners rounded once scaled,
    its size (at least one cell, both corners included) cut at floor(i * size / bins) and
    ceil((i + 1) * size / bins), in exact integer arithmetic. `slack` widens every cut that
    falls on a whole cell by that many, where a float product may land either side of it."""
    x1, y1, x2, y2 = (_round_away(float(v) * scale) for v in roi)
    axes = []
    for start, end, bins, length in zip((y1, x1), (y2, x2), pooled, shape, strict=True):
        size = max(end - start + 1, 1)
        cuts = []
        for i in range(bins):
            lo, hi = start + i * size // bins, start - (-(i + 1) * size // bins)
            lo -= slack if i and i * size % bins == 0 else 0
            hi += slack if (i + 1) * size % bins == 0 else 0
            cuts.append((lo, hi))
        axes.append([range(min(max(lo, 0), length), min(max(hi, 0), length)) for lo, hi in cuts])
    return axes


def max_roi_pool(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each bin's max over its cells; an empty bin (a box past the image's edge) gives 0, as
    onnxruntime and TVM have it."""
    x, rois = inputs[0], inputs[1]
    pooled = [int(v) for v in attrs["pooled_shape"]]
    scale = float(attrs.get("spatial_scale", 1.0))
    out = torch.zeros(rois.shape[0], x.shape[1], *pooled, dtype=x.dtype)
    for k, roi in enumerate(rois.double().tolist()):
        ys, xs = roi_pool_bins(roi[1:], scale, pooled, x.shape[2:])
        for i, rows in enumerate(ys):
            for j, cols in enumerate(xs):
                if rows and cols:
                    cells = x[int(roi[0]), :, rows.start : rows.stop, cols.start : cols.stop]
                    out[k, :, i, j] = cells.amax(dim=(1, 2))
    return [out]


def roi_pool_unsafe(roi: Sequence[float], scale: float, pooled: Sequence[int], shape: Sequence[int]) -> bool:
    """Whether a box leaves a bin empty (the spec does not say what that gives), puts a scaled
    corner within ROUND_GAP of a rounding tie, or cuts a bin at a whole cell where a float
    division's product could floor or ceil to the next one and change the cells it reads (a
    size over bins that is a whole number of quarter cells divides exactly)."""
    scaled = [float(v) * scale for v in roi]
    if any(abs(v - math.floor(v) - 0.5) < ROUND_GAP for v in scaled):
        return True
    bins = roi_pool_bins(roi, scale, pooled, shape)
    if any(not cells for axis in bins for cells in axis):
        return True
    x1, y1, x2, y2 = (_round_away(v) for v in scaled)
    sizes = [max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)]
    inexact = [4 * s % p != 0 for s, p in zip(sizes, pooled, strict=True)]
    widened = roi_pool_bins(roi, scale, pooled, shape, slack=1)
    return any(flag and bins[a] != widened[a] for a, flag in enumerate(inexact))


@register
class MaxRoiPool(OpSpec):
    """X [N, C, H, W] max-pooled over owned boxes [R, 5] (batch index, x1, y1, x2, y2) into
    [R, C, *pooled_shape]."""

    op_type = "MaxRoiPool"
    since_opset = 1
    min_rank = 4
    max_rank = 4
    dtypes = FLOATS_32_FIRST

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.rois = sc.var("rois", lo=1, hi=6)
        self.pooled = [sc.var("pooled", lo=1, hi=4) for _ in range(2)]
        self.scale = self.rng.choice(SCALES)
        self.explicit = self.rng.random() < 0.4

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [self.rois >= 1, *(p >= 1 for p in self.pooled)]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        x = ins[0].shape
        return [AbsTensor(ins[0].dtype, [self.rois, x[1], *self.pooled])]

    def work(self, val: Callable[[Dim], int]) -> int:
        r, c, h, w = val(self.rois), *(val(d) for d in self.inputs[0].shape[1:])
        oh, ow = (val(p) for p in self.pooled)
        # Bins overlap by at most a cell; each reads its cells once.
        return r * c * (h + oh) * (w + ow)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        n, h, w = em.ival(x.shape[0]), em.ival(x.shape[2]), em.ival(x.shape[3])
        pooled = [em.ival(p) for p in self.pooled]
        boxes = [
            [float(em.values.integers(0, n)), *_safe_pool_box(em.values, (h, w), self.scale, pooled, x.dtype)]
            for _ in range(em.ival(self.rois))
        ]
        attrs: Attrs = {"pooled_shape": pooled}
        if self.scale != 1.0 or self.explicit:
            attrs["spatial_scale"] = self.scale
        em.node("MaxRoiPool", [ins[0], em.const(np.array(boxes, dtype=x.dtype.numpy))], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return max_roi_pool(attrs, inputs)


def _pool_side(rng: np.random.Generator, length: int) -> tuple[float, float]:
    """One box side in feature-map cells: corners near whole cells, up to two past an edge."""
    size = int(rng.integers(1, length + 3))
    start = int(rng.integers(-2, length))
    lo, hi = rng.uniform(-0.4, 0.4, size=2)
    return start + lo, start + size - 1 + hi


def _safe_pool_box(
    rng: np.random.Generator, shape: tuple[int, int], scale: float, pooled: list[int], dtype: DType
) -> list[float]:
    """[x1, y1, x2, y2] in image coordinates, as `dtype` holds them, every bin reading a cell."""
    for _ in range(400):
        (y1, y2), (x1, x2) = (_pool_side(rng, length) for length in shape)
        stored = [float(v) for v in (np.array([x1, y1, x2, y2]) / scale).astype(dtype.numpy)]
        if not roi_pool_unsafe(stored, scale, pooled, shape):
            return stored
    raise ValueError("MaxRoiPool: no box with every bin inside the image")


def _zero_padded_taps(pos: torch.Tensor, length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(index clamped into the axis, weight or 0 where the tap lies outside it) of a bilinear
    position's two taps: the input reads as zeros all around."""
    low = torch.floor(pos)
    taps = []
    for cell, weight in ((low, 1 - (pos - low)), (low + 1, pos - low)):
        inside = (cell >= 0) & (cell < length)
        taps.append((cell.clamp(0, length - 1).long(), torch.where(inside, weight, 0.0)))
    return taps


def deform_conv(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """2-D DeformConv in float64: every kernel tap of every output cell sampled bilinearly at its
    place plus its offset (dy, dx per offset group and tap), times the mask, then a grouped
    convolution of those samples."""
    x, w, offset = inputs[0], inputs[1], inputs[2]
    bias = inputs[3] if len(inputs) > 3 and inputs[3] is not None and inputs[3].numel() else None
    mask = inputs[4] if len(inputs) > 4 and inputs[4] is not None else None
    if x.dim() != 4:
        raise NotImplementedError(f"DeformConv over {x.dim() - 2} spatial dims")
    n, c, h, wd = x.shape
    kernel = [int(v) for v in attrs.get("kernel_shape", w.shape[2:])]
    strides = [int(v) for v in attrs.get("strides", [1, 1])]
    dil = [int(v) for v in attrs.get("dilations", [1, 1])]
    pads = [int(v) for v in attrs.get("pads", [0, 0, 0, 0])]
    group, og = int(attrs.get("group", 1)), int(attrs.get("offset_group", 1))
    oh, ow = offset.shape[2], offset.shape[3]
    k = kernel[0] * kernel[1]
    ky, kx = torch.meshgrid(torch.arange(kernel[0]), torch.arange(kernel[1]), indexing="ij")
    base_y = (torch.arange(oh) * strides[0] - pads[0])[None, :, None] + (ky.reshape(-1) * dil[0])[:, None, None]
    base_x = (torch.arange(ow) * strides[1] - pads[1])[None, None, :] + (kx.reshape(-1) * dil[1])[:, None, None]
    off = offset.double().reshape(n, og, k, 2, oh, ow)
    py, px = base_y + off[:, :, :, 0], base_x + off[:, :, :, 1]  # [n, og, k, oh, ow]
    flat = x.double().reshape(n, og, c // og, h * wd)
    cols = torch.zeros(n, og, c // og, k * oh * ow, dtype=torch.float64)
    for iy, wy in _zero_padded_taps(py, h):
        for ix, wx in _zero_padded_taps(px, wd):
            index = (iy * wd + ix).reshape(n, og, 1, -1).expand(-1, -1, c // og, -1)
            cols += flat.gather(3, index) * (wy * wx).reshape(n, og, 1, -1)
    if mask is not None:
        cols = cols * mask.double().reshape(n, og, 1, -1)
    cols = cols.reshape(n, group, c // group, k, oh, ow)
    weights = w.double().reshape(group, w.shape[0] // group, c // group, k)
    y = torch.einsum("gocK,ngcKhw->ngohw", weights, cols).reshape(n, w.shape[0], oh, ow)
    if bias is not None:
        y = y + bias.double().reshape(1, -1, 1, 1)
    return [y.to(x.dtype)]


@register
class DeformConv(OpSpec):
    """X [N, C, H, W] convolved at offset places: offsets owned (a constant, or computed from X
    by a small Conv of the same geometry, as deformable layers do), an optional owned mask and
    bias, groups and offset groups."""

    op_type = "DeformConv"
    since_opset = 19
    reference_since = 19
    min_rank = 4
    max_rank = 4
    dtypes = FLOATS_32_FIRST

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.kernel = [sc.var("kernel", lo=1, hi=3) for _ in range(2)]
        self.strides = [sc.var("stride", lo=1, hi=2) for _ in range(2)]
        self.dilations = [sc.var("dilation", lo=1, hi=2) for _ in range(2)]
        padded = self.rng.random() < 0.7
        self.pads: list[Dim] = [sc.var("pad", zero_ok=True, lo=0, hi=2) if padded else 0 for _ in range(4)]
        self.out_channels = sc.var("out_channels", lo=1)
        self.group, self.offset_group = self.rng.choice((1, 1, 2)), self.rng.choice((1, 1, 2))
        self.bias, self.mask = self.rng.random() < 0.5, self.rng.random() < 0.5
        self.computed = self.rng.random() < 0.3
        self.explicit = self.rng.random() < 0.4

    @classmethod
    def support_ops(cls) -> tuple[str, ...]:
        return ("DeformConv", "Conv")

    def spatial_out(self, ins: list[AbsTensor]) -> list[Dim]:
        return [
            floordiv(ins[0].shape[2 + i] + self.pads[i] + self.pads[i + 2] - self.extent(i), self.strides[i]) + 1
            for i in range(2)
        ]

    def extent(self, i: int) -> Dim:
        return self.dilations[i] * (self.kernel[i] - 1) + 1

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        c, taps = ins[0].shape[1], self.kernel[0] * self.kernel[1]
        out = self.spatial_out(ins)
        cons: list[Cond] = [c % self.group == 0, c % self.offset_group == 0, self.out_channels % self.group == 0]
        cons += [ins[0].shape[2 + i] + self.pads[i] + self.pads[i + 2] >= self.extent(i) for i in range(2)]
        cons += [numel([self.out_channels, c, self.kernel[0], self.kernel[1]]) <= self.sc.max_elements]
        offsets = numel([ins[0].shape[0], self.offset_group * taps * 2, *out])
        return [*cons, offsets <= self.sc.max_elements]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        x = ins[0].shape
        return [AbsTensor(ins[0].dtype, [x[0], self.out_channels, *self.spatial_out(ins)])]

    def work(self, val: Callable[[Dim], int]) -> int:
        n, c = val(self.inputs[0].shape[0]), val(self.inputs[0].shape[1])
        cells = n * math.prod(val(d) for d in self.spatial_out(self.inputs)) * val(self.kernel[0] * self.kernel[1])
        offset_conv = cells * c * self.offset_group * 2 if self.computed else 0
        return cells * (c * 4 + val(self.out_channels) * c // self.group) + offset_conv

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        n, c = em.ival(x.shape[0]), em.ival(x.shape[1])
        oc, kernel = em.ival(self.out_channels), [em.ival(k) for k in self.kernel]
        out = [em.ival(d) for d in self.spatial_out(self.inputs)]
        taps = self.offset_group * kernel[0] * kernel[1]
        attrs: Attrs = {"kernel_shape": kernel} if self.explicit else {}
        for key, values, unit in (
            ("strides", self.strides, 1),
            ("dilations", self.dilations, 1),
            ("pads", self.pads, 0),
        ):
            ints = [em.ival(v) for v in values]
            if self.explicit or any(v != unit for v in ints):
                attrs[key] = ints
        for key, value in (("group", self.group), ("offset_group", self.offset_group)):
            if self.explicit or value != 1:
                attrs[key] = value
        fan_in = c // self.group * kernel[0] * kernel[1]
        operands = [ins[0], em.weight([oc, c // self.group, *kernel], x.dtype, fan_in=fan_in)]
        if self.computed:
            geometry = {k: v for k, v in attrs.items() if k in ("strides", "dilations", "pads")}
            scale = 1.5 / math.sqrt(c * kernel[0] * kernel[1])
            head = (em.values.uniform(-scale, scale, (taps * 2, c, *kernel))).astype(x.dtype.numpy)
            em.node("Conv", [ins[0], em.const(head)], [f"{outs[0]}_offset"], kernel_shape=kernel, **geometry)
            operands.append(f"{outs[0]}_offset")
        else:
            operands.append(em.const(em.values.uniform(-1.5, 1.5, (n, taps * 2, *out)).astype(x.dtype.numpy)))
        if self.bias or self.mask:
            operands.append(em.weight([oc], x.dtype, fan_in=fan_in) if self.bias else "")
        if self.mask:
            operands.append(em.const(em.values.uniform(0.0, 1.0, (n, taps, *out)).astype(x.dtype.numpy)))
        em.node("DeformConv", operands, outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return deform_conv(attrs, inputs)
