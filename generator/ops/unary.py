"""Unary elementwise ops: math, trigonometry and activations, each registered from one line
that names its torch function and the element types it takes.

Float16 references compute in float32 and round once at the end (`upcast`), which is what a
single ONNX node means (and what onnxruntime's and numpy's float16 kernels do).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import ClassVar

import torch
import torch.nn.functional as F

from generator.dtypes import FLOAT_TYPES, INTS, NUMERIC, ORDERED_WIDE, SIGNED, WIDE_INTS, DType, classic
from generator.ops.base import OLDEST_WRITTEN, Attrs, Emitter, OpSpec, register
from generator.ops.elementwise import Fn
from generator.ops.matched import draw_matched
from generator.symbolic import AbsTensor, Cond, SymCtx, TType

TORCH_DTYPE = {d: getattr(torch, d.value) for d in DType}


def upcast(fn: Fn) -> Fn:
    """Run `fn` in float32 for float16 inputs and round the result back once."""

    def run(x: torch.Tensor, a: Attrs) -> torch.Tensor:
        if x.dtype == torch.float16:
            return fn(x.float(), a).half()
        return fn(x, a)

    return run


class UnaryOp(OpSpec):
    """Shape-preserving one-input op; float attributes are drawn, not solved, and now and
    then take the values converters match (generator.ops.matched)."""

    fn: Fn
    float_attrs: ClassVar[dict[str, tuple[float, float]]] = {}
    out_dtype: ClassVar[DType | None] = None
    """A fixed output type (IsNaN -> bool); None keeps the input's."""

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.attrs = {k: round(self.rng.uniform(lo, hi), 3) for k, (lo, hi) in self.float_attrs.items()}
        matched = draw_matched(self.op_type, self.rng)
        if matched is not None:
            self.attrs.update({k: v for k, v in matched.items() if v is not None})

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if cls.out_dtype is None:
            return super().backward_inputs(out, rng)
        if out.dtype != cls.out_dtype or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [TType(rng.choice(classic(cls.dtypes)), out.rank)]

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
    since: int = OLDEST_WRITTEN,
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
    """In float64 whatever the type: torch's float32 Gelu gives NaN at +inf and overflows to
    inf near float32's max, where the spec's 0.5 * x * (1 + erf(x / sqrt(2))) is x, and
    onnxruntime and TVM give x."""
    approximate = a.get("approximate", "none")
    return F.gelu(x.double(), approximate="tanh" if approximate == "tanh" else "none").to(x.dtype)


# Math.
_unary("Abs", lambda x, a: torch.abs(x), ORDERED_WIDE)


_unary("Neg", lambda x, a: torch.neg(x), (*SIGNED, DType.int16))


def _sign(x: torch.Tensor, a: Attrs) -> torch.Tensor:
    # torch.sign(NaN) is 0; ONNX (onnx.reference, onnxruntime) propagates the NaN.
    return torch.where(torch.isnan(x), x, torch.sign(x)) if x.is_floating_point() else torch.sign(x)


_unary("Sign", upcast(_sign), ORDERED_WIDE)


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


def _isinf(x: torch.Tensor, a: Attrs) -> torch.Tensor:
    positive = torch.isposinf(x) if a.get("detect_positive", 1) else torch.zeros_like(x, dtype=torch.bool)
    return (positive | torch.isneginf(x)) if a.get("detect_negative", 1) else positive


_unary("IsInf", _isinf, (DType.float32, DType.float64), out_dtype=DType.bool)


_unary("Not", lambda x, a: torch.logical_not(x), (DType.bool,))


_unary("BitwiseNot", lambda x, a: torch.bitwise_not(x), (*INTS, *WIDE_INTS), since=18)


# Activations (Softmax, LogSoftmax and Hardmax are axis ops in nn.py).
_unary("Relu", lambda x, a: torch.relu(x), (*FLOAT_TYPES, DType.int8, DType.int32, DType.int64))


_unary("Sigmoid", upcast(lambda x, a: torch.sigmoid(x)))


_unary("Tanh", upcast(lambda x, a: torch.tanh(x)))


_unary("Softplus", upcast(lambda x, a: F.softplus(x)))


_unary("Softsign", upcast(lambda x, a: x / (1 + torch.abs(x))))


_unary("LeakyRelu", upcast(lambda x, a: F.leaky_relu(x, a.get("alpha", 0.01))), float_attrs={"alpha": (0.01, 0.5)})


_unary("Elu", upcast(lambda x, a: F.elu(x, a.get("alpha", 1.0))), float_attrs={"alpha": (0.1, 2.0)})


_unary("Selu", upcast(_selu), float_attrs={"alpha": (0.5, 2.0), "gamma": (0.5, 1.5)})


_unary("Celu", lambda x, a: F.celu(x, a.get("alpha", 1.0)), (DType.float32,), {"alpha": (0.2, 2.0)}, since=12)


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


_unary(
    "Swish",
    upcast(lambda x, a: x * torch.sigmoid(a.get("alpha", 1.0) * x)),
    float_attrs={"alpha": (0.1, 2.0)},
    since=24,
)


_unary("Shrink", _shrink, NUMERIC, {"lambd": (0.0, 1.0), "bias": (0.0, 1.0)})


class Gelu(UnaryOp):
    op_type = "Gelu"
    dtypes = FLOAT_TYPES
    since_opset = 20
    fn = staticmethod(_gelu)

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.approximate = self.rng.choice(("none", "tanh"))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Gelu", ins, outs, approximate=self.approximate)


register(Gelu)
