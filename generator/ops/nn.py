"""Neural-network ops besides windows: matrix products (MatMul, Gemm, MatMulInteger, Einsum),
softmax-like ops, Dropout, and the type sets and helpers the nn families share.

Weights an op owns (Gemm's B and C, zero points) are emitted as initializers, so a model's
data-flow graph only holds the activations the generator grew.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np
import torch
import torch.nn.functional as F
import z3

from generator.dtypes import FLOATS_32_FIRST, ORDERED, WIDE_NUMERIC, DType, classic
from generator.ops.base import (
    OUTPUTS,
    Attrs,
    Emitter,
    OpSpec,
    Reference,
    SameShapeOp,
    attribute_default,
    axis_of,
    full_and_lower_rank,
    has_attribute,
    register,
    takes_input,
)
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType

QUANT: tuple[DType, ...] = (DType.uint8, DType.int8)


AUTO_PADS = ("SAME_UPPER", "SAME_LOWER", "VALID")


CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def widen(x: torch.Tensor) -> torch.Tensor:
    """float16 is computed in float32 and rounded once at the end: torch lacks several CPU half
    kernels, and a single rounding is what every backend's result approximates."""
    return x.float() if x.dtype == torch.float16 else x


def exact(x: torch.Tensor) -> torch.Tensor:
    """Integers as float64, where every sum the generator's small values reach is exact: float
    math on them then truncates on the cast back exactly as ONNX's float-scaled integer ops do."""
    return x if x.dtype.is_floating_point else x.double()


def any_of(*conds: Cond) -> Cond:
    """Disjunction of conditions, some of which may already be folded to Python bools."""
    if any(c is True for c in conds):
        return True
    rest = [c for c in conds if not isinstance(c, bool)]
    return z3.Or(*rest) if rest else False


def all_of(*conds: Cond) -> Cond:
    if any(c is False for c in conds):
        return False
    rest = [c for c in conds if not isinstance(c, bool)]
    return z3.And(*rest) if rest else True


def torch_pads(pads: Sequence[int]) -> list[int]:
    """ONNX [b0, b1, ..., e0, e1, ...] to F.pad's last-axis-first (b, e) pairs."""
    n = len(pads) // 2
    out: list[int] = []
    for i in reversed(range(n)):
        out += [int(pads[i]), int(pads[i + n])]
    return out


