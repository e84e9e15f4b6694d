"""Layout ops that pad, crop or regroup spatial blocks: CenterCropPad, Pad, DepthToSpace,
SpaceToDepth.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from generator.ops.base import Attrs, Emitter, OpSpec, Reference, register
from generator.ops.shape import ANY, int_list, optional_input, scalar_at, spell_axis
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, floordiv


@register
class CenterCropPad(OpSpec):
    """Each chosen axis gets a solved target length: longer ones are cropped around
    their centre, shorter ones zero-padded around it (the odd element goes at the end)."""

    op_type = "CenterCropPad"
    dtypes = ANY
    since_opset = 18

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axes = self.rng.sample(range(rank), self.rng.randint(1, rank))
        self.target = {a: sc.var("crop") for a in self.axes}
        self.axes_attr = sorted(self.axes) != list(range(rank)) or self.rng.random() < 0.5
        self.negative = [self.rng.random() < 0.3 for _ in self.axes]
        if not self.axes_attr:
            self.axes.sort()

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [t >= 1 for t in self.target.values()]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, [self.target.get(a, d) for a, d in enumerate(ins[0].shape)])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        shape = em.const_i64([em.ival(self.target[a]) for a in self.axes])
        if not self.axes_attr:
            em.node("CenterCropPad", [ins[0], shape], outs)
            return
        rank = self.ins[0].rank
        axes = [spell_axis(a, rank, neg) for a, neg in zip(self.axes, self.negative, strict=True)]
        em.node("CenterCropPad", [ins[0], shape], outs, axes=axes)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, shape = inputs[0], int_list(inputs[1])
        axes = [a + x.dim() if a < 0 else a for a in attrs.get("axes", range(x.dim()))]
        for a, target in zip(axes, shape, strict=True):
            d = x.shape[a]
            if target < d:
                x = x.narrow(a, (d - target) // 2, target)
            elif target > d:
                before = (target - d) // 2
                x = _pad_axis(x, a, before, target - d - before, "constant", torch.zeros((), dtype=x.dtype))
        return [x]


def _pad_axis(x: torch.Tensor, axis: int, begin: int, end: int, mode: str, value: torch.Tensor) -> torch.Tensor:
    """Crop the negative sides, then pad the positive ones (onnxruntime's order; the
    generator never mixes signs where the order would matter)."""
    d = x.shape[axis]
    lo, hi = max(-begin, 0), d - max(-end, 0)
    x = x.narrow(axis, lo, hi - lo)
    n = hi - lo
    src = torch.arange(-max(begin, 0), n + max(end, 0))
    if mode == "edge" or mode == "constant":
        idx = src.clamp(0, n - 1)
    elif mode == "wrap":
        idx = torch.remainder(src, n)
    elif mode == "reflect":
        period = max(2 * (n - 1), 1)
        m = torch.remainder(src, period)
        idx = torch.where(m >= n, period - m, m)
    else:
        raise NotImplementedError(f"Pad mode {mode}")
    y = x.index_select(axis, idx)
    if mode == "constant":
        inside = ((src >= 0) & (src < n)).reshape([-1 if i == axis else 1 for i in range(x.dim())])
        y = torch.where(inside, y, value.to(x.dtype))
    return y


@register
class Pad(OpSpec):
    """Per axis, both sides grow, both crop (negative pads), or, where the result does
    not depend on crop/pad order (constant, edge), one side of each. Reflect pads stay
    below the dim they mirror, as onnxruntime requires."""

    op_type = "Pad"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.mode = self.rng.choice(("constant", "constant", "reflect", "edge", *(("wrap",) if sc.opset >= 19 else ())))
        self.begin = [sc.var("pad", zero_ok=True) for _ in range(rank)]
        self.end = [sc.var("pad", zero_ok=True) for _ in range(rank)]
        patterns = [(1, 1)] * 6 + [(-1, -1)]
        if self.mode in ("constant", "edge"):
            patterns += [(1, -1), (-1, 1)]
        self.signs = [self.rng.choice(patterns) for _ in range(rank)]
        self.value_input = self.mode == "constant" and self.rng.random() < 0.6
        self.axes_input = sc.opset >= 18 and self.rng.random() < 0.4
        self.negative_axes = self.rng.random() < 0.3
        self.write_mode = self.mode != "constant" or self.rng.random() < 0.5
        self.value_at = self.rng.random()
        """Where the constant lies in `scalar_value`'s range, drawn with the op's other
        choices."""

    @property
    def value(self) -> float | None:
        """The constant written (None without a value input, where it is 0)."""
        return float(scalar_at(self.value_at, self.ins[0].dtype)) if self.value_input else None

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        # Backward with drawn pads: the input is the target with the padding taken off.
        if not all(isinstance(p, int) for p in (*self.begin, *self.end)):
            return None
        return [
            [
                int(d - sb * b - se * e)
                for d, b, e, (sb, se) in zip(out_shape, self.begin, self.end, self.signs, strict=True)
            ]
        ]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        cons: list[Cond] = []
        for d, b, e, (sb, se) in zip(ins[0].shape, self.begin, self.end, self.signs, strict=True):
            crop: Dim = (b if sb < 0 else 0) + (e if se < 0 else 0)
            cons += [b >= 0, e >= 0, d - crop >= 1]
            if self.mode == "reflect":
                cons += [pad <= d - crop - 1 for pad, sign in ((b, sb), (e, se)) if sign > 0]
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = [
            d + sb * b + se * e
            for d, b, e, (sb, se) in zip(ins[0].shape, self.begin, self.end, self.signs, strict=True)
        ]
        return [AbsTensor(ins[0].dtype, shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        rank = self.ins[0].rank
        begin = [sb * em.ival(b) for b, (sb, _) in zip(self.begin, self.signs, strict=True)]
        end = [se * em.ival(e) for e, (_, se) in zip(self.end, self.signs, strict=True)]
        value = em.const(scalar_at(self.value_at, self.ins[0].dtype)) if self.value_input else ""
        attrs = {"mode": self.mode} if self.write_mode else {}
        if not self.axes_input:
            operands = [ins[0], em.shape_operand(begin + end)] + ([value] if value else [])
            em.node("Pad", operands, outs, **attrs)
            return
        axes = [a for a in range(rank) if begin[a] or end[a] or em.values.random() < 0.3] or [0]
        em.values.shuffle(axes)
        pads = [begin[a] for a in axes] + [end[a] for a in axes]
        written = [spell_axis(int(a), rank, self.negative_axes) for a in axes]
        em.node("Pad", [ins[0], em.const_i64(pads), value, em.const_i64(written)], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, pads = inputs[0], int_list(inputs[1])
        given, axes_t = optional_input(inputs, 2), optional_input(inputs, 3)
        value = given.reshape(()) if given is not None else torch.zeros((), dtype=x.dtype)
        axes = [a + x.dim() if a < 0 else a for a in int_list(axes_t)] if axes_t is not None else list(range(x.dim()))
        n = len(axes)
        for i, a in enumerate(axes):
            x = _pad_axis(x, a, pads[i], pads[i + n], str(attrs.get("mode", "constant")), value)
        return [x]

    old_attrs = frozenset({"pads", "value"})

    @classmethod
    def reference_at(cls, version: int) -> Reference:
        """Pad-2 spells the pads and the constant as attributes."""
        return cls.reference if version >= 11 else _pad_2


def _pad_2(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    x = inputs[0]
    pads = torch.tensor([int(p) for p in attrs["pads"]], dtype=torch.int64)
    value = torch.tensor(float(attrs.get("value", 0.0)), dtype=torch.float64).to(x.dtype)
    return Pad.reference(attrs, [x, pads, value])


class BlockOp(OpSpec):
    """DepthToSpace and SpaceToDepth: NCHW only, blocksize 2-4. Where the dims are
    already known (forward, or the target of a backward insertion) the drawn blocksize
    gives way to one that divides them, so that small tensors still host the op."""

    min_rank = 4
    max_rank = 4
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.block = self.rng.choice((2, 2, 3, 4))

    def fit_block(self, ok: Callable[[int], bool]) -> bool:
        fits = [b for b in (2, 3, 4) if ok(b)]
        if fits and self.block not in fits:
            self.block = self.rng.choice(fits)
        return bool(fits)


@register
class DepthToSpace(BlockOp):
    op_type = "DepthToSpace"

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.mode = self.rng.choice(("DCR", "CRD"))
        self.write_mode = self.mode == "CRD" or self.rng.random() < 0.5

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        c = ins[0].shape[1]
        if isinstance(c, int):
            self.fit_block(lambda b: c % (b * b) == 0)
        return [c % (self.block * self.block) == 0]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        n, c, h, w = out_shape
        if not self.fit_block(lambda b: h % b == 0 and w % b == 0):
            return None
        b = self.block
        return [[n, c * b * b, h // b, w // b]]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        n, c, h, w = ins[0].shape
        b = self.block
        return [AbsTensor(ins[0].dtype, [n, floordiv(c, b * b), h * b, w * b])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("DepthToSpace", ins, outs, blocksize=self.block, **({"mode": self.mode} if self.write_mode else {}))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        b = int(attrs["blocksize"])
        n, c, h, w = x.shape
        if attrs.get("mode", "DCR") == "DCR":
            y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
        else:
            y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
        return [y.reshape(n, c // (b * b), h * b, w * b)]


@register
class SpaceToDepth(BlockOp):
    op_type = "SpaceToDepth"

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        h, w = ins[0].shape[2:]
        if isinstance(h, int) and isinstance(w, int):
            self.fit_block(lambda b: h % b == 0 and w % b == 0)
        return [h % self.block == 0, w % self.block == 0]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        n, c, h, w = out_shape
        if not self.fit_block(lambda b: c % (b * b) == 0):
            return None
        b = self.block
        return [[n, c // (b * b), h * b, w * b]]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        n, c, h, w = ins[0].shape
        b = self.block
        return [AbsTensor(ins[0].dtype, [n, c * b * b, floordiv(h, b), floordiv(w, b)])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("SpaceToDepth", ins, outs, blocksize=self.block)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        b = int(attrs["blocksize"])
        n, c, h, w = x.shape
        y = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
        return [y.reshape(n, c * b * b, h // b, w // b)]
