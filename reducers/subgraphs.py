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

import numpy as np
import onnx
from onnx import helper, numpy_helper

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


def loop_trims(case: Candidate) -> Iterator[Candidate]:
    """Each Loop run fewer times: its trip count (a constant or a graph input's value) at 1,
    then halved, and its early stop (a body condition `iteration < K`) at 0, then halved. A
    bug seen after five iterations is read faster after one, when one is enough. The scan
    outputs a graph returns get the new iteration count as their first dim."""
    for index, node in enumerate(case.model.graph.node):
        if node.op_type != "Loop" or node.domain not in ("", "ai.onnx") or not node.input or not node.input[0]:
            continue
        trips = _int_value(case, node.input[0])
        stop = _early_stop(node)
        if trips is None:
            continue
        runs = trips if stop is None else min(trips, stop[1] + 1)
        for new_trips in dict.fromkeys((1, (trips + 1) // 2)):
            if new_trips < trips and new_trips < runs:
                made = _trimmed(case, index, trips=new_trips, stop=None if stop is None else stop[1])
                if made is not None:
                    yield made
        if stop is not None:
            for new_stop in dict.fromkeys((0, stop[1] // 2)):
                if new_stop < stop[1] and new_stop + 1 < trips:
                    made = _trimmed(case, index, trips=trips, stop=new_stop)
                    if made is not None:
                        yield made


def _int_value(case: Candidate, name: str) -> int | None:
    """The one integer `name` holds, from an initializer or the case's feeds."""
    for t in case.model.graph.initializer:
        if t.name == name:
            value = numpy_helper.to_array(t)
            return int(value.reshape(-1)[0]) if value.size == 1 else None
    fed = case.inputs.get(name)
    return int(fed.reshape(-1)[0]) if fed is not None and fed.size == 1 else None


def _early_stop(node: onnx.NodeProto) -> tuple[int, int] | None:
    """(index in the body, K) of the Constant K in the body's condition `iteration < K`."""
    body = next((a.g for a in node.attribute if a.name == "body"), None)
    if body is None or len(body.input) < 1 or len(body.output) < 1:
        return None
    made = {o: i for i, n in enumerate(body.node) for o in n.output}
    cond = made.get(body.output[0].name)
    if cond is None or body.node[cond].op_type != "Less" or body.node[cond].input[0] != body.input[0].name:
        return None
    k = made.get(body.node[cond].input[1])
    if k is None or body.node[k].op_type != "Constant":
        return None
    value = next((numpy_helper.to_array(a.t) for a in body.node[k].attribute if a.name == "value"), None)
    return (k, int(value.reshape(-1)[0])) if value is not None and value.size == 1 else None


def _trimmed(case: Candidate, index: int, trips: int, stop: int | None) -> Candidate | None:
    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    g = m.graph
    node = g.node[index]
    feeds = dict(case.inputs)
    name = node.input[0]
    for t in g.initializer:
        if t.name == name:
            t.CopyFrom(numpy_helper.from_array(np.full(tuple(t.dims), trips, dtype=np.int64), name))
    if name in feeds:
        feeds[name] = np.full_like(feeds[name], trips)
    early = _early_stop(node)
    if early is not None and stop is not None:
        body = next(a.g for a in node.attribute if a.name == "body")
        for a in body.node[early[0]].attribute:
            if a.name == "value":
                a.t.CopyFrom(numpy_helper.from_array(np.array(stop, dtype=np.int64), a.t.name))
    runs = trips if stop is None else min(trips, stop + 1)
    scans = set(node.output[len(node.input) - 2 :])
    after = _downstream(g, scans)
    for out in g.output:
        dims = out.type.tensor_type.shape.dim
        if out.name in scans and len(dims) > 0:
            dims[0].Clear()
            dims[0].dim_value = runs
        elif out.name in after:  # its shape may follow the count: inference says what it can
            for d in dims:
                d.Clear()
    checked = finalize(m)
    if checked is None:
        return None
    names = {v.name for v in checked.graph.input}
    return Candidate(checked, {k: v for k, v in feeds.items() if k in names})


def _downstream(g: onnx.GraphProto, names: set[str]) -> set[str]:
    """Every tensor computed from `names`, in a graph whose nodes are in order."""
    reached = set(names)
    for node in g.node:
        if any(i in reached for i in reads(node)):
            reached.update(node.output)
    return reached - names


__all__ = ["branch_inlines", "loop_trims", "outer_reads", "reads"]
