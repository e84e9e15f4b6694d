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
from reducers.subgraphs import reads


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
            needed.update(i for i in reads(node) if i)
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
    used = {i for n in live for i in reads(n) if i} | out_names
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
    for name in dict.fromkeys(i for n in nodes for i in reads(n) if i and i not in produced and i not in outside):
        value = values.get(name) if values is not None else None
        vi = value_info_for(name, value, types.get(name))
        if vi is None:
            return None
        inputs.append(vi)
        if value is not None:
            feeds[name] = value
    outputs = [o for o in g.output if o.name in produced]
    read = {i for n in nodes for i in reads(n)} | {o.name for o in outputs}
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
    predicate decide, not shape inference. A dim_param stays where all its dims keep one
    size above 1 (`_kept_dim_params`); otherwise each of its dims becomes static."""
    m = copy_model(case.model)
    g = m.graph
    feeds = dict(case.inputs)
    for name, window in windows.items():
        if name in feeds:
            feeds[name] = np.ascontiguousarray(feeds[name][tuple(slice(start, stop) for start, stop in window)])
    kept = _kept_dim_params(g.input, feeds)
    for vi in g.input:
        feed = feeds.get(vi.name)
        cut = windows.get(vi.name)
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.dim_param in kept or (cut is None and not d.dim_param):
                continue
            if cut is not None:
                size = cut[axis][1] - cut[axis][0]
            elif feed is not None and axis < feed.ndim:
                size = int(feed.shape[axis])
            else:
                continue  # no size to make it static at: an external check's model keeps it
            d.Clear()
            d.dim_value = size
    for vi in g.output:
        vi.type.tensor_type.ClearField("shape")
    made = rebuild(m, g.node, g.input, g.output, g.initializer, feeds)
    if made is not None and any(d.dim_param for v in made.model.graph.input for d in v.type.tensor_type.shape.dim):
        # Strict inference cannot see a kept name's new size meet a static dim (a [batch]
        # cut to 2 against a weight's 13); the model at its feeds' sizes can.
        return made if static_dims(made) is not None else None
    return made


def _kept_dim_params(inputs: Iterable[onnx.ValueInfoProto], feeds: Mapping[str, np.ndarray]) -> set[str]:
    """The dim_params that stay true of the new feeds: a name promises its dims are equal,
    so one whose dims now differ in size (one cut, another not) is made static instead, as
    is one cut to size 1, which broadcasting reads as a static 1 (the generator's rule too)."""
    sizes: dict[str, set[int]] = {}
    for vi in inputs:
        feed = feeds.get(vi.name)
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.dim_param:
                size = int(feed.shape[axis]) if feed is not None and axis < feed.ndim else -1
                sizes.setdefault(d.dim_param, set()).add(size)
    return {name for name, held in sizes.items() if len(held) == 1 and min(held) > 1}


def static_dims(case: Candidate) -> Candidate | None:
    """Every dim_param of the graph inputs replaced by the size its feed has, outputs
    re-inferred: a static repro, where the bug does not need the dims unknown. None when
    the model has no symbolic input dim (or a feed to size one by is missing)."""
    m = copy_model(case.model)
    g = m.graph
    changed = False
    for vi in g.input:
        feed = case.inputs.get(vi.name)
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.dim_param or not d.HasField("dim_value"):
                if feed is None or axis >= feed.ndim:
                    return None
                d.Clear()
                d.dim_value = int(feed.shape[axis])
                changed = True
    if not changed:
        return None
    for vi in g.output:  # re-inferred; the rank stays, for an output inference cannot size
        for d in vi.type.tensor_type.shape.dim:
            d.Clear()
    return rebuild(m, g.node, g.input, g.output, g.initializer, case.inputs)


def input_shapes(case: Candidate) -> dict[str, list[int]]:
    """Each graph input's dims, a symbolic one read off its feed (-1 where there is none)."""
    shapes: dict[str, list[int]] = {}
    for vi in case.model.graph.input:
        feed = case.inputs.get(vi.name)
        dims = []
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value"):
                dims.append(d.dim_value)
            else:
                dims.append(int(feed.shape[axis]) if feed is not None and axis < feed.ndim else -1)
        shapes[vi.name] = dims
    return shapes


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
