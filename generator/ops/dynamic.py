"""Ops whose output shape depends on values: NonZero, Range and ConstantOfShape here, Unique
and NonMaxSuppression in generator.ops.picking.

A compiler meets these in every exported detection or NLP model (masks, positions, shapes
computed at run time), and they break its static shape plans. A generated model stays valid
by construction all the same: the values that decide a shape are runtime constants
(`Emitter.runtime`, an `r<n>` graph input with a fixed value that no value search moves), so
the compiler sees an input it cannot fold while the generator knows the shape: a solved z3
term, realized exactly when the op draws its runtime values at emission.

Each op reads the graph tensor it is inserted on (for its shape, or to combine with it), so
that the node sits in the data flow as its exported idiom does.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np
import torch
from onnx import TensorProto, numpy_helper

from generator.dtypes import FLOATS_32_FIRST, DType
from generator.ops.base import Attrs, Emitter, OpSpec, register
from generator.ops.shape import ANY, INDEX_TYPES
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, numel

BROADCAST_SHARE = 0.25
"""Chance that a runtime mask or shape has 1 where the tensor it meets has its dim."""


def nonzero_values(rng: np.random.Generator, count: int, dtype: DType) -> np.ndarray:
    """`count` values of `dtype`, none of them zero, in the generated inputs' ranges."""
    if dtype is DType.bool:
        return np.ones(count, dtype=bool)
    if dtype.is_float:
        magnitude: np.ndarray = rng.uniform(0.125, 1.0, size=count)
        signs: np.ndarray = rng.choice(np.array([-1.0, 1.0]), size=count)
        drawn_floats: np.ndarray = (magnitude * signs).astype(dtype.numpy)
        return drawn_floats
    low = 1 if dtype.is_unsigned else -8
    drawn = rng.integers(low, 9, size=count)
    return np.where(drawn == 0, 1, drawn).astype(dtype.numpy)


def sparse_mask(rng: np.random.Generator, shape: Sequence[int], keep: int, dtype: DType) -> np.ndarray:
    """A tensor of `shape` with exactly `keep` nonzero elements, at random places."""
    size = math.prod(shape)
    flat = np.zeros(size, dtype=dtype.numpy)
    flat[rng.choice(size, size=keep, replace=False)] = nonzero_values(rng, keep, dtype)
    return flat.reshape(tuple(shape))


def part_name(outs: Sequence[str], k: int) -> str:
    """The name of a node's k-th intermediate: derived from its first output, unique in the model."""
    return f"{outs[0]}_{k}"