@register
class MatMul(OpSpec):
    """numpy matmul: 1-D operands, and batch dims that are equal or broadcast from 1 on either side."""

    op_type = "MatMul"
    arity = 2
    dtypes = WIDE_NUMERIC

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        batch = max(0, min(t.rank for t in ins) - 2)
        self.modes = [self.rng.choice(("eq", "eq", "eq", "lhs1", "rhs1")) for _ in range(batch)]

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        # Two vectors would give a rank-0 result, which the generator never makes.
        return super().accepts(ins) and max(t.rank for t in ins) >= 2

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if super().backward_inputs(out, rng) is None:
            return None
        if out.rank == 1:
            vec, mat = TType(out.dtype, 1), TType(out.dtype, 2)
            return [vec, mat] if rng.random() < 0.5 else [mat, vec]
        return full_and_lower_rank(out, 2, rng)

    def _batches(self, ins: list[AbsTensor]) -> tuple[list[Dim], list[tuple[str, Dim, Dim]]]:
        """The unaligned leading batch dims and the aligned (mode, lhs, rhs) ones."""
        a, b = ins[0].shape[:-2], ins[1].shape[:-2]
        n = len(self.modes)
        lead = list((a if len(a) >= len(b) else b)[: max(len(a), len(b)) - n])
        return lead, list(zip(self.modes, a[len(a) - n :], b[len(b) - n :], strict=True))

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        a, b = ins[0].shape, ins[1].shape
        cons: list[Cond] = [a[-1] == (b[-2] if len(b) >= 2 else b[0])]
        for mode, x, y in self._batches(ins)[1]:
            cons.append(x == y if mode == "eq" else (x if mode == "lhs1" else y) == 1)
        return cons

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        a, b = ins[0].shape, ins[1].shape
        lead, aligned = self._batches(ins)
        shape = lead + [y if mode == "lhs1" else x for mode, x, y in aligned]
        shape += ([a[-2]] if len(a) >= 2 else []) + ([b[-1]] if len(b) >= 2 else [])
        return [AbsTensor(ins[0].dtype, shape)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("MatMul", ins, outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        a, b = inputs
        if a.dtype.is_floating_point:
            return [torch.matmul(widen(a), widen(b)).to(a.dtype)]
        # Integer matmul wraps around like the backends' integer accumulators.
        return [torch.matmul(a.long(), b.long()).to(a.dtype)]


GEMM_C_SHAPES = ("none", "n", "1n", "mn", "m1", "11", "1", "scalar")


@register
class Gemm(OpSpec):
    """A @ B with B (and the optional C, in any shape that broadcasts to [M, N]) owned by the op."""

    op_type = "Gemm"
    min_rank = 2
    max_rank = 2
    dtypes = WIDE_NUMERIC

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.n = sc.var("gemm_n", lo=1)
        self.c_shape = self.rng.choice(GEMM_C_SHAPES)
        self.defaults = self.rng.random() < 0.2
        """Emit no alpha/beta/trans attributes at all (their defaults)."""
        self.trans_a = not self.defaults and self.rng.random() < 0.3
        self.trans_b = not self.defaults and self.rng.random() < 0.5
        if ins[0].dtype.is_float:
            self.alpha = round(self.rng.uniform(0.25, 2.0), 3)
            self.beta = round(self.rng.uniform(0.25, 2.0), 3)
        else:
            self.alpha, self.beta = self.rng.choice((1.0, 2.0, -1.0)), self.rng.choice((1.0, 3.0, -2.0))

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        k = ins[0].shape[0] if self.trans_a else ins[0].shape[1]
        return [self.n >= 1, self.n * k <= self.sc.max_elements]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        m = ins[0].shape[1] if self.trans_a else ins[0].shape[0]
        return [AbsTensor(ins[0].dtype, [m, self.n])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        a = self.inputs[0]
        m, k = (em.ival(d) for d in (a.shape[::-1] if self.trans_a else a.shape))
        n = em.ival(self.n)
        operands = [ins[0], em.weight([n, k] if self.trans_b else [k, n], a.dtype, fan_in=k)]
        c_shapes = {"n": [n], "1n": [1, n], "mn": [m, n], "m1": [m, 1], "11": [1, 1], "1": [1], "scalar": []}
        if self.c_shape in c_shapes:
            operands.append(em.weight(c_shapes[self.c_shape], a.dtype))
        if self.defaults:
            em.node("Gemm", operands, outs)
            return
        attrs = {"alpha": self.alpha, "beta": self.beta, "transA": int(self.trans_a), "transB": int(self.trans_b)}
        em.node("Gemm", operands, outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        a, b = inputs[0], inputs[1]
        c = inputs[2] if len(inputs) > 2 else None
        a = a.T if attrs.get("transA", 0) else a
        b = b.T if attrs.get("transB", 0) else b
        # Integers: float64 is exact here, and the cast back truncates as ONNX's float scaling does.
        up = widen if a.dtype.is_floating_point else exact
        y = float(attrs.get("alpha", 1.0)) * (up(a) @ up(b))
        if c is not None:
            y = y + float(attrs.get("beta", 1.0)) * up(c)
        return [y.to(a.dtype)]


def quant_zero_point(em: Emitter, dtype: DType) -> np.ndarray:
    """A scalar zero point inside the small value range the generator draws quantised data from."""
    low = 0 if dtype.is_unsigned else -4
    return np.asarray(em.values.integers(low, 5), dtype=dtype.numpy)


class AxisOp(SameShapeOp):
    """Shape-preserving ops along one drawn axis (negative half the time); the axis is left
    out now and then where it is the version's default (-1, and 1 before opset 13)."""

    dtypes = FLOATS_32_FIRST
    max_rank = 5

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.axis = self.rng.randint(-rank, rank - 1)
        self.explicit = self.axis != attribute_default(self.op_type, "axis", sc.opset) or self.rng.random() < 0.5

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node(self.op_type, ins, outs, **({"axis": self.axis} if self.explicit else {}))

    @classmethod
    def reference_at(cls, version: int) -> Reference:
        """Before opset 13 these ops normalized the input flattened to 2-D at `axis` (default
        1) over everything after it, not along one axis."""
        return cast(Reference, cls.reference) if version >= 13 else functools.partial(_coerced, cls.reference)


def _coerced(current: Reference, attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    x = inputs[0]
    axis = axis_of(attrs, "axis", 1, x.dim())
    flat = x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
    return [y.reshape(x.shape) for y in current({**attrs, "axis": 1}, [flat])]


@register
class Softmax(AxisOp):
    op_type = "Softmax"

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        return [torch.softmax(widen(x), dim=int(attrs.get("axis", -1))).to(x.dtype)]


@register
class LogSoftmax(AxisOp):
    op_type = "LogSoftmax"

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        return [torch.log_softmax(widen(x), dim=int(attrs.get("axis", -1))).to(x.dtype)]


@register
class Hardmax(AxisOp):
    op_type = "Hardmax"

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x = inputs[0]
        axis = axis_of(attrs, "axis", -1, x.dim())
        # torch.argmax returns the first of tied maxima, as ONNX requires.
        first = torch.argmax(widen(x), dim=axis, keepdim=True)
        return [torch.zeros_like(x).scatter(axis, first, 1)]


@register
class Dropout(SameShapeOp):
    """Inference-mode Dropout: the identity, with the optional ratio and training_mode inputs
    sometimes spelled out."""

    op_type = "Dropout"
    dtypes = FLOATS_32_FIRST
    max_rank = 5

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.form = self.rng.choice(("bare", "ratio", "training_off"))
        self.seed = self.rng.random() < 0.3

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        operands, attrs = list(ins), {}
        if self.form != "bare":
            ratio = np.asarray(round(float(em.values.uniform(0.05, 0.9)), 3), dtype=self.inputs[0].dtype.numpy)
            if takes_input("Dropout", "ratio", em.opset):
                operands.append(em.const(ratio))
            else:  # Dropout-10 (opset 11): the ratio is an attribute, and there is no training_mode
                attrs["ratio"] = float(ratio)
        if self.form == "training_off" and takes_input("Dropout", "training_mode", em.opset):
            operands.append(em.const(np.asarray(False)))
        if self.seed and has_attribute("Dropout", "seed", em.opset):
            attrs["seed"] = 7
        em.node("Dropout", operands, outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        training = len(inputs) > 2 and inputs[2] is not None and bool(inputs[2].item())
        ratio = float(inputs[1].item()) if len(inputs) > 1 and inputs[1] is not None else 0.5
        if training and ratio > 0:
            raise NotImplementedError("Dropout in training mode is random")
        # The optional mask output: nothing is dropped.
        return [inputs[0].clone(), torch.ones(inputs[0].shape, dtype=torch.bool)]

    old_attrs = frozenset({"ratio"})
    """Dropout-7 and -10 spell the ratio as an attribute: inference ignores it either way."""

    @classmethod
    def refusal(cls, version: int, attrs: Attrs) -> str | None:
        """Before opset 12 the spec leaves the mask of an inference run open (onnxruntime
        gives all False, onnx.reference all True); from 12 on nothing is dropped."""
        if version < 12 and attrs[OUTPUTS] > 1:
            return f"Dropout-{version} mask output is unspecified in inference"
        return super().refusal(version, attrs)


@register
class MatMulInteger(OpSpec):
    """Quantised matmul: (A - a_zero_point) @ (B - b_zero_point) in int32; B and the zero points
    (B's per column or scalar) are owned by the op."""

    op_type = "MatMulInteger"
    min_rank = 2
    dtypes = QUANT

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.n = sc.var("matmul_n", lo=1)
        self.zero_points = self.rng.choice(("none", "a", "both", "b", "b_cols"))

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype is not DType.int32 or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [TType(rng.choice(classic(cls.dtypes)), out.rank)]

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return [self.n * ins[0].shape[-1] <= self.sc.max_elements]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(DType.int32, [*ins[0].shape[:-1], self.n])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        dtype = self.inputs[0].dtype
        k, n = em.ival(self.inputs[0].shape[-1]), em.ival(self.n)
        operands = [ins[0], em.weight([k, n], dtype)]
        if self.zero_points != "none":
            operands.append(em.const(quant_zero_point(em, dtype)) if self.zero_points in ("a", "both") else "")
        if self.zero_points == "b_cols":
            operands.append(em.const(np.stack([quant_zero_point(em, dtype) for _ in range(n)])))
        elif self.zero_points in ("b", "both"):
            operands.append(em.const(quant_zero_point(em, dtype)))
        em.node("MatMulInteger", operands, outs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        a, b = inputs[0].long(), inputs[1].long()
        if len(inputs) > 2 and inputs[2] is not None:  # scalar, or one per row of A
            a = a - inputs[2].long().reshape(-1, 1)
        if len(inputs) > 3 and inputs[3] is not None:
            b = b - inputs[3].long()
        return [torch.matmul(a, b).to(torch.int32)]


EINSUM_LETTERS = "abcdefghij"


@register
class Einsum(OpSpec):
    """An equation built from the input ranks: shared letters are batch or contracted dims, a
    unary equation transposes, reduces or takes a diagonal, two inputs without shared letters
    make an outer product. The implicit form (no `->`) is used now and then."""

    op_type = "Einsum"
    since_opset = 12
    arity = 2
    dtypes = ORDERED

    arities = (1, 2, 2)

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        return (
            1 <= len(ins) <= 2
            and all(cls.slot_ok(i, t) for i, t in enumerate(ins))
            and len({t.dtype for t in ins}) == 1
        )

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        if out.dtype not in cls.dtypes or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        if rng.random() < 0.4:
            return [TType(out.dtype, rng.randint(out.rank, cls.max_rank))]
        first = rng.randint(1, cls.max_rank)
        return [TType(out.dtype, first), TType(out.dtype, rng.randint(max(1, out.rank - first), cls.max_rank))]

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.terms = self._draw_terms([t.rank for t in ins])
        letters = list(dict.fromkeys("".join(self.terms)))
        once = sorted(c for c in letters if "".join(self.terms).count(c) == 1)
        if out is None and once and len(once) <= self.max_rank and self.rng.random() < 0.2:
            self.output, self.implicit = "".join(once), True
        else:
            rank = out.rank if out is not None else self.rng.randint(1, min(len(letters), self.max_rank))
            self.output, self.implicit = "".join(self.rng.sample(letters, min(rank, len(letters)))), False

    def _draw_terms(self, ranks: list[int]) -> list[str]:
        first = list(EINSUM_LETTERS[: ranks[0]])
        if len(ranks) == 1:
            if ranks[0] >= 2 and self.rng.random() < 0.2:
                i, j = self.rng.sample(range(ranks[0]), 2)
                first[j] = first[i]  # a diagonal
            return ["".join(first)]
        fresh = iter(EINSUM_LETTERS[ranks[0] :])
        shareable = list(first)
        self.rng.shuffle(shareable)
        second = [shareable.pop() if shareable and self.rng.random() < 0.6 else next(fresh) for _ in range(ranks[1])]
        return ["".join(first), "".join(second)]

    @property
    def equation(self) -> str:
        lhs = ",".join(self.terms)
        return lhs if self.implicit else f"{lhs}->{self.output}"

    def _dims(self, ins: list[AbsTensor]) -> dict[str, Dim]:
        dims: dict[str, Dim] = {}
        for term, t in zip(self.terms, ins, strict=True):
            for c, d in zip(term, t.shape, strict=True):
                dims.setdefault(c, d)
        return dims

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        if len(self.output) != (self.out.rank if self.out is not None else len(self.output)):
            return [False]
        dims = self._dims(ins)
        return [
            d == dims[c] for term, t in zip(self.terms, ins, strict=True) for c, d in zip(term, t.shape, strict=True)
        ]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        dims = self._dims(ins)
        return [AbsTensor(ins[0].dtype, [dims[c] for c in self.output])]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("Einsum", ins, outs, equation=self.equation)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        eq = str(attrs["equation"]).replace(" ", "")
        dtype = inputs[0].dtype
        # Integer einsum accumulates in int64 and wraps on the way back, like integer hardware.
        up: Callable[[torch.Tensor], torch.Tensor] = widen if dtype.is_floating_point else (lambda t: t.long())
        return [torch.einsum(eq, *(up(t) for t in inputs)).to(dtype)]
