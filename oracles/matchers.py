"""Deciding whether one rule matches one case.

A case is looked at lazily and at most once per kind of fact: the graph index and the
mismatching outputs' cone when the first op pattern needs them, the intermediate values
(one interpreter walk, which also yields the margin check's unsafe ops) only when a rule
got past every cheap matcher. Within a rule the order is scope, message regexes, static op
patterns, value conditions, margin, and last the evidence (oracles.evidence): re-runs of
the reference with the matched nodes computed another legitimate way, which must move
every element that mismatched. Cheapest first, each able to stop the rest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import onnx
from pydantic import BaseModel, ConfigDict

from backends.reference import ReferenceError, run_reference
from generator.ops.base import node_attrs
from oracles.compare import Edges, bad_mask
from oracles.count_keys import CountKey
from oracles.evidence import (
    TIE_PICKS,
    Alternative,
    break_ties,
    collapse_ties,
    explained,
    explains,
    finite,
    flip_near,
    nan_alternatives,
    nudge,
    ties_as_chosen,
)
from oracles.intermediates import CaseValues, MarginFailure, nan_inputs, near, tie
from oracles.patterns import TIE_OPS, GraphView, NodeRef
from oracles.rule_schema import ANY_BACKEND, OpPattern, Rule
from oracles.tolerances import Tolerance, tolerance_for
from oracles.verdict import Judgement, Verdict


@dataclass(frozen=True)
class CaseView:
    """What the rules see of one judged run: which backend, the model and its inputs, the
    judgement (verdict, message, comparison naming the mismatching outputs), and, for the
    evidence a wrong result needs, the backend's outputs, the reference they were judged
    against, the bounds and the precision envelope of that judgement."""

    backend: str
    model: onnx.ModelProto
    inputs: Mapping[str, np.ndarray]
    judgement: Judgement
    outputs: Mapping[str, np.ndarray] | None = None
    reference: Mapping[str, np.ndarray] | None = None
    bounds: Mapping[str, Tolerance] | None = None
    envelope: Mapping[str, Edges] | None = None


class RuleHit(BaseModel):
    model_config = ConfigDict(frozen=True)

    rule_id: str
    explanation: str
    """Why this case matched, with the nodes and values involved, for the report."""

    @property
    def count_key(self) -> str:
        return str(CountKey.filtered(self.rule_id))


@dataclass(frozen=True)
class Anchor:
    """A node an op pattern matched, and what made it match."""

    ref: NodeRef
    why: str
    fed: str = ""
    """Which op computed its operand, when the pattern asked (", fed by ...")."""


class CaseFacts:
    """The facts about one case that rules share, each computed on first use only."""

    def __init__(self, case: CaseView) -> None:
        self.case = case

    @cached_property
    def graph(self) -> GraphView:
        return GraphView(self.case.model)

    @cached_property
    def bad_outputs(self) -> list[str] | None:
        """The outputs that mismatched; None where the verdict concerns the whole run."""
        j = self.case.judgement
        if j.verdict is not Verdict.wrong_result or j.comparison is None:
            return None
        return [o.name for o in j.comparison.outputs if o.mismatch is not None]

    @cached_property
    def cone(self) -> frozenset[int] | None:
        """Node indices a mismatching output depends on; None: every node counts."""
        bad = self.bad_outputs
        return None if bad is None else self.graph.cone(bad)

    @cached_property
    def values(self) -> CaseValues:
        return CaseValues(self.case.model, self.case.inputs)

    @cached_property
    def tensor_cone(self) -> frozenset[str] | None:
        """Tensors a mismatching output depends on; None: every tensor counts."""
        bad = self.bad_outputs
        return None if bad is None else self.graph.tensor_cone(bad)

    def in_cone(self, index: int) -> bool:
        return self.cone is None or index in self.cone

    @cached_property
    def expected(self) -> dict[str, np.ndarray] | None:
        """The reference the judgement used (recomputed by torch when not given)."""
        if self.case.reference is not None:
            return dict(self.case.reference)
        try:
            return run_reference(self.case.model, self.case.inputs)
        except ReferenceError:
            return None

    def bound(self, name: str, dtype: np.dtype) -> Tolerance:
        return (self.case.bounds or {}).get(name) or tolerance_for(dtype)

    @cached_property
    def bad_masks(self) -> dict[str, np.ndarray]:
        """Per mismatching output, its mismatching elements; empty where element evidence is
        impossible (no backend outputs, or a shape, dtype or missing-output mismatch)."""
        got, want = self.case.outputs, self.expected
        if got is None or want is None or not self.bad_outputs:
            return {}
        masks: dict[str, np.ndarray] = {}
        for name in self.bad_outputs:
            e, a = want.get(name), got.get(name)
            if e is None or a is None or e.shape != a.shape or e.dtype != a.dtype:
                return {}
            masks[name] = bad_mask(e, a, self.bound(name, e.dtype), (self.case.envelope or {}).get(name))
        return masks

    def explained(self, alternatives: list[Alternative]) -> bool:
        """Whether the alternatives explain every mismatching element (oracles.evidence)."""
        want, got = self.expected, self.case.outputs
        if want is None or got is None or not alternatives or not self.bad_masks:
            return False
        bounds = {name: self.bound(name, v.dtype) for name, v in want.items()}
        covered = explained(self.case.model, self.case.inputs, want, got, bounds, alternatives)
        return explains(self.bad_masks, covered)


def in_scope(rule: Rule, facts: CaseFacts) -> bool:
    scope, case = rule.scope, facts.case
    if case.judgement.verdict.value not in scope.verdicts:
        return False
    if ANY_BACKEND not in scope.backends and case.backend not in scope.backends:
        return False
    return not scope.ops or bool(facts.graph.op_types.intersection(scope.ops))


def match_message(patterns: list[str], message: str) -> str | None:
    for p in patterns:
        found = re.search(p, message)
        if found:
            return f"message matches /{p}/ at {found.group(0)!r}"
    return None


def static_anchors(pattern: OpPattern, facts: CaseFacts) -> list[Anchor]:
    """Nodes matching the pattern's op types, producers and dtypes, in the cone."""
    graph, found = facts.graph, []
    for ref in graph.nodes:
        if ref.node.op_type not in pattern.op or not facts.in_cone(ref.index):
            continue
        if pattern.input_dtype and graph.input_class(ref) != pattern.input_dtype:
            continue
        if pattern.output_dtype and graph.output_class(ref) != pattern.output_dtype:
            continue
        why = ref.label + (f" on {pattern.input_dtype} inputs" if pattern.input_dtype else "")
        fed = ""
        if pattern.after:
            src = graph.fed_by(ref, frozenset(pattern.after))
            if src is None:
                continue
            fed = f", fed by {src.label}"
        found.append(Anchor(ref, why + fed, fed))
    return found


