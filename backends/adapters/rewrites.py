"""Rewrite keys from two graphs: the one a system was given and the one its optimizer made.

A system's optimized graph is the only record of which rewrites it performed that needs no
instrumentation of the build under test. The keys (generator.coverage.Coverage.rewrites)
are `+domain::Op` for nodes of a type the optimized graph has more of (a fusion's result,
an expansion) and `-domain::Op` for nodes it has fewer of (eliminations, folding), the
default domain written `ai.onnx`.

The ONNX side is read without onnx: a worker runs under the side's own interpreter, and a
release venv of onnxruntime has protobuf but not onnx. Only the fields naming nodes are
decoded; initializers are skipped by their length, so a model with large weights costs no
more than a small one. Where protobuf imports, a message class built at run time with just
those fields parses in C (about a tenth of a millisecond less per compile, on the critical
path of every test); elsewhere a wire walker in the standard library reads the same fields.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any

DEFAULT_DOMAIN = "ai.onnx"

_MODEL_GRAPH = 7
_GRAPH_NODE = 1
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP_TYPE, _NODE_ATTRIBUTE, _NODE_DOMAIN = 1, 2, 3, 4, 5, 7
_ATTRIBUTE_GRAPH, _ATTRIBUTE_GRAPHS = 6, 11


class WireError(ValueError):
    """The bytes are not a protobuf message this reader can walk."""


def _varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise WireError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise WireError("varint over 64 bits")


def _fields(data: memoryview) -> Iterator[tuple[int, memoryview | None]]:
    """(field number, payload) per field; the payload of a non-length-delimited field is None."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(data, pos)
            yield field, None
        elif wire == 1 or wire == 5:
            pos += 8 if wire == 1 else 4
            yield field, None
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > end:
                raise WireError("field runs past the message")
            yield field, data[pos : pos + size]
            pos += size
        else:
            raise WireError(f"wire type {wire}")
    if pos != end:
        raise WireError("fixed-size field runs past the message")


def _graph_ops(graph: memoryview, counts: Counter[str]) -> None:
    for field, node in _fields(graph):
        if field == _GRAPH_NODE and node is not None:
            _node_ops(node, counts)


def _node_ops(node: memoryview, counts: Counter[str]) -> None:
    """The node's own type, then the nodes of its subgraphs (If, Loop, Scan bodies), which
    optimizers rewrite too."""
    key, _, _, subgraphs = _node_fields(node)
    for graph in subgraphs:
        _graph_ops(graph, counts)
    counts[key] += 1


def _node_fields(node: memoryview) -> tuple[str, list[str], list[str], list[memoryview]]:
    """A node's `domain::Op`, inputs, outputs and subgraphs."""
    op_type, domain = "", ""
    inputs: list[str] = []
    made: list[str] = []
    subgraphs: list[memoryview] = []
    for field, payload in _fields(node):
        if payload is None:
            continue
        if field == _NODE_OP_TYPE:
            op_type = bytes(payload).decode()
        elif field == _NODE_DOMAIN:
            domain = bytes(payload).decode()
        elif field == _NODE_INPUT:
            inputs.append(bytes(payload).decode())
        elif field == _NODE_OUTPUT:
            made.append(bytes(payload).decode())
        elif field == _NODE_ATTRIBUTE:
            subgraphs += [
                g for sub, g in _fields(payload) if sub in (_ATTRIBUTE_GRAPH, _ATTRIBUTE_GRAPHS) and g is not None
            ]
    return f"{domain or DEFAULT_DOMAIN}::{op_type}", inputs, made, subgraphs


def node_names(model: bytes) -> set[str]:
    """The names of a serialized ModelProto's nodes, subgraphs' included: what a build's
    message names a node by, when the node is the model's own and not one its optimizer
    made. The standard library alone: the worker's venv may hold no onnx."""
    names: set[str] = set()
    graphs = [g for field, g in _fields(memoryview(model)) if field == _MODEL_GRAPH and g is not None]
    while graphs:
        for field, node in _fields(graphs.pop()):
            if field != _GRAPH_NODE or node is None:
                continue
            names.update(bytes(p).decode() for f, p in _fields(node) if f == _NODE_NAME and p is not None)
            graphs += _node_fields(node)[3]
    return names


def optimizer_made(pattern: str, message: str, model: bytes) -> bool:
    """Whether a refusal (`pattern`'s groups `op` and `node`: Adapter.refused_node) names a
    node the model does not have, of an op type it does not have either: one the build's
    optimizer made, whose missing kernel is its bug. A model's node the optimizer renamed is
    still the model's (onnxruntime's If folding calls a branch's Cos `_if_else_branch_Cos`,
    and its missing float64 kernel is a declared limit)."""
    found = re.search(pattern, message)
    if found is None:
        return False
    ops = {key.rsplit("::", 1)[-1] for key in wire_op_counts(model)}
    return found["node"] not in node_names(model) and found["op"] not in ops


