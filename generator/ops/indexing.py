"""Index-driven ops that gather and scatter: Gather, GatherElements, GatherND, ScatterElements,
ScatterND, and the helpers the index families share.

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
from generator.ops.base import Attrs, Emitter, OpSpec, axis_of, has_attribute, register
from generator.ops.families import negative_share
from generator.ops.shape import ANY, INDEX_TYPES, spell_axis_by_chance
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, numel

REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}
"""ONNX scatter reductions and their torch.scatter_reduce names."""


def _nonneg(idx: torch.Tensor, dims: torch.Tensor | int) -> torch.Tensor:
    """Indices made non-negative; one outside [-dim, dim - 1] is refused. ONNX gives it no
    result, and torch would wrap -9 into a dim of 8 and answer: a reduction once shrank a
    GatherND's data under its index so, and the reference judged TVM's answer wrong."""
    i = idx.long()
    if bool(((i < -dims) | (i >= dims)).any()):
        raise IndexError("an index is outside [-dim, dim - 1], where ONNX defines no result")
    return torch.where(i < 0, i + dims, i)


def _some_negative(em: Emitter, idx: np.ndarray, dims: np.ndarray | int, op_type: str) -> np.ndarray:
    """Write a share of the indices in their from-the-end form, where the op's spec defines it
    (generator.ops.families.NEGATIVE_INDEX)."""
    return np.where(em.values.random(idx.shape) < negative_share(op_type), idx - dims, idx)


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
        self.written_axis = spell_axis_by_chance(self.axis, rank, self.rng)
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
        axis = axis_of(attrs, "axis", 0, x.dim())
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
        self.written_axis = spell_axis_by_chance(self.axis, rank, self.rng)
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
        axis = axis_of(attrs, "axis", 0, x.dim())
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
        batched = has_attribute("GatherND", "batch_dims", sc.opset)  # from GatherND-12
        layouts = [
            lay
            for lay in _gathernd_layouts(ins[0].rank, out.rank if out else None, self.max_rank)
            if batched or not lay[0]
        ]
        self.layout = self.rng.choice(layouts) if layouts else None
        self.write_batch_dims = self.rng.random() < 0.3 and batched
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
        idx = _some_negative(em, idx, dims, self.op_type)
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
        self.written_axis = spell_axis_by_chance(self.axis, rank, self.rng)
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
        idx = _some_negative(em, idx, d, self.op_type).astype(self.index_type)
        attrs = _reduction_attrs(self.reduction, em.opset, self.write_none)
        em.node("ScatterElements", [ins[0], em.const(idx), ins[1]], outs, axis=self.written_axis, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, idx, upd = inputs
        axis = axis_of(attrs, "axis", 0, x.dim())
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
        idx = _some_negative(em, idx, np.asarray(dims), self.op_type).astype(np.int64)
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


@register
class TensorScatter(OpSpec):
    """A KV-cache write: `update` (an owned constant, the cache's shape but for a shorter
    sequence axis) overwrites each batch row's cache from its write index on. Linear mode keeps
    every write inside the cache, as the spec requires; circular mode wraps past its end."""

    op_type = "TensorScatter"
    since_opset = 24
    dtypes = ANY
    min_rank = 2

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        # Never the batch axis 0: a rank-2 cache must name axis 1, its default -2 being 0.
        self.axis = self.rng.choice((max(1, rank - 2), max(1, rank - 2), self.rng.randint(1, rank - 1)))
        self.written_axis = self.axis - rank if self.rng.random() < 0.5 else self.axis
        self.circular = self.rng.random() < 0.3
        self.indices = self.rng.random() < 0.7

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, list(ins[0].shape))]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        return [list(out_shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        shape = [em.ival(d) for d in self.inputs[0].shape]
        cache = shape[self.axis]
        seq = int(em.values.integers(1, cache + 1))
        operands = [ins[0], em.weight([*shape[: self.axis], seq, *shape[self.axis + 1 :]], self.inputs[0].dtype)]
        if self.indices:
            top = cache if self.circular else cache - seq + 1
            operands.append(em.const(em.values.integers(0, top, size=shape[0]).astype(np.int64)))
        attrs: dict[str, int | str] = {}
        if self.written_axis != -2:
            attrs["axis"] = self.written_axis
        if self.circular:
            attrs["mode"] = "circular"
        em.node(self.op_type, operands, outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        cache, update = inputs[0], inputs[1]
        indices = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
        axis = axis_of(attrs, "axis", -2, cache.dim())
        size, seq = cache.shape[axis], update.shape[axis]
        out = cache.clone()
        for b in range(cache.shape[0]):
            start = int(indices[b]) if indices is not None else 0
            rows = torch.arange(start, start + seq)
            if attrs.get("mode", "linear") == "circular":
                rows = rows % size
            out[b].index_copy_(axis - 1, rows, update[b])
        return [out]


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
