"""The graph IR that growth builds and emission walks."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx

from generator.binning import Solution
from generator.ops.base import OpSpec
from generator.symbolic import AbsTensor


@dataclass
class Fragment:
    """What one graph node was written as (generator.emit): its ONNX nodes, and the
    initializers it owns by name (`c<n>` constants, `w<n>` weights), in the order they were
    made. Kept on the node it belongs to, so that repair can rewrite one node's part."""

    nodes: list[onnx.NodeProto] = field(default_factory=list)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    runtime: dict[str, np.ndarray] = field(default_factory=dict)
    """Values it reads as graph inputs (`r<n>`): shapes, scales and bounds that a compiler
    cannot fold as constants. Fixed like constants: no value search moves them."""


@dataclass
class GNode:
    op: OpSpec
    inputs: list[int]
    outputs: list[int]
    solution: Solution
    """The values of this node's attribute variables."""
    binned: list[tuple[str, int]] = field(default_factory=list)
    """(variable key, solved value) of each binned variable this insertion created."""
    fragment: Fragment | None = None
    """The ONNX it was written as when it was inserted (generator.witness); None: written
    at emission."""


Checkpoint = tuple[int, int, tuple[int, ...]]
"""A graph state to return to: tensor count, node count, placeholders."""


@dataclass
class Graph:
    """Tensors by id; nodes in insertion order (backward insertion breaks topological order)."""

    tensors: list[AbsTensor] = field(default_factory=list)
    nodes: list[GNode] = field(default_factory=list)
    placeholders: list[int] = field(default_factory=list)
    producer_op: dict[int, str] = field(default_factory=dict)
    """The op type that produces each non-placeholder tensor."""
    consumer_ops: dict[int, list[str]] = field(default_factory=dict)
    """The op types that read each tensor."""

    def add_node(self, node: GNode) -> None:
        self.nodes.append(node)
        for o in node.outputs:
            self.producer_op[o] = node.op.op_type
        for i in node.inputs:
            self.consumer_ops.setdefault(i, []).append(node.op.op_type)

    def size(self) -> int:
        """What the nodes count toward a model's node budget (a rewrite template counts
        about the ONNX nodes it writes)."""
        return sum(n.op.node_cost for n in self.nodes)

    def checkpoint(self) -> Checkpoint:
        return len(self.tensors), len(self.nodes), tuple(self.placeholders)

    def rollback(self, mark: Checkpoint) -> None:
        """Undo the insertions made since `mark` (the last node first)."""
        tensors, nodes, placeholders = mark
        while len(self.nodes) > nodes:
            node = self.nodes.pop()
            for o in node.outputs:
                self.producer_op.pop(o, None)
            for i in node.inputs:
                readers = self.consumer_ops[i]
                readers.pop()
                if not readers:
                    del self.consumer_ops[i]
        del self.tensors[tensors:]
        self.placeholders[:] = placeholders

    def add_tensor(self, t: AbsTensor) -> int:
        self.tensors.append(t)
        return len(self.tensors) - 1

    def topological(self) -> list[GNode]:
        """Nodes with producers first; ties keep insertion order, so the result is deterministic."""
        producer = {o: i for i, n in enumerate(self.nodes) for o in n.outputs}
        order: list[GNode] = []
        state: dict[int, int] = {}

        def visit(i: int) -> None:
            if state.get(i) == 2:
                return
            if state.get(i) == 1:
                raise ValueError("cycle in generated graph")
            state[i] = 1
            for t in self.nodes[i].inputs:
                if t in producer:
                    visit(producer[t])
            state[i] = 2
            order.append(self.nodes[i])

        for i in range(len(self.nodes)):
            visit(i)
        return order

    def sinks(self) -> list[int]:
        consumed = {t for n in self.nodes for t in n.inputs}
        return [o for n in self.topological() for o in n.outputs if o not in consumed]
