"""Writing a solved graph as an ONNX ModelProto with onnx.helper.

Names are positional (t<id>, w<n>, c<n>, input<k>) and every value comes from the
case's numpy generator in emission order, so one seed yields identical bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from generator.binning import Solution
from generator.dtypes import DType
from generator.graph import GNode, Graph
from generator.symbolic import Dim

NodeHook = Callable[[GNode, list[onnx.NodeProto]], None]

PRODUCER = "fuzzbot"
IR_VERSION = {13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10}
"""Lowest IR version per opset, so that older runtimes (onnxruntime 1.15) load the model."""


def draw_values(rng: np.random.Generator, shape: Sequence[int], dtype: DType, fan_in: int = 1) -> np.ndarray:
    """Uniform values; floats are scaled by 1/sqrt(fan_in) as in common weight init, so
    activations stay near unit scale and float32 rounding stays far below tolerance."""
    if dtype.is_float:
        bound = 1.0 / np.sqrt(max(fan_in, 1))
        return rng.uniform(-bound, bound, size=tuple(shape)).astype(dtype.numpy)
    if dtype is DType.bool:
        return rng.random(size=tuple(shape)) < 0.5
    low = 0 if dtype is DType.uint8 else -8
    return rng.integers(low, 9, size=tuple(shape)).astype(dtype.numpy)


class OnnxEmitter:
    """The Emitter an op writes itself through; collects nodes and initializers."""

    def __init__(self, opset: int, values: np.random.Generator) -> None:
        self.solution = Solution(None)
        """The solution of the node being emitted; its attribute terms are read through it."""
        self.opset = opset
        self.values = values
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def ival(self, term: Dim) -> int:
        return self.solution.eval(term)

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any) -> None:
        name = f"n{len(self.nodes)}_{op_type}"
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=name, **attrs))

    def const_i64(self, values: Sequence[int]) -> str:
        return self._initializer("c", np.asarray(values, dtype=np.int64))

    def const(self, array: np.ndarray) -> str:
        """An op-owned constant of any dtype (clip bounds, shift amounts, indices)."""
        return self._initializer("c", np.asarray(array))

    def weight(self, shape: Sequence[int], dtype: DType, fan_in: int = 1) -> str:
        return self._initializer("w", draw_values(self.values, shape, dtype, fan_in))

    def add_initializer(self, name: str, array: np.ndarray) -> None:
        self.initializers.append(numpy_helper.from_array(array, name))

    def _initializer(self, prefix: str, array: np.ndarray) -> str:
        name = f"{prefix}{len(self.initializers)}"
        self.add_initializer(name, array)
        return name


def emit_model(
    graph: Graph, opset: int, values: np.random.Generator, as_weight: set[int], on_node: NodeHook | None = None
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Build the ModelProto; placeholders in `as_weight` become initializers, the rest inputs.

    `on_node` sees each graph node with the ONNX nodes it was written as (coverage).
    """
    em = OnnxEmitter(opset, values)

    def tname(i: int) -> str:
        return f"t{i}"

    def value_info(i: int) -> onnx.ValueInfoProto:
        t = graph.tensors[i]
        return helper.make_tensor_value_info(tname(i), t.dtype.onnx, [em.ival(d) for d in t.shape])

    inputs: dict[str, np.ndarray] = {}
    graph_inputs = []
    for p in sorted(graph.placeholders):
        t = graph.tensors[p]
        array = draw_values(values, [em.ival(d) for d in t.shape], t.dtype)
        if p in as_weight:
            em.add_initializer(tname(p), array)
        else:
            inputs[tname(p)] = array
            graph_inputs.append(value_info(p))
    for n in graph.topological():
        em.solution = n.solution
        first = len(em.nodes)
        n.op.emit(em, [tname(i) for i in n.inputs], [tname(o) for o in n.outputs])
        if on_node is not None:
            on_node(n, em.nodes[first:])
    outputs = [value_info(o) for o in graph.sinks()]
    g = helper.make_graph(em.nodes, "fuzzbot_graph", graph_inputs, outputs, initializer=em.initializers)
    proto = helper.make_model(
        g,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name=PRODUCER,
        ir_version=IR_VERSION.get(opset, 8),
    )
    return proto, inputs
