"""Diversity coverage of generated models, and the feedback that steers generation.

COMET shows that covering more operator inputs, parameter values and operator
sequences reaches more branches of the library under test. fuzzbot cannot instrument
the compiler (it is another build in another process), so it measures those three
kinds of coverage on its own models and biases the next model toward what is missing:

- op inputs: (op, slot, dtype, rank, shape bucket)
- attribute values: (op, attribute, bin), from emitted attributes and solved variables;
  a defaulted attribute also as `absent` or written at its `default` (generator.emit), and
  an optional input as `absent` or `present` (`Op.input<k>`, generator.ops.optional)
- directed op pairs: which op type feeds which

Op choice follows COMET's Metropolis-Hastings scheme: ops are ranked by how much they
could still add, and a chain over the ranking accepts a lower-ranked op with
probability (1 - p)^(rank distance), so every op stays reachable while the ones with
uncovered combinations come up more often.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence

import onnx
from onnx import helper
from pydantic import BaseModel, Field, PrivateAttr

from generator.binning import ABSENT, AT_DEFAULT, bin_of
from generator.dtypes import DType
from generator.emit import at_default, pads_implied, schema_defaults
from generator.focus import FocusDraws
from generator.graph import GNode, Graph
from generator.ops.base import OpSpec
from generator.ops.optional import form_key, input_form, optional_slots
from generator.patterns.base import Pattern
from generator.symbolic import Dim, TType

INPUT = "input"
"""The producer name of a placeholder in op-pair keys."""
RANKS = 4


def shape_bucket(shape: Sequence[Dim]) -> str:
    """Per dim: 1, small (2-7) or large (8+) -- the distinctions kernels special-case."""
    return "".join("1" if d == 1 else "s" if int(d) < 8 else "l" for d in shape)


def value_bucket(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, bool | int):
        v = int(value)
        return f"-{bin_of(-v)}" if v < 0 else str(bin_of(v))
    if isinstance(value, float):
        if value == 0 or not math.isfinite(value):
            return str(value)
        return f"{'-' if value < 0 else ''}e{math.floor(math.log2(abs(value)))}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(value_bucket(v) for v in value) + "]"
    return type(value).__name__


class CoverageStats(BaseModel):
    models: int = 0
    op_types: int = 0
    op_inputs: int = 0
    attr_values: int = 0
    op_pairs: int = 0
    dtypes: dict[str, int] = Field(default_factory=dict)
    rewrites: dict[str, int] = Field(default_factory=dict)
    """Rewrites the systems under test performed, by key (Coverage.rewrites), in how many cases."""
    patterns: dict[str, int] = Field(default_factory=dict)
    """Rewrite templates and near misses placed in models (Coverage.patterns)."""
    edges: dict[str, int] = Field(default_factory=dict)
    """Cases aimed at each kind of edge input (generator.edges)."""
    opsets: dict[str, int] = Field(default_factory=dict)
    """Generated models by the default-domain opset they import (a campaign draws one per case)."""
    symbolic: int = 0
    """Generated models with a symbolic (dim_param) graph-input dim (GenConfig.symbolic_dims);
    over `models`, the share the summary reports."""
    twins: int = 0
    """Generated models with a constant twin (GenConfig.constant_twins), which a compiler
    folds at import."""


class Coverage(BaseModel):
    """What generated models have covered so far; JSON-serializable for summary.json."""

    models: int = 0
    ops: Counter[str] = Field(default_factory=Counter)
    inputs: Counter[str] = Field(default_factory=Counter)
    attrs: Counter[str] = Field(default_factory=Counter)
    pairs: Counter[str] = Field(default_factory=Counter)
    dtypes: Counter[str] = Field(default_factory=Counter)
    rewrites: Counter[str] = Field(default_factory=Counter)
    """Rewrites a system under test performed, in how many cases: `+domain::Op` for an op
    its optimized graph gained (a fusion's result), `-domain::Op` for nodes it removed,
    `tvm::fused_a_b` for a fused function; read off each optimized graph, no instrumentation."""
    patterns: Counter[str] = Field(default_factory=Counter)
    """Rewrite templates placed in models, `Template` or `Template~near_miss` (generator.patterns)."""
    edges: Counter[str] = Field(default_factory=Counter)
    """Cases aimed at each kind of edge input (generator.edges)."""
    opsets: Counter[str] = Field(default_factory=Counter)
    """Models by the opset they import."""
    symbolic: int = 0
    """Models with a symbolic graph-input dim."""
    twins: int = 0
    """Models with a constant twin."""
    _fed: Counter[str] = PrivateAttr(default_factory=Counter)
    _fed_by: Counter[str] = PrivateAttr(default_factory=Counter)
    _fed_total: int = PrivateAttr(default=-1)

    def partner_counts(self) -> tuple[Counter[str], Counter[str]]:
        """How many distinct producers feed each op, and how many consumers each op feeds."""
        if self._fed_total != len(self.pairs):
            self._fed = Counter(k.split(">", 1)[1] for k in self.pairs)
            self._fed_by = Counter(k.split(">", 1)[0] for k in self.pairs)
            self._fed_total = len(self.pairs)
        return self._fed, self._fed_by

    def stats(self) -> CoverageStats:
        return CoverageStats(
            models=self.models,
            op_types=len(self.ops),
            op_inputs=len(self.inputs),
            attr_values=len(self.attrs),
            op_pairs=len(self.pairs),
            dtypes=dict(sorted(self.dtypes.items())),
            rewrites=dict(self.rewrites.most_common()),
            patterns=dict(self.patterns.most_common()),
            edges=dict(sorted(self.edges.items())),
            opsets=dict(sorted(self.opsets.items(), key=lambda kv: int(kv[0]))),
            symbolic=self.symbolic,
            twins=self.twins,
        )

    def record_node(self, graph: Graph, node: GNode, emitted: list[onnx.NodeProto]) -> None:
        op = node.op.op_type
        if isinstance(node.op, Pattern):
            self.patterns[node.op.name()] += 1
        else:
            self.ops[op] += 1
        for slot, t in enumerate(node.inputs):
            tensor = graph.tensors[t]
            self.inputs[input_key(op, slot, tensor.dtype.value, tensor.rank, shape_bucket(tensor.shape))] += 1
            pair = pair_key(graph.producer_op.get(t, INPUT), op)
            if pair not in self.pairs and self._fed_total == len(self.pairs):
                producer = pair.split(">", 1)[0]
                self._fed[op] += 1
                self._fed_by[producer] += 1
                self._fed_total += 1
            self.pairs[pair] += 1
            self.dtypes[tensor.dtype.value] += 1
        for n in emitted:
            if n.op_type == op:
                self._record_attrs(op, n, node.op.sc.opset)
                for slot in optional_slots(op, node.op.sc.opset):
                    self.attrs[f"{form_key(op, slot)}={input_form(n.input, slot)}"] += 1
        for key, value in node.binned:
            self.attrs[f"{key}={bin_of(value)}"] += 1

    def _record_attrs(self, op: str, n: onnx.NodeProto, opset: int) -> None:
        """Each attribute's value bin, and for each defaulted one whether it was left out
        (`absent`) or written at its default (`default`): a kernel may take another path
        for either, so the two are counted apart and feedback steers toward the unseen one."""
        written = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        for name, value in written.items():
            self.attrs[f"{op}.{name}={value_bucket(value)}"] += 1
        for name, default in schema_defaults(op, opset).items():
            if name == "pads" and pads_implied(written):
                continue  # set by auto_pad or output_shape: neither absent nor at a default
            if name not in written:
                self.attrs[f"{op}.{name}={ABSENT}"] += 1
            elif at_default(op, name, written[name], default):
                self.attrs[f"{op}.{name}={AT_DEFAULT}"] += 1


Proposal = tuple[str, type[OpSpec], int]
"""("forward", op, tensor it reads) or ("backward", op, placeholder it replaces)."""


def _may_produce(spec: type[OpSpec], dtype: DType) -> bool:
    out = getattr(spec, "out_dtype", None)
    return dtype == out if out is not None else dtype in spec.dtypes


def input_key(op: str, slot: int, dtype: str, rank: int, bucket: str) -> str:
    return f"{op}[{slot}]:{dtype}:r{rank}:{bucket}"


def pair_key(producer: str, consumer: str) -> str:
    return f"{producer}>{consumer}"


class Feedback:
    """Biases one model's choices toward what `coverage` has not seen yet."""

    def __init__(
        self, coverage: Coverage, specs: list[type[OpSpec]], rng: random.Random, focus: FocusDraws | None = None
    ) -> None:
        """`focus`, when given, makes a share of the choices toward where two builds diverged."""
        self.cov = coverage
        self.rng = rng
        self.focus = focus
        n = len(specs) + 1
        fed, fed_by = coverage.partner_counts()
        fitness = {s: 2 * n - fed[s.op_type] - fed_by[s.op_type] for s in specs}
        self.ranked = sorted(specs, key=lambda s: (-fitness[s], s.op_type))
        self.p = min(0.5, 3.0 / len(specs))
        self.local: set[str] = set()
        self._current = self.rng.randrange(len(self.ranked))
        self._consumers: dict[tuple[str, TType], list[type[OpSpec]]] = {}
        self._producers: dict[tuple[str, DType], list[type[OpSpec]]] = {}
        self._readers: dict[TType, list[type[OpSpec]]] = {}

    def choose_op(self) -> type[OpSpec]:
        """One Metropolis-Hastings step over the fitness ranking (COMET §3.5), unless the
        focus makes this choice."""
        focused = self.focus.choose_op() if self.focus is not None else None
        if focused is not None:
            return focused
        proposal = self.rng.randrange(len(self.ranked))
        if proposal <= self._current or self.rng.random() < (1 - self.p) ** (proposal - self._current):
            self._current = proposal
        return self.ranked[self._current]

    def propose(self, graph: Graph) -> Proposal | None:
        """An insertion that would form a directed op pair no model has had yet.

        Picking the op first and hoping a fitting tensor exists wastes most picks once
        the common pairs are covered; starting from a tensor finds an uncovered pair
        whenever the graph has one. Forward: a new consumer of the tensor. Backward: a
        new producer of a placeholder that already has a consumer. The focus, when it has
        one, may first name a pair two builds diverged on.
        """
        if self.focus is not None:
            tensors = [t.ttype for t in graph.tensors]
            focused = self.focus.propose(graph.producer_op, graph.consumer_ops, tensors, graph.placeholders)
            if focused is not None:
                return focused
        if graph.placeholders and self.rng.random() < 0.2:
            target = self.rng.choice(graph.placeholders)
            consumers = graph.consumer_ops.get(target, [])
            if consumers:
                consumer = self.rng.choice(consumers)
                dtype = graph.tensors[target].dtype
                key = (consumer, dtype)
                if key not in self._producers:
                    self._producers[key] = [
                        s for s in self.ranked if _may_produce(s, dtype) and self._new(s.op_type, consumer)
                    ]
                spec = self._draw_new(self._producers[key], lambda s: (s.op_type, consumer))
                if spec is not None:
                    return "backward", spec, target
        lists = [self._fresh_consumers(graph, t) for t in range(len(graph.tensors))]
        # Squared: a tensor whose producer still has many unseen consumers is where new
        # pairs are cheap (bool and int tensors run out of unseen consumers early).
        weights = [len(c) ** 2 for c in lists]
        if not any(weights):
            return None
        t = self.rng.choices(range(len(lists)), weights)[0]
        producer = graph.producer_op.get(t, INPUT)
        spec = self._draw_new(lists[t], lambda s: (producer, s.op_type))
        return None if spec is None else ("forward", spec, t)

    def _fresh_consumers(self, graph: Graph, t: int) -> list[type[OpSpec]]:
        """Ops that could read tensor `t` and would form a new pair with its producer
        (cached per producer and type; entries go stale and are dropped when drawn)."""
        producer = graph.producer_op.get(t, INPUT)
        ttype = graph.tensors[t].ttype
        key = (producer, ttype)
        if key not in self._consumers:
            if ttype not in self._readers:
                self._readers[ttype] = [s for s in self.ranked if s.slot_ok(0, ttype)]
            self._consumers[key] = [s for s in self._readers[ttype] if self._new(producer, s.op_type)]
        return self._consumers[key]

    def _draw_new(
        self, cands: list[type[OpSpec]], pair: Callable[[type[OpSpec]], tuple[str, str]]
    ) -> type[OpSpec] | None:
        """A random candidate whose pair is still new; stale ones are dropped on the way."""
        while cands:
            i = self.rng.randrange(len(cands))
            if self._new(*pair(cands[i])):
                return cands[i]
            cands[i] = cands[-1]
            cands.pop()
        return None

    def _new(self, producer: str, consumer: str) -> bool:
        key = pair_key(producer, consumer)
        return key not in self.cov.pairs and key not in self.local

    def inserted(self, graph: Graph, node: GNode) -> None:
        """Pairs made inside the model being grown count as covered for the rest of it."""
        for t in node.inputs:
            self.local.add(pair_key(graph.producer_op.get(t, INPUT), node.op.op_type))
        for o in node.outputs:
            for consumer in graph.consumer_ops.get(o, []):
                self.local.add(pair_key(node.op.op_type, consumer))

    def pick_tensor(self, graph: Graph, spec: type[OpSpec], slot: int, cands: list[int]) -> int:
        """Prefer inputs that would form an unseen op pair or an unseen input signature."""
        weights = []
        for i in cands:
            t = graph.tensors[i]
            w = 1.0
            if pair_key(graph.producer_op.get(i, INPUT), spec.op_type) not in self.cov.pairs:
                w += 6.0
            if input_key(spec.op_type, slot, t.dtype.value, t.rank, shape_bucket(t.shape)) not in self.cov.inputs:
                w += 2.0
            weights.append(w)
        return self.rng.choices(cands, weights)[0]

    def bin_weight(self, key: str, i: int | str) -> float:
        """2 for a bin no model has had yet (a presence bin, ABSENT or AT_DEFAULT, too), plus
        the focus's bonus for a numeric bin two builds diverged on."""
        fresh = 0.0 if f"{key}={i}" in self.cov.attrs else 2.0
        bonus = self.focus.bin_bonus(key, i) if self.focus is not None and isinstance(i, int) else 0.0
        return fresh + bonus
