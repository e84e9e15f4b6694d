"""Edge inputs: a share of cases aimed on purpose at the inputs compilers mishandle.

The witness keeps every value far from every op's edge, which is what value comparison
needs and exactly what a crash hunt does not: compilers crash, trap or read out of bounds
on a zero divisor, an overflowing sum or a float too large for its integer cast, and
their kernels special-case unit and broadcast dimensions. An edge case is one of:

- `unit_dims` (defined): the model's free tensors get dims of 1 half the time, so
  broadcasting and size-1 special cases run. Compared as usual.
- `zero_divisor`, `int_overflow`, `cast_out_of_range` (undefined): after the model is
  grown, the graph input feeding an integer divisor (a member of the family
  generator.ops.families.ZERO_DIVISOR, drawn evenly: Div, Mod under fmod 0 and 1), an
  integer sum or product, or a float-to-integer Cast is set to values ONNX leaves
  unspecified. Their
  values are never compared (generator.values.undefined tells the triage, and tells
  `aim` that the edge it set is one); a crash on them is
  still judged, as a robustness regression.

The kind is a function of the seed alone, and so are the values, so a seed still gives
one case at any load. An undefined kind whose target the model lacks gives way to
another undefined kind it has a target for; with none, the case is left as it was.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import onnx

from generator.emit import is_runtime_constant
from generator.ops.families import ZERO_DIVISOR
from generator.values.undefined import undefined_inputs

EDGE_SALT = 0xED6E
UNIT_DIM_SHARE = 0.5
"""The chance that a free tensor's dim is 1 in a `unit_dims` case."""
KINDS = ("unit_dims", "zero_divisor", "int_overflow", "cast_out_of_range")
UNDEFINED = frozenset(KINDS[1:])

Inputs = dict[str, np.ndarray]
Aim = Callable[[onnx.ModelProto, Inputs, np.random.Generator], Inputs | None]


def edge_kind(seed: int, share: float) -> str | None:
    """Which edge the seed's case aims at, if any (the `share` of seeds)."""
    rng = random.Random(seed ^ EDGE_SALT)
    if share <= 0 or rng.random() >= share:
        return None
    return rng.choice(KINDS)


FIRST_OP = {
    "zero_divisor": ("Div", ("int32", "int64")),
    "int_overflow": ("Mul", ("int32", "int64")),
    "cast_out_of_range": ("Cast", ("float32",)),
}
"""An undefined kind's target, inserted first so that it reads the first graph input:
(op type, the first tensor's allowed types)."""


def _data(inputs: Inputs) -> Inputs:
    """The graph inputs that hold data, not the fixed shape-like values (`r<n>`,
    generator.emit.OnnxEmitter.runtime) that keep the model valid."""
    return {k: v for k, v in inputs.items() if not is_runtime_constant(k)}


def _feeding(
    model: onnx.ModelProto, inputs: Inputs, ops: dict[str, tuple[int, ...]]
) -> list[tuple[onnx.NodeProto, str]]:
    """(node, graph input) for each node of `ops` reading a data graph input at one of the
    op's data slots."""
    data = _data(inputs)
    found = []
    for node in model.graph.node:
        for slot in ops.get(node.op_type, ()):
            if slot < len(node.input) and node.input[slot] in data:
                found.append((node, node.input[slot]))
    return found


DIVISORS: dict[str, tuple[int, ...]] = {op: (slot,) for op, (slot, _) in ZERO_DIVISOR.items()}
"""The zero-divisor family (generator.ops.families.ZERO_DIVISOR): op -> its divisor slot."""


def divisor_form(node: onnx.NodeProto) -> str:
    """The member of the zero-divisor family a node is: its op, and Mod's fmod, whose two
    forms kernels compute apart."""
    fmod = next((a.i for a in node.attribute if a.name == "fmod"), 0)
    return f"Mod(fmod={fmod})" if node.op_type == "Mod" else node.op_type


def _zero_divisor(model: onnx.ModelProto, inputs: Inputs, rng: np.random.Generator) -> Inputs | None:
    """A zero set in the integer divisor of one member of the family, drawn evenly over the
    members the model has (Div, Mod under either fmod), so that no sibling waits on another."""
    found = [(n, name) for n, name in _feeding(model, inputs, DIVISORS) if inputs[name].dtype.kind in "iu"]
    found = [(n, name) for n, name in found if inputs[name].size]
    if not found:
        return None
    forms = sorted({divisor_form(n) for n, _ in found})
    form = forms[int(rng.integers(len(forms)))]
    name = next(name for n, name in found if divisor_form(n) == form)
    divisor = inputs[name]
    zeroed = divisor.copy()
    zeroed.flat[rng.integers(0, divisor.size, size=max(1, divisor.size // 3))] = 0
    return {**inputs, name: zeroed}


def _int_overflow(model: onnx.ModelProto, inputs: Inputs, rng: np.random.Generator) -> Inputs | None:
    for _, name in _feeding(model, inputs, OVERFLOWING):
        value = inputs[name]
        if value.dtype.kind == "i" and value.size:
            info = np.iinfo(value.dtype)
            high = rng.integers(info.max // 2, info.max, size=value.shape, endpoint=True, dtype=value.dtype)
            return {**inputs, name: high}
    return None


def _cast_out_of_range(model: onnx.ModelProto, inputs: Inputs, rng: np.random.Generator) -> Inputs | None:
    integer = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT32, onnx.TensorProto.INT64}
    for node, name in _feeding(model, inputs, {"Cast": (0,)}):
        target = next((a.i for a in node.attribute if a.name == "to"), None)
        value = inputs[name]
        if target in integer and value.dtype.kind == "f" and value.size:
            big = 6e4 if value.dtype == np.float16 else 1e12
            signs = rng.choice(np.array([-1.0, 1.0]), size=value.shape)
            return {**inputs, name: (signs * big).astype(value.dtype)}
    return None


OVERFLOWING: dict[str, tuple[int, ...]] = {
    **{op: (0, 1) for op in ("Add", "Sub", "Mul", "MatMul", "Gemm", "Pow")},
    **{op: (0,) for op in ("ReduceSum", "ReduceProd", "ReduceSumSquare", "CumSum", "CumProd")},
    "Sum": tuple(range(8)),
}
"""Integer ops, with their data slots, whose result wraps (undefined) once operands near
the type's limit; axes and shapes are never touched."""

AIMS: dict[str, Aim] = {
    "zero_divisor": _zero_divisor,
    "int_overflow": _int_overflow,
    "cast_out_of_range": _cast_out_of_range,
}


def aim(kind: str, model: onnx.ModelProto, inputs: Inputs, seed: int) -> tuple[str, Inputs] | None:
    """The case's inputs with an undefined edge set: `kind` where the model has a graph
    input to set it on, else the first other undefined kind it has one for; None when it
    has none."""
    order = [kind, *(k for k in AIMS if k != kind)]
    for k in order:
        aimed = AIMS[k](model, inputs, np.random.default_rng([seed, EDGE_SALT]))
        if aimed is not None and undefined_inputs(model, aimed):
            return k, aimed
    return None
