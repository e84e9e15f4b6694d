"""Broadcasting elementwise ops: arithmetic, comparison, logic and bit ops, Mean and Mod
(unary ops: generator.ops.unary; Where, Clip and the casts: generator.ops.clip_cast).

Numerically unsafe ops (Div, Pow, Mod, ...) are here too: the value search, not the op
set, keeps their operands in the valid domain.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import reduce
from typing import ClassVar

import numpy as np
import torch

from generator.dtypes import EXACT_WIDE, FLOAT_TYPES, INTS, NUMERIC, ORDERED_WIDE, WIDE, WIDE_INTS, DType, classic
from generator.ops.base import OLDEST_WRITTEN, Attrs, Emitter, OpSpec, register
from generator.ops.matched import draw_matched
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType

Fn = Callable[[torch.Tensor, Attrs], torch.Tensor]


class BroadcastOp(OpSpec):
    """Inputs under ONNX multidirectional broadcasting.

    For every right-aligned dim a drawn subset of the inputs is 1 there and the rest
    agree, so every broadcasting pattern (either side, several sides) comes up.
    Three-input ops use inputs of one rank; two-input ops may differ in rank.
    """

    arity = 2
    out_dtype: ClassVar[DType | None] = None
    in_dtypes: ClassVar[dict[int, tuple[DType, ...]]] = {}
    """Per-slot dtypes where a slot differs from the op's main type (Where's condition)."""

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        aligned = min(t.rank for t in ins)
        n = len(ins)
        self.ones: list[frozenset[int]] = []
        for _ in range(aligned):
            if n == 1 or self.rng.random() < 0.6:
                self.ones.append(frozenset())
            else:
                k = self.rng.randint(1, n - 1)
                self.ones.append(frozenset(self.rng.sample(range(n), k)))

    @classmethod
    def slot_ok(cls, slot: int, t: TType) -> bool:
        return t.dtype in cls.in_dtypes.get(slot, cls.dtypes) and cls.min_rank <= t.rank <= cls.max_rank

    @classmethod
    def main_slots(cls, n: int) -> list[int]:
        return [i for i in range(n) if i not in cls.in_dtypes]

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        if not all(cls.slot_ok(i, t) for i, t in enumerate(ins)):
            return False
        if len({ins[i].dtype for i in cls.main_slots(len(ins))}) != 1:
            return False
        return len(ins) <= 2 or len({t.rank for t in ins}) == 1

    @classmethod
    def key_slot(cls, ins: Sequence[TType]) -> int:
        return cls.main_slots(len(ins))[0]

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        if cls.out_dtype is not None:
            if out.dtype != cls.out_dtype:
                return None
            main = rng.choice(classic(cls.dtypes))
        elif out.dtype in cls.dtypes:
            main = out.dtype
        else:
            return None
        n = cls.draw_arity(rng)
        slot_type = {i: rng.choice(classic(cls.in_dtypes[i])) for i in range(n) if i in cls.in_dtypes}
        types = [TType(slot_type.get(i, main), out.rank) for i in range(n)]
        if n == 2 and rng.random() < 0.5:
            short = rng.randrange(2)
            types[short] = TType(types[short].dtype, rng.randint(cls.min_rank, out.rank))
        return types

    def _aligned(self, ins: list[AbsTensor]) -> list[list[Dim]]:
        n = len(self.ones)
        return [t.shape[t.rank - n :] for t in ins]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        cons: list[Cond] = []
        tails = self._aligned(ins)
        for j, ones in enumerate(self.ones):
            full = [tails[i][j] for i in range(len(ins)) if i not in ones]
            cons += [tails[i][j] == 1 for i in ones]
            cons += [d == full[0] for d in full[1:]]
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        longest = max(ins, key=lambda t: t.rank)
        lead = list(longest.shape[: longest.rank - len(self.ones)])
        tails = self._aligned(ins)
        tail = [tails[min(set(range(len(ins))) - ones)][j] for j, ones in enumerate(self.ones)]
        return [AbsTensor(self.out_dtype or ins[self.main_slots(len(ins))[0]].dtype, lead + tail)]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        n = len(self.ones)
        lead, tail = out_shape[: len(out_shape) - n], out_shape[len(out_shape) - n :]
        shapes = []
        for i, t in enumerate(self.ins):
            own = [1 if i in ones else d for ones, d in zip(self.ones, tail, strict=True)]
            shapes.append((lead if t.rank > n else []) + own)
        return shapes

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node(self.op_type, ins, outs)


Binary = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

CONSTANT_SHARE = 0.15
"""The share of two-input insertions of a binary op drawn instead with a size-1 constant of
its own as one operand (Add(x, c), Mul(c, x)): x * 1 or x + 0 with c of more dims than x
changes the output's rank, which a fusion that folds c away drops."""


