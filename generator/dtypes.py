"""Tensor element types shared by the generator, the reference and the bundles.

One enum maps each type to its ONNX and numpy spellings, so that no module
keeps its own table that could drift from the others.
"""

from __future__ import annotations

import builtins
from enum import StrEnum

import ml_dtypes
import numpy as np
from onnx import TensorProto


class DType(StrEnum):
    float32 = "float32"
    float64 = "float64"
    float16 = "float16"
    int8 = "int8"
    uint8 = "uint8"
    int32 = "int32"
    int64 = "int64"
    bool = "bool"
    int16 = "int16"
    uint16 = "uint16"
    uint32 = "uint32"
    uint64 = "uint64"
    bfloat16 = "bfloat16"

    @property
    def onnx(self) -> int:
        return _ONNX[self]

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(ml_dtypes.bfloat16) if self is DType.bfloat16 else np.dtype(self.value)

    @property
    def is_float(self) -> builtins.bool:  # `bool` here would name the member below
        return self in (DType.float16, DType.float32, DType.float64, DType.bfloat16)

    @property
    def is_unsigned(self) -> builtins.bool:
        return self in (DType.uint8, DType.uint16, DType.uint32, DType.uint64)

    @classmethod
    def from_onnx(cls, elem_type: int) -> DType:
        for dtype, code in _ONNX.items():
            if code == elem_type:
                return dtype
        raise ValueError(f"unsupported ONNX element type {TensorProto.DataType.Name(elem_type)}")

    @classmethod
    def from_numpy(cls, dtype: np.dtype) -> DType:
        return cls(np.dtype(dtype).name)


_ONNX: dict[DType, int] = {
    DType.float32: TensorProto.FLOAT,
    DType.float64: TensorProto.DOUBLE,
    DType.float16: TensorProto.FLOAT16,
    DType.int8: TensorProto.INT8,
    DType.uint8: TensorProto.UINT8,
    DType.int32: TensorProto.INT32,
    DType.int64: TensorProto.INT64,
    DType.bool: TensorProto.BOOL,
    DType.int16: TensorProto.INT16,
    DType.uint16: TensorProto.UINT16,
    DType.uint32: TensorProto.UINT32,
    DType.uint64: TensorProto.UINT64,
    DType.bfloat16: TensorProto.BFLOAT16,
}

FLOATS: tuple[DType, ...] = (DType.float32,)
"""The default of specs that declare no dtypes (float32 only)."""
FLOAT_TYPES: tuple[DType, ...] = (DType.float16, DType.float32, DType.float64)
SIGNED_INTS: tuple[DType, ...] = (DType.int8, DType.int32, DType.int64)
INTS: tuple[DType, ...] = (DType.int8, DType.uint8, DType.int32, DType.int64)
NUMERIC: tuple[DType, ...] = FLOAT_TYPES + INTS
FLOATS_32_FIRST: tuple[DType, ...] = (DType.float32, DType.float64, DType.float16)
"""FLOAT_TYPES in the enum's order, which the nn families draw from. A set's order is part
of what a seed draws, so the two orders stay: one of them changed would change every case."""
WIDE_NUMERIC: tuple[DType, ...] = (*FLOATS_32_FIRST, DType.int32, DType.int64)
"""Floats and the 32/64-bit ints: matrix products and most reductions."""
ORDERED: tuple[DType, ...] = (*WIDE_NUMERIC, DType.int8, DType.uint8)
"""Every type with an order (all but bool), for ArgMax, ReduceMax and Einsum."""
NUMERIC_32_FIRST: tuple[DType, ...] = (*FLOATS_32_FIRST, *INTS)
"""NUMERIC in the enum's order, which the index families draw from."""
SIGNED: tuple[DType, ...] = FLOAT_TYPES + SIGNED_INTS
ALL: tuple[DType, ...] = (*NUMERIC, DType.bool)
UNSIGNED_WIDE: tuple[DType, ...] = (DType.uint16, DType.uint32, DType.uint64)
"""The unsigned types past uint8. torch stores them but computes almost nothing on them, so
every op computes them on a signed stand-in (generator.ops.unsigned)."""
WIDE_INTS: tuple[DType, ...] = (DType.int16, *UNSIGNED_WIDE)
"""The integer types past the classic ones: the bitwise ops take these, not bfloat16."""
WIDE: tuple[DType, ...] = (*WIDE_INTS, DType.bfloat16)
"""Element types a case draws only when it starts from them (GenConfig.wide_types): every
type-choosing draw picks among the others (`classic`), so adding a type to an op's set
leaves every case that never starts from it as it was. onnxruntime 1.31.1 runs int16 in 24
CPU kernels (arithmetic, comparisons, data movement) and the unsigned ones in its data
movement, Max/Min, Div, BitShift and Cast; TVM all of them in all it lowers. bfloat16 crosses
no graph boundary (generator.emit.BF16_BOUNDARY): onnxruntime's Python binding takes and
gives no bfloat16 array, and exported mixed-precision models cast in and out of it."""
EXACT_WIDE: tuple[DType, ...] = (*NUMERIC, *WIDE)
"""NUMERIC and every WIDE type: the ops that wrap, and compare only for equality (Add, Sub,
Mul, the bitwise ops, Equal), which uint64's signed stand-in computes bit for bit."""
ORDERED_WIDE: tuple[DType, ...] = (*NUMERIC, DType.int16, DType.uint16, DType.uint32, DType.bfloat16)
"""NUMERIC and the WIDE types but uint64: the ops that order or divide (Max, Less, Div, Abs),
which uint64's stand-in, int64 read bit for bit, would order wrong past 2**63."""


def classic(types: tuple[DType, ...] | list[DType]) -> list[DType]:
    """`types` without the WIDE ones: what an op draws a type from (see WIDE)."""
    return [t for t in types if t not in WIDE] or list(types)
