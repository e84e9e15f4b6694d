"""The named reduction passes. Each takes the current case and returns a smaller one
that still passes the predicate, or None when it found nothing; the driver runs them
in order until none finds anything.

Passes that try one edit at a time (bypass, initializers, attributes, shapes) list
every candidate edit in a fixed order and take the first success, then start over
on the smaller case: the batch keeps N jobs busy, the fixed order keeps the result
independent of N.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice

import numpy as np
import onnx
from onnx import numpy_helper

from reducers import edit
from reducers.candidate import Candidate, TensorValues, tensor_types
from reducers.ddmin import ddmin
from reducers.subgraphs import branch_inlines, loop_trims
from reducers.tester import BudgetExhausted, Tester


@dataclass
class Context:
    tester: Tester[Candidate]
    values: TensorValues | None = None
    """Where cut tensors get their values; None leaves them to the check (external mode)."""
    _memo: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)

    def values_for(self, case: Candidate) -> dict[str, np.ndarray] | None:
        """Every tensor's value in `case`, computed once per distinct model; empty when
        the reference cannot run it (cut tensors then become inputs without values)."""
        if self.values is None:
            return None
        key = case.key()
        if key not in self._memo:
            self._memo.clear()  # only the current case is ever asked for twice
            try:
                self._memo[key] = self.values(case.model, case.inputs)
            except Exception:  # noqa: BLE001 - a reference that cannot run this model gives no values
                self._memo[key] = {}
        return self._memo[key]


Pass = Callable[[Candidate, Context], Candidate | None]


CHUNK = 8
"""Candidates built at a time: making one (an edit, the checker) costs as much as a test on a
model with many weights, so they are made as they are tested, within the budget."""


def _first_of(
    ctx: Context, case: Candidate, candidates: Callable[[Candidate], Iterator[Candidate | None]]
) -> Candidate | None:
    """Apply the first accepted candidate again and again; the last accepted case, if any.

    A candidate that is a case already accepted here (the same content) is never offered:
    it is known to fail, costs no test, and taken again it restarts the search from the
    same case. A float64 ReduceSumSquare whose `axes` was an empty initializer made an
    edit that changed nothing ("zeros" of no elements), and its reduction ran 66,389 such
    answers from the cache for 60 s, past every test bound."""
    best: Candidate | None = None
    seen = {case.key()}
    try:
        while True:
            current = best or case
            fresh = (c for c in candidates(current) if c is None or c.key() not in seen)
            hit = _first_in(ctx, fresh)
            if hit is None:
                return best
            seen.add(hit.key())
            best = hit
    except BudgetExhausted:
        return best


def _first_in(ctx: Context, candidates: Iterator[Candidate | None]) -> Candidate | None:
    """The first candidate, in order, the predicate accepts, building CHUNK at a time with the
    budget checked before each: a model with a hundred weights once kept one pass building
    three hundred checked candidates per accepted edit, past every bound."""
    while True:
        ctx.tester.check_budget()
        chunk = list(islice(candidates, max(CHUNK, ctx.tester.config.jobs)))
        if not chunk:
            return None
        hit = ctx.tester.first_success(chunk)
        if hit is not None:
            return chunk[hit]


def drop_outputs(case: Candidate, ctx: Context) -> Candidate | None:
    """Graph outputs the failure does not need (and the nodes only they needed)."""
    names = [o.name for o in case.model.graph.output]
    if len(names) < 2:
        return None
    kept = ddmin(names, lambda s: edit.keep_outputs(case, s), ctx.tester)
    return edit.keep_outputs(case, kept) if len(kept) < len(names) else None


def drop_nodes(case: Candidate, ctx: Context) -> Candidate | None:
    """ddmin over the node set; cut tensors become graph inputs carrying their values."""
    n = len(case.model.graph.node)
    if n < 2:
        return None
    values = ctx.values_for(case)
    types = tensor_types(case.model)
    kept = ddmin(list(range(n)), lambda s: edit.keep_nodes(case, s, values, types), ctx.tester)
    return edit.keep_nodes(case, kept, values, types) if len(kept) < n else None


def _bypasses(case: Candidate) -> Iterator[Candidate | None]:
    types = tensor_types(case.model)
    for i, node in enumerate(case.model.graph.node):
        outs = [o for o in node.output if o]
        if len(outs) != 1 or outs[0] not in types:
            continue
        for src in dict.fromkeys(x for x in node.input if x):
            if types.get(src) == types[outs[0]]:
                yield edit.bypass(case, i, src)


def bypass_nodes(case: Candidate, ctx: Context) -> Candidate | None:
    """A node replaced by one of its inputs of the same type and shape."""
    return _first_of(ctx, case, _bypasses)


SCALE_SLOTS = {
    "QuantizeLinear": (1,),
    "DequantizeLinear": (1,),
    "QLinearMatMul": (1, 4, 6),
    "QLinearConv": (1, 4, 6),
}
"""Inputs that are a quantization scale: a scale of 0 makes a reduced model no maintainer
accepts (a QuantizeLinear dividing by it), so polish never zeroes one."""


def _scales(model: onnx.ModelProto) -> set[str]:
    return {n.input[i] for n in model.graph.node for i in SCALE_SLOTS.get(n.op_type, ()) if i < len(n.input)}


def _initializer_edits(case: Candidate) -> Iterator[Candidate | None]:
    scales = _scales(case.model)
    for t in case.model.graph.initializer:
        value = numpy_helper.to_array(t)
        if value.dtype.kind not in "biuf":
            continue
        if value.size == 0 or (value == 0).all() or (value == 1).all():
            continue  # a constant is as simple as it gets; moving it out would hide it
        if t.name not in scales:
            yield edit.replace_initializer(case, t.name, "zeros")
        yield edit.replace_initializer(case, t.name, "ones")
        yield edit.replace_initializer(case, t.name, "input")


def simplify_initializers(case: Candidate, ctx: Context) -> Candidate | None:
    """Weights turned into zeros or ones, or else into plain graph inputs."""
    return _first_of(ctx, case, _initializer_edits)


def _schema_attr(node: onnx.NodeProto, opset: int, name: str) -> onnx.defs.OpSchema.Attribute | None:
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except onnx.defs.SchemaError:
        return None
    return schema.attributes.get(name)


def _attribute_edits(case: Candidate) -> Iterator[Candidate | None]:
    opset = {o.domain: o.version for o in case.model.opset_import}
    for i, node in enumerate(case.model.graph.node):
        for a in node.attribute:
            spec = _schema_attr(node, opset.get(node.domain, opset.get("ai.onnx", 1)), a.name)
            if spec is None or spec.required:
                continue
            yield edit.drop_attribute(case, i, a.name)


def default_attributes(case: Candidate, ctx: Context) -> Candidate | None:
    """Optional attributes removed, so they take their schema default."""
    return _first_of(ctx, case, _attribute_edits)


def _shrinkable_inputs(case: Candidate) -> dict[str, list[int]]:
    """Graph inputs (not initializers) with a known shape that has something to shrink."""
    inits = {t.name for t in case.model.graph.initializer}
    shapes: dict[str, list[int]] = {}
    for name, dims in edit.input_shapes(case).items():
        if name not in inits and dims and min(dims) > 0 and max(dims) > 1:
            shapes[name] = dims
    return shapes


def _dim_groups(shapes: dict[str, list[int]]) -> list[tuple[int, list[tuple[str, int]]]]:
    """Dimensions that broadcasting lines up (the same size at the same place counted from
    the last, numpy's alignment), each with its size: they are cut together, since one cut
    alone would no longer broadcast against the others."""
    groups: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for name, dims in shapes.items():
        for axis, size in enumerate(dims):
            if size > 1:
                groups.setdefault((len(dims) - axis, size), []).append((name, axis))
    return [(size, members) for (_, size), members in groups.items()]


def _cut(
    case: Candidate, shapes: dict[str, list[int]], cuts: dict[tuple[str, int], tuple[int, int]]
) -> Candidate | None:
    windows = {n: [cuts.get((n, axis), (0, size)) for axis, size in enumerate(shapes[n])] for n, _ in cuts}
    return edit.crop_inputs(case, windows)


def _shape_edits(case: Candidate) -> Iterator[Candidate | None]:
    """Each input at all-ones; then every dimension halved at once; then one dimension (with
    those that broadcast against it) cut to its first or its second half. Halves on both
    sides are what lets a bug that lives in a few elements away from the origin (a rounding
    at one large value) shrink down to them, where leading slices alone lose it."""
    shapes = _shrinkable_inputs(case)
    for name, dims in shapes.items():
        yield _cut(case, shapes, {(name, axis): (0, 1) for axis in range(len(dims))})
    groups = _dim_groups(shapes)
    if len(groups) > 1:
        yield _cut(case, shapes, {m: (0, (size + 1) // 2) for size, members in groups for m in members})
    for size, members in groups:
        half = (size + 1) // 2
        yield _cut(case, shapes, dict.fromkeys(members, (0, half)))
        yield _cut(case, shapes, dict.fromkeys(members, (half, size)))


def static_dims(case: Candidate, ctx: Context) -> Candidate | None:
    """Symbolic input dims made static at their feeds' sizes, in one test: a maintainer
    would rather read a static repro, when the bug does not need the dims unknown."""
    made = edit.static_dims(case)
    if made is None:
        return None
    try:
        return made if ctx.tester.first_success([made]) == 0 else None
    except BudgetExhausted:
        return None


def shrink_shapes(case: Candidate, ctx: Context) -> Candidate | None:
    """Graph inputs made smaller, where shape inference and the checker still agree."""
    return _first_of(ctx, case, _shape_edits)


def tidy(case: Candidate, ctx: Context) -> Candidate | None:
    """Dead code out (rebuild does it) and short names in: one test."""
    renamed = edit.short_names(case)
    if renamed is None:
        return None
    try:
        return renamed if ctx.tester.first_success([renamed]) == 0 else None
    except BudgetExhausted:
        return None


def inline_branches(case: Candidate, ctx: Context) -> Candidate | None:
    """An If replaced by the nodes of one branch (reducers.subgraphs)."""
    return _first_of(ctx, case, branch_inlines)


def trim_loops(case: Candidate, ctx: Context) -> Candidate | None:
    """Loops run fewer times (reducers.subgraphs)."""
    return _first_of(ctx, case, loop_trims)


STRUCTURAL_PASSES: tuple[Pass, ...] = (drop_nodes, drop_outputs, bypass_nodes, inline_branches)
"""Passes that remove nodes. drop_nodes comes first: cutting nodes also drops the
outputs they made, which on generated models is cheaper than ddmin over outputs first."""


def _without_attributes(case: Candidate) -> Candidate:
    current = case
    opset = {o.domain: o.version for o in case.model.opset_import}
    for i, node in enumerate(case.model.graph.node):
        for a in node.attribute:
            spec = _schema_attr(node, opset.get(node.domain, opset.get("ai.onnx", 1)), a.name)
            if spec is not None and not spec.required:
                current = edit.drop_attribute(current, i, a.name) or current
    return current


def _small_and_short(case: Candidate) -> Candidate:
    """Every graph input at all-ones shape, then short names."""
    current = case
    inits = {t.name for t in case.model.graph.initializer}
    for name, dims in edit.input_shapes(case).items():
        if name not in inits and dims and max(dims) > 1 and min(dims) > 0:
            current = edit.reshape_input(current, name, [1] * len(dims)) or current
    return edit.short_names(current) or current


def polish_at_once(case: Candidate, ctx: Context) -> Candidate | None:
    """All the polish in one or two tests, run as one batch: every attribute at its
    default with all-ones inputs and short names, else the same keeping the attributes
    (the bug may need one). When the bug does not care, the one-edit-at-a-time passes
    after this find nothing left to try, and a later attribute edit hits the cache."""
    together = _small_and_short(_without_attributes(case))
    keeping = _small_and_short(case)
    by_key = {c.key(): c for c in (together, keeping) if c.key() != case.key()}
    candidates = list(by_key.values())
    if not candidates:
        return None
    try:
        hit = ctx.tester.first_success(list(candidates))
    except BudgetExhausted:
        return None
    return None if hit is None else candidates[hit]


POLISH_PASSES: tuple[Pass, ...] = (
    static_dims,
    polish_at_once,
    simplify_initializers,
    default_attributes,
    shrink_shapes,
    trim_loops,
    tidy,
)
"""Passes that keep the node count and make what is left simpler to read. A pass is named
by its function's name, in progress lines, steps and per-pass counts alike."""

DEFAULT_PASSES = STRUCTURAL_PASSES + POLISH_PASSES
