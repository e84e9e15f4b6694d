"""The same case at another element type: how a reduced trigger is asked whether its bug
needs the dtype it was found with.

Every tensor of the chosen type becomes the new type: graph inputs and outputs,
initializers, Constant and ConstantOfShape values, and Cast targets, so the graph keeps
its shape and its dtype flow. Values are converted with numpy (`astype`; for bool, "not
zero"). The ONNX checker, with strict type inference, then says whether the ops allow the
new type; a model it refuses is not a test, so it cannot count as "passes".

Values keep what they mean where the new type can hold it (an int into a float, a float
into a wider float). Floats into integers or bools would mostly become 0 and could hide a
bug by its values rather than its type, so those get fresh small integers (or bits),
drawn from a generator seeded by the tensor's name: the same case always gets the same.
"""

from __future__ import annotations

import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from reducers.candidate import Candidate, finalize
from reducers.edit import copy_model

GENERALIZE_DTYPES: tuple[int, ...] = (
    TensorProto.FLOAT,
    TensorProto.DOUBLE,
    TensorProto.FLOAT16,
    TensorProto.INT8,
    TensorProto.UINT8,
    TensorProto.INT32,
    TensorProto.INT64,
    TensorProto.BOOL,
)
"""The types a trigger is tried at: the ones every backend here runs, one of each kind."""
FOUND_ONLY_DTYPES: tuple[int, ...] = (TensorProto.INT16, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64)
"""Types a trigger may be found at (a case that starts wide, generator.dtypes.WIDE) but is
not tried at: it is tried at GENERALIZE_DTYPES, so that one bug met at uint32 and at int32
gets one name (bot.reduce.generalize)."""


def dtype_name(elem: int) -> str:
    return helper.tensor_dtype_to_np_dtype(elem).name


def main_dtype(model: onnx.ModelProto) -> int | None:
    """The type to generalize over: the first graph input's (the data a trigger computes
    on; index and shape inputs come later in the models fuzzbot writes), else the first
    initializer's."""
    for vi in model.graph.input:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            return int(vi.type.tensor_type.elem_type)
    return int(model.graph.initializer[0].data_type) if model.graph.initializer else None


VALUE_VARIANTS = 5
"""Sets of input values a re-typed trigger may be run with: the original's converted, then
four fresh draws. A failure on any of them is the bug; a pass counts only where none
fails (values, not the type, can make a wrong kernel look right: 0 * b - 0 == 0 - 0 * b,
a float64 op computed in float32 is right on every small integer, and a gather from the
wrong index is right wherever the two cells hold the same small value)."""


def _drawn(rng: np.random.Generator, shape: tuple[int, ...], target: np.dtype, variant: int) -> np.ndarray:
    """Variant 1: small positive values (no zero divisor, nothing negative into an unsigned
    type); 2: small values of either sign; 3: wide ones, beyond float32's 24-bit mantissa;
    4: every cell different (as far as the type has values), so no wrong pick hides."""
    if target == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if variant == 4:
        cells = int(np.prod(shape))
        span = 2048 if target.kind == "f" else min(int(np.iinfo(target).max), 2**20)
        distinct = rng.permutation(cells) % span + 1
        return (distinct + (0.25 if target.kind == "f" else 0)).reshape(shape).astype(target)
    if variant == 3:
        bits = {2: 10, 4: 24, 8: 24}[target.itemsize] if target.kind == "f" else 8 * target.itemsize - 2
        low = 0 if target.kind == "u" else -(2**bits)
        wide = rng.integers(low, 2**bits + 2**bits // 2, shape, dtype=np.int64)
        return (wide + (0.5 if target.kind == "f" else 0)).astype(target)
    low = 1 if variant == 1 or target.kind == "u" else -8
    drawn = rng.integers(low, 9, shape)
    return (drawn if target.kind in "iu" else drawn + rng.random(shape)).astype(target)


def _convert(name: str, values: np.ndarray, new: int, variant: int = 0) -> np.ndarray:
    """Values for a tensor re-typed to `new`: variant 0 keeps the original's values where
    the new type holds them, the others are drawn (`_drawn`), seeded by name and variant."""
    target = helper.tensor_dtype_to_np_dtype(new)
    values = np.asarray(values)
    if variant > 0 or (values.dtype.kind == "f" and target.kind in "biu"):
        rng = np.random.default_rng([zlib.crc32(name.encode()), max(variant, 1)])
        return _drawn(rng, values.shape, target, max(variant, 1))
    if target == np.bool_:
        return np.asarray(values != 0)
    if target.kind in "iu":  # an integer narrowed to a smaller one stays in its range
        info = np.iinfo(target)
        values = np.clip(values, info.min, info.max)
    with np.errstate(all="ignore"):
        return values.astype(target)


def _retype_tensor(tensor: onnx.TensorProto, old: int, new: int) -> onnx.TensorProto:
    if tensor.data_type != old:
        return tensor
    return numpy_helper.from_array(_convert(tensor.name, numpy_helper.to_array(tensor), new), tensor.name)


def _retype_node(node: onnx.NodeProto, old: int, new: int) -> None:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.TENSOR:
            attr.t.CopyFrom(_retype_tensor(attr.t, old, new))
        elif node.op_type == "Cast" and attr.name == "to" and attr.i == old:
            attr.i = new


def retype(case: Candidate, old: int, new: int, variant: int = 0) -> Candidate | None:
    """`case` with every `old`-typed tensor made `new` (inputs valued by `variant`), or None
    when the ops refuse the new type."""
    m = copy_model(case.model)
    g = m.graph
    del g.value_info[:]
    for vi in [*g.input, *g.output]:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type == old:
            vi.type.tensor_type.elem_type = new
    inits = [_retype_tensor(t, old, new) for t in g.initializer]
    del g.initializer[:]
    g.initializer.extend(inits)
    for node in g.node:
        _retype_node(node, old, new)
    checked = finalize(m)
    if checked is None:
        return None
    old_np = helper.tensor_dtype_to_np_dtype(old)
    inputs = {k: _convert(k, v, new, variant) if v.dtype == old_np else v for k, v in case.inputs.items()}
    return Candidate(checked, inputs)
