"""The compiler's own IR: ONNX is read once, so passes and kernels never touch protobufs."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper


@dataclass
class Node:
    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, float] = field(default_factory=dict)


@dataclass
class Graph:
    nodes: list[Node]
    inputs: list[str]
    outputs: list[str]
    constants: dict[str, np.ndarray]

    def consumers(self, name: str) -> list[Node]:
        return [n for n in self.nodes if name in n.inputs]


def load_graph(model_bytes: bytes) -> Graph:
    model = onnx.load_from_string(model_bytes)
    g = model.graph
    constants = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    nodes = [Node(n.op_type, list(n.input), list(n.output)) for n in g.node]
    inputs = [i.name for i in g.input if i.name not in constants]
    return Graph(nodes, inputs, [o.name for o in g.output], constants)
