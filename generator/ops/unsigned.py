"""uint16, uint32 and uint64 through torch, which stores and converts them but computes
almost nothing on them (torch 2.13 has no add, where, gather or maximum for them).

An op computes on a signed stand-in. uint16 and uint32 widen to int32 and int64, where
values, order and quotients are exact. uint64 has nothing wider, so it is read bit for bit
as int64: sums, differences, products, bits and equality are exact there, order is not past
2**63, so no op that compares or divides takes uint64 (generator.dtypes.ORDERED_WIDE), and
an op that only picks values by their order computes on a stand-in that orders as uint64
does (ORDERING). A result that the
op's schema types by the same type parameter as an unsigned input goes back to that type,
wrapped as the unsigned type wraps: 3 - 5 in uint16 is 65534.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar, cast

import onnx
import torch

from generator.ops.base import Attrs
from generator.ops.narrow import INT4, UINT4

STAND_IN: dict[torch.dtype, torch.dtype] = {torch.uint16: torch.int32, torch.uint32: torch.int64}
"""Widened: every value of the unsigned type is a value of its stand-in."""
SAME_BITS: dict[torch.dtype, torch.dtype] = {
    torch.uint64: torch.int64,
    INT4: torch.int8,
    UINT4: torch.uint8,
}
"""Read bit for bit: the stand-in of the same width (int4 and uint4 are one value a byte,
generator.ops.narrow)."""
NATIVE = frozenset(
    {"Cast", "CastLike", "BitCast", "EyeLike", "QuantizeLinear", "DequantizeLinear", "If", "Loop", "Scan"}
)
"""Ops that only convert, which torch does for the unsigned types itself (and exactly, where
uint64's stand-in would turn 2**63 and up negative), and EyeLike, which reads its input's
type where its schema gives the output a type parameter of its own: on a stand-in it wrote
int64 where the model declares uint64, a false "dtype" report in the first campaign. The
quantizers read a 4-bit type's tag for its range (generator.ops.narrow), and the control
ops hand their bodies the tensors as they are (each body op is carried itself)."""

Reference = TypeVar("Reference", bound=Callable[..., list[torch.Tensor]])


def carried(op_type: str, reference: Reference) -> Reference:
    """`reference` computing unsigned operands on their stand-ins; itself for an op that
    converts (NATIVE)."""
    if op_type in NATIVE:
        return reference

    def compute(attrs: Attrs, inputs: Sequence[torch.Tensor | None]) -> list[torch.Tensor]:
        types = [None if t is None else t.dtype for t in inputs]
        if not any(d in STAND_IN or d in SAME_BITS for d in types):
            return reference(attrs, inputs)
        flip = orders(op_type, attrs) and torch.uint64 in types
        args = [None if t is None else _ordered(stand_in(t), flip and t.dtype == torch.uint64) for t in inputs]
        outs = reference(attrs, args)
        shared = _shared_inputs(op_type, len(inputs), len(outs))
        backs = [[types[i] for i in shared[j]] for j in range(len(outs))]
        return [
            _back(_ordered(out, flip and torch.uint64 in back), back) for out, back in zip(outs, backs, strict=True)
        ]

    return cast(Reference, compute)


ORDERING = {"Unique": None, "ScatterElements": ("max", "min"), "ScatterND": ("max", "min")}
"""Ops that take uint64 and pick values by their order: every Unique (it sorts), and the
scatters under a max or min reduction (under add or mul the bits are exact). Read bit for
bit as int64, 2**63 and up would order below 0: a ScatterElements max over uint64 was
reported against onnxruntime and onnx.reference, which agreed with each other. Such an
op computes on the stand-in with its sign bit flipped, which orders as uint64 does."""

TOP_BIT = -(2**63)


def orders(op_type: str, attrs: Attrs) -> bool:
    """Whether this node picks its uint64 values by their order (ORDERING)."""
    if op_type not in ORDERING:
        return False
    reductions = ORDERING[op_type]
    return reductions is None or str(attrs.get("reduction", "none")) in reductions


def _ordered(t: torch.Tensor, flip: bool) -> torch.Tensor:
    """uint64's int64 stand-in with its top bit flipped, an order-keeping bijection both ways."""
    return t ^ TOP_BIT if flip and t.dtype == torch.int64 else t


def stand_in(t: torch.Tensor) -> torch.Tensor:
    """The signed tensor an unsigned one is computed as (the tensor itself otherwise)."""
    if t.dtype in STAND_IN:
        return t.to(STAND_IN[t.dtype])
    if t.dtype in SAME_BITS:
        return t.contiguous().view(SAME_BITS[t.dtype])
    return t


def signed_view(t: torch.Tensor) -> torch.Tensor:
    """`t`'s storage as the signed type of its width, for writes in place (torch has no
    index_put for the unsigned types)."""
    bits = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}
    return t.view(bits[t.dtype]) if t.dtype in bits else t


def _back(out: torch.Tensor, unsigned: Sequence[torch.dtype | None]) -> torch.Tensor:
    """`out` in the unsigned type of the input it shares a type parameter with."""
    for dtype in unsigned:
        if dtype in STAND_IN and out.dtype == STAND_IN[dtype]:
            mask = (1 << (torch.iinfo(dtype).bits)) - 1
            return (out & mask).to(dtype)
        if dtype in SAME_BITS and out.dtype == SAME_BITS[dtype]:
            return out.contiguous().view(dtype)
    return out


@functools.cache
def _shared_inputs(op_type: str, n_in: int, n_out: int) -> tuple[tuple[int, ...], ...]:
    """For each output, the inputs the op's schema types by the same parameter (Gather's
    data and output are both "T", its indices "Tind"); variadic formals repeat the last."""
    try:
        schema = onnx.defs.get_schema(op_type)
    except onnx.defs.SchemaError:
        return tuple(() for _ in range(n_out))
    ins = [schema.inputs[min(i, len(schema.inputs) - 1)].type_str for i in range(n_in)] if schema.inputs else []
    outs = [schema.outputs[min(j, len(schema.outputs) - 1)].type_str for j in range(n_out)]
    return tuple(tuple(i for i, t in enumerate(ins) if t == o) for o in outs)


__all__ = ["NATIVE", "carried", "signed_view", "stand_in"]
