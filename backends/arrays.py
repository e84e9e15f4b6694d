"""numpy arrays as pydantic fields, serialized to JSON as dtype, shape and base64 bytes."""

from __future__ import annotations

import base64
from typing import Annotated, Any

import numpy as np
from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from backends.protocol import dtype_of, dtype_text


def array_to_json(a: np.ndarray) -> dict[str, Any]:
    return {"dtype": dtype_text(a.dtype), "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode()}


def array_from_json(v: Any) -> np.ndarray:
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, dict) and {"dtype", "shape", "data"} <= v.keys():
        raw = base64.b64decode(v["data"])
        return np.frombuffer(raw, dtype=dtype_of(v["dtype"])).reshape(tuple(v["shape"])).copy()
    raise ValueError("expected an array object with dtype, shape and data")


NDArray = Annotated[
    np.ndarray,
    PlainValidator(array_from_json),
    PlainSerializer(array_to_json, return_type=dict),
    WithJsonSchema({"type": "object", "properties": {"dtype": {}, "shape": {}, "data": {}}}),
]
