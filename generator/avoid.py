"""Triggers of bugs already known, steered away from while a graph grows.

A campaign that keeps hitting a bug it has already reduced spends its budget on
occurrences: fifteen minutes of TVM fuzzing once went 40% to the same few frontend
crashes. Once a bug has a reduced trigger (a few nodes, with the dtypes the failure
needs), an insertion that would complete that trigger in the growing graph is refused,
most of the time, and the grower picks another op, as it does when the witness refuses
unsafe values. Some completions are still let through (`strength` below 1), so a bug that
is fixed, or that hides a second bug behind it, is still met now and then.

A trigger is matched as a subgraph: its nodes by op type, first input's dtype and the
attributes the failure needs, its edges as producer-to-consumer links between them. A
bug is avoided only as narrowly as its evidence: a persistent defect of Pad's "wrap"
mode, learned as "Pad, any attributes", once kept every Pad out of a campaign, and with
it a regression that needed a constant Pad in front of another op. The reducer drops
every optional attribute the failure does not need (reducers.passes.default_attributes),
so the attributes a reduced trigger still writes are its evidence; other forms of the op
stay as likely as ever, and the matching form is only made rarer (`strength`), never
removed. A rewrite template counts as the ONNX nodes it wrote: its insertion is checked
once they are written (generator.grow), so a trigger inside it, or one it completes with
the graph around it, is refused like any other. Every draw comes from the graph's own
seeded rng, and only when a trigger matches, so a campaign that knows no bug grows the
same graphs as before, and the same seed and known triggers give the same model.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from generator.emit import tname
from generator.graph import Graph

Attrs = tuple[tuple[str, str], ...]
"""A node's attributes as (name, canonical text) pairs, sorted by name."""


def attribute_text(attribute: onnx.AttributeProto) -> str | None:
    """One attribute's value as text that a generated node and its reduced copy share (floats
    at float32, as ONNX stores them); None for a subgraph, which no trigger is matched on."""
    if attribute.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
        return None
    value = helper.get_attribute_value(attribute)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, float):
        return repr(float(np.float32(value)))
    if isinstance(value, list):
        items = [v.decode(errors="replace") if isinstance(v, bytes) else v for v in value]
        return repr([float(np.float32(v)) if isinstance(v, float) else v for v in items])
    if isinstance(value, onnx.TensorProto):
        return repr(onnx.numpy_helper.to_array(value).tolist())
    return repr(value)


def node_attributes(node: onnx.NodeProto) -> Attrs:
    texts = ((a.name, attribute_text(a)) for a in node.attribute)
    return tuple(sorted((name, text) for name, text in texts if text is not None))


@dataclass(frozen=True)
class Unit:
    """One ONNX op of the growing graph: a graph node, or one of the nodes a rewrite
    template wrote (generator.patterns), so a trigger inside or across a template is
    matched as it is anywhere else."""

    op_type: str
    dtype: str | None
    """The dtype of the graph node's first input (a template's, for its nodes)."""
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    node: int
    """Index of the graph node it belongs to."""
    attrs: Attrs | None = None
    """Its attributes as written; None where the node is not written yet (no witness)."""


@dataclass(frozen=True)
class PatternNode:
    op_type: str
    dtypes: frozenset[str] | None = None
    """The first input's dtypes the failure shows at; None: any."""
    attrs: frozenset[tuple[str, str]] | None = None
    """Attribute values the failure needs (name, canonical text); None or empty: any."""

    def admits(self, unit: Unit) -> bool:
        if unit.op_type != self.op_type:
            return False
        if not (self.dtypes is None or unit.dtype is None or unit.dtype in self.dtypes):
            return False
        return not self.attrs or unit.attrs is None or self.attrs <= set(unit.attrs)


@dataclass(frozen=True)
class Trigger:
    """A known bug's reduced trigger, as a pattern to keep out of new graphs."""

    nodes: tuple[PatternNode, ...]
    edges: tuple[tuple[int, int], ...] = ()
    """(producer, consumer) indices into `nodes`."""
    bug: str = ""
    """The bug's fingerprint, for counting what was steered away from."""


