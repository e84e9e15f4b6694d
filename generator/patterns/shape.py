"""Elimination and folding templates: round trips and no-ops a compiler removes, and
shape arithmetic (Shape, Gather, Concat) it folds into constants."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from generator.dtypes import ALL, FLOAT_TYPES, NUMERIC, DType
from generator.ops.base import OUTPUTS, Emitter, list_operand, op_version
from generator.ops.nn import Dropout
from generator.patterns.base import Pattern, SameShapePattern
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, floordiv, numel

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


class ShapedPattern(Pattern):
    """A template whose output shape its variant may change: `shapes` names the output's
    (and the exposed intermediate's) shape; backward insertion goes through the solver."""

    dtypes = ALL

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        return None

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        """The output's shape, the exposed intermediate's shape and its dtype."""
        raise NotImplementedError

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        out, middle, dtype = self.shapes(ins)
        return self.outputs(AbsTensor(ins[0].dtype, out), AbsTensor(dtype, middle))


class TransposePair(ShapedPattern):
    """A Transpose and its inverse."""

    template = "TransposePair"
    source = "onnxruntime TransposeOptimizer; TVM SimplifyExpr"
    fires = ("-ai.onnx::Transpose",)
    uses = ("Transpose",)
    min_rank = 2
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {
        "not_inverse": "the second Transpose repeats the first perm instead of inverting it",
        "second_consumer": "the transposed tensor is also an output",
    }

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.perm = list(range(rank))
        while self.perm == sorted(self.perm):
            self.rng.shuffle(self.perm)
        inverse = [self.perm.index(i) for i in range(rank)]
        self.second = list(self.perm) if self.variant == "not_inverse" else inverse

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        middle = [ins[0].shape[p] for p in self.perm]
        return [middle[p] for p in self.second], middle, ins[0].dtype

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        middle = w.op("Transpose", ins, self.exposed(outs), perm=self.perm)
        w.op("Transpose", [middle], outs[0], perm=self.second)


class ReshapeRoundTrip(ShapedPattern):
    """Reshape to one axis and back."""

    template = "ReshapeRoundTrip"
    source = "onnxruntime ReshapeFusion and constant folding; TVM FoldConstant"
    fires = ("-ai.onnx::Reshape",)
    uses = ("Reshape",)
    min_rank = 2
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {
        "runtime_shape": "the shape back is a graph input, not a constant",
        "second_consumer": "the flat tensor is also an output",
    }

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        return list(ins[0].shape), [numel(ins[0].shape)], ins[0].dtype

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        dims = np.array(self.dims(em), dtype=np.int64)
        flat = w.op("Reshape", [ins[0], em.const_i64([-1])], self.exposed(outs))
        back = w.runtime(dims) if self.variant == "runtime_shape" else em.const_i64(dims.tolist())
        w.op("Reshape", [flat, back], outs[0])


CAST_THROUGH = {
    DType.float32: (DType.float64, DType.float16, DType.int32),
    DType.float64: (DType.float64, DType.float32, DType.int64),
    DType.float16: (DType.float32, DType.float16, DType.int32),
    DType.int32: (DType.int64, DType.int8, DType.float16),
    DType.int64: (DType.int64, DType.int32, DType.float32),
}
"""Per input type: (a type that holds every value, a narrower one, one of the other kind).
A type listed as its own widening (float64, int64) has none: Cast to itself then back."""


class CastRoundTrip(SameShapePattern):
    """Cast to a type that holds every value, and back: a no-op to remove."""

    template = "CastRoundTrip"
    source = "onnxruntime CastElimination and RemoveDuplicateCastTransformer; TVM SimplifyExpr"
    fires = ("-ai.onnx::Cast",)
    uses = ("Cast",)
    dtypes = tuple(CAST_THROUGH)
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {
        "narrowing": "the middle type is narrower (float16, int8, int32): the round trip rounds",
        "other_kind": "the middle type is of the other kind (float to int truncates)",
        "second_consumer": "the cast tensor is also an output",
    }

    def middle(self) -> DType:
        choices = CAST_THROUGH[self.inputs[0].dtype]
        return {"narrowing": choices[1], "other_kind": choices[2]}.get(self.variant, choices[0])

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        middle = AbsTensor(CAST_THROUGH[ins[0].dtype][0], list(ins[0].shape))
        return self.outputs(AbsTensor(ins[0].dtype, list(ins[0].shape)), middle)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        middle = w.op("Cast", ins, self.exposed(outs), to=self.middle().onnx)
        w.op("Cast", [middle], outs[0], to=self.inputs[0].dtype.onnx)


class SqueezeRoundTrip(ShapedPattern):
    """Unsqueeze an axis and squeeze it again."""

    template = "SqueezeRoundTrip"
    source = "onnxruntime UnsqueezeElimination and SqueezeUnsqueeze folding; TVM SimplifyExpr"
    fires = ("-ai.onnx::Unsqueeze", "-ai.onnx::Squeeze")
    uses = ("Unsqueeze", "Squeeze")
    max_rank = 4
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {"second_consumer": "the unsqueezed tensor is also an output"}

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.axis = self.rng.randint(-ins[0].rank - 1, ins[0].rank)

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        shape = list(ins[0].shape)
        at = self.axis % (len(shape) + 1)
        return shape, [*shape[:at], 1, *shape[at:]], ins[0].dtype

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        axes, attrs = list_operand(em, "Unsqueeze", "axes", [self.axis], constant=True)
        grown = w.op("Unsqueeze", [ins[0], *axes], self.exposed(outs), **attrs)
        axes, attrs = list_operand(em, "Squeeze", "axes", [self.axis], constant=True)
        w.op("Squeeze", [grown, *axes], outs[0], **attrs)


class SliceWhole(SameShapePattern):
    """A Slice over a whole axis: a no-op."""

    template = "SliceWhole"
    source = "onnxruntime SliceElimination; TVM FoldConstant"
    fires = ("-ai.onnx::Slice",)
    uses = ("Slice",)
    dtypes = ALL
    node_cost = 1
    near_misses: ClassVar[dict[str, str]] = {
        "reverse": "step -1 over the whole axis: a reversal, not a no-op",
        "runtime_bounds": "the bounds are graph inputs, not constants",
    }

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.axis = self.rng.randrange(ins[0].rank)

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        starts, ends = ([-1], [INT64_MIN]) if self.variant == "reverse" else ([0], [INT64_MAX])
        bounds = [np.array(v, dtype=np.int64) for v in (starts, ends)]
        names = [w.runtime(b) for b in bounds] if self.variant == "runtime_bounds" else [em.const(b) for b in bounds]
        steps = [-1] if self.variant == "reverse" else [1]
        w.op("Slice", [ins[0], *names, em.const_i64([self.axis]), em.const_i64(steps)], outs[0])


class ExpandSame(ShapedPattern):
    """Expand to the input's own shape: a no-op."""

    template = "ExpandSame"
    source = "onnxruntime ExpandElimination; TVM FoldConstant"
    fires = ("-ai.onnx::Expand",)
    uses = ("Expand",)
    node_cost = 1
    near_misses: ClassVar[dict[str, str]] = {
        "grow": "the shape has a new leading axis of 2: a real broadcast",
        "runtime_shape": "the shape is a graph input, not a constant",
    }

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        shape = list(ins[0].shape)
        return ([2, *shape] if self.variant == "grow" else shape), shape, ins[0].dtype

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        shape = np.array(([2] if self.variant == "grow" else []) + self.dims(em), dtype=np.int64)
        name = w.runtime(shape) if self.variant == "runtime_shape" else em.const(shape)
        w.op("Expand", [ins[0], name], outs[0])


class DropoutChain(ShapedPattern):
    """Identity then an inference Dropout: both removable."""

    template = "DropoutChain"
    source = "onnxruntime EliminateIdentity and EliminateDropout; TVM frontend"
    fires = ("-ai.onnx::Dropout", "-ai.onnx::Identity")
    uses = ("Identity", "Dropout")
    dtypes = FLOAT_TYPES
    node_cost = 2
    near_misses: ClassVar[dict[str, str]] = {"second_consumer": "the Dropout's mask is also an output"}

    @classmethod
    def exists_at(cls, opset: int) -> bool:
        """The mask of an inference Dropout means something from Dropout-12 on (nothing is
        dropped); before, the spec leaves it open and the reference refuses it."""
        if cls.variant == "second_consumer" and super().exists_at(opset):
            return Dropout.refusal(op_version("Dropout", opset), {OUTPUTS: 2}) is None
        return super().exists_at(opset)

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        return list(ins[0].shape), list(ins[0].shape), DType.bool

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        same = w.op("Identity", ins)
        em.node("Dropout", [same], outs if self.second_output else outs[:1])


NEUTRAL = {"Add": 0.0, "Sub": 0.0, "Mul": 1.0, "Div": 1.0}


class NeutralArith(ShapedPattern):
    """x + 0, x - 0, x * 1 or x / 1 with a constant operand: removable."""

    template = "NeutralArith"
    source = "onnxruntime NoopElimination; TVM SimplifyExpr"
    fires = ("-ai.onnx::Add", "-ai.onnx::Sub", "-ai.onnx::Mul", "-ai.onnx::Div")
    uses = ("Add", "Sub", "Mul", "Div")
    dtypes = NUMERIC
    node_cost = 1
    lifts = True
    near_misses: ClassVar[dict[str, str]] = {
        "broadcast": "the neutral operand has a leading axis of 2: the op broadcasts",
        "runtime_operand": "the neutral operand is a graph input, not a constant",
    }

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.op = self.rng.choice(sorted(NEUTRAL))

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        shape = list(ins[0].shape)
        return ([2, *shape] if self.variant == "broadcast" else self.lifted(shape)), shape, ins[0].dtype

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        if self.variant == "broadcast":
            operand = em.const(np.full([2] + [1] * self.inputs[0].rank, NEUTRAL[self.op], dtype=w.dtype.numpy))
        else:
            operand = w.scalar(NEUTRAL[self.op], lift=True, runtime=self.variant == "runtime_operand")
        w.op(self.op, [ins[0], operand], outs[0])


class ShapeReshape(ShapedPattern):
    """Reshape to [x.shape[0], -1] with the shape computed by Shape, Gather and Concat:
    static shapes fold it to a constant."""

    template = "ShapeReshape"
    source = "onnxruntime ReshapeFusion and ConstantFolding; TVM FoldConstant"
    fires = ("-ai.onnx::Shape", "-ai.onnx::Gather", "-ai.onnx::Concat")
    uses = ("Shape", "Reshape")
    min_rank = 2
    node_cost = 5
    near_misses: ClassVar[dict[str, str]] = {
        "other_dim": "the kept dim is the second, not the first",
        "runtime_tail": "the -1 is a graph input, not a constant",
        "second_consumer": "the computed shape is also an output",
    }

    def kept(self) -> int:
        return 1 if self.variant == "other_dim" else 0

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        shape = ins[0].shape
        kept = shape[self.kept()]
        return [kept, floordiv(numel(shape), kept)], [2], DType.int64

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        dims = w.op("Shape", ins)
        kept = w.index("Gather", self.kept(), self.inputs[0].rank)
        picked = w.op("Gather", [dims, em.const(np.array([kept], dtype=np.int64))], axis=0)
        tail = np.array([-1], dtype=np.int64)
        rest = w.runtime(tail) if self.variant == "runtime_tail" else em.const(tail)
        target = w.op("Concat", [picked, rest], self.exposed(outs), axis=0)
        w.op("Reshape", [ins[0], target], outs[0])


class NotWhere(ShapedPattern):
    """Where(Not(c), a, b): the Not is dropped by swapping a and b."""

    template = "NotWhere"
    source = "onnxruntime NotWhereFusion"
    fires = ("-ai.onnx::Not",)
    uses = ("Greater", "Where:1")
    dtypes = NUMERIC
    node_cost = 3
    near_misses: ClassVar[dict[str, str]] = {"second_consumer": "the negated condition is also an output"}

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        return list(ins[0].shape), list(ins[0].shape), DType.bool

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        negated = w.op("Not", [w.op("Greater", [ins[0], w.scalar(0)])], self.exposed(outs))
        w.op("Where", [negated, ins[0], em.weight(self.dims(em)[-1:], w.dtype)], outs[0])


class GatherSplit(ShapedPattern):
    """Every index of a short axis gathered one by one and summed: the gathers become a Split."""

    template = "GatherSplit"
    source = "onnxruntime GatherSliceToSplitFusion"
    fires = ("+ai.onnx::Split",)
    uses = ("Gather", "Sum")
    dtypes = FLOAT_TYPES
    min_rank = 2
    node_cost = 4
    near_misses: ClassVar[dict[str, str]] = {"partial": "the last index is left out: no Split covers the gathers"}

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.axis = self.rng.randrange(ins[0].rank)
        self.length = self.rng.choice((2, 3))

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        ok = out.dtype in cls.dtypes and out.rank < 4
        return [TType(out.dtype, out.rank + 1)] if ok else None

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        return [[*out_shape[: self.axis], self.length, *out_shape[self.axis :]]]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        """A tensor in hand with a dim of 2 or 3 is split along it."""
        short = [i for i, d in enumerate(ins[0].shape) if isinstance(d, int) and d in (2, 3)]
        if short:
            self.axis = self.rng.choice(short)
            self.length = int(ins[0].shape[self.axis])
        return [ins[0].shape[self.axis] == self.length]

    def shapes(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[Dim], DType]:
        shape = [d for i, d in enumerate(ins[0].shape) if i != self.axis]
        return shape, shape, ins[0].dtype

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        w = self.writer(em, outs)
        count = self.length - 1 if self.variant == "partial" else self.length
        picks = [np.array(w.index("Gather", i, self.length), dtype=np.int64) for i in range(count)]
        parts = [w.op("Gather", [ins[0], em.const(i)], axis=self.axis) for i in picks]
        w.op("Sum", parts, outs[0])


TEMPLATES = (
    TransposePair,
    ReshapeRoundTrip,
    CastRoundTrip,
    SqueezeRoundTrip,
    SliceWhole,
    ExpandSame,
    DropoutChain,
    NeutralArith,
    ShapeReshape,
    NotWhere,
    GatherSplit,
)
