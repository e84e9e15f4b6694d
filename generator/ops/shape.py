"""Layout ops: reshape, transpose, concat, slice, flatten, (un)squeeze.

Index-like operands (shapes, axes, starts) are written as int64 initializers, the
form every opset-13+ consumer expects, rather than as graph inputs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from generator.ops.base import Attrs, Emitter, OpSpec, register
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, numel


def _ints(t: torch.Tensor | None) -> list[int]:
    return [] if t is None else [int(v) for v in t.reshape(-1).tolist()]


def _norm_axes(axes: Sequence[int], rank: int) -> list[int]:
    return sorted(a + rank if a < 0 else a for a in axes)


@register
class Reshape(OpSpec):
    op_type = "Reshape"

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.out_rank = out.rank if out else self.rng.randint(self.min_rank, self.max_rank)

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        self.out_shape = self.sc.fresh_shape(self.out_rank, "reshape")
        return [numel(self.out_shape) == numel(ins[0].shape)]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, list(self.out_shape))]

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        return [TType(out.dtype, rng.randint(cls.min_rank, cls.max_rank))]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Reshape", [ins[0], em.const_i64([em.ival(d) for d in self.out_shape])], outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, shape = inputs[0], _ints(inputs[1])
        if not attrs.get("allowzero", 0):
            shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
        return [x.reshape(shape)]


@register
class Transpose(OpSpec):
    op_type = "Transpose"
    min_rank = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.perm = list(range(ins[0].rank))
        self.rng.shuffle(self.perm)

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, [ins[0].shape[p] for p in self.perm])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Transpose", ins, outs, perm=self.perm)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        perm = attrs.get("perm") or list(reversed(range(x.dim())))
        return [x.permute(*perm)]


@register
class Concat(OpSpec):
    op_type = "Concat"
    arity = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.axis = self.rng.randrange(ins[0].rank)
        self.negative_axis = self.rng.random() < 0.3

    @classmethod
    def draw_arity(cls, rng: random.Random) -> int:
        return rng.choice((2, 2, 3))

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
        em.node("Concat", ins, outs, axis=self.axis - self.ins[0].rank if self.negative_axis else self.axis)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [torch.cat(inputs, dim=int(attrs["axis"]))]


@register
class Slice(OpSpec):
    """Slices a drawn subset of axes with positive steps; bounds are solved, then
    sometimes written in their negative (from-the-end) form."""

    op_type = "Slice"

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axes = sorted(self.rng.sample(range(rank), self.rng.randint(1, rank)))
        self.steps = [self.rng.choice((1, 1, 1, 2, 3)) for _ in self.axes]
        self.starts = [sc.var("start", zero_ok=True) for _ in self.axes]
        self.ends = [sc.var("end") for _ in self.axes]
        self.negative = [self.rng.random() < 0.3 for _ in self.axes]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        cons: list[Cond] = []
        for ax, s, e in zip(self.axes, self.starts, self.ends, strict=False):
            cons += [s >= 0, s < e, e <= ins[0].shape[ax]]
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = list(ins[0].shape)
        for ax, s, e, step in zip(self.axes, self.starts, self.ends, self.steps, strict=False):
            shape[ax] = (e - s + step - 1) / step
        return [AbsTensor(ins[0].dtype, shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        starts, ends = [em.ival(s) for s in self.starts], [em.ival(e) for e in self.ends]
        dims = [em.ival(self.inputs[0].shape[a]) for a in self.axes]
        for i, neg in enumerate(self.negative):
            if neg:
                starts[i] -= dims[i]
                # A negative end can only name positions before the last one.
                ends[i] = ends[i] - dims[i] if ends[i] < dims[i] else ends[i] + dims[i]
        operands = [starts, ends, self.axes, self.steps]
        em.node("Slice", [ins[0], *(em.const_i64(v) for v in operands)], outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        starts, ends = _ints(inputs[1]), _ints(inputs[2])
        axes = _ints(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else list(range(len(starts)))
        steps = _ints(inputs[4]) if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts)
        for s, e, a, st in zip(starts, ends, axes, steps, strict=False):
            a = a + x.dim() if a < 0 else a
            idx = range(*slice(s, e, st).indices(x.shape[a]))
            x = x.index_select(a, torch.tensor(list(idx), dtype=torch.long))
        return [x]


@register
class Flatten(OpSpec):
    op_type = "Flatten"

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.axis = self.rng.randint(0, ins[0].rank)

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.rank != 2 or out.dtype not in cls.dtypes:
            return None
        return [TType(out.dtype, rng.randint(cls.min_rank, cls.max_rank))]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        s = ins[0].shape
        return [AbsTensor(ins[0].dtype, [numel(s[: self.axis]), numel(s[self.axis :])])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Flatten", ins, outs, axis=self.axis)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        axis = int(attrs.get("axis", 1))
        axis = axis + x.dim() if axis < 0 else axis
        lead = 1
        for d in x.shape[:axis]:
            lead *= d
        return [x.reshape(lead, -1) if x.numel() else x.reshape(lead, 0)]


@register
class Unsqueeze(OpSpec):
    op_type = "Unsqueeze"
    max_rank = 3

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        out_rank = out.rank if out else min(4, ins[0].rank + self.rng.randint(1, 2))
        self.axes = sorted(self.rng.sample(range(out_rank), out_rank - ins[0].rank))

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.rank < 2 or out.dtype not in cls.dtypes:
            return None
        return [TType(out.dtype, out.rank - rng.randint(1, out.rank - 1))]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape: list[Dim] = list(ins[0].shape)
        for a in self.axes:
            shape.insert(a, 1)
        return [AbsTensor(ins[0].dtype, shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Unsqueeze", [ins[0], em.const_i64(self.axes)], outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        axes = _ints(inputs[1]) if len(inputs) > 1 else list(attrs["axes"])
        for a in _norm_axes(axes, x.dim() + len(axes)):
            x = x.unsqueeze(a)
        return [x]


@register
class Squeeze(OpSpec):
    op_type = "Squeeze"
    min_rank = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        count = rank - out.rank if out else self.rng.randint(1, rank - 1)
        self.axes = sorted(self.rng.sample(range(rank), count))

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.rank >= cls.max_rank or out.dtype not in cls.dtypes:
            return None
        return [TType(out.dtype, rng.randint(max(out.rank + 1, cls.min_rank), cls.max_rank))]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [ins[0].shape[a] == 1 for a in self.axes]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, [d for i, d in enumerate(ins[0].shape) if i not in self.axes])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Squeeze", [ins[0], em.const_i64(self.axes)], outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        if len(inputs) > 1 and inputs[1] is not None:
            axes = _ints(inputs[1])
        else:
            axes = list(attrs.get("axes", [i for i, d in enumerate(x.shape) if d == 1]))
        keep = [d for i, d in enumerate(x.shape) if i not in _norm_axes(axes, x.dim())]
        return [x.reshape(keep)]