def units(graph: Graph) -> list[Unit]:
    """The graph's ops: a template's as the ONNX nodes it wrote, any other node as itself."""
    out: list[Unit] = []
    for i, n in enumerate(graph.nodes):
        dtype = str(n.op.ins[0].dtype) if n.op.ins else None
        written = n.fragment.nodes if n.fragment is not None else None
        if written is None or n.op.node_cost <= 1:
            main = next((w for w in written or () if w.op_type == n.op.op_type), None)
            attrs = node_attributes(main) if main is not None else None
            out.append(Unit(n.op.op_type, dtype, tuple(map(tname, n.inputs)), tuple(map(tname, n.outputs)), i, attrs))
            continue
        out += [Unit(w.op_type, dtype, tuple(w.input), tuple(w.output), i, node_attributes(w)) for w in written]
    return out


Links = tuple[dict[int, set[int]], dict[int, set[int]]]


def _links(flat: list[Unit]) -> Links:
    """Unit-to-unit successors and predecessors, through the tensors between them."""
    producer = {t: i for i, u in enumerate(flat) for t in u.outputs}
    succ: dict[int, set[int]] = defaultdict(set)
    pred: dict[int, set[int]] = defaultdict(set)
    for j, u in enumerate(flat):
        for t in u.inputs:
            i = producer.get(t)
            if i is not None:
                succ[i].add(j)
                pred[j].add(i)
    return succ, pred


def embeds_at(trigger: Trigger, flat: list[Unit], at: int, links: Links | None = None) -> bool:
    """Whether `trigger` appears among the units `flat` with one of its nodes at unit `at`."""
    links = links or _links(flat)
    unit = flat[at]
    return any(p.admits(unit) and _extend({i: at}, trigger, flat, links) for i, p in enumerate(trigger.nodes))


def _extend(mapping: dict[int, int], trigger: Trigger, flat: list[Unit], links: Links) -> bool:
    """Backtracking over the pattern's nodes, next to ones already placed where it can."""
    if len(mapping) == len(trigger.nodes):
        return True
    succ, pred = links
    todo, cands = _next_node(mapping, trigger, flat, succ, pred)
    used = set(mapping.values())
    for g in sorted(cands):
        if g in used or not trigger.nodes[todo].admits(flat[g]):
            continue
        placed = {**mapping, todo: g}
        edges_hold = all(placed[b] in succ[placed[a]] for a, b in trigger.edges if a in placed and b in placed)
        if edges_hold and _extend(placed, trigger, flat, links):
            return True
    return False


def _next_node(
    mapping: dict[int, int], trigger: Trigger, flat: list[Unit], succ: dict[int, set[int]], pred: dict[int, set[int]]
) -> tuple[int, Iterable[int]]:
    for a, b in trigger.edges:
        if a in mapping and b not in mapping:
            return b, succ[mapping[a]]
        if b in mapping and a not in mapping:
            return a, pred[mapping[b]]
    todo = next(i for i in range(len(trigger.nodes)) if i not in mapping)
    return todo, range(len(flat))


class Avoid:
    """The known triggers of one campaign, and how often each was steered away from."""

    def __init__(self, triggers: Sequence[Trigger] = (), strength: float = 0.9) -> None:
        self.triggers = [t for t in triggers if t.nodes]
        self.strength = strength
        self.steered: Counter[str] = Counter()

    @property
    def needs_written(self) -> bool:
        """Whether some trigger needs attribute values: then a node is matched once written
        (generator.grow), not before, when its attributes are not known yet."""
        return any(p.attrs for t in self.triggers for p in t.nodes)

    def add(self, trigger: Trigger) -> None:
        if trigger.nodes and trigger not in self.triggers:
            self.triggers.append(trigger)

    def refuses(self, graph: Graph, rng: random.Random) -> bool:
        """Whether the node just added (the graph's last) completes a known trigger and is
        to be undone; one seeded draw, and only when a trigger matches."""
        if not self.triggers or self.strength <= 0:
            return False
        flat = units(graph)
        last = len(graph.nodes) - 1
        added = [i for i, u in enumerate(flat) if u.node == last]
        candidates = [t for t in self.triggers if any(p.admits(flat[i]) for p in t.nodes for i in added)]
        if not candidates:
            return False
        links = _links(flat)
        for trigger in candidates:
            if any(embeds_at(trigger, flat, at, links) for at in added):
                if rng.random() < self.strength:
                    self.steered[trigger.bug] += 1
                    return True
                return False
        return False
