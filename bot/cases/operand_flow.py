"""A value wanted for a shape-like operand, traced back to the graph inputs it is built from.

A generated model may build a Reshape's target as Concat(Gather(Shape(x)), r): only the
tail `r` is a graph input. The target's value is read off the declared shapes as for a
direct operand; each part of it then goes to the input it came from, through Concat,
Cast, Identity and the ops that only reshape a 1-D value. Parts computed from the model
(a Shape) are taken as they come: the reference says later whether the whole holds.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
import onnx

from bot.cases.shape_sites import Site

PASS_THROUGH = frozenset({"Identity", "Cast", "CastLike", "Squeeze", "Unsqueeze", "Reshape", "Flatten"})
"""Ops that hand a 1-D shape value on unchanged but for its type or its dims."""


def assign_back(
    tensor: str,
    value: np.ndarray,
    producers: Mapping[str, onnx.NodeProto],
    drawn: Collection[str],
    shapes: Mapping[str, list[int]],
    constants: Mapping[str, np.ndarray],
) -> dict[str, np.ndarray] | None:
    """The drawn inputs' values that give `tensor` the value `value`; None when a constant
    part disagrees or the value cannot be traced through the op that makes it."""
    if tensor in drawn:
        return {tensor: value}
    if tensor in constants:
        return {} if np.array_equal(np.asarray(constants[tensor]).reshape(-1), value.reshape(-1)) else None
    node = producers.get(tensor)
    if node is None:
        return None
    if node.op_type in PASS_THROUGH:
        return assign_back(node.input[0], value, producers, drawn, shapes, constants)
    if node.op_type == "Concat" and value.ndim <= 1:
        return _split(node, value.reshape(-1), producers, drawn, shapes, constants)
    return {}  # computed from the model (Shape, Gather of a shape): taken as it comes


def _split(
    node: onnx.NodeProto,
    value: np.ndarray,
    producers: Mapping[str, onnx.NodeProto],
    drawn: Collection[str],
    shapes: Mapping[str, list[int]],
    constants: Mapping[str, np.ndarray],
) -> dict[str, np.ndarray] | None:
    lengths = [shapes.get(part) for part in node.input]
    if any(shape is None or len(shape) != 1 for shape in lengths) or sum(s[0] for s in lengths if s) != len(value):
        return None
    found: dict[str, np.ndarray] = {}
    start = 0
    for part, shape in zip(node.input, lengths, strict=True):
        assert shape is not None
        piece = assign_back(part, value[start : start + shape[0]], producers, drawn, shapes, constants)
        if piece is None:
            return None
        found.update(piece)
        start += shape[0]
    return found


def fitted(value: object, like: np.ndarray) -> np.ndarray | None:
    """`value` in the dtype and dims of `like` (a drawn input), integers clipped to the
    dtype's range (an int64 "to the end" in an int32 operand); None when it cannot fit."""
    array = np.asarray(value)
    if like.dtype.kind in "iu" and array.dtype.kind in "iuf":
        info = np.iinfo(like.dtype)
        array = np.clip(array, info.min, info.max)
    try:
        return array.astype(like.dtype).reshape(like.shape)
    except ValueError:
        return None


def operand_like(site: Site) -> np.ndarray:
    """A stand-in array of the operand's dims and dtype, for `fitted`."""
    return np.zeros(site.dims, dtype=site.dtype)
