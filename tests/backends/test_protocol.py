"""Frames carry every dtype bit-exactly and reject garbage."""

from __future__ import annotations

import io

import ml_dtypes
import numpy as np
import pytest

from backends.arrays import array_from_json, array_to_json
from backends.protocol import ProtocolError, encode, read_message

pytestmark = [pytest.mark.worker]


def test_roundtrip_of_all_dtypes_and_blobs() -> None:
    arrays = {
        dt: (np.arange(12) % 5 - 2).astype(dt).reshape(3, 4)
        for dt in ("float32", "float64", "float16", "int8", "uint8", "int32", "int64", "bool")
    }
    arrays["scalar"] = np.array(3.5, dtype=np.float32)
    arrays["empty"] = np.zeros((0, 3), dtype=np.float32)
    frame = encode({"op": "run", "id": 4}, arrays, {"model": b"\x00\x01onnx"})
    header, got, blobs = read_message(io.BytesIO(frame))
    assert header == {"op": "run", "id": 4}
    assert blobs == {"model": b"\x00\x01onnx"}
    for name, a in arrays.items():
        assert got[name].dtype == a.dtype and got[name].shape == a.shape
        assert np.array_equal(got[name], a)


def test_bfloat16_and_the_other_ml_dtypes_types_come_back_as_themselves_not_as_void() -> None:
    """Their numpy `str` is raw bytes ('<V2'): sent so, a bfloat16 output came back as
    numpy.void, which torch cannot read, and a TVM campaign ended in an internal error."""
    values = np.array([1.5, -2.25, 3.0e38, 0.0], np.float32)
    arrays = {name: values.astype(t) for name, t in (("bf16", ml_dtypes.bfloat16), ("f8", ml_dtypes.float8_e4m3fn))}
    _, got, _ = read_message(io.BytesIO(encode({"op": "run"}, arrays)))
    for name, a in arrays.items():
        assert got[name].dtype == a.dtype, (name, got[name].dtype)
        assert got[name].tobytes() == a.tobytes()
    assert array_from_json(array_to_json(arrays["bf16"])).dtype == ml_dtypes.bfloat16


def test_truncated_frame_is_eof() -> None:
    frame = encode({"op": "run"}, {"x": np.ones(100, np.float32)})
    with pytest.raises(EOFError):
        read_message(io.BytesIO(frame[:-10]))


def test_garbage_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        read_message(io.BytesIO(b"\x00\x00\x00\x05nope!"))
    with pytest.raises(ProtocolError):
        encode({}, {"o": np.array([object()])})