def value_anchor(pattern: OpPattern, anchor: Anchor, facts: CaseFacts) -> Anchor | None:
    """The anchor with its run-time condition described, or None where it does not hold."""
    if pattern.values is None:
        return anchor
    if pattern.values == "ties" and not _decision_reaches_mismatch(anchor.ref, facts):
        return None
    if pattern.values == "ties":
        found = tie(anchor.ref, facts.values, _mismatching_slices(anchor.ref, facts), _decided(anchor.ref, facts))
    else:
        found = {"nan": nan_inputs, "near": near}[pattern.values](anchor.ref, facts.values)
    return Anchor(anchor.ref, found + anchor.fed, anchor.fed) if found else None


def _mismatching_slices(ref: NodeRef, facts: CaseFacts) -> set[int] | None:
    """The slices (in the order `tie` numbers them) where the node's decided result is itself
    a mismatching output: its elements beyond the reduced axis are the slices, in order."""
    out = ref.node.output[TIE_DECIDED_OUTPUT.get(ref.node.op_type, 0)]
    mask = facts.bad_masks.get(out)
    if mask is None or ref.node.op_type == "Hardmax":
        return None
    x = facts.values.value(ref.node.input[0])
    if x is None or x.ndim == 0 or mask.ndim != x.ndim:
        return None
    axis = _tie_axis(ref, x.ndim)
    per_slice = np.moveaxis(mask, axis, -1).reshape(-1, mask.shape[axis]).any(axis=1)
    return {int(i) for i in np.flatnonzero(per_slice)}


