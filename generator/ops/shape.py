"""Layout ops: they move, copy, crop or resample elements without other arithmetic.

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
from collections.abc import Callable, Sequence

import numpy as np
import torch

from generator.dtypes import DType
from generator.ops.base import OUTPUTS, Attrs, Emitter, OpSpec, SameShapeOp, register
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, ceildiv, floordiv, numel

ANY: tuple[DType, ...] = tuple(DType)
"""Every element type: a layout op is valid for all of them."""

INDEX_TYPES: tuple[type[np.signedinteger], ...] = (np.int64, np.int64, np.int32)
"""Index operand types where the schema allows both (int64 is the common one)."""


def _ints(t: torch.Tensor | None) -> list[int]:
    return [] if t is None else [int(v) for v in t.reshape(-1).tolist()]


def _given(inputs: Sequence[torch.Tensor | None], i: int) -> torch.Tensor | None:
    """Optional input `i`, or None when it is absent or named by an empty string."""
    return inputs[i] if len(inputs) > i else None


def _norm_axes(axes: Sequence[int], rank: int) -> list[int]:
    return sorted(a + rank if a < 0 else a for a in axes)


def _spell_axis(axis: int, rank: int, negative: bool) -> int:
    return axis - rank if negative else axis


def _huge(index_type: type[np.signedinteger]) -> int:
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
    lo = 0 if dtype is DType.uint8 else -8
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
        x, shape = inputs[0], _ints(inputs[1])
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
class Concat(OpSpec):
    op_type = "Concat"
    arity = 2
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.axis = self.rng.randrange(ins[0].rank)
        self.negative_axis = self.rng.random() < 0.3

    @classmethod
    def draw_arity(cls, rng: random.Random) -> int:
        return rng.choice((2, 2, 3, 4))

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
        em.node("Concat", ins, outs, axis=_spell_axis(self.axis, self.ins[0].rank, self.negative_axis))

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
        huge = _huge(self.index_type)
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
        axes = [_spell_axis(a, rank, neg) for a, neg in zip(self.axes, self.negative_axis, strict=True)]
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
        starts, ends = _ints(inputs[1]), _ints(inputs[2])
        axes_t, steps_t = _given(inputs, 3), _given(inputs, 4)
        axes = _ints(axes_t) if axes_t is not None else list(range(len(starts)))
        steps = _ints(steps_t) if steps_t is not None else [1] * len(starts)
        for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
            a = a + x.dim() if a < 0 else a
            idx = _slice_bounds(s, e, st, x.shape[a])
            x = x.index_select(a, torch.tensor(list(idx), dtype=torch.long))
        return [x]


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
        em.node("Flatten", ins, outs, axis=_spell_axis(self.axis, self.ins[0].rank, self.negative_axis))

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
        self.written = [_spell_axis(a, out_rank, self.rng.random() < 0.3) for a in self.axes]
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
        em.node("Unsqueeze", [ins[0], em.shape_operand(self.written)], outs)

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
            written = [_spell_axis(a, rank, self.negative[a]) for a in sorted(self.axes, key=lambda a: self.order[a])]
            em.node("Squeeze", [ins[0], em.shape_operand(written)], outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        given = _given(inputs, 1)
        if given is not None:
            axes = _ints(given)
        else:
            axes = list(attrs.get("axes", [i for i, d in enumerate(x.shape) if d == 1]))
        keep = [d for i, d in enumerate(x.shape) if i not in _norm_axes(axes, x.dim())]
        return [x.reshape(keep)]


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
        return [TType(rng.choice(cls.dtypes), rng.randint(cls.min_rank, cls.max_rank))]

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
        shape = np.broadcast_shapes(tuple(x.shape), tuple(_ints(inputs[1])))
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
        return [inputs[0].repeat(_ints(inputs[1]))]


@register
class Split(OpSpec):
    """Two or three outputs (one when inserted backward: a legal, rarely seen form), of
    solved sizes or in equal chunks (the last one smaller when the axis does not divide).
    Equal chunks are written with num_outputs from opset 18 and as explicit sizes before
    it: the older implicit form takes its count from the node's outputs, which the
    reference cannot see."""

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
        axis = _spell_axis(self.axis, self.ins[0].rank, self.negative_axis)
        if self.equal and em.opset >= 18:
            em.node("Split", ins, outs, axis=axis, num_outputs=self.count)
        else:
            em.node("Split", [ins[0], em.const_i64([em.ival(s) for s in self.sizes])], outs, axis=axis)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        axis = int(attrs.get("axis", 0))
        sizes_t = _given(inputs, 1)
        if sizes_t is not None:
            sizes = _ints(sizes_t)
        else:  # num_outputs (opset 18), or before it one part per output of the node
            n, d = int(attrs["num_outputs"] if "num_outputs" in attrs else attrs[OUTPUTS]), x.shape[axis]
            chunk = -(-d // n)
            sizes = [chunk] * (n - 1) + [d - chunk * (n - 1)]
        return list(torch.split(x, sizes, dim=axis))


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
        axes = [_spell_axis(a, rank, neg) for a, neg in zip(self.axes, self.negative, strict=True)]
        em.node("CenterCropPad", [ins[0], shape], outs, axes=axes)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, shape = inputs[0], _ints(inputs[1])
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
        written = [_spell_axis(int(a), rank, self.negative_axes) for a in axes]
        em.node("Pad", [ins[0], em.const_i64(pads), value, em.const_i64(written)], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, pads = inputs[0], _ints(inputs[1])
        given, axes_t = _given(inputs, 2), _given(inputs, 3)
        value = given.reshape(()) if given is not None else torch.zeros((), dtype=x.dtype)
        axes = [a + x.dim() if a < 0 else a for a in _ints(axes_t)] if axes_t is not None else list(range(x.dim()))
        n = len(axes)
        for i, a in enumerate(axes):
            x = _pad_axis(x, a, pads[i], pads[i + n], str(attrs.get("mode", "constant")), value)
        return [x]


SCALES: tuple[tuple[int, int], ...] = ((1, 4), (1, 2), (3, 4), (1, 1), (5, 4), (3, 2), (2, 1), (5, 2), (3, 1), (4, 1))
"""Resize ratios p/q: dyadic, so float32 and float64 hold them (and out/in for sizes) exactly."""

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
        coords = RESIZE_COORDS + (("half_pixel_symmetric",) if sc.opset >= 19 else ())
        self.coord = self.rng.choice(coords)
        self.attrs: dict[str, str | float | int | list[int]] = {"mode": self.mode}
        if self.coord != "half_pixel" or self.rng.random() < 0.5:
            self.attrs["coordinate_transformation_mode"] = self.coord
        if self.mode == "nearest":
            self.attrs["nearest_mode"] = self.rng.choice(("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"))
        if self.mode == "cubic":
            self.attrs["cubic_coeff_a"] = self.rng.choice((-0.75, -0.5))
            self.attrs["exclude_outside"] = int(self.rng.random() < 0.3)
        self.axes_attr = sc.opset >= 18 and self.rng.random() < 0.4
        self.out_shape: list[Dim] = []

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        cons: list[Cond] = []
        self.out_shape = list(ins[0].shape)
        for a, (p, q) in self.ratio.items():
            d = ins[0].shape[a]
            out = floordiv(d * p, q)
            self.out_shape[a] = out
            if self.by_sizes or self.coord not in FREE_SCALE_COORDS:
                cons.append((d * p) % q == 0)
            elif p != q:
                # onnxruntime copies the input when the output length equals it, whatever the scale.
                cons.append(out != d)
            if self.coord in ("align_corners", "pytorch_half_pixel"):
                cons.append(out >= 2)  # their one-element special case is read differently by evaluators
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, list(self.out_shape))]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        rank = self.ins[0].rank
        attrs = dict(self.attrs)
        axes = self.axes if self.axes_attr else list(range(rank))
        if self.axes_attr:
            attrs["axes"] = [_spell_axis(a, rank, em.values.random() < 0.3) for a in axes]
        if self.by_sizes:
            sizes = [em.ival(self.out_shape[a]) for a in axes]
            em.node("Resize", [ins[0], "", "", em.const_i64(sizes)], outs, **attrs)
            return
        p_q = [self.ratio.get(a, (1, 1)) for a in axes]
        scales = np.asarray([p / q for p, q in p_q], dtype=np.float32)
        em.node("Resize", [ins[0], "", em.const(scales)], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        axes = [a + x.dim() if a < 0 else a for a in attrs.get("axes", range(x.dim()))]
        roi_t, scales_t, sizes_t = _given(inputs, 1), _given(inputs, 2), _given(inputs, 3)
        if scales_t is not None and scales_t.numel():
            scales = [float(s) for s in scales_t.double().tolist()]
            sizes = [int(np.floor(x.shape[a] * s)) for a, s in zip(axes, scales, strict=True)]
        elif sizes_t is not None:
            sizes = _ints(sizes_t)
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