@register
class NonZero(OpSpec):
    """torch.nonzero over a runtime mask of the input's shape, as `NonZero(Expand(m, Shape(x)))`:
    the mask may have 1 where x has a dim (an expand_as), so its `keep` nonzeros count once per
    broadcast copy. The index list's length is what the generator solved; the compiler only
    learns it when the model runs."""

    op_type = "NonZero"
    dtypes = ANY
    node_cost = 3

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.broadcast = [self.rng.random() < BROADCAST_SHARE for _ in range(ins[0].rank)]
        self.keep = sc.var("nonzeros")

    @classmethod
    def support_ops(cls) -> tuple[str, ...]:
        return ("NonZero", "Expand", "Shape")

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        return None  # its count is solved from the mask it draws: forward insertion only

    def mask_shape(self, ins: list[AbsTensor]) -> list[Dim]:
        return [1 if b else d for b, d in zip(self.broadcast, ins[0].shape, strict=True)]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [self.keep >= 1, self.keep <= numel(self.mask_shape(ins))]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        copies = numel([d for b, d in zip(self.broadcast, ins[0].shape, strict=True) if b])
        return [AbsTensor(DType.int64, [ins[0].rank, self.keep * copies])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        shape = [em.ival(d) for d in self.mask_shape(self.inputs)]
        mask = em.runtime(sparse_mask(em.values, shape, em.ival(self.keep), self.inputs[0].dtype))
        em.node("Shape", [ins[0]], [part_name(outs, 0)])
        em.node("Expand", [mask, part_name(outs, 0)], [part_name(outs, 1)])
        em.node("NonZero", [part_name(outs, 1)], outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        # Row-major order, as ONNX lists them; a 0-d input gives a [0, count] result.
        return [torch.nonzero(inputs[0]).T.contiguous()]


RANGE_TYPES: tuple[DType, ...] = (*FLOATS_32_FIRST[:2], DType.int32, DType.int64)
"""The fuzzbot types Range's schema takes (float, double, int32, int64; not float16)."""
FLOAT_STEPS = (0.25, 0.5, 1.0, 2.0, -0.5, -1.0)
"""Float deltas: powers of two, so that every element and the length are exact in float32."""
INT_STEPS = (1, 1, 2, 3, -1, -2)


def range_length(start: float, limit: float, delta: float) -> int:
    """ONNX's element count, max(ceil((limit - start) / delta), 0), exactly for integers."""
    if delta == 0:
        raise ValueError("Range with delta 0 has no defined length")
    if all(float(v).is_integer() for v in (start, limit, delta)):
        return max(-(int(start - limit) // int(delta)), 0)
    return max(math.ceil((limit - start) / delta), 0)


def range_bounds(rng: np.random.Generator, length: int, dtype: DType) -> tuple[float, float, float]:
    """(start, limit, delta) of a Range of exactly `length` elements, with the limit strictly
    inside the last step (never on a boundary the division could round across)."""
    if dtype.is_float:
        delta = float(rng.choice(FLOAT_STEPS))
        start = float(rng.integers(-8, 9)) / 4
        return start, start + (length - 0.5) * delta, delta
    delta = int(rng.choice(INT_STEPS))
    start = int(rng.integers(-4, 5))
    past = int(rng.integers(1, abs(delta) + 1))
    return start, start + (length - 1) * delta + past * (1 if delta > 0 else -1), delta


@register
class Range(OpSpec):
    """torch.arange with runtime bounds, in its two exported uses: positions added along the
    last axis (`x + arange(n)`, n the axis length), or indices a Gather picks along an axis
    (`x.index_select(a, arange(...))`, the count solved). The bounds are runtime scalars, so the
    compiler cannot size the result; the generator draws bounds of exactly the solved length."""

    op_type = "Range"
    dtypes = ANY
    node_cost = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.add = ins[0].dtype in RANGE_TYPES and self.rng.random() < 0.5
        self.axis = self.rng.randrange(ins[0].rank)
        self.index_type = self.rng.choice(INDEX_TYPES)
        self.count = sc.var("range")

    @classmethod
    def schema_allows(cls, opset: int, ins: Sequence[TType]) -> bool:
        """A type Range does not take is only gathered from, with int64 or int32 indices."""
        return True

    @classmethod
    def support_keys(cls, key: DType) -> list[tuple[str, DType]]:
        gather = [("Range", DType.int64), ("Range", DType.int32), ("Gather", key)]
        return gather + ([("Range", key), ("Add", key)] if key in RANGE_TYPES else [])

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        if self.add:
            return []
        # Indices run over [-dim, dim - 1]: up to twice the axis without leaving it.
        return [self.count >= 1, self.count <= 2 * ins[0].shape[self.axis]]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = list(ins[0].shape)
        if not self.add:
            shape[self.axis] = self.count
        return [AbsTensor(ins[0].dtype, shape)]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        return [list(out_shape)] if self.add else None

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        if self.add:
            length = em.ival(self.inputs[0].shape[-1])
            dtype = self.inputs[0].dtype
            bounds = range_bounds(em.values, length, dtype)
            scalars = [em.runtime(np.asarray(v, dtype=dtype.numpy)) for v in bounds]
            em.node("Range", scalars, [part_name(outs, 0)])
            em.node("Add", [ins[0], part_name(outs, 0)], outs)
            return
        count, dim = em.ival(self.count), em.ival(self.inputs[0].shape[self.axis])
        start, limit, delta = self._index_bounds(em.values, count, dim)
        scalars = [em.runtime(np.asarray(v, dtype=self.index_type)) for v in (start, limit, delta)]
        em.node("Range", scalars, [part_name(outs, 0)])
        em.node("Gather", [ins[0], part_name(outs, 0)], outs, axis=self.axis)

    @staticmethod
    def _index_bounds(rng: np.random.Generator, count: int, dim: int) -> tuple[int, int, int]:
        """Bounds of `count` indices, all in [-dim, dim - 1]; a step of 2 or -1 where it fits."""
        steps = [s for s in (1, 2, -1) if (count - 1) * abs(s) <= 2 * dim - 1]
        delta = int(rng.choice(steps))
        span = (count - 1) * delta
        low, high = (-dim, dim - 1 - span) if delta > 0 else (-dim - span, dim - 1)
        start = int(rng.integers(low, high + 1))
        return start, start + count * delta, delta

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        start, limit, delta = (t.reshape(()) for t in inputs)
        n = range_length(start.item(), limit.item(), delta.item())
        # start + i * delta, each element computed alone (no accumulated rounding), as ONNX says.
        steps = torch.arange(n, dtype=torch.float64 if start.is_floating_point() else torch.int64)
        return [(start.to(steps.dtype) + steps * delta.to(steps.dtype)).to(start.dtype)]


COMBINE = {True: ("Or", "And"), False: ("Add", "Mul")}
"""How a constant is combined with the tensor it was shaped after, for bool and for numbers."""
CONSTANT_TYPES: tuple[DType, ...] = (*FLOATS_32_FIRST, DType.int32, DType.int64, DType.bool)


@register
class ConstantOfShape(OpSpec):
    """zeros_like/ones_like/full_like as torch exports them, `ConstantOfShape(Shape(x))`
    combined with x; or a constant of a runtime shape (torch.full of computed sizes) that x
    broadcasts against: up to two solved leading dims, and 1 where x has a dim. The runtime
    shape is what the compiler cannot see through."""

    op_type = "ConstantOfShape"
    dtypes = CONSTANT_TYPES
    node_cost = 3

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.runtime_shape = self.rng.random() < 0.5
        lead = self.rng.randint(0, min(2, 4 - rank)) if self.runtime_shape else 0
        self.lead = [sc.var("lead") for _ in range(lead)]
        self.broadcast = [self.runtime_shape and self.rng.random() < BROADCAST_SHARE for _ in range(rank)]
        self.combine = self.rng.choice(COMBINE[ins[0].dtype is DType.bool])
        self.fill = self.rng.choice((0.0, 1.0, 1.0, self.rng.random()))
        self.write_value = ins[0].dtype is not DType.float32 or self.fill != 0.0 or self.rng.random() < 0.5

    @classmethod
    def support_ops(cls) -> tuple[str, ...]:
        return ("ConstantOfShape", "Shape", "Add", "Mul", "Or", "And")

    @classmethod
    def support_keys(cls, key: DType) -> list[tuple[str, DType]]:
        combine = COMBINE[key is DType.bool]
        return [("ConstantOfShape", key), *((op, key) for op in combine)]

    @classmethod
    def schema_allows(cls, opset: int, ins: Sequence[TType]) -> bool:
        return ins[0].dtype in CONSTANT_TYPES

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [d >= 1 for d in self.lead]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, [*self.lead, *ins[0].shape])]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        return None if self.lead else [list(out_shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        dtype = self.inputs[0].dtype
        if self.runtime_shape:
            dims = [1 if b else em.ival(d) for b, d in zip(self.broadcast, self.inputs[0].shape, strict=True)]
            shape = em.runtime(np.asarray([em.ival(d) for d in self.lead] + dims, dtype=np.int64))
        else:
            shape = part_name(outs, 0)
            em.node("Shape", [ins[0]], [shape])
        fill = np.asarray([self.fill], dtype=dtype.numpy)
        attrs = {"value": numpy_helper.from_array(fill)} if self.write_value else {}
        em.node("ConstantOfShape", [shape], [part_name(outs, 1)], **attrs)
        em.node(self.combine, [ins[0], part_name(outs, 1)], outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        sizes = [int(v) for v in inputs[0].reshape(-1).tolist()]
        value = attrs.get("value")
        if isinstance(value, torch.Tensor):  # the torch module builder's, made before tracing
            fill = value
        else:
            fill = torch.from_numpy(np.array(value_array(value))) if value is not None else torch.zeros(1)
        return [fill.reshape(()).expand(sizes).clone()]


def value_array(value: object) -> np.ndarray:
    """An attribute's tensor value as numpy (onnx.helper hands a TensorProto)."""
    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)