def _decided(ref: NodeRef, facts: CaseFacts) -> tuple[int, int, int] | None:
    """Where the node's decided result is itself a mismatching output (ArgMax, ArgMin, TopK's
    indices): the first slice it differs in, the position the reference chose there, and
    the one the build chose."""
    out = ref.node.output[TIE_DECIDED_OUTPUT.get(ref.node.op_type, 0)]
    want, got = (facts.expected or {}).get(out), (facts.case.outputs or {}).get(out)
    x = facts.values.value(ref.node.input[0])
    if ref.node.op_type == "Hardmax" or want is None or got is None or x is None or x.ndim == 0 or x.size == 0:
        return None
    if want.shape != got.shape or not np.issubdtype(want.dtype, np.integer):
        return None
    w, g = _by_slice(ref, x, want), _by_slice(ref, x, got)
    if w is None or g is None:
        return None  # the values read are not this output's input (a campaign met one: ArgMin
        # of a [62, 24, 1, 2] input with a [13, 1, 2] result), so they decide nothing
    differs = np.argwhere(w != g)
    if differs.size == 0:
        return None
    row, col = (int(v) for v in differs[0])
    return row, int(w[row, col]), int(g[row, col])


def build_winners(ref: NodeRef, facts: CaseFacts) -> list[list[int]] | None:
    """What the build chose in each slice of a tie-deciding node whose decided result is a
    graph output (slices in the order oracles.evidence numbers them): ArgMax's or ArgMin's
    index, TopK's k indices in order, the position of Hardmax's one. None where the result
    is not an output the build returned, or does not line up with the node's input."""
    op = ref.node.op_type
    out = ref.node.output[TIE_DECIDED_OUTPUT.get(op, 0)]
    got = (facts.case.outputs or {}).get(out)
    x = facts.values.value(ref.node.input[0])
    if got is None or x is None or x.ndim == 0 or x.size == 0:
        return None
    axis = _tie_axis(ref, x.ndim)
    slices = x.size // x.shape[axis]
    if op == "Hardmax":
        if got.shape != x.shape:
            return None
        return [[int(np.argmax(row))] for row in np.moveaxis(got, axis, -1).reshape(slices, -1)]
    rows = _by_slice(ref, x, got) if np.issubdtype(got.dtype, np.integer) else None
    if rows is None:
        return None
    return [[int(v) for v in row] for row in rows]


