"""The framed worker protocol: a JSON header followed by raw buffers.

Arrays travel as their bytes plus dtype and shape, never pickled, so a worker in
another interpreter (another numpy, another Python) reads them safely. Only the
standard library and numpy are used: this module runs inside worker processes.
"""

from __future__ import annotations

import json
import struct
from typing import Any, BinaryIO

import numpy as np

HEADER = struct.Struct(">I")
MAX_HEADER = 64 * 1024 * 1024
PROTOCOL_VERSION = 2
"""Bumped whenever a frame's meaning changes; the bot refuses a worker that speaks another."""


def dtype_text(dtype: np.dtype) -> str:
    """The dtype's `str` ('<f4'), but an ml_dtypes type's name (bfloat16, int4), whose `str`
    is raw bytes ('<V2') that would come back as numpy.void."""
    return dtype.name if dtype.kind == "V" and dtype.names is None else dtype.str


def dtype_of(text: str) -> np.dtype:
    """`dtype_text`'s reverse."""
    try:
        return np.dtype(text)
    except TypeError:  # bfloat16 and kin: numpy knows them once ml_dtypes is imported
        try:
            import ml_dtypes  # noqa: F401 - registers the types (not every worker venv has it)
        except ImportError as e:
            raise ProtocolError(f"array dtype {text!r} needs ml_dtypes, which this interpreter lacks") from e
        return np.dtype(text)


class ProtocolError(Exception):
    """The peer sent something that is not a frame; the channel cannot be trusted any more."""


def encode(
    header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None, blobs: dict[str, bytes] | None = None
) -> bytes:
    buffers: list[dict[str, Any]] = []
    payload: list[bytes] = []
    for name, arr in (arrays or {}).items():
        if arr.dtype.hasobject:
            raise ProtocolError(f"array {name!r} has object dtype")
        data = arr.tobytes()  # C order whatever the layout; keeps 0-d shapes
        dtype = dtype_text(arr.dtype)
        buffers.append({"key": name, "kind": "array", "dtype": dtype, "shape": list(arr.shape), "nbytes": len(data)})
        payload.append(data)
    for name, blob in (blobs or {}).items():
        buffers.append({"key": name, "kind": "bytes", "nbytes": len(blob)})
        payload.append(blob)
    head = json.dumps({**header, "buffers": buffers}).encode()
    return HEADER.pack(len(head)) + head + b"".join(payload)


def decode_body(head: bytes, read: Any) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, bytes]]:
    """Parse a header and pull each buffer it announces through `read(n) -> bytes`."""
    try:
        header = json.loads(head)
    except ValueError as e:
        raise ProtocolError(f"bad frame header: {e}") from e
    arrays: dict[str, np.ndarray] = {}
    blobs: dict[str, bytes] = {}
    for buf in header.pop("buffers", []):
        data = read(int(buf["nbytes"]))
        if buf["kind"] == "array":
            dtype = dtype_of(buf["dtype"])
            arrays[buf["key"]] = np.frombuffer(data, dtype=dtype).reshape(tuple(buf["shape"])).copy()
        else:
            blobs[buf["key"]] = data
    return header, arrays, blobs


def header_length(prefix: bytes) -> int:
    n = int(HEADER.unpack(prefix)[0])
    if n > MAX_HEADER:
        raise ProtocolError(f"frame header of {n} bytes")
    return n


def read_exact(stream: BinaryIO, n: int) -> bytes:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            raise EOFError("peer closed the channel")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_message(stream: BinaryIO) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, bytes]]:
    head = read_exact(stream, header_length(read_exact(stream, HEADER.size)))
    return decode_body(head, lambda n: read_exact(stream, n))


def write_message(
    stream: BinaryIO,
    header: dict[str, Any],
    arrays: dict[str, np.ndarray] | None = None,
    blobs: dict[str, bytes] | None = None,
) -> None:
    stream.write(encode(header, arrays, blobs))
    stream.flush()
