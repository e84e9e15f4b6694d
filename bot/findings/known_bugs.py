"""Known bugs as triggers for the generator to steer away from (generator.avoid).

A bug is known once it has a reduced trigger: in this campaign as soon as its first
finding is reduced, and in later runs from `known-bugs.json`, which every campaign writes
beside summary.json and `known_bugs:` in fuzzbot.yml reads back (a file, or an earlier
output folder). The trigger is the reduced model's nodes, with the dtypes its failure
showed at (bot.reduce.generalize), so a bug that fails at every type is avoided at every type,
and with the attributes its reduced model still writes, which the failure needs (the reducer
dropped the rest), so a bug of one Pad mode leaves the other modes alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import onnx
from pydantic import BaseModel, Field, ValidationError

from bot.errors import UserError
from bot.findings.bundle import DtypeEvidence, Finding
from generator.avoid import PatternNode, Trigger, Unit, embeds_at, node_attributes
from generator.dtypes import DType
from generator.ops import registry
from oracles.provenance import tensor_dtypes

KNOWN_FILE = "known-bugs.json"
GENERATED = frozenset(d.value for d in DType)
MAX_TRIGGER_NODES = 8
"""A reduction stopped early leaves a big trigger; steering away from it would avoid
almost nothing and cost a subgraph match per insertion."""


class KnownNode(BaseModel):
    op_type: str
    dtypes: list[str] | None = None
    attrs: dict[str, str] | None = None
    """The attribute values the failure needs (generator.avoid.attribute_text): those its
    reduced trigger still writes; None (a file from before they were kept): any."""


class KnownBug(BaseModel):
    """One line of known-bugs.json: a bug's fingerprint, its name and its trigger."""

    fingerprint: str
    signature: str = ""
    nodes: list[KnownNode]
    edges: list[tuple[int, int]] = Field(default_factory=list)

    def trigger(self) -> Trigger:
        nodes = tuple(
            PatternNode(
                n.op_type,
                frozenset(n.dtypes) if n.dtypes is not None else None,
                frozenset(n.attrs.items()) if n.attrs else None,
            )
            for n in self.nodes
        )
        return Trigger(nodes, tuple(self.edges), self.fingerprint)


def _node_dtypes(dtype: str | None, evidence: DtypeEvidence | None) -> list[str] | None:
    """The dtypes a trigger node stands for: where the bug fails, when its type was tried
    (any type, when none passed); else just its own."""
    if evidence is not None and dtype in evidence.fails:
        return sorted(evidence.fails) if evidence.needs_dtype else None
    return [dtype] if dtype is not None else None


def holds(model: onnx.ModelProto, triggers: Iterable[Trigger]) -> bool:
    """Whether a model's nodes hold any of `triggers` as a subgraph: op types, first-input
    dtypes and producer-to-consumer edges, matched as generation matches them."""
    present = {n.op_type for n in model.graph.node}
    wanted = [t for t in triggers if {p.op_type for p in t.nodes} <= present]
    if not wanted:  # the usual answer, without shape inference
        return False
    types = tensor_dtypes(model)
    flat = [
        Unit(n.op_type, types.get(n.input[0]) if n.input else None, tuple(n.input), tuple(n.output), i, attrs)
        for i, n in enumerate(model.graph.node)
        for attrs in [node_attributes(n)]
    ]
    return any(embeds_at(t, flat, at) for t in wanted for at in range(len(flat)))


def known_bug(model: onnx.ModelProto, finding: Finding) -> KnownBug | None:
    """The reduced `model` of `finding` as a known bug, or None when it is too big to steer
    by or has no node the generator makes."""
    ops = registry()
    types = tensor_dtypes(model)
    kept = [n for n in _needed(model, finding) if n.op_type in ops]
    if not kept or len(kept) > MAX_TRIGGER_NODES:
        return None
    producer = {out: i for i, n in enumerate(kept) for out in n.output}
    nodes = []
    for n in kept:
        name = types.get(n.input[0]) if n.input else None
        dtype = name if name in GENERATED else None  # not a type the generator makes (bfloat16, a string)
        attrs = dict(node_attributes(n)) or None
        nodes.append(KnownNode(op_type=n.op_type, dtypes=_node_dtypes(dtype, finding.dtypes), attrs=attrs))
    edges = sorted({(producer[i], j) for j, n in enumerate(kept) for i in n.input if i in producer})
    return KnownBug(fingerprint=finding.fingerprint, signature=finding.signature, nodes=nodes, edges=edges)


def _needed(model: onnx.ModelProto, finding: Finding) -> list[onnx.NodeProto]:
    """The nodes the failure needs as a trigger: for a wrong result, those the mismatching
    outputs are computed from, and where the reduction blamed a kernel of the model's own
    (bot.reduce.blame: `values at ai.onnx::Pad`), its first such node and what feeds it, not
    what reads its wrong output; else every node. onnxruntime 1.30.0's "wrap" Pad reads
    past its input, and its reduction kept a TopK beside it that shaped the heap; known as
    Pad and TopK, it went on being found in models without a TopK, 226 times in six
    minutes."""
    nodes = list(model.graph.node)
    ends = {o.name for o in finding.comparison.outputs if o.mismatch} if finding.comparison else set()
    kernel = finding.blamed.rpartition(" at ")[2] if finding.blamed else ""
    at = next((i for i, n in enumerate(nodes) if f"{n.domain or 'ai.onnx'}::{n.op_type}" == kernel), None)
    roots = [at] if at is not None else [i for i, n in enumerate(nodes) if ends & set(n.output)]
    if not roots:
        return nodes
    producer = {out: i for i, n in enumerate(nodes) for out in n.output}
    needed, todo = set(roots), list(roots)
    while todo:
        for name in nodes[todo.pop()].input:
            if name in producer and producer[name] not in needed:
                needed.add(producer[name])
                todo.append(producer[name])
    return [n for i, n in enumerate(nodes) if i in needed]


def write_known(path: Path, bugs: list[KnownBug]) -> Path:
    path.write_text(json.dumps([b.model_dump() for b in bugs], indent=1) + "\n")
    return path


def read_known(paths: list[Path]) -> list[KnownBug]:
    """The known bugs of earlier runs: each path a known-bugs.json, or an output folder
    holding one. A missing or broken file is a one-line UserError, never silently none."""
    bugs: dict[str, KnownBug] = {}
    for given in paths:
        path = given / KNOWN_FILE if given.is_dir() else given
        try:
            rows = json.loads(path.read_text())
            found = [KnownBug.model_validate(row) for row in rows]
        except FileNotFoundError as e:
            raise UserError(f"known_bugs: {path}: no such file") from e
        except OSError as e:
            raise UserError(f"known_bugs: {path}: cannot read: {e.strerror or e}") from e
        except (ValueError, ValidationError, TypeError) as e:  # broken JSON, or not UTF-8 text
            raise UserError(f"known_bugs: {path}: not a known-bugs.json ({str(e).splitlines()[0]})") from e
        bugs.update((b.fingerprint, b) for b in found)
    return list(bugs.values())