def _by_slice(ref: NodeRef, x: np.ndarray, result: np.ndarray) -> np.ndarray | None:
    """A decided result (ArgMax's or ArgMin's index, with keepdims or not; TopK's indices)
    as one row per slice of the node's input `x`, in the order oracles.evidence numbers the
    slices; None where its shape does not line up with `x`."""
    axis = _tie_axis(ref, x.ndim)
    keeps = result.ndim == x.ndim
    others = x.shape[:axis] + x.shape[axis + 1 :]
    if (np.moveaxis(result, axis, -1).shape[:-1] if keeps else result.shape) != others:
        return None
    return (np.moveaxis(result, axis, -1) if keeps else result).reshape(x.size // x.shape[axis], -1)


def _tie_axis(ref: NodeRef, ndim: int) -> int:
    """The axis a tie-deciding node reduces over, non-negative."""
    default_axis, _ = TIE_OPS[ref.node.op_type]
    return int(node_attrs(ref.node).get("axis", default_axis)) % ndim


TIE_DECIDED_OUTPUT = {"TopK": 1}
"""The output a tie decides, where it is not output 0: TopK's indices. Its values output
only trades near-equal values, by less than any tolerance, so a tie never explains it."""


def _decision_reaches_mismatch(ref: NodeRef, facts: CaseFacts) -> bool:
    cone = facts.tensor_cone
    index = TIE_DECIDED_OUTPUT.get(ref.node.op_type, 0)
    return cone is None or (index < len(ref.node.output) and ref.node.output[index] in cone)


def match_ops(patterns: list[OpPattern], facts: CaseFacts) -> list[tuple[OpPattern, Anchor]]:
    """Every matched node with its pattern, static conditions for all patterns before any
    value is computed."""
    candidates = [(p, a) for p in patterns for a in static_anchors(p, facts)]
    matched = [(p, value_anchor(p, a, facts)) for p, a in candidates]
    return [(p, a) for p, a in matched if a is not None]


def match_margin(facts: CaseFacts, anchors: list[Anchor] | None) -> list[MarginFailure]:
    """The unsafe ops within their margin, in the cone and among the anchors if any."""
    allowed = None if anchors is None else {a.ref.index for a in anchors}
    return [f for f in facts.values.failures if facts.in_cone(f.index) and (allowed is None or f.index in allowed)]


def alternatives(
    valued: list[tuple[OpPattern, Anchor]],
    margins: list[MarginFailure],
    chosen: Mapping[int, list[list[int]]] | None = None,
) -> list[Alternative]:
    """The re-runs that may explain a wrong result: every matched node's value condition,
    and every unsafe operand moved by its margin, up and down. `chosen`: of a tie-deciding
    node whose decision is a graph output, by node index, what the build chose in each
    slice (`build_winners`)."""
    alts: list[Alternative] = []
    ties = [a.ref for p, a in valued if p.values == "ties"]
    if chosen:
        alts.append(
            Alternative(
                "ties decided as the build decided them",
                {i: ties_as_chosen(ref.node.op_type, chosen[i]) for ref in ties if (i := ref.index) in chosen},
            )
        )
    for pick in [*range(TIE_PICKS), *range(-TIE_PICKS, 0)] if ties else ():
        alts.append(Alternative("ties broken another way", {t.index: break_ties(t.node.op_type, pick) for t in ties}))
        behind = {t.index: break_ties(t.node.op_type, pick, behind=True) for t in ties}
        alts.append(Alternative("ties broken another way", behind))
    if ties:
        alts.append(Alternative("ties computed equal", {t.index: collapse_ties(t.node.op_type) for t in ties}))
    nans = [(a.ref.index, a.ref.node.op_type) for p, a in valued if p.values == "nan"]
    if nans:
        alts.extend(nan_alternatives(nans))
    comparisons = {a.ref.index: flip_near(a.ref.node.op_type) for p, a in valued if p.values == "near"}
    if comparisons:
        alts.append(Alternative("near-equal comparisons flipped", comparisons))
    movable = [f for f in margins if f.slot is not None]
    for sign in (1.0, -1.0):
        if movable:
            moves = {f.index: nudge(f.op_type, f.slot or 0, f.within, f.margin, sign) for f in movable}
            alts.append(Alternative("operands moved by their margin", moves, sensitivity=True))
    overflowed = {f.index: finite(f.op_type) for f in margins if f.slot is None}
    if overflowed:
        alts.append(Alternative("non-finite intermediates replaced", overflowed, sensitivity=True))
    return alts


def evaluate(rule: Rule, facts: CaseFacts) -> RuleHit | None:
    """The rule's hit on this case: every kind of matcher it has must match (AND), and a
    wrong result must be explained element by element by the re-runs they imply."""
    if not in_scope(rule, facts):
        return None
    reasons: list[str] = []
    if rule.match.message:
        found = match_message(rule.match.message, facts.case.judgement.message)
        if found is None:
            return None
        reasons.append(found)
    valued: list[tuple[OpPattern, Anchor]] = []
    anchors: list[Anchor] | None = None
    if rule.match.ops:
        valued = match_ops(rule.match.ops, facts)
        if not valued:
            return None
        anchors = [a for _, a in valued]
        reasons.append(anchors[0].why)
    margins: list[MarginFailure] = []
    if rule.match.margin:
        margins = match_margin(facts, anchors)
        if not margins:
            return None
        reasons.append(f"within the numeric margin: {margins[0].text}")
    if facts.bad_outputs is not None:
        chosen = {a.ref.index: w for p, a in valued if p.values == "ties" and (w := build_winners(a.ref, facts))}
        alts = alternatives([(p, a) for p, a in valued if p.values is not None], margins, chosen)
        if alts and not facts.explained(alts):
            return None
        if alts:
            count = sum(int(m.sum()) for m in facts.bad_masks.values())
            why = " / ".join(dict.fromkeys(a.why for a in alts))
            reasons.append(f"{why} explains all {count} mismatching element(s)")
        reasons.append(f"mismatching output(s): {', '.join(facts.bad_outputs)}")
    return RuleHit(rule_id=rule.id, explanation="; ".join(reasons))
