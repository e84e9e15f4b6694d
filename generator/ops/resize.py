"""Resize: every coordinate transformation, interpolation mode and rounding the spec names,
with a torch reference written from the spec's formulas axis by axis.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np
import torch

from generator.ops.base import Attrs, Emitter, OpSpec, Reference, may_omit, op_version, register
from generator.ops.shape import ANY, SCALES, int_list, optional_input, spell_axis
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, floordiv

RESIZE_COORDS = ("half_pixel", "half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")


FREE_SCALE_COORDS = ("half_pixel", "asymmetric", "pytorch_half_pixel")
"""Modes whose source coordinates use the given scale itself, so floor(d * scale) may
differ from d * scale; align_corners and half_pixel_symmetric read the output length,
and evaluators disagree on which length (float or int) to read when it is not whole."""


def _resize_axes(rank: int, mode: str, rng: random.Random) -> tuple[list[int], bool]:
    """Which axes to resize, and whether they may only grow: onnxruntime implements
    linear for ranks 2-4 and cubic for ranks 2 and 4, and in rank 4 only on axes 2-3
    (any scale) or 1-2 (cubic: upsampling only)."""
    if mode == "nearest" or rank == 2 or (mode == "linear" and rank == 3):
        pool, grow_only = list(range(rank)), False
    else:
        pool = rng.choice(([2, 3], [1, 2]))
        grow_only = mode == "cubic" and pool == [1, 2]
    return sorted(rng.sample(pool, rng.randint(1, len(pool)))), grow_only


def _coords(opset: int, mode: str) -> tuple[str, ...]:
    """The coordinate mappings drawn at `opset`: half_pixel_symmetric from Resize-19, and
    for nearest, Resize-11's tf_half_pixel_for_nn (removed at 13)."""
    if opset >= 19:
        return (*RESIZE_COORDS, "half_pixel_symmetric")
    if op_version("Resize", opset) == 11 and mode == "nearest":
        return (*RESIZE_COORDS, "tf_half_pixel_for_nn")
    return RESIZE_COORDS


def _unused(em: Emitter, slot: int) -> str:
    """An input the node leaves unused (roi, or scales beside sizes): an empty name where the
    schema lets it be omitted (from 13), else an empty float32 tensor, as Resize-11 requires."""
    return "" if may_omit("Resize", slot, em.opset) else em.const(np.zeros([0], np.float32))


