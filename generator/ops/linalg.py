"""Linear algebra beyond MatMul: Det.

A determinant is a sum of products that cancel: where it is small next to the product of its
rows' norms, the builds' different pivoting gives different results, none of them wrong. The
unsafe-op table keeps generated values away from there (`det_conditioning`).
"""

from __future__ import annotations

import random

import torch

from generator.dtypes import DType
from generator.ops.base import Attrs, Emitter, OpSpec, register
from generator.symbolic import AbsTensor, Cond, TType

MAX_ORDER = 4
"""The largest matrix: beyond it a float32 determinant's rounding outgrows the tolerances."""


@register
class Det(OpSpec):
    """Determinants of the trailing square matrices of a batch. A lone matrix's result is a
    scalar, which the generator never makes, so the input has at least one batch dim."""

    op_type = "Det"
    since_opset = 11
    dtypes = (DType.float32, DType.float64)
    min_rank = 3
    max_rank = 5

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype not in cls.dtypes or not cls.min_rank <= out.rank + 2 <= cls.max_rank:
            return None
        return [TType(out.dtype, out.rank + 2)]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        n = ins[0].shape[-1]
        return [ins[0].shape[-2] == n, n <= MAX_ORDER]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, list(ins[0].shape[:-2]))]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node(self.op_type, ins, outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        return [torch.linalg.det(x.double()).to(x.dtype)]
