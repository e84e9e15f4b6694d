"""What a node's subgraphs read from the graph around them, and the edit that inlines an If.

An If's branches (and a Loop's or Scan's body) may read tensors of the enclosing graph by
name, without listing them as the node's inputs. Every edit that asks which tensors a node
reads must count those reads, or it drops the producer of a value a branch still needs and
the candidate is no model at all. The generator knows the same rule
(generator.ops.base.captured_names); reducers import nothing of ours, so it is stated here
again over plain onnx.
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx
from onnx import helper

from reducers.candidate import Candidate, finalize


def outer_reads(node: onnx.NodeProto) -> tuple[str, ...]:
    """The enclosing graph's tensors `node`'s subgraphs read, in the order first read."""
    seen: dict[str, None] = {}
    for a in node.attribute:
        for g in (a.g,) if a.type == onnx.AttributeProto.GRAPH else tuple(a.graphs):
            for name in _free_names(g):
                seen.setdefault(name)
    return tuple(seen)


def _free_names(g: onnx.GraphProto) -> list[str]:
    defined = {v.name for v in g.input} | {t.name for t in g.initializer}
    free: list[str] = []
    for n in g.node:
        free += [x for x in (*n.input, *outer_reads(n)) if x and x not in defined]
        defined.update(n.output)
    return free + [o.name for o in g.output if o.name not in defined]


def reads(node: onnx.NodeProto) -> tuple[str, ...]:
    """Every tensor `node` reads: its inputs, then what its subgraphs read from outside."""
    return (*node.input, *outer_reads(node))


def branch_inlines(case: Candidate) -> Iterator[Candidate]:
    """Each If replaced by the nodes of one of its branches, then of the other: a bug that
    does not need the If shows in a straight-line graph a maintainer reads at once. A
    branch whose result is an outer tensor as it is becomes an Identity."""
    for index, node in enumerate(case.model.graph.node):
        if node.op_type != "If" or node.domain not in ("", "ai.onnx"):
            continue
        for attr in ("then_branch", "else_branch"):
            branch = next((a.g for a in node.attribute if a.name == attr), None)
            if branch is None or len(branch.output) != len(node.output) or branch.initializer:
                continue
            inlined = _inline(case.model, index, branch)
            checked = finalize(inlined)
            if checked is not None:
                names = {v.name for v in checked.graph.input}
                yield Candidate(checked, {k: v for k, v in case.inputs.items() if k in names})


def _inline(model: onnx.ModelProto, index: int, branch: onnx.GraphProto) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    node = g.node[index]
    renamed = {o.name: out for o, out in zip(branch.output, node.output, strict=True)}
    nodes: list[onnx.NodeProto] = []
    for inner in branch.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(inner)
        for i, name in enumerate(copy.input):
            copy.input[i] = renamed.get(name, name)
        for i, name in enumerate(copy.output):
            copy.output[i] = renamed.get(name, name)
        nodes.append(copy)
    made = {o for n in branch.node for o in n.output}
    for o, out in zip(branch.output, node.output, strict=True):
        if o.name not in made:  # the branch hands an outer tensor through
            nodes.append(helper.make_node("Identity", [o.name], [out], name=f"{out}_identity"))
    rest = [n for i, n in enumerate(g.node) if i != index]
    del g.node[:]
    g.node.extend([*rest[:index], *nodes, *rest[index:]])
    return m


__all__ = ["branch_inlines", "outer_reads", "reads"]
