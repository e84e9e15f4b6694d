"""A user's input arrays held against the inputs the model declares, before anything runs.

Every build refuses an array of another rank, element type or static size ("Invalid rank
for input"), and one that names no input of the model, alike: judged, that is a crash on
both sides, a compiler bug that is really the user's mistake. So names, element types,
ranks and static dims are compared first; a mismatch is one line naming the input, what
the model declares and what was given. A symbolic dim (`N`) takes any size, the same size
wherever its name appears.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
from onnx import helper

from bot.errors import UserError


class InputMismatch(UserError):
    """Arrays that do not fit the model's declared inputs; one line."""


def declared_form(v: onnx.ValueInfoProto) -> str:
    """`float32[2,N,4]`: the element type and dims a graph input declares."""
    t = v.type.tensor_type
    try:
        name = str(np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type)))
    except (KeyError, ValueError, TypeError):
        name = onnx.TensorProto.DataType.Name(t.elem_type) if t.elem_type else "?"
    if not t.HasField("shape"):
        return f"{name} of any shape"
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim]
    return f"{name}[{','.join(dims)}]"


def given_form(array: np.ndarray) -> str:
    return f"{array.dtype}[{','.join(str(n) for n in array.shape)}]"


def check_inputs(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray], source: str) -> None:
    """Raise InputMismatch, naming `source` (the .npz), when `inputs` do not fit `model`."""
    declared = {v.name: v for v in model.graph.input}
    initialized = {i.name for i in model.graph.initializer}
    missing = [name for name in declared if name not in initialized and name not in inputs]
    if missing:
        raise InputMismatch(f"{source} has no array for graph input(s) {', '.join(missing)}")
    extra = sorted(set(inputs) - set(declared))
    if extra:
        wanted = ", ".join(n for n in declared if n not in initialized) or "none"
        raise InputMismatch(f"{source}: array(s) {', '.join(extra)} name no input of the model (its inputs: {wanted})")
    for name, array in inputs.items():
        if not _fits(declared[name], np.asarray(array)):
            raise InputMismatch(
                f"{source}: input {name!r} is {given_form(np.asarray(array))}, "
                f"but the model declares {declared_form(declared[name])}"
            )
    _same_sizes(model, inputs, source)


def _same_sizes(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray], source: str) -> None:
    """A dim_param promises that its dims are equal: arrays that give one name two sizes
    break the promise, and a build may take either size (or refuse), so say so first."""
    seen: dict[str, tuple[str, int]] = {}
    for v in model.graph.input:
        array = inputs.get(v.name)
        if array is None or not v.type.HasField("tensor_type"):
            continue
        for d, size in zip(v.type.tensor_type.shape.dim, np.shape(array), strict=False):
            if not d.dim_param:
                continue
            first = seen.setdefault(d.dim_param, (v.name, int(size)))
            if first[1] != size:
                raise InputMismatch(
                    f"{source}: dim {d.dim_param!r} is {first[1]} in input {first[0]!r} but {size} in input {v.name!r}"
                )


def _fits(v: onnx.ValueInfoProto, array: np.ndarray) -> bool:
    if not v.type.HasField("tensor_type"):
        return True  # a sequence or optional input: nothing here to hold it against
    t = v.type.tensor_type
    if t.elem_type:
        try:
            if np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type)) != array.dtype:
                return False
        except (KeyError, ValueError, TypeError):
            pass  # a type numpy cannot name: the build will say
    if not t.HasField("shape"):
        return True
    dims = t.shape.dim
    if len(dims) != array.ndim:
        return False
    return all(not d.HasField("dim_value") or d.dim_value == n for d, n in zip(dims, array.shape, strict=True))
