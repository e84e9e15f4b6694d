"""Ops that pick, mask or accumulate along an axis: OneHot, Compress, ReverseSequence, Trilu,
CumSum, EyeLike.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np
import torch

from generator.dtypes import NUMERIC_32_FIRST, DType, classic
from generator.ops.base import Attrs, Emitter, OpSpec, SameShapeOp, axis_of, register
from generator.ops.indexing import DEPTH_LIMIT, ONE_HOT_ORT
from generator.ops.shape import ANY, INDEX_TYPES, scalar_at, spell_axis_by_chance
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, numel


def _one_hot_types(indices: DType) -> list[tuple[DType, DType]]:
    # Values of a type a case draws (classic): int16 comes only with a case that starts wide.
    return ONE_HOT_ORT.get(indices) or [(depth, value) for depth in (DType.int64, indices) for value in classic(ANY)]


def _off_on(dtype: DType, rng: random.Random) -> tuple[float, float]:
    """Two different values of `dtype`, in the ranges of the generated inputs (as the
    values themselves are written, so that float16 rounding cannot make them equal)."""
    off, on = (float(scalar_at(rng.random(), dtype)) for _ in range(2))
    if on == off:
        on = 1.0 - off if dtype is DType.bool else (off - 1.0 if off > 0 else off + 1.0)
    return off, on


@register
class OneHot(OpSpec):
    """Indices come from the graph (an out-of-range one gives an all-off row; a float one is
    cast to int64 first, truncating, as the spec says since OneHot-9); depth and the off/on
    pair are op-owned constants."""

    op_type = "OneHot"
    dtypes = NUMERIC_32_FIRST
    max_rank = 3

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        types = [t for t in _one_hot_types(ins[0].dtype) if out is None or t[1] is out.dtype]
        self.types = self.rng.choice(types) if types else None
        self.axis = self.rng.randint(-rank - 1, rank)
        self.depth = sc.var("depth")
        self.depth_rank = self.rng.choice((0, 1))
        self.write_axis = self.axis != -1 or self.rng.random() < 0.5
        # Drawn with the op's other choices, from the structure's generator.
        self.off_on = _off_on(self.types[1], self.rng) if self.types else (0.0, 1.0)

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.rank < 2:
            return None
        sources = [t for t in cls.dtypes if any(v is out.dtype for _, v in _one_hot_types(t))]
        return [TType(rng.choice(sources), out.rank - 1)] if sources else None

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        if self.types is None:
            return [False]
        # The depth constant is written in the depth type: it must hold it exactly.
        return [self.depth >= 1, self.depth <= DEPTH_LIMIT.get(self.types[0], 1 << 30)]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = list(ins[0].shape)
        axis = self.axis + len(shape) + 1 if self.axis < 0 else self.axis
        shape.insert(axis, self.depth)
        return [AbsTensor(self.types[1] if self.types else ins[0].dtype, shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        assert self.types is not None
        depth_type, value_type = self.types
        depth = np.asarray(em.ival(self.depth), dtype=depth_type.numpy).reshape([1] * self.depth_rank)
        values = np.asarray(self.off_on, dtype=value_type.numpy)
        attrs = {"axis": self.axis} if self.write_axis else {}
        em.node("OneHot", [ins[0], em.const(depth), em.const(values)], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, depth_t, values = inputs
        depth = int(depth_t.reshape(-1)[0].double().trunc())
        # Float indices are cast to int64 before use (the spec's words): 2.7 is class 2, -0.5
        # class 0. onnxruntime before 1.32.0 and onnx.reference compare them uncast instead.
        idx = x.double().trunc().long() if x.dtype.is_floating_point else x.long()
        idx = torch.where(idx < 0, idx + depth, idx)
        axis = axis_of(attrs, "axis", -1, x.dim() + 1)
        classes = torch.arange(depth, dtype=idx.dtype).reshape([-1 if i == axis else 1 for i in range(x.dim() + 1)])
        hot = idx.unsqueeze(axis) == classes
        return [torch.where(hot, values[1], values[0])]


RUNTIME_MASK_SHARE = 0.4
"""Share of Compress masks written as graph inputs rather than initializers."""


@register
class Compress(OpSpec):
    """A mask keeps a solved number of slices along an axis, or of elements of the flattened
    input when no axis is given; the mask may be shorter than the axis. A share of the masks
    are runtime inputs (`Emitter.runtime`): the output's length is then data-dependent to the
    compiler (a masked select it cannot fold), while the generator drew it."""

    op_type = "Compress"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        must_flatten = out is not None and out.rank != rank
        self.flatten = must_flatten or self.rng.random() < 0.25
        self.axis = self.rng.randrange(rank)
        self.written_axis = spell_axis_by_chance(self.axis, rank, self.rng)
        self.keep = sc.var("keep")
        self.runtime_mask = self.rng.random() < RUNTIME_MASK_SHARE

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        rank = rng.randint(cls.min_rank, cls.max_rank) if out.rank == 1 else out.rank
        return [TType(out.dtype, rank)]

    def _length(self, ins: list[AbsTensor]) -> Dim:
        return numel(ins[0].shape) if self.flatten else ins[0].shape[self.axis]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [self.keep >= 1, self.keep <= self._length(ins)]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        if self.flatten:
            return [AbsTensor(ins[0].dtype, [self.keep])]
        shape = list(ins[0].shape)
        shape[self.axis] = self.keep
        return [AbsTensor(ins[0].dtype, shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        keep, n = em.ival(self.keep), em.ival(self._length(self.inputs))
        length = int(em.values.integers(keep, n + 1))
        mask = np.zeros(length, dtype=bool)
        mask[em.values.choice(length, size=keep, replace=False)] = True
        attrs = {} if self.flatten else {"axis": self.written_axis}
        condition = em.runtime(mask) if self.runtime_mask else em.const(mask)
        em.node("Compress", [ins[0], condition], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, cond = inputs
        if "axis" not in attrs:
            x = x.reshape(-1)
        axis = axis_of(attrs, "axis", 0, x.dim())
        picked = torch.nonzero(cond.reshape(-1).bool()).reshape(-1)
        return [x.index_select(axis, picked[picked < x.shape[axis]])]


@register
class ReverseSequence(SameShapeOp):
    op_type = "ReverseSequence"
    dtypes = ANY
    min_rank = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.batch_axis, self.time_axis = self.rng.choice(((1, 0), (0, 1)))
        self.write_axes = (self.batch_axis, self.time_axis) != (1, 0) or self.rng.random() < 0.5

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        shape = [em.ival(d) for d in self.inputs[0].shape]
        lens = em.values.integers(1, shape[self.time_axis] + 1, size=shape[self.batch_axis]).astype(np.int64)
        attrs = {"batch_axis": self.batch_axis, "time_axis": self.time_axis} if self.write_axes else {}
        em.node("ReverseSequence", [ins[0], em.const(lens)], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, lens = inputs[0], inputs[1].long()
        batch_axis, time_axis = int(attrs.get("batch_axis", 1)), int(attrs.get("time_axis", 0))
        steps = torch.arange(x.shape[time_axis])
        # source[b, t] = len_b - 1 - t inside the sequence, t past its end
        source = torch.where(steps[None, :] < lens[:, None], lens[:, None] - 1 - steps[None, :], steps[None, :])
        if batch_axis > time_axis:
            source = source.T
        source = source.reshape(*source.shape, *([1] * (x.dim() - 2))).expand_as(x)
        return [torch.gather(x, time_axis, source)]


@register
class Trilu(SameShapeOp):
    op_type = "Trilu"
    dtypes = ANY
    min_rank = 2
    since_opset = 14

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.upper = self.rng.choice((0, 1))
        self.write_upper = self.upper == 0 or self.rng.random() < 0.5
        self.k_input = self.rng.random() < 0.7
        # Where k falls, drawn now so the generator's range check knows what the mask keeps.
        self.k_pick = self.rng.random()

    def k(self, rows: int, cols: int) -> int:
        """The diagonal offset: up to one past either edge, beyond which the mask is all-on
        or all-off."""
        if not self.k_input:
            return 0
        return -rows - 1 + min(int(self.k_pick * (rows + cols + 3)), rows + cols + 2)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        rows, cols = (em.ival(d) for d in self.inputs[0].shape[-2:])
        operands = [ins[0]]
        if self.k_input:
            operands.append(em.const(np.array(self.k(rows, cols), dtype=np.int64)))
        em.node("Trilu", operands, outs, **({"upper": self.upper} if self.write_upper else {}))

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        k_t = inputs[1] if len(inputs) > 1 else None
        k = int(k_t.reshape(-1)[0]) if k_t is not None else 0
        rows, cols = x.shape[-2:]
        offset = torch.arange(cols)[None, :] - torch.arange(rows)[:, None]
        keep = offset >= k if attrs.get("upper", 1) else offset <= k
        return [torch.where(keep, x, torch.zeros((), dtype=x.dtype))]


@register
class CumSum(OpSpec):
    op_type = "CumSum"
    dtypes: ClassVar[tuple[DType, ...]] = (DType.float32, DType.float64, DType.float16, DType.int32, DType.int64)

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.valid = ins[0].dtype is not DType.float16 or sc.opset >= 14
        self.axis = spell_axis_by_chance(self.rng.randrange(rank), rank, self.rng)
        self.axis_type = self.rng.choice(INDEX_TYPES)
        self.attrs = {k: 1 for k in ("exclusive", "reverse") if self.rng.random() < 0.4}

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [self.valid]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, list(ins[0].shape))]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        return [list(out_shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        axis = np.asarray(self.axis, dtype=self.axis_type)
        em.node("CumSum", [ins[0], em.const(axis)], outs, **self.attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [_scan(attrs, inputs, torch.cumsum, torch.zeros_like)]


@register
class CumProd(CumSum):
    """CumSum's axis input and attributes, multiplying: exact for integers inside the range the
    overflow table keeps them in, rounded once per step for floats, as every build does."""

    op_type = "CumProd"
    since_opset = 26
    dtypes = (DType.float32, DType.float64, DType.int32, DType.int64)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("CumProd", [ins[0], em.const(np.asarray(self.axis, dtype=self.axis_type))], outs, **self.attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [_scan(attrs, inputs, torch.cumprod, torch.ones_like)]


def _scan(
    attrs: Attrs,
    inputs: list[torch.Tensor],
    running: Callable[..., torch.Tensor],
    identity: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """CumSum's and CumProd's running total along the axis input, `reverse` running from the
    end, `exclusive` shifting the totals one place and starting from the identity."""
    x = inputs[0]
    axis = int(inputs[1].reshape(-1)[0]) % x.dim()
    y = x.flip(axis) if attrs.get("reverse", 0) else x
    total = running(y, dim=axis, dtype=x.dtype)
    if attrs.get("exclusive", 0):
        total = torch.cat([identity(y.narrow(axis, 0, 1)), total.narrow(axis, 0, y.shape[axis] - 1)], dim=axis)
    return total.flip(axis) if attrs.get("reverse", 0) else total


@register
class EyeLike(SameShapeOp):
    """The output has the input's shape and (written or implied) its type: onnxruntime
    picks the kernel from the output type alone, so the pair never varies independently."""

    op_type = "EyeLike"
    dtypes = ANY
    min_rank = 2
    max_rank = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.k = self.rng.choice((0, 0, 1, -1, 2, -3, 5))
        self.write_dtype = self.rng.random() < 0.5

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        attrs = {"k": self.k} if self.k else {}
        if self.write_dtype:
            attrs["dtype"] = self.ins[0].dtype.onnx
        em.node("EyeLike", ins, outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        dtype = x.dtype
        if "dtype" in attrs:
            dtype = torch.from_numpy(np.zeros(0, dtype=DType.from_onnx(int(attrs["dtype"])).numpy)).dtype
        rows, cols = x.shape
        offset = torch.arange(cols)[None, :] - torch.arange(rows)[:, None]
        return [(offset == int(attrs.get("k", 0))).to(dtype)]
