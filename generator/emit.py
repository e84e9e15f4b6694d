"""Writing a solved graph as an ONNX ModelProto with onnx.helper.

Names are positional (t<id>, w<n>, c<n>) and every value comes from the case's numpy
generator in the order nodes are written (as they are inserted, when the graph grows
with its values), so one seed yields identical bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from generator.binning import Solution
from generator.dtypes import DType
from generator.graph import Fragment, GNode, Graph
from generator.symbolic import Dim

NodeHook = Callable[[GNode, list[onnx.NodeProto]], None]

PRODUCER = "fuzzbot"
IR_VERSION = {13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11, 24: 12, 25: 13, 26: 13}
"""Lowest IR version per opset (onnx.helper.VERSION_TABLE), so that older runtimes load the
model: a runtime refuses an IR version newer than it knows even where it knows the opset."""
NEWEST_OPSET = max(IR_VERSION)
"""The newest default-domain opset the generator writes: every op spec was audited up to it
(checker, strict shape inference, the torch reference and onnxruntime 1.31.1, which loads
nothing newer; tests/test_opset_range.py)."""


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


RUNTIME_PREFIX = "r"
"""How a generated model names a graph input that holds a fixed value, `r<n>` (a runtime
shape or scale, `OnnxEmitter.runtime`): part of the model's validity, so no value search
and no edge input ever moves it."""


def is_runtime_constant(name: str) -> bool:
    return name[:1] == RUNTIME_PREFIX and name[1:].isdigit()


def tname(i: int) -> str:
    """The ONNX name of graph tensor `i`."""
    return f"t{i}"


class OnnxEmitter:
    """The Emitter an op writes itself through, one graph node at a time (`write`), so that
    a node can be written as soon as it is inserted (generator.witness runs it at once).
    Names count up over the emitter's life, never reused, whatever is later kept."""

    def __init__(self, opset: int, values: np.random.Generator, runtime_shapes: float = 0.0) -> None:
        """`runtime_shapes`: the share of shape-like operands (shapes, starts and ends,
        repeats, axes, pads) written as graph inputs instead of initializers."""
        self.runtime_shapes = runtime_shapes
        self.solution = Solution(None)
        """The solution of the node being emitted; its attribute terms are read through it."""
        self.opset = opset
        self.values = values
        self.fragment = Fragment()
        self.made_nodes = 0
        self.made_arrays = 0
        self.fan_in: dict[str, int] = {}
        """The fan-in each weight was drawn for (`draw_values`), so it can be drawn anew."""

    def write(self, n: GNode) -> Fragment:
        """Emit one graph node; its tensors are named `tname(id)`."""
        self.solution = n.solution
        self.fragment = Fragment()
        n.op.emit(self, [tname(i) for i in n.inputs], [tname(o) for o in n.outputs])
        return self.fragment

    def ival(self, term: Dim) -> int:
        return self.solution.eval(term)

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any) -> None:
        name = f"n{self.made_nodes}_{op_type}"
        self.made_nodes += 1
        self.fragment.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=name, **attrs))

    def const_i64(self, values: Sequence[int]) -> str:
        return self._initializer("c", np.asarray(values, dtype=np.int64))

    def const(self, array: np.ndarray) -> str:
        """An op-owned constant of any dtype (clip bounds, shift amounts, indices)."""
        return self._initializer("c", np.asarray(array))

    def shape_operand(self, values: Sequence[int] | np.ndarray, dtype: type = np.int64) -> str:
        """A shape-like operand: a constant, or (the `runtime_shapes` share of the time) a
        graph input holding the same values, which a compiler cannot fold as a constant
        (constant folding over runtime values is where TVM and onnxruntime bugs live)."""
        array: np.ndarray = np.asarray(values, dtype=dtype)
        if self.runtime_shapes and self.values.random() < self.runtime_shapes:
            return self.runtime(array)
        return self._initializer("c", array)

    def runtime(self, array: np.ndarray) -> str:
        """A value the node reads as a graph input of its own."""
        name = f"{RUNTIME_PREFIX}{self.made_arrays}"
        self.made_arrays += 1
        self.fragment.runtime[name] = np.asarray(array)
        return name

    def weight(self, shape: Sequence[int], dtype: DType, fan_in: int = 1) -> str:
        name = self._initializer("w", draw_values(self.values, shape, dtype, fan_in))
        self.fan_in[name] = fan_in
        return name

    def _initializer(self, prefix: str, array: np.ndarray) -> str:
        name = f"{prefix}{self.made_arrays}"
        self.made_arrays += 1
        self.fragment.arrays[name] = array
        return name


def emit_model(
    graph: Graph,
    opset: int,
    values: np.random.Generator,
    as_weight: set[int],
    on_node: NodeHook | None = None,
    leaves: Mapping[str, np.ndarray] | None = None,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Build the ModelProto; placeholders in `as_weight` become initializers, the rest inputs.

    A node already written while the graph grew (`GNode.fragment`) is used as written;
    `leaves` then holds the values of placeholders and weights (generator.witness), and
    `values` draws only what it lacks. Otherwise every value is drawn here, placeholders
    first, in one order per graph.
    `on_node` sees each graph node with the ONNX nodes it was written as (coverage).
    """
    em = OnnxEmitter(opset, values)
    leaves = leaves or {}

    def value_info(i: int) -> onnx.ValueInfoProto:
        t = graph.tensors[i]
        return helper.make_tensor_value_info(tname(i), t.dtype.onnx, [em.ival(d) for d in t.shape])

    inputs: dict[str, np.ndarray] = {}
    graph_inputs = []
    initializers: list[onnx.TensorProto] = []
    for p in sorted(graph.placeholders):
        t = graph.tensors[p]
        array = leaves.get(tname(p))
        if array is None:
            array = draw_values(values, [em.ival(d) for d in t.shape], t.dtype)
        if p in as_weight:
            initializers.append(numpy_helper.from_array(array, tname(p)))
        else:
            inputs[tname(p)] = array
            graph_inputs.append(value_info(p))
    nodes: list[onnx.NodeProto] = []
    for n in graph.topological():
        fragment = n.fragment if n.fragment is not None else em.write(n)
        nodes += fragment.nodes
        initializers += [numpy_helper.from_array(leaves.get(k, a), k) for k, a in fragment.arrays.items()]
        for k, a in fragment.runtime.items():
            inputs[k] = a
            graph_inputs.append(helper.make_tensor_value_info(k, DType.from_numpy(a.dtype).onnx, list(a.shape)))
        if on_node is not None:
            on_node(n, fragment.nodes)
    outputs = [value_info(o) for o in graph.sinks()]
    g = helper.make_graph(nodes, "fuzzbot_graph", graph_inputs, outputs, initializer=initializers)
    proto = helper.make_model(
        g,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name=PRODUCER,
        ir_version=IR_VERSION.get(opset, 8),
    )
    return proto, inputs
