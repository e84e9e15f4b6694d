"""Frames carry every dtype bit-exactly and reject garbage."""

from __future__ import annotations

import io

import numpy as np
import pytest

from backends.protocol import ProtocolError, encode, read_message


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


def test_truncated_frame_is_eof() -> None:
    frame = encode({"op": "run"}, {"x": np.ones(100, np.float32)})
    with pytest.raises(EOFError):
        read_message(io.BytesIO(frame[:-10]))


def test_garbage_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        read_message(io.BytesIO(b"\x00\x00\x00\x05nope!"))
    with pytest.raises(ProtocolError):
        encode({}, {"o": np.array([object()])})
