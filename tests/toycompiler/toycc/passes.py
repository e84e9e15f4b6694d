"""Graph passes run at O1; each takes a graph and returns a rewritten one."""

from __future__ import annotations

from collections.abc import Callable

from .graph import Graph, Node

Pass = Callable[[Graph], Graph]


def fuse_mul_add(graph: Graph) -> Graph:
    """Mul whose only use is the first operand of Add or Sub becomes one FusedMulAdd node,
    so the product is never materialized. (`Add(p, p)` uses the product twice: fusing it
    would read a tensor nobody computes any more, as fuzzbot found in this pass.)"""
    nodes = list(graph.nodes)
    for mul in [n for n in nodes if n.op == "Mul"]:
        product = mul.outputs[0]
        users = graph.consumers(product)
        if len(users) != 1 or product in graph.outputs:
            continue
        user = users[0]
        if user.op not in ("Add", "Sub") or user.inputs[0] != product or user.inputs[1] == product:
            continue
        sign = 1.0 if user.op == "Add" else -1.0
        fused = Node("FusedMulAdd", [*mul.inputs, user.inputs[1]], list(user.outputs), {"sign": sign})
        nodes[nodes.index(user)] = fused
        nodes.remove(mul)
    return Graph(nodes, graph.inputs, graph.outputs, graph.constants)
