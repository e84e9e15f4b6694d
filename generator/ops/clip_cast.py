"""Element-wise ops that choose, clamp, shift or convert each element: Where, PRelu, BitShift,
Clip, Cast, CastLike and BitCast.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import torch

from generator.dtypes import ALL, FLOAT_TYPES, NUMERIC, UNSIGNED_WIDE, WIDE, DType
from generator.ops.base import Attrs, Emitter, Reference, SameShapeOp, register
from generator.ops.elementwise import BroadcastOp
from generator.ops.matched import draw_matched
from generator.ops.unary import TORCH_DTYPE
from generator.symbolic import AbsTensor, SymCtx, TType


@register
class Where(BroadcastOp):
    op_type = "Where"
    arity = 3
    dtypes = (*ALL, *WIDE)
    in_dtypes = {0: (DType.bool,)}

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [torch.where(inputs[0], inputs[1], inputs[2])]


@register
class PRelu(BroadcastOp):
    """Slope broadcasts to X in one direction only: X keeps its shape."""

    op_type = "PRelu"
    dtypes = (*FLOAT_TYPES, DType.int32, DType.int64)

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
    dtypes = (DType.uint8, *UNSIGNED_WIDE)

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.direction = self.rng.choice(("LEFT", "RIGHT"))

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        x = self.inputs[0]
        shape = [em.ival(d) for d in x.shape]
        shape = [1 if em.values.random() < 0.5 else d for d in shape]
        amounts = em.values.integers(0, 8 * x.dtype.numpy.itemsize, size=shape).astype(x.dtype.numpy)
        em.node("BitShift", [ins[0], em.const(amounts)], outs, direction=self.direction)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        x, n = inputs[0], inputs[1]
        if x.dtype == torch.uint8:
            x, n = x.to(torch.int32), n.to(torch.int32)
            y = x << n if attrs.get("direction") == "LEFT" else x >> n
            return [(y & 0xFF).to(torch.uint8)]
        # The wider unsigned types arrive on their signed stand-ins (generator.ops.unsigned):
        # a left shift wraps as the unsigned one does, a right shift must not carry the sign
        # bit of uint64's stand-in in.
        if attrs.get("direction") == "LEFT":
            return [x << n]
        low_bits = torch.iinfo(x.dtype).max >> (n - 1).clamp_min(0)
        return [torch.where(n == 0, x, (x >> n) & low_bits)]


@register
class Clip(SameShapeOp):
    """min and max are optional op-owned scalar inputs, min <= max; now and then the bounds
    converters match (ReLU6's 0 and 6) or bounds just off them (generator.ops.matched)."""

    op_type = "Clip"
    dtypes = NUMERIC

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.form = self.rng.choice(("both", "both", "min", "max", "none"))
        # Drawn with the op's other choices, from the structure's generator.
        dtype = self.ins[0].dtype
        low = 0 if dtype.is_unsigned else -4
        self.bounds = sorted(self.rng.randint(low, 4) for _ in range(2))
        self.matched = draw_matched("Clip", self.rng, lambda v: dtype.is_float or (v == int(v) and (v >= low)))
        if self.matched is not None:
            given = [k for k in ("min", "max") if self.matched.get(k) is not None]
            self.form = "both" if len(given) == 2 else given[0]

    def value_bounds(self) -> tuple[float, float]:
        """min and max as the emitted constants hold them (one of them unused by a form
        that passes only the other)."""
        if self.matched is not None:
            lo, hi = self.matched.get("min"), self.matched.get("max")
            return (float(lo if lo is not None else 0.0), float(hi if hi is not None else 0.0))
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

    old_attrs = frozenset({"min", "max"})

    @classmethod
    def reference_at(cls, version: int) -> Reference:
        """Clip-6 spells the bounds as float attributes (defaults: float32's extremes)."""
        return cls.reference if version >= 11 else _clip_6


def _clip_6(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    bounds = [torch.tensor(float(attrs[k]), dtype=torch.float64) for k in ("min", "max")]
    return Clip.reference(attrs, [inputs[0], *bounds])


class CastOp(SameShapeOp):
    """Any of fuzzbot's types to any other; the target is drawn (or is the backward target)."""

    dtypes = (*ALL, *WIDE)

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


BIT_CASTS: dict[DType, tuple[DType, ...]] = {
    DType.float32: (DType.int32,),
    DType.float64: (DType.int64,),
    DType.int8: (DType.uint8,),
    DType.uint8: (DType.int8,),
}
"""The reinterpretations written: to an integer of the same width, where every bit pattern is
a value. The reverse ones would make NaN, infinities and subnormals out of integers, which the
builds need not carry alike. float16 has only int16 beside it, a type a case draws only when
it starts wide (generator.dtypes.WIDE), so it is left out."""


@register
class BitCast(SameShapeOp):
    """The input's bytes read as another type of the same width, little endian."""

    op_type = "BitCast"
    since_opset = 26
    dtypes = tuple(BIT_CASTS)

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.to = out.dtype if out is not None else self.rng.choice(BIT_CASTS[ins[0].dtype])

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        sources = [d for d, targets in BIT_CASTS.items() if out.dtype in targets]
        if not sources or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [TType(rng.choice(sources), out.rank)]

    def result_dtype(self, ins: list[AbsTensor]) -> DType:
        return self.to

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        em.node("BitCast", ins, outs, to=self.to.onnx)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        to = TORCH_DTYPE[DType.from_onnx(int(attrs["to"]))]
        x = inputs[0]
        if x.dtype == torch.bool:  # one byte holding 0 or 1 (onnxruntime 1.31 has no kernel for it)
            x = x.to(torch.uint8)
        return [x.contiguous().view(to)]
