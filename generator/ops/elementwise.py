"""Elementwise ops: unary math and activations, broadcasting arithmetic, comparison,
logic and bit ops, Where, Clip and the casts.

Float16 references compute in float32 and round once at the end, which is what a
single ONNX node means (and what onnxruntime's and numpy's float16 kernels do).
Numerically unsafe ops (Log, Sqrt, Pow, Div, the inverse trig functions, ...) are
here too: the value search, not the op set, keeps their operands in the valid domain.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import reduce
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from generator.dtypes import ALL, FLOAT_TYPES, INTS, NUMERIC, SIGNED, DType
from generator.ops.base import Attrs, Emitter, OpSpec, SameShapeOp, register
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType

Fn = Callable[[torch.Tensor, Attrs], torch.Tensor]
TORCH_DTYPE = {d: getattr(torch, d.value) for d in DType}


def upcast(fn: Fn) -> Fn:
    """Run `fn` in float32 for float16 inputs and round the result back once."""

    def run(x: torch.Tensor, a: Attrs) -> torch.Tensor:
        if x.dtype == torch.float16:
            return fn(x.float(), a).half()
        return fn(x, a)

    return run


class UnaryOp(OpSpec):
    """Shape-preserving one-input op; float attributes are drawn, not solved."""

    fn: Fn
    float_attrs: ClassVar[dict[str, tuple[float, float]]] = {}
    out_dtype: ClassVar[DType | None] = None
    """A fixed output type (IsNaN -> bool); None keeps the input's."""

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.attrs = {k: round(self.rng.uniform(lo, hi), 3) for k, (lo, hi) in self.float_attrs.items()}

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if cls.out_dtype is None:
            return super().backward_inputs(out, rng)
        if out.dtype != cls.out_dtype or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [TType(rng.choice(cls.dtypes), out.rank)]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(self.out_dtype or ins[0].dtype, list(ins[0].shape))]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        return [list(out_shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node(self.op_type, ins, outs, **self.attrs)

    @classmethod
    def reference(cls, attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [cls.fn(inputs[0], attrs)]


def _unary(
    op_type: str,
    fn: Fn,
    dtypes: tuple[DType, ...] = FLOAT_TYPES,
    float_attrs: dict[str, tuple[float, float]] | None = None,
    *,
    since: int = 13,
    out_dtype: DType | None = None,
) -> type[OpSpec]:
    body = {
        "__module__": __name__,
        "op_type": op_type,
        "fn": staticmethod(fn),
        "float_attrs": float_attrs or {},
        "dtypes": dtypes,
        "since_opset": since,
        "out_dtype": out_dtype,
    }
    return register(type(op_type, (UnaryOp,), body))


def _selu(x: torch.Tensor, a: Attrs) -> torch.Tensor:
    alpha, gamma = a.get("alpha", 1.67326319217681884765625), a.get("gamma", 1.05070102214813232421875)
    y: torch.Tensor = gamma * torch.where(x > 0, x, alpha * (torch.exp(x) - 1))
    return y


def _shrink(x: torch.Tensor, a: Attrs) -> torch.Tensor:
    lambd, bias = a.get("lambd", 0.5), a.get("bias", 0.0)
    if not x.is_floating_point():
        # Integer inputs are shifted by the float bias and truncated back, as kernels do.
        xf = x.double()
        y = torch.where(xf < -lambd, xf + bias, torch.where(xf > lambd, xf - bias, torch.zeros_like(xf)))
        return y.to(x.dtype)
    return torch.where(x < -lambd, x + bias, torch.where(x > lambd, x - bias, torch.zeros_like(x)))


def _gelu(x: torch.Tensor, a: Attrs) -> torch.Tensor:
    approximate = a.get("approximate", "none")
    return F.gelu(x, approximate="tanh" if approximate == "tanh" else "none")


# Math.
_unary("Abs", lambda x, a: torch.abs(x), NUMERIC)
_unary("Neg", lambda x, a: torch.neg(x), SIGNED)
_unary("Sign", upcast(lambda x, a: torch.sign(x)), NUMERIC)
_unary("Ceil", upcast(lambda x, a: torch.ceil(x)))
_unary("Floor", upcast(lambda x, a: torch.floor(x)))
_unary("Round", upcast(lambda x, a: torch.round(x)))
_unary("Exp", upcast(lambda x, a: torch.exp(x)))
_unary("Log", upcast(lambda x, a: torch.log(x)))
_unary("Sqrt", upcast(lambda x, a: torch.sqrt(x)))
_unary("Reciprocal", upcast(lambda x, a: torch.reciprocal(x)))
_unary("Erf", upcast(lambda x, a: torch.erf(x)))
_unary("Sin", upcast(lambda x, a: torch.sin(x)))
_unary("Cos", upcast(lambda x, a: torch.cos(x)))
_unary("Tan", upcast(lambda x, a: torch.tan(x)))
_unary("Asin", upcast(lambda x, a: torch.asin(x)))
_unary("Acos", upcast(lambda x, a: torch.acos(x)))
_unary("Atan", upcast(lambda x, a: torch.atan(x)))
_unary("Sinh", upcast(lambda x, a: torch.sinh(x)))
_unary("Cosh", upcast(lambda x, a: torch.cosh(x)))
_unary("Asinh", upcast(lambda x, a: torch.asinh(x)))
_unary("Acosh", upcast(lambda x, a: torch.acosh(x)))
_unary("Atanh", upcast(lambda x, a: torch.atanh(x)))
_unary("IsNaN", lambda x, a: torch.isnan(x), (DType.float32, DType.float64), out_dtype=DType.bool)
_unary("IsInf", lambda x, a: torch.isinf(x), (DType.float32, DType.float64), out_dtype=DType.bool)
_unary("Not", lambda x, a: torch.logical_not(x), (DType.bool,))
_unary("BitwiseNot", lambda x, a: torch.bitwise_not(x), INTS, since=18)

# Activations (Softmax, LogSoftmax and Hardmax are axis ops in nn.py).
_unary("Relu", lambda x, a: torch.relu(x), (*FLOAT_TYPES, DType.int8, DType.int32, DType.int64), since=14)
_unary("Sigmoid", upcast(lambda x, a: torch.sigmoid(x)))
_unary("Tanh", upcast(lambda x, a: torch.tanh(x)))
_unary("Softplus", upcast(lambda x, a: F.softplus(x)))
_unary("Softsign", upcast(lambda x, a: x / (1 + torch.abs(x))))
_unary("LeakyRelu", upcast(lambda x, a: F.leaky_relu(x, a.get("alpha", 0.01))), float_attrs={"alpha": (0.01, 0.5)})
_unary("Elu", upcast(lambda x, a: F.elu(x, a.get("alpha", 1.0))), float_attrs={"alpha": (0.1, 2.0)})
_unary("Selu", upcast(_selu), float_attrs={"alpha": (0.5, 2.0), "gamma": (0.5, 1.5)})
_unary("Celu", lambda x, a: F.celu(x, a.get("alpha", 1.0)), (DType.float32,), {"alpha": (0.2, 2.0)})
_unary(
    "HardSigmoid",
    upcast(lambda x, a: torch.clamp(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0.0, 1.0)),
    float_attrs={"alpha": (0.05, 0.5), "beta": (0.2, 0.8)},
)
_unary("HardSwish", upcast(lambda x, a: x * torch.clamp(x / 6 + 0.5, 0.0, 1.0)), since=14)
_unary(
    "ThresholdedRelu",
    upcast(lambda x, a: torch.where(x > a.get("alpha", 1.0), x, torch.zeros_like(x))),
    float_attrs={"alpha": (-0.5, 1.0)},
)
_unary("Mish", upcast(lambda x, a: x * torch.tanh(F.softplus(x))), since=18)
_unary("Shrink", _shrink, NUMERIC, {"lambd": (0.0, 1.0), "bias": (0.0, 1.0)})


class Gelu(UnaryOp):
    op_type = "Gelu"
    dtypes = FLOAT_TYPES
    since_opset = 20
    fn = staticmethod(upcast(_gelu))

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.approximate = self.rng.choice(("none", "tanh"))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Gelu", ins, outs, approximate=self.approximate)


register(Gelu)


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
            main = rng.choice(cls.dtypes)
        elif out.dtype in cls.dtypes:
            main = out.dtype
        else:
            return None
        n = cls.draw_arity(rng)
        types = [TType(rng.choice(cls.in_dtypes[i]) if i in cls.in_dtypes else main, out.rank) for i in range(n)]
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


class BinaryOp(BroadcastOp):
    fn: Binary

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
    since: int = 13,
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
        body["draw_arity"] = classmethod(lambda cls, rng: rng.choice((1, 2, 2, 3)))
    return register(type(op_type, (BinaryOp,), body))


def _int_div(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.is_floating_point():
        return a / b
    return torch.div(a, b, rounding_mode="trunc")


def _mean(*xs: torch.Tensor) -> torch.Tensor:
    return reduce(torch.add, xs) / len(xs)


_binary("Add", torch.add)
_binary("Sub", torch.sub)
_binary("Mul", torch.mul)
_binary("Div", _int_div)
_binary("Pow", torch.pow, FLOAT_TYPES)
_binary("Max", torch.maximum, variadic=True)
_binary("Min", torch.minimum, variadic=True)
_binary("Sum", torch.add, FLOAT_TYPES, variadic=True)
_binary("Equal", torch.eq, (*INTS, DType.float32, DType.float64, DType.bool), out_dtype=DType.bool)
_binary("Less", torch.lt, NUMERIC, out_dtype=DType.bool)
_binary("Greater", torch.gt, NUMERIC, out_dtype=DType.bool)
_binary("LessOrEqual", torch.le, NUMERIC, out_dtype=DType.bool)
_binary("GreaterOrEqual", torch.ge, NUMERIC, out_dtype=DType.bool)
_binary("And", torch.logical_and, (DType.bool,))
_binary("Or", torch.logical_or, (DType.bool,))
_binary("Xor", torch.logical_xor, (DType.bool,))
_binary("BitwiseAnd", torch.bitwise_and, INTS, since=18)
_binary("BitwiseOr", torch.bitwise_or, INTS, since=18)
_binary("BitwiseXor", torch.bitwise_xor, INTS, since=18)


@register
class Mean(BinaryOp):
    op_type = "Mean"
    dtypes = FLOAT_TYPES

    @classmethod
    def draw_arity(cls, rng: random.Random) -> int:
        return rng.choice((1, 2, 2, 3))

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
        em.node("Mod", ins, outs, fmod=self.fmod)

    @classmethod
    def reference(cls, attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        a, b = inputs
        if attrs.get("fmod", 0):
            if a.dtype == torch.float16:
                return [torch.fmod(a.float(), b.float()).half()]
            return [torch.fmod(a, b)]
        return [torch.remainder(a, b)]


@register
class Where(BroadcastOp):
    op_type = "Where"
    arity = 3
    dtypes = ALL
    in_dtypes = {0: (DType.bool,)}

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [torch.where(inputs[0], inputs[1], inputs[2])]


@register
class PRelu(BroadcastOp):
    """Slope broadcasts to X in one direction only: X keeps its shape."""

    op_type = "PRelu"
    dtypes = (*FLOAT_TYPES, DType.int32, DType.int64)
    since_opset = 16

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.ones = [ones - {0} for ones in self.ones]

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        return super().accepts(ins) and ins[1].rank <= ins[0].rank

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype not in cls.dtypes or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [out, TType(out.dtype, rng.randint(1, out.rank))]

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, slope = inputs
        return [torch.where(x < 0, x * slope, x)]


@register
class BitShift(SameShapeOp):
    """The shift amounts are an op-owned constant below the bit width: a shift by the
    width or more is undefined in C and differs between kernels."""

    op_type = "BitShift"
    dtypes = (DType.uint8,)

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.direction = self.rng.choice(("LEFT", "RIGHT"))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        shape = [em.ival(d) for d in x.shape]
        shape = [1 if em.values.random() < 0.5 else d for d in shape]
        amounts = em.values.integers(0, 8, size=shape).astype(np.uint8)
        em.node("BitShift", [ins[0], em.const(amounts)], outs, direction=self.direction)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, n = inputs[0].to(torch.int32), inputs[1].to(torch.int32)
        y = x << n if attrs.get("direction") == "LEFT" else x >> n
        return [(y & 0xFF).to(torch.uint8)]


@register
class Clip(SameShapeOp):
    """min and max are optional op-owned scalar inputs, min <= max."""

    op_type = "Clip"
    dtypes = NUMERIC

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.form = self.rng.choice(("both", "both", "min", "max", "none"))
        # Drawn with the op's other choices, from the structure's generator.
        low = 0 if self.ins[0].dtype is DType.uint8 else -4
        self.bounds = sorted(self.rng.randint(low, 4) for _ in range(2))

    def value_bounds(self) -> tuple[float, float]:
        """min and max as the emitted constants hold them."""
        lo, hi = self.bounds
        return (lo / 4, hi / 4) if self.ins[0].dtype.is_float else (float(lo), float(hi))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        dtype = self.inputs[0].dtype
        lo_v, hi_v = (np.array(v, dtype.numpy) for v in self.value_bounds())
        # Only the bounds this form passes become initializers: an unused one is noise in
        # every repro and a model a strict checker may refuse.
        if self.form == "both":
            operands = [ins[0], em.const(lo_v), em.const(hi_v)]
        elif self.form == "min":
            operands = [ins[0], em.const(lo_v)]
        elif self.form == "max":
            operands = [ins[0], "", em.const(hi_v)]
        else:
            operands = [ins[0]]
        em.node("Clip", operands, outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        lo = inputs[1] if len(inputs) > 1 and inputs[1] is not None else None
        hi = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
        if lo is not None:
            x = torch.maximum(x, lo.to(x.dtype))
        if hi is not None:
            x = torch.minimum(x, hi.to(x.dtype))
        return [x]


class CastOp(SameShapeOp):
    """Any of fuzzbot's types to any other; the target is drawn (or is the backward target)."""

    dtypes = ALL

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.to = out.dtype if out is not None else self.rng.choice([d for d in ALL if d != ins[0].dtype])

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [TType(rng.choice([d for d in ALL if d != out.dtype]), out.rank)]

    def result_dtype(self, ins: list[AbsTensor]) -> DType:
        return self.to


def _cast(x: torch.Tensor, to: torch.dtype) -> torch.Tensor:
    if to == torch.bool:
        return x != 0
    if x.is_floating_point() and not to.is_floating_point:
        # Float to int truncates toward zero; the value search keeps it in range.
        x = torch.trunc(x)
    return x.to(to)


@register
class Cast(CastOp):
    op_type = "Cast"

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Cast", ins, outs, to=self.to.onnx)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        to = DType.from_onnx(int(attrs["to"]))
        return [_cast(inputs[0], TORCH_DTYPE[to])]


@register
class CastLike(CastOp):
    op_type = "CastLike"
    since_opset = 15

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("CastLike", [ins[0], em.const(np.zeros([1], self.to.numpy))], outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [_cast(inputs[0], inputs[1].dtype)]
