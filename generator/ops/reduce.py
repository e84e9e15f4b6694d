"""Reductions (Reduce*, ArgMax/ArgMin, TopK) over drawn axes, with and without kept dims.

Integer reductions follow the backends' integer arithmetic: sums and products accumulate in
int64 and wrap on the cast back, means truncate toward zero, and float-valued reductions of
integers (L2, LogSum, LogSumExp) truncate their float result.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch

from generator.dtypes import FLOATS_32_FIRST, ORDERED, WIDE_NUMERIC, DType, classic
from generator.ops.base import (
    Attrs,
    Emitter,
    OpSpec,
    Reference,
    axis_of,
    has_attribute,
    list_operand,
    register,
    takes_input,
)
from generator.ops.families import EMPTY_AXES
from generator.ops.nn import exact, widen
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, numel

Reducer = Callable[[torch.Tensor, list[int], bool], torch.Tensor]


def _sum_like(x: torch.Tensor) -> torch.Tensor:
    """The type a sum of `x` accumulates in: int64 for integers, float32 for float16."""
    return widen(x) if x.dtype.is_floating_point else x.long()


def _float_of(x: torch.Tensor) -> torch.Tensor:
    """The type float math on `x` runs in: float64 for integers, float32 for float16."""
    return widen(x) if x.dtype.is_floating_point else exact(x)


class ReduceOp(OpSpec):
    fn: ClassVar[Reducer]
    dtypes = WIDE_NUMERIC
    max_rank = 5
    bool_since: ClassVar[int] = 99
    """First opset whose schema takes bool (ReduceMax/ReduceMin from 20)."""
    old_attrs = frozenset({"axes"})
    max_reduced: ClassVar[dict[DType, int]] = {}
    """Per dtype, the most elements one output may reduce: keeps integer products of the
    generator's small values (|v| <= 8) inside the type, where overflow is undefined, and
    float products of values around 1 away from underflow and overflow (a product of 150
    factors is 0 or Inf for almost every input, which no value search can repair)."""

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.noop = self.omit_axes = False
        if out is not None:
            self.keepdims = out.rank == rank
            count = self.rng.randint(1, rank) if self.keepdims else rank - out.rank
        else:
            mode = self.rng.random()
            # noop_with_empty_axes needs the axes-as-input form; reducing everything without
            # kept dims would make a rank-0 tensor, which the generator never does.
            self.noop = mode < 0.08 and takes_input(self.op_type, "axes", sc.opset)
            self.omit_axes = 0.08 <= mode < 0.2
            self.keepdims = self.noop or self.omit_axes or self.rng.random() < 0.5 or rank == 1
            count = rank if self.omit_axes else self.rng.randint(1, rank if self.keepdims else rank - 1)
        self.axes = [] if self.noop else sorted(self.rng.sample(range(rank), count))
        self.negative = self.rng.random() < 0.3
        # An empty axes list, spelled as an empty input rather than none (EMPTY_AXES: the spec
        # makes the two one), where the opset takes axes as an input.
        empty = (
            (self.noop or self.omit_axes) and takes_input(self.op_type, "axes", sc.opset) and self.op_type in EMPTY_AXES
        )
        self.empty_input = empty and self.rng.random() < 0.5
        self.keep_attr = not self.keepdims or self.rng.random() < 0.5

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        return [TType(out.dtype, rng.randint(out.rank, cls.max_rank))]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        cons: list[Cond] = [ins[0].dtype is not DType.bool or self.sc.opset >= self.bool_since]
        cap = self.max_reduced.get(ins[0].dtype)
        if cap is not None:
            cons.append(numel([ins[0].shape[a] for a in self.axes]) <= cap)
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape: list[Dim] = []
        for i, d in enumerate(ins[0].shape):
            if i not in self.axes:
                shape.append(d)
            elif self.keepdims:
                shape.append(1)
        return [AbsTensor(ins[0].dtype, shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        rank = self.inputs[0].rank
        attrs: dict[str, Any] = {"keepdims": int(self.keepdims)} if self.keep_attr else {}
        axes = [a - rank for a in self.axes] if self.negative else self.axes
        written = [ins[0], em.shape_operand([])] if self.empty_input else ins
        if self.noop:
            em.node(self.op_type, written, outs, noop_with_empty_axes=1, **attrs)
        elif self.omit_axes:
            em.node(self.op_type, written, outs, **attrs)
        else:
            operand, spelled = list_operand(em, self.op_type, "axes", axes)
            em.node(self.op_type, [ins[0], *operand], outs, **spelled, **attrs)

    @classmethod
    def reference(cls, attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return cls.reduce_with(cls.fn, attrs, inputs)

    @staticmethod
    def reduce_with(fn: Reducer, attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """The op's axes, keepdims and noop semantics around another reducer: the float16
        envelope's step-by-step accumulation (oracles.accumulation) reads them from here."""
        x = inputs[0]
        if len(inputs) > 1 and inputs[1] is not None:
            axes = [int(a) for a in inputs[1].tolist()]
        else:
            axes = list(attrs.get("axes", []))
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                # Reducing over no axes still applies the op's elementwise steps (ReduceL1 gives
                # |x|, ReduceLogSum log(x)); reducing a new axis of one element is exactly that.
                return [fn(x.unsqueeze(0), [0], False).to(x.dtype)]
            axes = list(range(x.dim()))
        axes = sorted(a + x.dim() if a < 0 else a for a in axes)
        return [fn(x, axes, bool(attrs.get("keepdims", 1))).to(x.dtype)]


