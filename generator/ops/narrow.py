"""int4, uint4 and the two float8 types: types a generated model holds only between a
QuantizeLinear and its DequantizeLinear (generator.patterns.qdq.QdqRelu), never as a graph
input or output, so no array of them crosses the worker protocol.

numpy holds them through ml_dtypes. torch has float8 types that compute conversions, and
int4 and uint4 types that hold one value per byte and compute nothing: a 4-bit tensor is
its 8-bit values viewed as torch.int4 or torch.uint4, a tag that tells QuantizeLinear and
DequantizeLinear the range (a model whose QuantizeLinear lost its `output_dtype` still
means int4), and that any other op computes through (generator.ops.unsigned.SAME_BITS).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch
from onnx import TensorProto

INT4: torch.dtype = torch.int4  # type: ignore[attr-defined]  # torch's stubs lack the bit types
UINT4: torch.dtype = torch.uint4  # type: ignore[attr-defined]
FOUR_BIT: dict[int, tuple[int, int, torch.dtype, torch.dtype]] = {
    TensorProto.INT4: (-8, 7, INT4, torch.int8),
    TensorProto.UINT4: (0, 15, UINT4, torch.uint8),
}
"""ONNX type -> its range, torch's tag for it and the byte type its values are held in."""
FLOAT8: dict[int, torch.dtype] = {
    TensorProto.FLOAT8E4M3FN: torch.float8_e4m3fn,
    TensorProto.FLOAT8E5M2: torch.float8_e5m2,
}
FLOAT8_MANTISSA = {torch.float8_e4m3fn: 3, torch.float8_e5m2: 2}
"""Explicit mantissa bits: the spacing of representable values at each binade."""
ONNX_OF: dict[torch.dtype, int] = {
    **{tag: onnx for onnx, (_, _, tag, _) in FOUR_BIT.items()},
    **{dtype: onnx for onnx, dtype in FLOAT8.items()},
}
"""torch's type of a narrow tensor -> its ONNX type."""
_NUMPY: dict[torch.dtype, tuple[np.dtype, np.dtype]] = {
    INT4: (np.dtype(np.int8), np.dtype(ml_dtypes.int4)),
    UINT4: (np.dtype(np.uint8), np.dtype(ml_dtypes.uint4)),
    torch.float8_e4m3fn: (np.dtype(np.uint8), np.dtype(ml_dtypes.float8_e4m3fn)),
    torch.float8_e5m2: (np.dtype(np.uint8), np.dtype(ml_dtypes.float8_e5m2)),
    torch.bfloat16: (np.dtype(np.uint16), np.dtype(ml_dtypes.bfloat16)),
}
"""torch type -> the numpy bytes it is held in, and the ml_dtypes type numpy names it by.
bfloat16 is here too: numpy knows it only through ml_dtypes, and torch's `.numpy()` refuses
it, so a bfloat16 weight or traced value crosses between them as its 16 bits."""
_TORCH_BYTES = {np.dtype(np.int8): torch.int8, np.dtype(np.uint8): torch.uint8, np.dtype(np.uint16): torch.uint16}
_TORCH = {numpy: (byte, dtype) for dtype, (byte, numpy) in _NUMPY.items()}


def as_torch(a: np.ndarray) -> torch.Tensor:
    """A numpy array as the torch tensor the references compute on (narrow types tagged)."""
    found = _TORCH.get(np.asarray(a).dtype)
    if found is None:
        return torch.from_numpy(np.array(a, copy=True))
    byte, dtype = found
    held = np.asarray(a).astype(byte) if dtype in (INT4, UINT4) else np.array(a, copy=True).view(byte)
    return torch.from_numpy(held).view(dtype)


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """The reverse of `as_torch`: a narrow tensor as the ml_dtypes array its ONNX type is."""
    found = _NUMPY.get(t.dtype)
    if found is None:
        return t.detach().numpy()
    byte, numpy = found
    held = t.contiguous().view(_TORCH_BYTES[byte]).numpy()
    return held.astype(numpy) if t.dtype in (INT4, UINT4) else held.view(numpy)


def byte_values(t: torch.Tensor) -> torch.Tensor:
    """A 4-bit tensor's values in its byte type (others as they are), to compute on."""
    for _, _, tag, byte in FOUR_BIT.values():
        if t.dtype == tag:
            return t.view(byte)
    return t


def quantize_to(x: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, to: int, saturate: bool) -> torch.Tensor:
    """QuantizeLinear into a 4-bit type (round half to even, saturate; tagged) or a float8
    type (x / scale rounded to nearest even by the conversion, saturated to the largest
    finite value)."""
    v = x.float() / scale.float()
    if to in FOUR_BIT:
        lo, hi, tag, byte = FOUR_BIT[to]
        return (torch.round(v) + byte_values(zero).float()).clamp(lo, hi).to(byte).view(tag)
    dtype = FLOAT8[to]
    if saturate:
        biggest = torch.finfo(dtype).max
        v = torch.where(torch.isnan(v), v, v.clamp(-biggest, biggest))
    return v.to(dtype)


def float8_spacing(v: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The distance between neighbouring values of `dtype` around each |v| (constant below
    the smallest normal, where the subnormals lie evenly)."""
    info = torch.finfo(dtype)
    binade = torch.floor(torch.log2(v.detach().abs().clamp_min(info.smallest_normal)))
    return torch.pow(2.0, binade - FLOAT8_MANTISSA[dtype]).to(v.dtype)


__all__ = [
    "FLOAT8",
    "FOUR_BIT",
    "INT4",
    "ONNX_OF",
    "UINT4",
    "as_numpy",
    "as_torch",
    "byte_values",
    "float8_spacing",
    "quantize_to",
]
