"""Reductions over a drawn subset of axes, with and without kept dimensions."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import torch

from generator.ops.base import Attrs, Emitter, OpSpec, register
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType

Reducer = Callable[[torch.Tensor, list[int], bool], torch.Tensor]


class ReduceOp(OpSpec):
    fn: Reducer
    axes_input_since: int = 18
    """First opset in which `axes` moved from an attribute to an input."""

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        if out is not None:
            self.keepdims = out.rank == rank
            count = self.rng.randint(1, rank) if self.keepdims else rank - out.rank
        else:
            self.keepdims = self.rng.random() < 0.5 or rank == 1
            count = self.rng.randint(1, rank if self.keepdims else rank - 1)
        self.axes = sorted(self.rng.sample(range(rank), count))

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        return [TType(out.dtype, rng.randint(out.rank, cls.max_rank))]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape: list[Dim] = []
        for i, d in enumerate(ins[0].shape):
            if i not in self.axes:
                shape.append(d)
            elif self.keepdims:
                shape.append(1)
        return [AbsTensor(ins[0].dtype, shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        if em.opset >= self.axes_input_since:
            em.node(self.op_type, [ins[0], em.const_i64(self.axes)], outs, keepdims=int(self.keepdims))
        else:
            em.node(self.op_type, ins, outs, axes=self.axes, keepdims=int(self.keepdims))

    @classmethod
    def reference(cls, attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        if len(inputs) > 1 and inputs[1] is not None:
            axes = [int(a) for a in inputs[1].tolist()]
        else:
            axes = list(attrs.get("axes", []))
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(x.dim()))
        axes = sorted(a + x.dim() if a < 0 else a for a in axes)
        return [cls.fn(x, axes, bool(attrs.get("keepdims", 1)))]


def _reduce(op_type: str, fn: Reducer, axes_input_since: int = 18) -> type[OpSpec]:
    body = {"op_type": op_type, "fn": staticmethod(fn), "axes_input_since": axes_input_since}
    return register(type(op_type, (ReduceOp,), body))


def _amax(x: torch.Tensor, axes: list[int], keep: bool) -> torch.Tensor:
    return torch.amax(x, dim=axes, keepdim=keep)


def _amin(x: torch.Tensor, axes: list[int], keep: bool) -> torch.Tensor:
    return torch.amin(x, dim=axes, keepdim=keep)


_reduce("ReduceSum", lambda x, axes, keep: torch.sum(x, dim=axes, keepdim=keep), axes_input_since=13)
_reduce("ReduceMean", lambda x, axes, keep: torch.mean(x, dim=axes, keepdim=keep))
_reduce("ReduceMax", _amax)
_reduce("ReduceMin", _amin)
_reduce("ReduceL1", lambda x, axes, keep: torch.sum(torch.abs(x), dim=axes, keepdim=keep))
_reduce("ReduceSumSquare", lambda x, axes, keep: torch.sum(x * x, dim=axes, keepdim=keep))