@register
class Resize(OpSpec):
    """Nearest (every type, every rank) or, for floats, linear and cubic, in the forms
    onnxruntime implements; by scales or by sizes, over four coordinate mappings."""

    op_type = "Resize"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank, dtype = ins[0].rank, ins[0].dtype
        modes = ["nearest"]
        if dtype.is_float:
            modes += ["linear"] * (rank in (2, 3, 4)) + ["cubic"] * (rank in (2, 4))
        self.mode = self.rng.choice(modes)
        self.axes, grow_only = _resize_axes(rank, self.mode, self.rng)
        choices = [s for s in SCALES if s[0] >= s[1]] if grow_only else list(SCALES)
        self.ratio = {a: self.rng.choice(choices) for a in self.axes}
        self.by_sizes = self.rng.random() < 0.4
        self.coord = self.rng.choice(_coords(sc.opset, self.mode))
        self.attrs: dict[str, str | float | int | list[int]] = {"mode": self.mode}
        if self.coord != "half_pixel" or self.rng.random() < 0.5:
            self.attrs["coordinate_transformation_mode"] = self.coord
        if self.mode == "nearest":
            self.attrs["nearest_mode"] = self.rng.choice(("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"))
        if self.mode == "cubic":
            self.attrs["cubic_coeff_a"] = self.rng.choice((-0.75, -0.5))
            self.attrs["exclude_outside"] = int(self.rng.random() < 0.3)
        self.axes_attr = sc.opset >= 18 and self.rng.random() < 0.4
        self._draw_resize_18(sc.opset)
        self.out_shape: list[Dim] = []
        self.sizes: list[Dim] = []

    def _draw_resize_18(self, opset: int) -> None:
        """Resize-18's attributes: antialias (a stretched filter when downscaling) for linear and
        cubic, and, with sizes over named axes, keep_aspect_ratio_policy. Drawn only from 18 on,
        so that models of older opsets keep their draws."""
        if opset < 18:
            return
        if self.mode != "nearest" and self.rng.random() < 0.3:
            self.attrs["antialias"] = 1
        if self.by_sizes and self.axes_attr and self.rng.random() < 0.5:
            policy = self.rng.choice(("not_larger", "not_smaller"))
            self.attrs["keep_aspect_ratio_policy"] = policy
            pick = min if policy == "not_larger" else max
            one = pick(self.ratio.values(), key=lambda pq: pq[0] / pq[1])
            self.kept = {a: one for a in self.axes}

    kept: dict[int, tuple[int, int]] | None = None
    """Under keep_aspect_ratio_policy, the one ratio every resized axis takes (the smallest of
    the requested ones for not_larger, the largest for not_smaller); None: each its own."""

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        cons: list[Cond] = []
        self.out_shape = list(ins[0].shape)
        self.sizes = list(ins[0].shape)
        for a, (p, q) in (self.kept or {}).items():
            d = ins[0].shape[a]
            cons.append((d * p) % q == 0)  # whole output lengths: no rounding for evaluators to read apart
            self.out_shape[a] = floordiv(d * p, q)
        for a, (p, q) in self.ratio.items():
            d = ins[0].shape[a]
            out = floordiv(d * p, q)
            self.sizes[a] = out
            if self.kept is None:
                self.out_shape[a] = out
            if self.by_sizes or self.coord not in FREE_SCALE_COORDS:
                cons.append((d * p) % q == 0)
            elif p != q:
                # onnxruntime copies the input when the output length equals it, whatever the scale.
                cons.append(out != d)
        if self.coord in ("align_corners", "pytorch_half_pixel"):
            # their one-element special case is read differently by evaluators
            cons += [self.out_shape[a] >= 2 for a in self.ratio]
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, list(self.out_shape))]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        rank = self.ins[0].rank
        attrs = dict(self.attrs)
        axes = self.axes if self.axes_attr else list(range(rank))
        if self.axes_attr:
            attrs["axes"] = [spell_axis(a, rank, em.values.random() < 0.3) for a in axes]
        roi = _unused(em, 1)
        if self.by_sizes:
            sizes = [em.ival(self.sizes[a]) for a in axes]
            em.node("Resize", [ins[0], roi, _unused(em, 2), em.const_i64(sizes)], outs, **attrs)
            return
        p_q = [self.ratio.get(a, (1, 1)) for a in axes]
        scales = np.asarray([p / q for p, q in p_q], dtype=np.float32)
        em.node("Resize", [ins[0], roi, em.const(scales)], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        axes = [a + x.dim() if a < 0 else a for a in attrs.get("axes", range(x.dim()))]
        roi_t, scales_t, sizes_t = optional_input(inputs, 1), optional_input(inputs, 2), optional_input(inputs, 3)
        if scales_t is not None and scales_t.numel():
            scales = [float(s) for s in scales_t.double().tolist()]
            sizes = [int(np.floor(x.shape[a] * s)) for a, s in zip(axes, scales, strict=True)]
        elif sizes_t is not None:
            sizes = int_list(sizes_t)
            scales = [n / x.shape[a] for a, n in zip(axes, sizes, strict=True)]
            policy = str(attrs.get("keep_aspect_ratio_policy", "stretch"))
            if policy != "stretch":
                # One scale for every resized axis: the one that fits the output inside the
                # sizes (not_larger) or around them (not_smaller); lengths round half up.
                if policy not in ("not_larger", "not_smaller"):
                    raise ValueError(f"Resize keep_aspect_ratio_policy {policy}")
                one = min(scales) if policy == "not_larger" else max(scales)
                scales = [one] * len(axes)
                sizes = [int(one * x.shape[a] + 0.5) for a in axes]
        else:
            raise ValueError("Resize needs scales or sizes")
        crop = attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize"
        roi = [float(v) for v in roi_t.double().tolist()] if roi_t is not None and roi_t.numel() else []
        if crop and len(roi) != 2 * len(axes):
            raise ValueError("Resize tf_crop_and_resize needs a roi of two values per axis")
        y = x
        for k, (a, n, s) in enumerate(zip(axes, sizes, scales, strict=True)):
            box = (roi[k], roi[k + len(axes)]) if crop else None
            if n != y.shape[a] or s != 1.0 or box is not None:
                y = _resize_axis(y, a, n, s, attrs, box)
        return [y]

    @classmethod
    def refusal(cls, version: int, attrs: Attrs) -> str | None:
        """Resize-10 maps coordinates asymmetrically, but leaves how nearest rounds them open
        (onnxruntime floors when upsampling and ceils when downsampling)."""
        if version < 11 and attrs.get("mode", "nearest") != "linear":
            return f"Resize-{version} mode {attrs.get('mode', 'nearest')} has no defined rounding"
        return super().refusal(version, attrs)

    @classmethod
    def reference_at(cls, version: int) -> Reference:
        """Resize-10 takes (X, scales) and maps coordinates asymmetrically."""
        return cls.reference if version >= 11 else _resize_10


def _resize_10(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return Resize.reference(
        {**attrs, "coordinate_transformation_mode": "asymmetric"}, [inputs[0], torch.zeros(0), inputs[1]]
    )


def _source_coords(
    mode: str, out_len: int, in_len: int, scale: float, box: tuple[float, float] | None = None
) -> torch.Tensor:
    """Where each output position samples the input, in float64 as ONNX's own evaluator computes
    it; `box` is tf_crop_and_resize's (start, end) of the axis, in input-relative coordinates."""
    y = torch.arange(out_len, dtype=torch.float64)
    if mode == "tf_crop_and_resize":
        if box is None:
            raise ValueError("Resize tf_crop_and_resize needs a roi")
        start, end = box
        width = scale * in_len  # the evaluator's output width: unrounded under scales
        if width == 1:
            return torch.full((out_len,), (end - start) * (in_len - 1) / 2 + start * (in_len - 1), dtype=torch.float64)
        return y * (end - start) * (in_len - 1) / (width - 1) + start * (in_len - 1)
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_half_pixel_for_nn":  # Resize-11 only
        return (y + 0.5) / scale
    if mode == "pytorch_half_pixel":
        return (y + 0.5) / scale - 0.5 if out_len > 1 else torch.zeros(out_len, dtype=torch.float64)
    if mode == "align_corners":
        return y * (in_len - 1) / (out_len - 1) if out_len > 1 else torch.zeros(out_len, dtype=torch.float64)
    if mode == "half_pixel_symmetric":
        adjustment = out_len / (scale * in_len)
        offset = in_len / 2 * (1 - adjustment)
        return offset + (y + 0.5) / scale - 0.5
    raise NotImplementedError(f"Resize coordinate_transformation_mode {mode}")


def _nearest_index(xo: torch.Tensor, mode: str, in_len: int) -> torch.Tensor:
    f = torch.floor(xo)
    frac = xo - f
    if mode == "round_prefer_floor":
        idx = torch.where(frac <= 0.5, f, f + 1)
    elif mode == "round_prefer_ceil":
        idx = torch.where(frac < 0.5, f, f + 1)
    elif mode == "floor":
        idx = f
    elif mode == "ceil":
        idx = torch.ceil(xo)
    else:
        raise NotImplementedError(f"Resize nearest_mode {mode}")
    return idx.long().clamp(0, in_len - 1)


def _cubic_weights(frac: torch.Tensor, a: float) -> torch.Tensor:
    """Weights of the taps at floor-1 .. floor+2 (Keys' cubic convolution with coefficient a)."""

    def near(t: torch.Tensor) -> torch.Tensor:
        return ((a + 2) * t - (a + 3)) * t * t + 1

    def far(t: torch.Tensor) -> torch.Tensor:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a

    return torch.stack([far(frac + 1), near(frac), near(1 - frac), far(2 - frac)], dim=1)


def _antialias_taps(xo: torch.Tensor, scale: float, mode: str, a: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Taps and weights of a linear or cubic filter stretched by 1 / scale when downscaling, as
    antialias asks: every tap the stretched kernel reaches, the weights normalised to sum 1."""
    s = min(scale, 1.0)
    start = math.floor(-(1 if mode == "linear" else 2) / s) + 1
    taps = torch.floor(xo).long()[:, None] + torch.arange(start, 2 - start)
    t = ((taps - xo[:, None]) * s).abs()
    if mode == "linear":
        weights = (1 - t).clamp(0, 1)
    else:
        near = ((a + 2) * t - (a + 3)) * t * t + 1
        far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        weights = torch.where(t <= 1, near, torch.where(t < 2, far, 0.0))
    return taps, weights / weights.sum(dim=1, keepdim=True)


def _resize_axis(
    x: torch.Tensor, axis: int, out_len: int, scale: float, attrs: Attrs, box: tuple[float, float] | None = None
) -> torch.Tensor:
    in_len = x.shape[axis]
    xo = _source_coords(str(attrs.get("coordinate_transformation_mode", "half_pixel")), out_len, in_len, scale, box)
    mode = str(attrs.get("mode", "nearest"))
    if mode == "nearest":
        y = x.index_select(axis, _nearest_index(xo, str(attrs.get("nearest_mode", "round_prefer_floor")), in_len))
        return y if box is None else _extrapolate(y, axis, xo, in_len, attrs)
    f = torch.floor(xo)
    frac = xo - f
    a = float(attrs.get("cubic_coeff_a", -0.75))
    if mode not in ("linear", "cubic"):
        raise NotImplementedError(f"Resize mode {mode}")
    if attrs.get("antialias", 0):
        taps, weights = _antialias_taps(xo, scale, mode, a)
    elif mode == "linear":
        taps, weights = f.long()[:, None] + torch.arange(2), torch.stack([1 - frac, frac], dim=1)
    else:
        taps = f.long()[:, None] + torch.arange(-1, 3)
        weights = _cubic_weights(frac, a)
    if mode == "cubic" and attrs.get("exclude_outside", 0):
        weights = torch.where((taps < 0) | (taps >= in_len), 0.0, weights)
        weights = weights / weights.sum(dim=1, keepdim=True)
    matrix = torch.zeros(out_len, in_len, dtype=torch.float64)
    matrix.scatter_add_(1, taps.clamp(0, in_len - 1), weights)
    y = torch.movedim(torch.movedim(x.double(), axis, -1) @ matrix.T, -1, axis)
    if box is not None:
        y = _extrapolate(y, axis, xo, in_len, attrs)
    if x.dtype.is_floating_point:
        return y.to(x.dtype)
    info = torch.iinfo(x.dtype)
    return torch.round(y).clamp(info.min, info.max).to(x.dtype)


def _extrapolate(y: torch.Tensor, axis: int, xo: torch.Tensor, in_len: int, attrs: Attrs) -> torch.Tensor:
    """tf_crop_and_resize: positions whose source lies outside the input take extrapolation_value
    (axis by axis, which is the same as for the whole output: a filter's weights sum to 1)."""
    outside = ((xo < 0) | (xo > in_len - 1)).reshape([-1 if d == axis else 1 for d in range(y.dim())])
    value = torch.tensor(float(attrs.get("extrapolation_value", 0.0)), dtype=torch.float64).to(y.dtype)
    return torch.where(outside, value, y)
