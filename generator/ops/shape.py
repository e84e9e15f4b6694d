"""Layout ops that reshape or describe a tensor without touching its elements: Reshape, Transpose,
Flatten, Unsqueeze, Squeeze, Identity, Shape and Size, and the helpers every layout family
shares (index operands, axis spellings, scalar operands).

Index-like operands (shapes, axes, starts, pads, scales) are written as initializers,
the form every opset-13+ consumer expects, rather than as graph inputs. Most of these
ops never look at element values, so they take every element type the fuzzer has.

Many operands have several spellings with one meaning (a negative axis, an end past
the dimension, an omitted default input): which spelling a node uses is drawn too,
because frontends parse each spelling on a separate path.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np
import torch

from generator.dtypes import DType, classic
from generator.ops.base import Attrs, Emitter, OpSpec, SameShapeOp, list_operand, norm_axes, register
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, numel

ANY: tuple[DType, ...] = tuple(DType)
"""Every element type: a layout op is valid for all of them."""


INDEX_TYPES: tuple[type[np.signedinteger], ...] = (np.int64, np.int64, np.int32)
"""Index operand types where the schema allows both (int64 is the common one)."""


def int_list(t: torch.Tensor | None) -> list[int]:
    return [] if t is None else [int(v) for v in t.reshape(-1).tolist()]


def optional_input(inputs: Sequence[torch.Tensor | None], i: int) -> torch.Tensor | None:
    """Optional input `i`, or None when it is absent or named by an empty string."""
    return inputs[i] if len(inputs) > i else None


def spell_axis(axis: int, rank: int, negative: bool) -> int:
    """`axis` as written in a node: counted from the end when `negative`."""
    return axis - rank if negative else axis


def spell_axis_by_chance(axis: int, rank: int, rng: random.Random) -> int:
    """`axis` as written in a node, counted from the end three times in ten (one draw of `rng`)."""
    return spell_axis(axis, rank, rng.random() < 0.3)


def index_max(index_type: type[np.signedinteger]) -> int:
    return int(np.iinfo(index_type).max)


def scalar_value(em: Emitter, dtype: DType) -> np.ndarray:
    """A 0-d value of `dtype` in the same ranges as the generated inputs."""
    return scalar_at(float(em.values.random()), dtype)


def scalar_at(u: float, dtype: DType) -> np.ndarray:
    """The 0-d value of `dtype` at quantile `u` in [0, 1) of `scalar_value`'s ranges: an op
    that draws `u` with itself knows its constant before emission (ranges read it)."""
    if dtype is DType.bool:
        return np.array(u < 0.5)
    if dtype.is_float:
        return np.array(-1.0 + 2.0 * u, dtype=dtype.numpy)
    lo = 0 if dtype.is_unsigned else -8
    return np.array(lo + min(int(u * (9 - lo)), 8 - lo), dtype=dtype.numpy)


def factorize(n: int, parts: int, rng: random.Random) -> list[int]:
    """`parts` positive ints whose product is `n`, each prime factor placed at random, with
    a lean toward dims that are still 1 (so that the target is not mostly ones)."""
    dims = [1] * parts
    p = 2
    while n > 1:
        while n % p == 0:
            ones = [i for i, d in enumerate(dims) if d == 1]
            dims[rng.choice(ones) if ones and rng.random() < 0.5 else rng.randrange(parts)] *= p
            n //= p
        p = p + 1 if p * p <= n else n
    return dims


@register
class Reshape(OpSpec):
    """The target shape is solved; it is written with a 0 (copy) or -1 (infer) where
    those spellings are valid for it."""

    op_type = "Reshape"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.out_rank = out.rank if out else self.rng.randint(self.min_rank, self.max_rank)
        self.infer_at = self.rng.randrange(self.out_rank) if self.rng.random() < 0.3 else None
        self.copy = [self.rng.random() < 0.25 for _ in range(self.out_rank)]
        self.allowzero_attr = self.rng.random() < 0.3
        self.target: list[int] | None = None

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        # Backward: the input is any factorization of the target's element count.
        self.target = list(out_shape)
        return [factorize(math.prod(out_shape), self.ins[0].rank, self.rng)]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        dims = ins[0].shape
        if all(isinstance(d, int) for d in dims):
            # A concrete input needs no solver: the target is a random factorization of its
            # element count (a product of shape variables is the slowest thing z3 sees here).
            count = math.prod(int(d) for d in dims)
            self.out_shape: list[Dim] = list(self.target or factorize(count, self.out_rank, self.rng))
            return []
        self.out_shape = self.sc.fresh_shape(self.out_rank, "reshape")
        return [numel(self.out_shape) == numel(dims)]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, list(self.out_shape))]

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        return [TType(out.dtype, rng.randint(cls.min_rank, cls.max_rank))]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        in_dims = [em.ival(d) for d in self.inputs[0].shape]
        shape = [em.ival(d) for d in self.out_shape]
        written = [0 if self.copy[i] and i < len(in_dims) and in_dims[i] == d else d for i, d in enumerate(shape)]
        if self.infer_at is not None:
            written[self.infer_at] = -1
        attrs = {"allowzero": 0} if self.allowzero_attr and em.opset >= 14 else {}
        em.node("Reshape", [ins[0], em.shape_operand(written)], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, shape = inputs[0], int_list(inputs[1])
        if not attrs.get("allowzero", 0):
            shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
        return [x.reshape(shape)]


@register
class Transpose(OpSpec):
    op_type = "Transpose"
    min_rank = 2
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        # The default (no perm) reverses the axes; it is its own spelling worth covering.
        self.default_perm = self.rng.random() < 0.15
        self.perm = list(reversed(range(rank))) if self.default_perm else self.rng.sample(range(rank), rank)

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, [ins[0].shape[p] for p in self.perm])]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        shape = [0] * len(out_shape)
        for i, p in enumerate(self.perm):
            shape[p] = out_shape[i]
        return [shape]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Transpose", ins, outs, **({} if self.default_perm else {"perm": self.perm}))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        perm = attrs.get("perm") or list(reversed(range(x.dim())))
        return [x.permute(*perm)]


@register
class Flatten(OpSpec):
    op_type = "Flatten"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.axis = self.rng.randint(0, ins[0].rank)
        self.negative_axis = self.axis < ins[0].rank and self.rng.random() < 0.3

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
        em.node("Flatten", ins, outs, axis=spell_axis(self.axis, self.ins[0].rank, self.negative_axis))

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
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        out_rank = out.rank if out else min(4, ins[0].rank + self.rng.randint(1, 2))
        self.axes = sorted(self.rng.sample(range(out_rank), out_rank - ins[0].rank))
        # Axes are read relative to the output rank, in any order.
        self.written = [spell_axis(a, out_rank, self.rng.random() < 0.3) for a in self.axes]
        self.rng.shuffle(self.written)

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

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        return [[d for i, d in enumerate(out_shape) if i not in self.axes]]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        axes, attrs = list_operand(em, "Unsqueeze", "axes", self.written)
        em.node("Unsqueeze", [ins[0], *axes], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        axes = int_list(inputs[1]) if len(inputs) > 1 else list(attrs["axes"])
        for a in norm_axes(axes, x.dim() + len(axes)):
            x = x.unsqueeze(a)
        return [x]

    old_attrs = frozenset({"axes"})
    """Before opset 13 the axes are an attribute (`list_operand` writes them so)."""


@register
class Squeeze(OpSpec):
    op_type = "Squeeze"
    min_rank = 2
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        count = rank - out.rank if out else self.rng.randint(1, rank - 1)
        self.axes = sorted(self.rng.sample(range(rank), count))
        self.negative = [self.rng.random() < 0.3 for _ in range(rank)]
        self.order = [self.rng.random() for _ in range(rank)]
        self.omit_axes = self.rng.random() < 0.3

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.rank >= cls.max_rank or out.dtype not in cls.dtypes:
            return None
        return [TType(out.dtype, rng.randint(max(out.rank + 1, cls.min_rank), cls.max_rank))]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        shape = ins[0].shape
        if self.out is None and all(isinstance(d, int) for d in shape):
            # Forward, the dims are known: squeeze some of the size-1 ones rather than fail.
            ones = [i for i, d in enumerate(shape) if d == 1]
            if ones and not set(self.axes) <= set(ones):
                self.axes = sorted(self.rng.sample(ones, self.rng.randint(1, min(len(ones), len(shape) - 1))))
        return [shape[a] == 1 for a in self.axes]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, [d for i, d in enumerate(ins[0].shape) if i not in self.axes])]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        shape = list(out_shape)
        for a in self.axes:
            shape.insert(a, 1)
        return [shape]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        ones = [i for i, d in enumerate(self.inputs[0].shape) if em.ival(d) == 1]
        # Without axes every size-1 dim is removed: only the same node when those are exactly ours.
        if self.omit_axes and ones == self.axes:
            em.node("Squeeze", ins[:1], outs)
        else:
            rank = self.ins[0].rank
            written = [spell_axis(a, rank, self.negative[a]) for a in sorted(self.axes, key=lambda a: self.order[a])]
            axes, attrs = list_operand(em, "Squeeze", "axes", written)
            em.node("Squeeze", [ins[0], *axes], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        given = optional_input(inputs, 1)
        if given is not None:
            axes = int_list(given)
        else:
            axes = list(attrs.get("axes", [i for i, d in enumerate(x.shape) if d == 1]))
        keep = [d for i, d in enumerate(x.shape) if i not in norm_axes(axes, x.dim())]
        return [x.reshape(keep)]

    old_attrs = frozenset({"axes"})
    """Before opset 13 the axes are an attribute (`list_operand` writes them so)."""


@register
class Identity(SameShapeOp):
    op_type = "Identity"
    dtypes = ANY

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Identity", ins, outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [inputs[0].clone()]


@register
class Shape(OpSpec):
    """The int64 shape vector; from opset 15 sometimes a window of it, whose start and
    end are written plainly, negatively or past the rank (clamped)."""

    op_type = "Shape"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.window: tuple[int, int] | None = None
        self.spelled: dict[str, int] = {}
        if sc.opset >= 15 and self.rng.random() < 0.6:
            start = self.rng.randrange(rank)
            end = self.rng.randint(start + 1, rank)
            self.window = (start, end)
            start_forms = [start, start - rank] + ([-rank - 3] if start == 0 else [])
            end_forms = [end] + ([end - rank] if end < rank else [rank + 2])
            if start != 0 or self.rng.random() < 0.5:
                self.spelled["start"] = self.rng.choice(start_forms)
            if end != rank or self.rng.random() < 0.5:
                self.spelled["end"] = self.rng.choice(end_forms)

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype is not DType.int64 or out.rank != 1:
            return None
        return [TType(rng.choice(classic(cls.dtypes)), rng.randint(cls.min_rank, cls.max_rank))]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        start, end = self.window or (0, ins[0].rank)
        return [AbsTensor(DType.int64, [end - start])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Shape", ins, outs, **self.spelled)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        dims = list(inputs[0].shape)
        # Python slicing clamps out-of-range bounds exactly as Shape does.
        return [torch.tensor(dims[int(attrs.get("start", 0)) : int(attrs.get("end", len(dims)))], dtype=torch.int64)]


@register
class Size(OpSpec):
    """Its output is a 0-d int64, so it never replaces a placeholder (none has rank 0)."""

    op_type = "Size"
    dtypes = ANY

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        return None

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(DType.int64, [])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Size", ins, outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [torch.tensor(inputs[0].numel(), dtype=torch.int64)]


SCALES: tuple[tuple[int, int], ...] = ((1, 4), (1, 2), (3, 4), (1, 1), (5, 4), (3, 2), (2, 1), (5, 2), (3, 1), (4, 1))
"""Resize ratios p/q: dyadic, so float32 and float64 hold them (and out/in for sizes) exactly."""