class BinaryOp(BroadcastOp):
    """A broadcasting op of two operands (or, `arities`, several). One graph input and an
    owned size-1 constant is a form of its own (CONSTANT_SHARE): the constant takes any rank
    from 0 to x's rank plus one, either operand slot, and the output x's shape under as
    many leading ones as the constant has extra dims."""

    fn: Binary

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.constant_rank: int | None = None
        """The rank of the owned size-1 operand (None: every operand is a graph tensor)."""
        self.constant_first = False
        self.constant_value: float | None = None
        """A value the owned operand is written with (a constant the value search leaves
        alone) rather than drawn: Pow's exponent of 2 (generator.ops.matched)."""
        if len(ins) == 1 and (not self.arities or self.rng.random() < 0.5):
            top = ins[0].rank if out is not None else ins[0].rank + 1
            self.constant_rank = self.rng.randint(0, min(top, self.max_rank))
            self.constant_first = self.rng.random() < 0.5
            matched = None if self.constant_first else draw_matched(self.op_type, self.rng)
            self.constant_value = next(iter(matched.values())) if matched else None

    @classmethod
    def draw_arity(cls, rng: random.Random) -> int:
        if cls.arities:
            return super().draw_arity(rng)
        return 1 if rng.random() < CONSTANT_SHARE else cls.arity

    @classmethod
    def takes(cls, count: int) -> bool:
        return super().takes(count) or (not cls.arities and count == 1)

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        out = super().transfer(ins)
        extra = (self.constant_rank or 0) - ins[0].rank
        if extra > 0:
            out[0].shape = [1] * extra + list(out[0].shape)
        return out

    def operands(self, em: Emitter, ins: list[str]) -> list[str]:
        """The node's inputs: the graph's, and the owned constant where the form has one (a
        weight, so that the value search may move it off an unsafe value)."""
        if self.constant_rank is None:
            return ins
        shape, dtype = [1] * self.constant_rank, self.inputs[0].dtype
        if self.constant_value is not None:
            constant = em.const(np.full(shape, self.constant_value, dtype.numpy))
        else:
            constant = em.weight(shape, dtype)
        return [constant, *ins] if self.constant_first else [*ins, constant]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node(self.op_type, self.operands(em, ins), outs)

    @classmethod
    def reference(cls, attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        if inputs[0].dtype == torch.float16:
            y = reduce(cls.fn, [x.float() for x in inputs])
            return [y.half() if y.is_floating_point() else y]
        return [reduce(cls.fn, inputs)]


def _binary(
    op_type: str,
    fn: Binary,
    dtypes: tuple[DType, ...] = NUMERIC,
    *,
    out_dtype: DType | None = None,
    since: int = OLDEST_WRITTEN,
    variadic: bool = False,
) -> type[OpSpec]:
    body: dict[str, object] = {
        "__module__": __name__,
        "op_type": op_type,
        "fn": staticmethod(fn),
        "dtypes": dtypes,
        "out_dtype": out_dtype,
        "since_opset": since,
    }
    if variadic:
        body["arities"] = (1, 2, 2, 3)
    return register(type(op_type, (BinaryOp,), body))


def _int_div(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.is_floating_point():
        return a / b
    return torch.div(a, b, rounding_mode="trunc")


def _mean(*xs: torch.Tensor) -> torch.Tensor:
    return reduce(torch.add, xs) / len(xs)


_binary("Add", torch.add, EXACT_WIDE)


_binary("Sub", torch.sub, EXACT_WIDE)


_binary("Mul", torch.mul, EXACT_WIDE)


_binary("Div", _int_div, ORDERED_WIDE)


_binary("Pow", torch.pow, FLOAT_TYPES)


_binary("Max", torch.maximum, ORDERED_WIDE, variadic=True)


_binary("Min", torch.minimum, ORDERED_WIDE, variadic=True)


_binary("Sum", torch.add, FLOAT_TYPES, variadic=True)


_binary("Equal", torch.eq, (*INTS, DType.float32, DType.float64, DType.bool, *WIDE), out_dtype=DType.bool)


_binary("Less", torch.lt, ORDERED_WIDE, out_dtype=DType.bool)


_binary("Greater", torch.gt, ORDERED_WIDE, out_dtype=DType.bool)


_binary("LessOrEqual", torch.le, NUMERIC, out_dtype=DType.bool, since=12)


_binary("GreaterOrEqual", torch.ge, NUMERIC, out_dtype=DType.bool, since=12)


_binary("And", torch.logical_and, (DType.bool,))


_binary("Or", torch.logical_or, (DType.bool,))


_binary("Xor", torch.logical_xor, (DType.bool,))


_binary("BitwiseAnd", torch.bitwise_and, (*INTS, *WIDE_INTS), since=18)


_binary("BitwiseOr", torch.bitwise_or, (*INTS, *WIDE_INTS), since=18)


_binary("BitwiseXor", torch.bitwise_xor, (*INTS, *WIDE_INTS), since=18)


@register
class Mean(BinaryOp):
    op_type = "Mean"
    dtypes = FLOAT_TYPES

    arities = (1, 2, 2, 3)

    @classmethod
    def reference(cls, attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        if inputs[0].dtype == torch.float16:
            return [_mean(*(x.float() for x in inputs)).half()]
        return [_mean(*inputs)]


@register
class Mod(BinaryOp):
    """Integer Mod takes the divisor's sign (fmod=0) or the dividend's (fmod=1); float Mod
    exists only as fmod=1."""

    op_type = "Mod"
    dtypes = NUMERIC

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.fmod = 1 if ins[0].dtype.is_float else self.rng.choice((0, 1))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Mod", self.operands(em, ins), outs, fmod=self.fmod)

    @classmethod
    def reference(cls, attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        a, b = inputs
        if attrs.get("fmod", 0):
            if a.is_floating_point():
                # C's fmod is exact; torch's vectorized float fmod is not (float32
                # fmod(3.4e38, 1e-45) gives NaN, not 0, and large ratios lose digits).
                with np.errstate(invalid="ignore"):
                    exact = torch.from_numpy(np.asarray(np.fmod(a.detach().numpy(), b.detach().numpy())))
                if not (a.requires_grad or b.requires_grad):
                    return [exact]
                # The value search differentiates through the reference: torch's fmod carries
                # the gradient, the exact value rides on it.
                approx = torch.fmod(a, b)
                return [approx + (exact - approx.detach())]
            return [torch.fmod(a, b)]
        return [torch.remainder(a, b)]