def _reduce(op_type: str, fn: Reducer, **body: Any) -> type[OpSpec]:
    attrs = {"op_type": op_type, "fn": staticmethod(fn), "__module__": __name__, **body}
    return register(type(op_type, (ReduceOp,), attrs))


def _mean(x: torch.Tensor, axes: list[int], keep: bool) -> torch.Tensor:
    if x.dtype.is_floating_point:
        return widen(x).mean(dim=axes, keepdim=keep)
    count = 1
    for a in axes:
        count *= x.shape[a]
    return torch.div(x.long().sum(dim=axes, keepdim=keep), count, rounding_mode="trunc")


def _extreme(fn: Callable[..., torch.Tensor]) -> Reducer:
    def run(x: torch.Tensor, axes: list[int], keep: bool) -> torch.Tensor:
        # torch has no amax/amin kernel for bool; as 0/1 bytes max is `or` and min is `and`.
        return fn(x.to(torch.uint8) if x.dtype == torch.bool else x, dim=axes, keepdim=keep)

    return run


def _log_sum(x: torch.Tensor, axes: list[int], keep: bool) -> torch.Tensor:
    return torch.log(widen(x).sum(dim=axes, keepdim=keep))


def _log_sum_exp(x: torch.Tensor, axes: list[int], keep: bool) -> torch.Tensor:
    return torch.logsumexp(widen(x), dim=axes, keepdim=keep)


def _l2(x: torch.Tensor, axes: list[int], keep: bool) -> torch.Tensor:
    """Squares summed as sums are; the root taken in float and, for integers, truncated back.
    Integers square in float64: the norm of int64 values past 3e9 fits its type though
    their squares do not (sqrt(x**2) is |x|), so an int64 square would wrap to garbage."""
    if not x.dtype.is_floating_point:
        return torch.sqrt((exact(x) ** 2).sum(dim=axes, keepdim=keep))
    acc = _sum_like(x)
    return torch.sqrt(_float_of((acc * acc).sum(dim=axes, keepdim=keep)))


def _prod(x: torch.Tensor, axes: list[int], keep: bool) -> torch.Tensor:
    """torch.prod takes one dim at a time; the highest goes first so the others keep their index."""
    for a in sorted(axes, reverse=True):
        x = x.prod(dim=a, keepdim=keep)
    return x


_reduce("ReduceSum", lambda x, axes, keep: _sum_like(x).sum(dim=axes, keepdim=keep))
_reduce("ReduceMean", _mean)
_reduce("ReduceMax", _extreme(torch.amax), dtypes=(*ORDERED, DType.bool), bool_since=20)
_reduce("ReduceMin", _extreme(torch.amin), dtypes=(*ORDERED, DType.bool), bool_since=20)
_reduce("ReduceL1", lambda x, axes, keep: _sum_like(x).abs().sum(dim=axes, keepdim=keep))
_reduce("ReduceL2", _l2)
_reduce("ReduceSumSquare", lambda x, axes, keep: (_sum_like(x) ** 2).sum(dim=axes, keepdim=keep))
_reduce(
    "ReduceProd",
    lambda x, axes, keep: _prod(_sum_like(x), axes, keep),
    max_reduced={DType.int32: 10, DType.int64: 20, DType.float16: 8, DType.float32: 16, DType.float64: 32},
)
# Integer inputs are left out: Log is not defined on them (ONNX dropped them from the schema in
# opset 28), the ONNX reference evaluator refuses them, and onnxruntime's integer LogSumExp
# truncates every intermediate, which no float formula reproduces.
_reduce("ReduceLogSum", _log_sum, dtypes=FLOATS_32_FIRST)
_reduce("ReduceLogSumExp", _log_sum_exp, dtypes=FLOATS_32_FIRST)


