"""Layout ops that join, cut or repeat tensors along axes: Concat, Slice, Split, Expand, Tile.

Their operands take the spellings generator.ops.shape describes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import torch

from generator.ops.base import OUTPUTS, Attrs, Emitter, OpSpec, Reference, list_operand, register
from generator.ops.shape import ANY, INDEX_TYPES, index_max, int_list, optional_input, spell_axis
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, ceildiv


@register
class Concat(OpSpec):
    op_type = "Concat"
    arity = 2
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.axis = self.rng.randrange(ins[0].rank)
        self.negative_axis = self.rng.random() < 0.3

    arities = (2, 2, 3, 4)

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        return super().accepts(ins) and len({t.rank for t in ins}) == 1

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        return [out] * cls.draw_arity(rng)

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        first = ins[0].shape
        return [t.shape[i] == first[i] for t in ins[1:] for i in range(len(first)) if i != self.axis]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = list(ins[0].shape)
        total: Dim = 0
        for t in ins:
            total = total + t.shape[self.axis]
        shape[self.axis] = total
        return [AbsTensor(ins[0].dtype, shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Concat", ins, outs, axis=spell_axis(self.axis, self.ins[0].rank, self.negative_axis))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [torch.cat(inputs, dim=int(attrs["axis"]))]


def _slice_bounds(start: int, end: int, step: int, dim: int) -> range:
    """ONNX Slice's clamping: it differs from Python's for a negative step with a
    start below -dim (ONNX clamps it to 0, Python empties the slice)."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return range(min(max(start, 0), dim), min(max(end, 0), dim), step)
    return range(min(max(start, 0), dim - 1), min(max(end, -1), dim - 1), step)


