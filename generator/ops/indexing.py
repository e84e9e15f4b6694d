"""Index-driven ops: gathers, scatters, one-hot, masks and scans along an axis.

Index operands are op-owned initializers drawn at emission from the case's value
generator, valid by construction: in [-dim, dim-1] with some written negatively, and
unique wherever duplicates would make the result depend on write order (scatters
without a reduction). The data operands are graph tensors, so values flow through.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import torch

from generator.dtypes import DType
from generator.ops.base import Attrs, Emitter, OpSpec, SameShapeOp, register
from generator.ops.shape import ANY, INDEX_TYPES, scalar_at
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, numel

NUMERIC: tuple[DType, ...] = tuple(d for d in DType if d is not DType.bool)

REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}
"""ONNX scatter reductions and their torch.scatter_reduce names."""


def _axis(attrs: Attrs, rank: int, default: int = 0) -> int:
    a = int(attrs.get("axis", default))
    return a + rank if a < 0 else a


def _spell_axis(axis: int, rank: int, rng: random.Random) -> int:
    return axis - rank if rng.random() < 0.3 else axis


def _nonneg(idx: torch.Tensor, dims: torch.Tensor | int) -> torch.Tensor:
    i = idx.long()
    return torch.where(i < 0, i + dims, i)


def _some_negative(em: Emitter, idx: np.ndarray, dims: np.ndarray | int) -> np.ndarray:
    """Write about a third of the indices in their from-the-end form."""
    return np.where(em.values.random(idx.shape) < 0.3, idx - dims, idx)


def _reductions(sc: SymCtx, dtype: DType) -> list[str]:
    """Scatter reductions valid at the model's opset. Bool has no arithmetic to reduce
    with; float16 reductions onnxruntime rejects only when the node runs (past what a
    support probe keyed by dtype can see), so they would read as failures."""
    if dtype in (DType.bool, DType.float16) or sc.opset < 16:
        return ["none"]
    return ["none", "none", "add", "mul"] + (["max", "min"] if sc.opset >= 18 else [])


def _reduction_attrs(reduction: str, opset: int, write_none: bool) -> dict[str, str]:
    if opset < 16 or (reduction == "none" and not write_none):
        return {}
    return {"reduction": reduction}


def _scatter(x: torch.Tensor, axis: int, idx: torch.Tensor, upd: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "none":
        return x.scatter(axis, idx, upd)
    return x.scatter_reduce(axis, idx, upd, REDUCE[reduction], include_self=True)


@register
class Gather(OpSpec):
    op_type = "Gather"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        if out is not None:
            self.q = out.rank - rank + 1
        else:
            self.q = self.rng.randint(1 if rank == 1 else 0, min(3, self.max_rank - rank + 1))
        self.axis = self.rng.randrange(rank)
        self.written_axis = _spell_axis(self.axis, rank, self.rng)
        self.index_type = self.rng.choice(INDEX_TYPES)
        self.write_axis = self.written_axis != 0 or self.rng.random() < 0.5
        self.idx_shape: list[Dim] = []

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        return [TType(out.dtype, rng.randint(max(1, out.rank - 2), min(cls.max_rank, out.rank + 1)))]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        self.idx_shape = [self.sc.var("indices") for _ in range(self.q)]
        return [self.q >= 0, *(d >= 1 for d in self.idx_shape)]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        s = ins[0].shape
        return [AbsTensor(ins[0].dtype, [*s[: self.axis], *self.idx_shape, *s[self.axis + 1 :]])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        d = em.ival(self.inputs[0].shape[self.axis])
        idx = em.values.integers(-d, d, size=[em.ival(v) for v in self.idx_shape])
        attrs = {"axis": self.written_axis} if self.write_axis else {}
        em.node("Gather", [ins[0], em.const(np.asarray(idx, dtype=self.index_type))], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, idx = inputs[0], inputs[1]
        axis = _axis(attrs, x.dim())
        i = _nonneg(idx, x.shape[axis])
        y = x.index_select(axis, i.reshape(-1))
        # A list, not unpacked sizes: a scalar index into 1-D data makes a 0-d result.
        return [y.reshape([*x.shape[:axis], *i.shape, *x.shape[axis + 1 :]])]


@register
class GatherElements(OpSpec):
    """The output takes the indices' shape: any length along the axis; on the others the
    data's length or, sometimes, less (torch.gather exports produce that form)."""

    op_type = "GatherElements"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axis = self.rng.randrange(rank)
        self.written_axis = _spell_axis(self.axis, rank, self.rng)
        self.index_type = self.rng.choice(INDEX_TYPES)
        self.narrower = self.rng.random() < 0.3
        self.idx_shape: list[Dim] = []

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        self.idx_shape = [self.sc.var("indices") for _ in ins[0].shape]
        pairs = [(i, d) for a, (i, d) in enumerate(zip(self.idx_shape, ins[0].shape, strict=True)) if a != self.axis]
        return [i <= d if self.narrower else i == d for i, d in pairs]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, list(self.idx_shape))]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        d = em.ival(self.inputs[0].shape[self.axis])
        idx = em.values.integers(-d, d, size=[em.ival(v) for v in self.idx_shape])
        em.node("GatherElements", [ins[0], em.const(idx.astype(self.index_type))], outs, axis=self.written_axis)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        axis = _axis(attrs, x.dim())
        return [torch.gather(x, axis, _nonneg(inputs[1], x.shape[axis]))]