class ArgOp(OpSpec):
    """ArgMax/ArgMin: int64 indices of the first extreme along an axis, or the last one with
    select_last_index (from opset 12: ArgMax-11 has no such attribute)."""

    dtypes = ORDERED
    max_rank = 5
    pick: ClassVar[Callable[..., torch.Tensor]]

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axis = self.rng.randint(-rank, rank - 1)
        self.keepdims = out.rank == rank if out is not None else rank == 1 or self.rng.random() < 0.5
        self.last = self.rng.random() < 0.3 and has_attribute(self.op_type, "select_last_index", sc.opset)
        self.explicit = self.rng.random() < 0.5

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype is not DType.int64 or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [TType(rng.choice(classic(cls.dtypes)), min(cls.max_rank, out.rank + rng.randint(0, 1)))]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = list(ins[0].shape)
        axis = self.axis % len(shape)
        if self.keepdims:
            shape[axis] = 1
        else:
            del shape[axis]
        return [AbsTensor(DType.int64, shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        attrs: dict[str, Any] = {}
        if self.axis != 0 or self.explicit:
            attrs["axis"] = self.axis
        if not self.keepdims or self.explicit:
            attrs["keepdims"] = int(self.keepdims)
        if (self.last or self.explicit) and has_attribute(self.op_type, "select_last_index", em.opset):
            attrs["select_last_index"] = int(self.last)
        em.node(self.op_type, ins, outs, **attrs)

    @classmethod
    def reference(cls, attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = widen(inputs[0])
        axis = axis_of(attrs, "axis", 0, x.dim())
        keep = bool(attrs.get("keepdims", 1))
        # torch picks the first of tied extremes; the last one is the first of the flipped tensor.
        if attrs.get("select_last_index", 0):
            return [x.shape[axis] - 1 - cls.pick(x.flip(axis), dim=axis, keepdim=keep)]
        return [cls.pick(x, dim=axis, keepdim=keep)]


@register
class ArgMax(ArgOp):
    op_type = "ArgMax"
    pick = staticmethod(torch.argmax)


@register
class ArgMin(ArgOp):
    op_type = "ArgMin"
    pick = staticmethod(torch.argmin)


@register
class TopK(OpSpec):
    """The k largest (or smallest) along an axis, values and int64 indices; k is a constant input.
    Ties go to the lower index. sorted=0 leaves the order open, so it is only emitted for k = 1,
    where there is no order to disagree on."""

    op_type = "TopK"
    dtypes = ORDERED
    max_rank = 5

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axis = self.rng.randint(-rank, rank - 1)
        self.k = sc.var("topk_k", lo=1)
        self.largest = self.rng.random() < 0.6
        self.unsorted = self.rng.random() < 0.15
        self.explicit = self.rng.random() < 0.5

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        return None  # two outputs: never a placeholder's single producer

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        cons: list[Cond] = [self.k >= 1, self.k <= ins[0].shape[self.axis]]
        return [*cons, self.k == 1] if self.unsorted else cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = list(ins[0].shape)
        shape[self.axis] = self.k
        return [AbsTensor(ins[0].dtype, shape), AbsTensor(DType.int64, list(shape))]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        attrs: dict[str, Any] = {}
        if self.axis != -1 or self.explicit:
            attrs["axis"] = self.axis
        if not self.largest or self.explicit:
            attrs["largest"] = int(self.largest)
        if self.unsorted or self.explicit:
            attrs["sorted"] = int(not self.unsorted)
        em.node("TopK", [ins[0], em.shape_operand([em.ival(self.k)])], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, k = inputs[0], int(inputs[1].reshape(-1)[0])
        axis = axis_of(attrs, "axis", -1, x.dim())
        # A stable sort keeps tied elements in index order, in either direction.
        order = torch.sort(widen(x), dim=axis, descending=bool(attrs.get("largest", 1)), stable=True).indices
        indices = order.narrow(axis, 0, k)
        return [torch.gather(x, axis, indices), indices]

    old_attrs = frozenset({"k"})

    @classmethod
    def reference_at(cls, version: int) -> Reference:
        """TopK-1 spells k as an attribute, and has no largest or sorted (both 1)."""
        return cls.reference if version >= 10 else _topk_1


def _topk_1(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return TopK.reference(attrs, [inputs[0], torch.tensor([int(attrs["k"])])])
