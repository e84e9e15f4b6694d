"""Graph edits that turn one case into a smaller candidate.

Each edit builds a fresh model and ends in `rebuild`, which drops what nothing uses
any more (dead nodes, inputs, initializers) and runs the checker, so a pass never has
to think about leftovers, and an edit that breaks the model yields None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from reducers.candidate import Candidate, finalize, value_info_for


def copy_model(model: onnx.ModelProto) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    return m


def _live_nodes(nodes: Sequence[onnx.NodeProto], outputs: set[str]) -> list[onnx.NodeProto]:
    """Nodes that contribute to some graph output (one backward sweep over topological order)."""
    needed = set(outputs)
    keep: list[onnx.NodeProto] = []
    for node in reversed(nodes):
        if any(o in needed for o in node.output if o):
            keep.append(node)
            needed.update(i for i in node.input if i)
    return keep[::-1]


def rebuild(
    base: onnx.ModelProto,
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializers: Iterable[onnx.TensorProto],
    feeds: dict[str, np.ndarray],
) -> Candidate | None:
    """A checked case from these parts, with everything unused left out."""
    if not outputs:
        return None
    out_names = {o.name for o in outputs}
    live = _live_nodes(nodes, out_names)
    used = {i for n in live for i in n.input if i} | out_names
    m = copy_model(base)
    g = m.graph
    del g.node[:], g.input[:], g.output[:], g.initializer[:], g.value_info[:]
    g.node.extend(live)
    g.input.extend(v for v in inputs if v.name in used)
    g.output.extend(outputs)
    g.initializer.extend(t for t in initializers if t.name in used)
    checked = finalize(m)
    if checked is None:
        return None
    names = {v.name for v in checked.graph.input}
    return Candidate(checked, {k: v for k, v in feeds.items() if k in names})


def keep_nodes(
    case: Candidate,
    keep: Iterable[int],
    values: dict[str, np.ndarray] | None,
    types: dict[str, onnx.TypeProto],
) -> Candidate | None:
    """Only the nodes at `keep`. A tensor a kept node reads but no kept node makes
    becomes a graph input fed with its recorded value; a kept node whose results
    nobody reads any more has its first result made a graph output, so it is not
    dead code that a backend would silently drop."""
    g = case.model.graph
    nodes = [g.node[i] for i in sorted(set(keep))]
    produced = {o for n in nodes for o in n.output if o}
    outside = {i.name for i in g.initializer} | {i.name for i in g.input}
    feeds = dict(case.inputs)
    inputs = list(g.input)
    for name in dict.fromkeys(i for n in nodes for i in n.input if i and i not in produced and i not in outside):
        value = values.get(name) if values is not None else None
        vi = value_info_for(name, value, types.get(name))
        if vi is None:
            return None
        inputs.append(vi)
        if value is not None:
            feeds[name] = value
    outputs = [o for o in g.output if o.name in produced]
    read = {i for n in nodes for i in n.input} | {o.name for o in outputs}
    for n in nodes:
        if n.output and not any(o in read for o in n.output if o):
            vi = value_info_for(n.output[0], None, types.get(n.output[0]))
            if vi is None:
                return None
            outputs.append(vi)
    return rebuild(case.model, nodes, inputs, outputs, g.initializer, feeds)


def keep_outputs(case: Candidate, keep: Iterable[str]) -> Candidate | None:
    g = case.model.graph
    wanted = set(keep)
    outputs = [o for o in g.output if o.name in wanted]
    return rebuild(case.model, g.node, g.input, outputs, g.initializer, case.inputs)


def bypass(case: Candidate, index: int, source: str) -> Candidate | None:
    """Node `index` removed, its only result replaced by its input `source`."""
    g = case.model.graph
    node = g.node[index]
    produced = [o for o in node.output if o]
    if len(produced) != 1:
        return None
    target = produced[0]
    graph_outs = {o.name for o in g.output}
    if target in graph_outs and (source in graph_outs or not _made_by_node(g, source)):
        return None  # a graph output may not simply alias an input or another output
    nodes = []
    for i, n in enumerate(g.node):
        if i == index:
            continue
        copy = onnx.NodeProto()
        copy.CopyFrom(n)
        for j, name in enumerate(copy.input):
            if name == target:
                copy.input[j] = source
        nodes.append(copy)
    outputs = []
    for o in g.output:
        vi = onnx.ValueInfoProto()
        vi.CopyFrom(o)
        if vi.name == target:
            vi.name = source
        outputs.append(vi)
    return rebuild(case.model, nodes, g.input, outputs, g.initializer, case.inputs)


def _made_by_node(g: onnx.GraphProto, name: str) -> bool:
    return any(name in n.output for n in g.node)


def replace_initializer(case: Candidate, name: str, how: str) -> Candidate | None:
    """Initializer `name` filled with zeros or ones, or moved to a graph input ("input")."""
    g = case.model.graph
    inits = []
    feeds = dict(case.inputs)
    inputs = list(g.input)
    for t in g.initializer:
        if t.name != name:
            inits.append(t)
            continue
        value = numpy_helper.to_array(t)
        if how == "input":
            vi = value_info_for(name, value, None)
            assert vi is not None
            inputs.append(vi)
            feeds[name] = value
        else:
            filled = np.zeros_like(value) if how == "zeros" else np.ones_like(value)
            inits.append(numpy_helper.from_array(filled, name))
    return rebuild(case.model, g.node, inputs, g.output, inits, feeds)


def drop_attribute(case: Candidate, index: int, attr: str) -> Candidate | None:
    m = copy_model(case.model)
    node = m.graph.node[index]
    kept = [a for a in node.attribute if a.name != attr]
    del node.attribute[:]
    node.attribute.extend(kept)
    g = m.graph
    return rebuild(m, g.node, g.input, g.output, g.initializer, case.inputs)


def reshape_input(case: Candidate, name: str, dims: Sequence[int]) -> Candidate | None:
    """Graph input `name` given smaller `dims`, keeping the leading elements of its value."""
    return crop_inputs(case, {name: [(0, size) for size in dims]})


def crop_inputs(case: Candidate, windows: Mapping[str, Sequence[tuple[int, int]]]) -> Candidate | None:
    """Graph inputs cut to a (start, stop) window in each dimension, their values cut alike:
    a window off the origin keeps the elements a wrong result needs, and inputs that
    broadcast together are cut together. Output shapes are inferred again; one that
    depends on an input's value (Resize sizes, Reshape shape, fed as a graph input after a
    cut) is left unknown rather than refusing the candidate: the checker and the bug
    predicate decide, not shape inference."""
    m = copy_model(case.model)
    g = m.graph
    for vi in g.input:
        if vi.name in windows:
            for d, (start, stop) in zip(vi.type.tensor_type.shape.dim, windows[vi.name], strict=True):
                d.Clear()
                d.dim_value = stop - start
    for vi in g.output:
        vi.type.tensor_type.ClearField("shape")
    feeds = dict(case.inputs)
    for name, window in windows.items():
        if name in feeds:
            feeds[name] = np.ascontiguousarray(feeds[name][tuple(slice(start, stop) for start, stop in window)])
    return rebuild(m, g.node, g.input, g.output, g.initializer, feeds)


def short_names(case: Candidate) -> Candidate | None:
    """Tensors renamed x0.. (inputs), w0.. (initializers), t0.. (the rest), nodes n0..:
    what a maintainer reads in a three-node repro."""
    m = copy_model(case.model)
    g = m.graph
    names: dict[str, str] = {}
    for prefix, group in (("x", [v.name for v in g.input]), ("w", [t.name for t in g.initializer])):
        for name in group:
            names.setdefault(name, f"{prefix}{len(names)}")
    count = 0
    for node in g.node:
        for out in node.output:
            if out and out not in names:
                names[out] = f"t{count}"
                count += 1
    if all(k == v for k, v in names.items()) and all(n.name == f"n{i}" for i, n in enumerate(g.node)):
        return None
    for i, node in enumerate(g.node):
        node.name = f"n{i}"
        node.input[:] = [names.get(x, x) for x in node.input]
        node.output[:] = [names.get(x, x) for x in node.output]
    for vi in [*g.input, *g.output]:
        vi.name = names.get(vi.name, vi.name)
    for t in g.initializer:
        t.name = names[t.name]
    feeds = {names.get(k, k): v for k, v in case.inputs.items()}
    return rebuild(m, g.node, g.input, g.output, g.initializer, feeds)