@register
class Slice(OpSpec):
    """Each sliced axis covers the solved interval [lo, hi), walked forwards or
    backwards; its bounds are then written plainly, from the end, or past the edge
    (clamped), and its axis plainly or negatively."""

    op_type = "Slice"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axes = self.rng.sample(range(rank), self.rng.randint(1, rank))
        self.steps = [self.rng.choice((1, 1, 1, 2, 3, -1, -1, -2)) for _ in self.axes]
        self.lo = [sc.var("start", zero_ok=True) for _ in self.axes]
        self.hi = [sc.var("end") for _ in self.axes]
        forms = ("plain", "plain", "neg", "clamp")
        self.start_form = [self.rng.choice(forms) for _ in self.axes]
        self.end_form = [self.rng.choice(forms) for _ in self.axes]
        self.overshoot = [self.rng.choice((0, 1, 3)) for _ in self.axes]
        """0 writes a clamped bound as the index type's extreme, else dim + this."""
        self.negative_axis = [self.rng.random() < 0.3 for _ in self.axes]
        self.index_type = self.rng.choice(INDEX_TYPES)
        self.omit_defaults = self.rng.random() < 0.5

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        cons: list[Cond] = []
        for ax, lo, hi in zip(self.axes, self.lo, self.hi, strict=True):
            cons += [lo >= 0, lo < hi, hi <= ins[0].shape[ax]]
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = list(ins[0].shape)
        for ax, lo, hi, step in zip(self.axes, self.lo, self.hi, self.steps, strict=True):
            shape[ax] = ceildiv(hi - lo, abs(step))
        return [AbsTensor(ins[0].dtype, shape)]

    def _bounds(self, i: int, lo: int, hi: int, dim: int) -> tuple[int, int]:
        huge = index_max(self.index_type)
        over = self.overshoot[i]
        past_end = huge if over == 0 else dim + over
        before_start = -huge if over == 0 else -dim - over
        if self.steps[i] > 0:
            start, end = lo, hi
            if self.start_form[i] == "neg":
                start = lo - dim
            elif self.start_form[i] == "clamp" and lo == 0:
                start = before_start
            if self.end_form[i] == "neg" and hi < dim:
                end = hi - dim
            elif self.end_form[i] == "clamp" and hi == dim:
                end = past_end
            return start, end
        start, end = hi - 1, lo - 1
        if self.start_form[i] == "neg":
            start -= dim
        elif self.start_form[i] == "clamp" and hi == dim:
            start = past_end
        if lo == 0:
            # -1 would mean the last element: "before the first" needs -dim-1 or less.
            end = -huge if over == 0 else -dim - over
        elif self.end_form[i] == "neg":
            end -= dim
        return start, end

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        rank = self.ins[0].rank
        starts, ends = [], []
        for i, ax in enumerate(self.axes):
            s, e = self._bounds(i, em.ival(self.lo[i]), em.ival(self.hi[i]), em.ival(self.inputs[0].shape[ax]))
            starts.append(s)
            ends.append(e)
        axes = [spell_axis(a, rank, neg) for a, neg in zip(self.axes, self.negative_axis, strict=True)]
        need_steps = not self.omit_defaults or any(s != 1 for s in self.steps)
        need_axes = not self.omit_defaults or axes != list(range(len(axes)))

        def const(values: list[int]) -> str:
            return em.shape_operand(values, self.index_type)

        operands = [ins[0], const(starts), const(ends)]
        if need_axes or need_steps:
            operands.append(const(axes) if need_axes else "")
        if need_steps:
            operands.append(const(self.steps))
        em.node("Slice", operands, outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        starts, ends = int_list(inputs[1]), int_list(inputs[2])
        axes_t, steps_t = optional_input(inputs, 3), optional_input(inputs, 4)
        axes = int_list(axes_t) if axes_t is not None else list(range(len(starts)))
        steps = int_list(steps_t) if steps_t is not None else [1] * len(starts)
        for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
            a = a + x.dim() if a < 0 else a
            idx = _slice_bounds(s, e, st, x.shape[a])
            x = x.index_select(a, torch.tensor(list(idx), dtype=torch.long))
        return [x]

    old_attrs = frozenset({"starts", "ends", "axes"})

    @classmethod
    def reference_at(cls, version: int) -> Reference:
        """Slice-1 spells starts, ends and axes as attributes, and has no steps."""
        return cls.reference if version >= 10 else _slice_1


def _slice_1(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    operands = [torch.tensor([int(v) for v in attrs[k]], dtype=torch.int64) for k in ("starts", "ends")]
    axes = [torch.tensor([int(v) for v in attrs["axes"]], dtype=torch.int64)] if "axes" in attrs else []
    return Slice.reference(attrs, [inputs[0], *operands, *axes])


@register
class Expand(OpSpec):
    """Bidirectional broadcast to a written shape: per aligned dim the shape keeps it,
    writes 1 for it, or grows a size-1 dim; extra leading dims are new. A shape shorter
    than the input (its leading dims left out) is valid too."""

    op_type = "Expand"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        out_rank = out.rank if out else min(self.max_rank, rank + self.rng.choice((0, 0, 1, 2)))
        self.lead = out_rank - rank
        self.modes = [self.rng.choice(("same", "one", "grow", "grow")) for _ in range(rank)]
        self.dropped = self.rng.randint(1, rank - 1) if self.lead == 0 and rank > 1 and self.rng.random() < 0.2 else 0
        for i in range(self.dropped):
            self.modes[i] = "same"
        self.new: list[Dim] = []

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        return [TType(out.dtype, rng.randint(cls.min_rank, out.rank))]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        cons: list[Cond] = []
        self.new = [self.sc.var("expand") for _ in range(self.lead)]
        self.grown: dict[int, Dim] = {}
        for i, d in enumerate(ins[0].shape):
            if self.modes[i] != "grow":
                continue
            if isinstance(d, int) and d != 1:
                self.modes[i] = "same"  # a concrete dim above 1 cannot grow
                continue
            self.grown[i] = self.sc.var("expand")
            cons.append(d == 1)
        return cons + [v >= 1 for v in [*self.new, *self.grown.values()]]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        tail = [self.grown.get(i, d) for i, d in enumerate(ins[0].shape)]
        return [AbsTensor(ins[0].dtype, [*self.new, *tail])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        shape = [em.ival(v) for v in self.new]
        for i, d in enumerate(self.inputs[0].shape):
            mode = self.modes[i]
            shape.append(em.ival(self.grown[i]) if mode == "grow" else 1 if mode == "one" else em.ival(d))
        em.node("Expand", [ins[0], em.shape_operand(shape[self.dropped :])], outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        # numpy's broadcast rule: torch.broadcast_shapes imports sympy on its first call (0.5 s).
        shape = np.broadcast_shapes(tuple(x.shape), tuple(int_list(inputs[1])))
        return [x.expand(shape).contiguous()]


@register
class Tile(OpSpec):
    op_type = "Tile"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.repeats = [sc.var("repeat") for _ in range(ins[0].rank)]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [r >= 1 for r in self.repeats]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        # Backward with drawn repeats: each repeat becomes a divisor of its target dim.
        if not all(isinstance(r, int) for r in self.repeats):
            return None
        drawn = [int(r) for r in self.repeats]
        self.repeats = [
            max(k for k in range(1, d + 1) if d % k == 0 and k <= r) for d, r in zip(out_shape, drawn, strict=True)
        ]
        return [[d // int(r) for d, r in zip(out_shape, self.repeats, strict=True)]]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, [d * r for d, r in zip(ins[0].shape, self.repeats, strict=True)])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Tile", [ins[0], em.shape_operand([em.ival(r) for r in self.repeats])], outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [inputs[0].repeat(int_list(inputs[1]))]


@register
class Split(OpSpec):
    """Two or three outputs (one when inserted backward: a legal, rarely seen form), of
    solved sizes or in equal chunks (the last one smaller when the axis does not divide).
    Equal chunks are written with num_outputs from opset 18 and as explicit sizes before
    it (an input from 13, the attribute `split` before): the older implicit form takes its
    count from the node's outputs, which the reference cannot see."""

    op_type = "Split"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.axis = self.rng.randrange(ins[0].rank)
        self.negative_axis = self.rng.random() < 0.3
        self.count = 1 if out is not None else self.rng.choice((2, 2, 2, 3))
        self.equal = self.rng.random() < 0.4
        self.sizes: list[Dim] = []

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        return [list(out_shape)]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        d = ins[0].shape[self.axis]
        if self.equal:
            chunk = ceildiv(d, self.count)
            self.sizes = [chunk] * (self.count - 1) + [d - (self.count - 1) * chunk]
            return [self.sizes[-1] >= 1]
        self.sizes = [self.sc.var("split") for _ in range(self.count)]
        total: Dim = 0
        for s in self.sizes:
            total = total + s
        return [*(s >= 1 for s in self.sizes), total == d]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        outs = []
        for s in self.sizes:
            shape = list(ins[0].shape)
            shape[self.axis] = s
            outs.append(AbsTensor(ins[0].dtype, shape))
        return outs

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        axis = spell_axis(self.axis, self.ins[0].rank, self.negative_axis)
        if self.equal and em.opset >= 18:
            em.node("Split", ins, outs, axis=axis, num_outputs=self.count)
        else:
            sizes, attrs = list_operand(em, "Split", "split", [em.ival(s) for s in self.sizes], constant=True)
            em.node("Split", [ins[0], *sizes], outs, axis=axis, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        axis = int(attrs.get("axis", 0))
        sizes_t = optional_input(inputs, 1)
        if sizes_t is not None:
            sizes = int_list(sizes_t)
        elif "split" in attrs:  # before opset 13 the sizes are an attribute
            sizes = [int(s) for s in attrs["split"]]
        else:  # num_outputs (opset 18), or before it one part per output of the node
            n, d = int(attrs["num_outputs"] if "num_outputs" in attrs else attrs[OUTPUTS]), x.shape[axis]
            chunk = -(-d // n)
            sizes = [chunk] * (n - 1) + [d - chunk * (n - 1)]
        return list(torch.split(x, sizes, dim=axis))

    old_attrs = frozenset({"split"})
