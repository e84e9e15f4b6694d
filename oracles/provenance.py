"""What each graph output depends on: the op types and float dtypes in its ancestor cone.

Tolerances and false-positive rules judge an output by what produced it. A float64
output computed from a float16 tensor carries float16 rounding, so comparing it at
float64 bounds reports rounding as a bug; an op-type override (say, looser bounds
wherever Softmax is involved) must reach the outputs Softmax feeds and no others.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx
from onnx import helper

_FLOAT_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}


@dataclass
class Cone:
    """The ancestors of one graph output."""

    ops: set[str] = field(default_factory=set)
    float_dtypes: set[str] = field(default_factory=set)
    nodes: set[int] = field(default_factory=set)
    """Indices into graph.node."""

    @property
    def lowest_float(self) -> str | None:
        """The least precise float type any ancestor tensor had: the rounding that reaches the output."""
        return min(self.float_dtypes, key=lambda d: _FLOAT_BITS[d], default=None)


def tensor_dtypes(model: onnx.ModelProto) -> dict[str, str]:
    """numpy dtype names of every typed tensor, after shape inference fills in the middle."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except (onnx.shape_inference.InferenceError, RuntimeError):  # judge with what is declared
        inferred = model
    g = inferred.graph
    out: dict[str, str] = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        elem = vi.type.tensor_type.elem_type
        if elem:
            out[vi.name] = helper.tensor_dtype_to_np_dtype(elem).name
    for init in g.initializer:
        out[init.name] = helper.tensor_dtype_to_np_dtype(init.data_type).name
    return out


def output_cones(model: onnx.ModelProto) -> dict[str, Cone]:
    """The cone of every graph output (top-level graph; subgraphs count as their node)."""
    dtypes = tensor_dtypes(model)
    producer = {name: i for i, n in enumerate(model.graph.node) for name in n.output if name}
    cones: dict[str, Cone] = {}
    for out in model.graph.output:
        cone = Cone()
        stack = [out.name]
        seen: set[str] = set()
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            if dtypes.get(name) in _FLOAT_BITS:
                cone.float_dtypes.add(dtypes[name])
            i = producer.get(name)
            if i is None:
                continue
            cone.nodes.add(i)
            cone.ops.add(model.graph.node[i].op_type)
            stack.extend(x for x in model.graph.node[i].input if x)
        cones[out.name] = cone
    return cones