def onnx_op_counts(model: bytes) -> Counter[str]:
    """`domain::Op` -> nodes of that type in a serialized ModelProto, subgraphs included."""
    parse = message_parser()
    if parse is not None:
        try:
            return parse(model)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError; the walker names what is wrong
            pass
    return wire_op_counts(model)


def wire_op_counts(model: bytes) -> Counter[str]:
    """`onnx_op_counts` by the standard library alone."""
    counts: Counter[str] = Counter()
    for field, graph in _fields(memoryview(model)):
        if field == _MODEL_GRAPH and graph is not None:
            _graph_ops(graph, counts)
    return counts


@cache
def message_parser() -> Callable[[bytes], Counter[str]] | None:
    """A parser of the fields the walker reads, or None where protobuf is missing or too old."""
    try:
        model = _message_class()
    except Exception:  # noqa: BLE001 - any protobuf that cannot build it leaves the walker
        return None

    def graph_ops(graph: Any, counts: Counter[str]) -> None:
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.HasField("g"):
                    graph_ops(attribute.g, counts)
                for sub in attribute.graphs:
                    graph_ops(sub, counts)
            counts[f"{node.domain.decode() or DEFAULT_DOMAIN}::{node.op_type.decode()}"] += 1

    def parse(data: bytes) -> Counter[str]:
        message = model()
        message.ParseFromString(data)
        counts: Counter[str] = Counter()
        graph_ops(message.graph, counts)
        return counts

    return parse


def _message_class() -> Any:
    """ModelProto, GraphProto, NodeProto and AttributeProto cut down to the fields that name
    nodes, under the field numbers of onnx.proto; every other field is skipped unparsed."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="fuzzbot_node_types.proto", package="fuzzbot_nodes")
    shapes: dict[str, list[tuple[str, int, str | None, bool]]] = {
        "Model": [("graph", _MODEL_GRAPH, ".fuzzbot_nodes.Graph", False)],
        "Graph": [("node", _GRAPH_NODE, ".fuzzbot_nodes.Node", True)],
        "Node": [
            ("op_type", _NODE_OP_TYPE, None, False),
            ("attribute", _NODE_ATTRIBUTE, ".fuzzbot_nodes.Attribute", True),
            ("domain", _NODE_DOMAIN, None, False),
        ],
        "Attribute": [
            ("g", _ATTRIBUTE_GRAPH, ".fuzzbot_nodes.Graph", False),
            ("graphs", _ATTRIBUTE_GRAPHS, ".fuzzbot_nodes.Graph", True),
        ],
    }
    for name, fields in shapes.items():
        message = proto.message_type.add(name=name)
        for field_name, number, kind, repeated in fields:
            label = field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL
            added = message.field.add(name=field_name, number=number, label=label, type=field.TYPE_BYTES)
            if kind:
                added.type, added.type_name = field.TYPE_MESSAGE, kind
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    descriptor = pool.FindMessageTypeByName("fuzzbot_nodes.Model")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


MOVEMENT = frozenset(
    {"ReorderInput", "ReorderOutput", "Reshape", "Transpose", "Identity", "Squeeze", "Unsqueeze", "Cast"}
)
"""Node types that move or retype data around a kernel (onnxruntime's NCHWc layout adds a
ReorderOutput after every convolution it converts, and a Cast back to float16 after a
kernel it runs in float32): the kernel is the node before them. One that is the first
node of the graph is the kernel itself."""


def tensor_producers(model: bytes) -> dict[str, str]:
    """Tensor name -> `domain::Op` of the top-level node that computes it, looking through
    nodes that only move data: the kernel that ran, in an optimized graph (a fused node's
    type where a fusion took the tensor). Every tensor a node makes, not only the graph's
    outputs: a wrong output is blamed on the first wrong tensor upstream of it
    (bot.reduce.blame). Read by the wire walker alone: a small graph's nodes cost tens of
    microseconds."""
    made_by: dict[str, tuple[str, str]] = {}
    for field, graph in _fields(memoryview(model)):
        if field != _MODEL_GRAPH or graph is None:
            continue
        for sub, payload in _fields(graph):
            if payload is not None and sub == _GRAPH_NODE:
                kernel, inputs, made, _ = _node_fields(payload)
                made_by |= dict.fromkeys(made, (kernel, inputs[0] if inputs else ""))
    found: dict[str, str] = {}
    for name in made_by:
        tensor, hops = name, 0
        while tensor in made_by and hops < len(made_by):
            kernel, source = made_by[tensor]
            if kernel.rsplit("::", 1)[-1] not in MOVEMENT or source not in made_by:
                found[name] = kernel
                break
            tensor, hops = source, hops + 1
    return found


def rewrite_keys(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """`+type` -> nodes the optimized graph has more of, `-type` -> nodes it has fewer of."""
    keys: dict[str, int] = {}
    for op in sorted(set(before) | set(after)):
        change = after.get(op, 0) - before.get(op, 0)
        if change:
            keys[f"{'+' if change > 0 else '-'}{op}"] = abs(change)
    return keys