def _gathernd_layouts(rank: int, out_rank: int | None, max_rank: int) -> list[tuple[int, int, int]]:
    """(batch_dims, index depth m, indices rank q) that give an output rank in range."""
    found = []
    for b in range(rank):
        for m in range(1, rank - b + 1):
            for q in range(b + 1, max_rank + 1):
                r = q - 1 + rank - b - m
                if (out_rank is None and 1 <= r <= max_rank) or r == out_rank:
                    found.append((b, m, q))
    return found


@register
class GatherND(OpSpec):
    op_type = "GatherND"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        layouts = _gathernd_layouts(ins[0].rank, out.rank if out else None, self.max_rank)
        self.layout = self.rng.choice(layouts) if layouts else None
        self.write_batch_dims = self.rng.random() < 0.3
        self.mid: list[Dim] = []

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        return [TType(out.dtype, rng.randint(cls.min_rank, cls.max_rank))]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        if self.layout is None:
            return [False]
        b, m, q = self.layout
        self.mid = [self.sc.var("indices") for _ in range(q - 1 - b)]
        lead = [*ins[0].shape[:b], *self.mid]
        return [*(d >= 1 for d in self.mid), numel(lead) * m <= self.sc.max_elements]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        if self.layout is None:
            return [AbsTensor(ins[0].dtype, list(ins[0].shape))]
        b, m, _ = self.layout
        s = ins[0].shape
        return [AbsTensor(ins[0].dtype, [*s[:b], *self.mid, *s[b + m :]])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        assert self.layout is not None
        b, m, _ = self.layout
        data = [em.ival(d) for d in self.inputs[0].shape]
        lead = data[:b] + [em.ival(d) for d in self.mid]
        dims = np.asarray(data[b : b + m])
        idx = np.floor(em.values.random([*lead, m]) * dims).astype(np.int64)
        idx = _some_negative(em, idx, dims)
        attrs = {"batch_dims": b} if b or self.write_batch_dims else {}
        em.node("GatherND", [ins[0], em.const(idx.astype(np.int64))], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, idx = inputs[0], inputs[1]
        b = int(attrs.get("batch_dims", 0))
        m = idx.shape[-1]
        batch = int(np.prod(x.shape[:b]))
        flat = x.reshape(batch, *x.shape[b:])
        i = _nonneg(idx.reshape(batch, -1, m), torch.tensor(x.shape[b : b + m]))
        rows = torch.arange(batch)[:, None].expand(batch, i.shape[1])
        picked = flat[(rows, *i.unbind(-1))]
        return [picked.reshape([*idx.shape[:-1], *x.shape[b + m :]])]


@register
class ScatterElements(OpSpec):
    """Data and updates both come from the graph; updates fit inside the data on the
    non-axis dims and, without a reduction, along the axis too (indices stay unique)."""

    op_type = "ScatterElements"
    arity = 2
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axis = self.rng.randrange(rank)
        self.written_axis = _spell_axis(self.axis, rank, self.rng)
        self.reduction = self.rng.choice(_reductions(sc, ins[0].dtype))
        self.write_none = self.rng.random() < 0.5
        self.index_type = self.rng.choice(INDEX_TYPES)

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        return super().accepts(ins) and ins[0].rank == ins[1].rank

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        data, upd = ins[0].shape, ins[1].shape
        free = self.reduction != "none"
        return [u <= d for a, (u, d) in enumerate(zip(upd, data, strict=True)) if a != self.axis or not free]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, list(ins[0].shape))]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        d = em.ival(self.inputs[0].shape[self.axis])
        shape = [em.ival(v) for v in self.inputs[1].shape]
        if self.reduction == "none":
            # Unique along the axis: the first shape[axis] entries of a random permutation per line.
            keys = em.values.random([*shape[: self.axis], d, *shape[self.axis + 1 :]])
            idx = np.argsort(keys, axis=self.axis).take(range(shape[self.axis]), axis=self.axis)
        else:
            idx = em.values.integers(0, d, size=shape)
        idx = _some_negative(em, idx, d).astype(self.index_type)
        attrs = _reduction_attrs(self.reduction, em.opset, self.write_none)
        em.node("ScatterElements", [ins[0], em.const(idx), ins[1]], outs, axis=self.written_axis, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, idx, upd = inputs
        axis = _axis(attrs, x.dim())
        return [_scatter(x, axis, _nonneg(idx, x.shape[axis]), upd, str(attrs.get("reduction", "none")))]


def _scatternd_depths(data_rank: int, upd_rank: int, max_rank: int) -> list[int]:
    """Index depths m for which updates of this rank fit: q - 1 + r - m == upd_rank, q <= max."""
    return [m for m in range(1, data_rank + 1) if 1 <= upd_rank - data_rank + m + 1 <= max_rank]


@register
class ScatterND(OpSpec):
    """Updates' leading dims index the data's first m dims; their trailing dims are the
    data's remaining ones. Without a reduction the index tuples are distinct."""

    op_type = "ScatterND"
    arity = 2
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        depths = _scatternd_depths(ins[0].rank, ins[1].rank, self.max_rank)
        self.depth = self.rng.choice(depths) if depths else None
        self.reduction = self.rng.choice(_reductions(sc, ins[0].dtype))
        self.write_none = self.rng.random() < 0.5

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        return all(cls.slot_ok(i, t) for i, t in enumerate(ins)) and ins[0].dtype == ins[1].dtype

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        return [out, TType(out.dtype, rng.randint(cls.min_rank, cls.max_rank))]

    def _lead(self, ins: list[AbsTensor]) -> list[Dim]:
        assert self.depth is not None
        data_rank = ins[0].rank
        return list(ins[1].shape[: ins[1].rank - (data_rank - self.depth)])

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        if self.depth is None:
            return [False]
        data, upd, m = ins[0].shape, ins[1].shape, self.depth
        tail = len(data) - m
        cons: list[Cond] = [u == d for u, d in zip(upd[len(upd) - tail :], data[m:], strict=True)] if tail else []
        count = numel(self._lead(ins))
        cons.append(count * m <= self.sc.max_elements)
        if self.reduction == "none":
            cons.append(count <= numel(data[:m]))
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, list(ins[0].shape))]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        assert self.depth is not None
        m = self.depth
        dims = [em.ival(d) for d in self.inputs[0].shape[:m]]
        lead = [em.ival(d) for d in self._lead(self.inputs)]
        count = int(np.prod(lead))
        if self.reduction == "none":
            flat = em.values.choice(int(np.prod(dims)), size=count, replace=False)
        else:
            flat = em.values.integers(0, int(np.prod(dims)), size=count)
        idx = np.stack(np.unravel_index(flat, dims), axis=-1).reshape([*lead, m])
        idx = _some_negative(em, idx, np.asarray(dims)).astype(np.int64)
        attrs = _reduction_attrs(self.reduction, em.opset, self.write_none)
        em.node("ScatterND", [ins[0], em.const(idx), ins[1]], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, idx, upd = inputs
        m = idx.shape[-1]
        rows = int(np.prod(x.shape[:m]))
        flat = x.reshape(rows, -1).clone()
        i = _nonneg(idx.reshape(-1, m), torch.tensor(x.shape[:m]))
        line = torch.zeros(i.shape[0], dtype=torch.long)
        for j in range(m):
            line = line * x.shape[j] + i[:, j]
        u = upd.reshape(i.shape[0], -1)
        reduction = str(attrs.get("reduction", "none"))
        if reduction == "none":
            flat[line] = u
        else:
            flat = flat.scatter_reduce(0, line[:, None].expand_as(u), u, REDUCE[reduction], include_self=True)
        return [flat.reshape(x.shape)]


ONE_HOT_ORT: dict[DType, list[tuple[DType, DType]]] = {
    DType.float32: [(DType.float32, DType.float32), (DType.float32, DType.float16), (DType.int64, DType.int64)],
    DType.float16: [(DType.float16, DType.float16), (DType.float16, DType.float32), (DType.int64, DType.int64)],
    DType.int32: [(DType.float32, DType.float32), (DType.int32, DType.float16), (DType.float16, DType.float32)],
    DType.int64: [
        (DType.int64, DType.int64),
        (DType.int64, DType.float32),
        (DType.float32, DType.int32),
        (DType.int32, DType.float16),
        (DType.float16, DType.float32),
    ],
}
"""(depth type, values type) per indices type, among the combinations onnxruntime
implements: the support matrix is keyed by the indices type alone, so every draw for
a type it marks supported must run. Other indices types draw from the whole schema."""


DEPTH_LIMIT: dict[DType, int] = {DType.int8: 127, DType.uint8: 255, DType.float16: 2048}
"""The largest depth each narrow depth type holds exactly (float16: every integer to 2^11)."""


def _one_hot_types(indices: DType) -> list[tuple[DType, DType]]:
    return ONE_HOT_ORT.get(indices) or [(depth, value) for depth in (DType.int64, indices) for value in ANY]


def _off_on(dtype: DType, rng: random.Random) -> tuple[float, float]:
    """Two different values of `dtype`, in the ranges of the generated inputs (as the
    values themselves are written, so that float16 rounding cannot make them equal)."""
    off, on = (float(scalar_at(rng.random(), dtype)) for _ in range(2))
    if on == off:
        on = 1.0 - off if dtype is DType.bool else (off - 1.0 if off > 0 else off + 1.0)
    return off, on


@register
class OneHot(OpSpec):
    """Indices come from the graph (a fractional or out-of-range one gives an all-off
    row); depth and the off/on pair are op-owned constants."""

    op_type = "OneHot"
    dtypes = NUMERIC
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
        # Float indices are compared as they are: a fractional one matches no class.
        idx = x.double() if x.dtype.is_floating_point else x.long()
        idx = torch.where(idx < 0, idx + depth, idx)
        axis = _axis(attrs, x.dim() + 1, default=-1)
        classes = torch.arange(depth, dtype=idx.dtype).reshape([-1 if i == axis else 1 for i in range(x.dim() + 1)])
        hot = idx.unsqueeze(axis) == classes
        return [torch.where(hot, values[1], values[0])]


@register
class Compress(OpSpec):
    """A constant mask keeps a solved number of slices along an axis, or of elements of
    the flattened input when no axis is given; the mask may be shorter than the axis."""

    op_type = "Compress"
    dtypes = ANY

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        must_flatten = out is not None and out.rank != rank
        self.flatten = must_flatten or self.rng.random() < 0.25
        self.axis = self.rng.randrange(rank)
        self.written_axis = _spell_axis(self.axis, rank, self.rng)
        self.keep = sc.var("keep")

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
        em.node("Compress", [ins[0], em.const(mask)], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, cond = inputs
        if "axis" not in attrs:
            x = x.reshape(-1)
        axis = _axis(attrs, x.dim())
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
    dtypes = (DType.float32, DType.float64, DType.float16, DType.int32, DType.int64)

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.valid = ins[0].dtype is not DType.float16 or sc.opset >= 14
        self.axis = _spell_axis(self.rng.randrange(rank), rank, self.rng)
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
        x = inputs[0]
        axis = int(inputs[1].reshape(-1)[0])
        axis = axis + x.dim() if axis < 0 else axis
        y = x.flip(axis) if attrs.get("reverse", 0) else x
        total = torch.cumsum(y, dim=axis, dtype=x.dtype)
        if attrs.get("exclusive", 0):
            first = torch.zeros_like(y.narrow(axis, 0, 1))
            total = torch.cat([first, total.narrow(axis, 0, y.shape[axis] - 1)], dim=axis)
        return [total.flip(axis) if attrs.get("reverse", 0) else total]


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
