"""Shape idioms of exported models (torch.onnx): a masked select, and views and expands whose
target shape is computed by Shape, Gather, Slice and Concat from the tensor's own dims mixed
with constants. A compiler folds the computed shape when every piece is static and must keep
it when a piece is a runtime input; a masked select's length is known only at run time,
unless its mask is a constant that constant folding evaluates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from generator.dtypes import ALL, DType
from generator.ops.base import Emitter, list_operand
from generator.ops.dynamic import sparse_mask
from generator.patterns.base import Writer
from generator.patterns.shape import INT64_MAX, ShapedPattern
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, numel


class MaskedSelect(ShapedPattern):
    """`x[mask]` as torch exports it, GatherND(x, Transpose(NonZero(mask))): the mask covers
    x's leading `depth` dims and holds a solved number of trues, so the result is that many
    rows of the remaining dims. The exact form's mask is a constant, which constant folding
    may evaluate (neither onnxruntime 1.31 nor TVM 0.27 folds NonZero yet); its near misses
    read the mask as a graph input, where the count is known only at run time."""

    template = "MaskedSelect"
    source = "torch.onnx export of x[mask] (aten::index with a bool mask); constant folding of NonZero"
    fires = ("-ai.onnx::NonZero",)
    uses = ("GatherND",)
    fixed_uses: ClassVar[dict[str, DType]] = {"NonZero": DType.bool, "Transpose": DType.int64}
    dtypes = ALL
    node_cost = 3
    near_misses: ClassVar[dict[str, str]] = {
        "runtime_mask": "the mask is a graph input: the count is known only at run time",
        "second_consumer": "the index list (of a runtime mask) is also an output",
    }

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.depth = self.rng.randint(1, ins[0].rank)
        self.keep = sc.var("selected")

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [self.keep >= 1, self.keep <= numel(ins[0].shape[: self.depth])]

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        return [self.keep, *ins[0].shape[self.depth :]], [self.keep, self.depth], DType.int64

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        dims = self.dims(em)[: self.depth]
        values = sparse_mask(em.values, dims, em.ival(self.keep), DType.bool)
        mask = em.const(values) if self.variant == "" else w.runtime(values)
        where = w.op("NonZero", [mask])
        indices = w.op("Transpose", [where], self.exposed(outs), perm=[1, 0])
        w.op("GatherND", [ins[0], indices], outs[0])


def shape_piece(w: Writer, dims: str, axis: int, rank: int) -> str:
    """One dim of a tensor of `rank` as a 1-element vector, as torch writes `x.size(axis)` into
    a shape: Gather of a scalar index (`x.size(-1)` from the end), then Unsqueeze."""
    index = np.array(w.index("Gather", axis, rank), dtype=np.int64)
    picked = w.op("Gather", [dims, w.em.const(index)], axis=0)
    axes, attrs = list_operand(w.em, "Unsqueeze", "axes", [0], constant=True)
    return w.op("Unsqueeze", [picked, *axes], **attrs)


class ViewReshape(ShapedPattern):
    """`x.view(x.size(0), -1, x.size(-1))` (or `x.view(x.size(0), -1)` for rank 2) as torch
    exports it: Shape, Gather and Unsqueeze per computed dim, a constant -1, Concat, Reshape.
    Each kept dim is computed or written as a constant, as a tracer leaves them."""

    template = "ViewReshape"
    source = "torch.onnx export of Tensor.view with sizes read off the tensor; onnxruntime ConstantFolding"
    fires = ("-ai.onnx::Shape",)
    uses = ("Shape", "Reshape")
    min_rank = 2
    node_cost = 6
    near_misses: ClassVar[dict[str, str]] = {
        "runtime_piece": "the -1 piece is a graph input, not a constant",
        "second_consumer": "the computed shape is also an output",
    }

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        kept = [0, ins[0].rank - 1] if ins[0].rank >= 3 else [0]
        self.computed = {a: self.rng.random() < 0.7 for a in kept}

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        s = ins[0].shape
        if len(s) >= 3:
            return [s[0], numel(s[1:-1]), s[-1]], [3], DType.int64
        return [s[0], s[1]], [2], DType.int64

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        dims = w.op("Shape", ins) if any(self.computed.values()) else ""  # no dim read: no Shape left dead
        static = self.dims(em)
        rank = self.inputs[0].rank
        pieces = {
            a: shape_piece(w, dims, a, rank) if c else em.const_i64([static[a]]) for a, c in self.computed.items()
        }
        rest = np.array([-1], dtype=np.int64)
        free = w.runtime(rest) if self.variant == "runtime_piece" else em.const(rest)
        order = [pieces[0], free, *([pieces[self.inputs[0].rank - 1]] if len(pieces) > 1 else [])]
        target = w.op("Concat", order, self.exposed(outs), axis=0)
        w.op("Reshape", [ins[0], target], outs[0])


class ExpandLeading(ShapedPattern):
    """`x.expand(n, *x.shape)` as torch exports it: Concat of a constant `n` and the tensor's
    shape (Slice of Shape, or its first dim computed apart and the Slice of the rest), Expand."""

    template = "ExpandLeading"
    source = "torch.onnx export of Tensor.expand with sizes read off the tensor; onnxruntime ConstantFolding"
    fires = ("-ai.onnx::Shape",)
    uses = ("Shape", "Expand")
    max_rank = 3
    node_cost = 4
    near_misses: ClassVar[dict[str, str]] = {
        "runtime_lead": "the new leading size is a graph input, not a constant",
        "second_consumer": "the computed shape is also an output",
    }

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.lead = sc.var("lead", lo=1, hi=4)
        self.split_first = self.rng.random() < 0.5

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [self.lead >= 1, self.lead <= 4]

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        return [self.lead, *ins[0].shape], [ins[0].rank + 1], DType.int64

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        dims = w.op("Shape", ins)
        lead = np.array([em.ival(self.lead)], dtype=np.int64)
        pieces = [w.runtime(lead) if self.variant == "runtime_lead" else em.const(lead)]
        start = 1 if self.split_first else 0
        if self.split_first:
            pieces.append(shape_piece(w, dims, 0, self.inputs[0].rank))
        if start < self.inputs[0].rank:
            bounds = [em.const_i64([start]), em.const_i64([INT64_MAX])]
            pieces.append(w.op("Slice", [dims, *bounds]))
        target = w.op("Concat", pieces, self.exposed(outs), axis=0)
        w.op("Expand", [ins[0], target], outs[0])


TEMPLATES = (MaskedSelect, ViewReshape, ExpandLeading)
