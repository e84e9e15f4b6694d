"""Elementwise ops: unary activations and math, binary ops with numpy broadcasting.

Only numerically safe ops live here until value search exists: every op below is
finite for every finite input, so random values cannot produce NaN/Inf noise.
Sin and Cos are left out for now: they are finite, but ill-conditioned on the large
activations deep graphs reach, so float32 rounding alone would look like a bug.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import reduce

import torch
import torch.nn.functional as F

from generator.ops.base import Attrs, Emitter, OpSpec, full_and_lower_rank, register
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType

Unary = Callable[[torch.Tensor, Attrs], torch.Tensor]


class UnaryOp(OpSpec):
    """Shape-preserving one-input op; float attributes are drawn, not solved."""

    fn: Unary
    float_attrs: dict[str, tuple[float, float]] = {}

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.attrs = {k: round(self.rng.uniform(lo, hi), 3) for k, (lo, hi) in self.float_attrs.items()}

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, list(ins[0].shape))]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node(self.op_type, ins, outs, **self.attrs)

    @classmethod
    def reference(cls, attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [cls.fn(inputs[0], attrs)]


def _unary(op_type: str, fn: Unary, float_attrs: dict[str, tuple[float, float]] | None = None) -> type[OpSpec]:
    cls = type(op_type, (UnaryOp,), {"op_type": op_type, "fn": staticmethod(fn), "float_attrs": float_attrs or {}})
    return register(cls)


_unary("Relu", lambda x, a: torch.relu(x))
_unary("Sigmoid", lambda x, a: torch.sigmoid(x))
_unary("Tanh", lambda x, a: torch.tanh(x))
_unary("Abs", lambda x, a: torch.abs(x))
_unary("Neg", lambda x, a: torch.neg(x))
_unary("Erf", lambda x, a: torch.erf(x))
_unary("Softplus", lambda x, a: F.softplus(x))
_unary("LeakyRelu", lambda x, a: F.leaky_relu(x, a.get("alpha", 0.01)), {"alpha": (0.01, 0.5)})
_unary("Elu", lambda x, a: F.elu(x, a.get("alpha", 1.0)), {"alpha": (0.1, 2.0)})
_unary(
    "HardSigmoid",
    lambda x, a: torch.clamp(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0.0, 1.0),
    {"alpha": (0.05, 0.5), "beta": (0.2, 0.8)},
)

Binary = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class BinaryOp(OpSpec):
    """Two inputs under numpy broadcasting; which side broadcasts is a drawn choice per dim."""

    arity = 2
    fn: Binary

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        aligned = min(t.rank for t in ins)
        self.modes = [self.rng.choice(("eq", "eq", "lhs1", "rhs1")) for _ in range(aligned)]

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        return full_and_lower_rank(out, cls.min_rank, rng)

    def _aligned(self, ins: list[AbsTensor]) -> list[tuple[str, Dim, Dim]]:
        a, b = ins[0].shape, ins[1].shape
        n = len(self.modes)
        return list(zip(self.modes, a[len(a) - n :], b[len(b) - n :], strict=False))

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        rules: dict[str, Callable[[Dim, Dim], Cond]] = {
            "eq": lambda x, y: x == y,
            "lhs1": lambda x, y: x == 1,
            "rhs1": lambda x, y: y == 1,
        }
        return [rules[m](x, y) for m, x, y in self._aligned(ins)]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        longer = max(ins, key=lambda t: t.rank).shape
        lead = list(longer[: len(longer) - len(self.modes)])
        tail = [y if m == "lhs1" else x for m, x, y in self._aligned(ins)]
        return [AbsTensor(ins[0].dtype, lead + tail)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node(self.op_type, ins, outs)

    @classmethod
    def reference(cls, attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [reduce(cls.fn, inputs)]


def _binary(op_type: str, fn: Binary) -> type[OpSpec]:
    cls = type(op_type, (BinaryOp,), {"op_type": op_type, "fn": staticmethod(fn)})
    return register(cls)


_binary("Add", torch.add)
_binary("Sub", torch.sub)
_binary("Mul", torch.mul)
_binary("Max", torch.maximum)
_binary("Min", torch.minimum)
