"""Deciding whether one rule matches one case.

A case is looked at lazily and at most once per kind of fact: the graph index and the
mismatching outputs' cone when the first op pattern needs them, the intermediate values
(one interpreter walk, which also yields the margin check's unsafe ops) only when a rule
got past every cheap matcher. Within a rule the order is scope, message regexes, static op
patterns, value conditions, margin: cheapest first, each able to stop the rest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import onnx
from pydantic import BaseModel, ConfigDict

from oracles.intermediates import CaseValues, nan_inputs, tie
from oracles.patterns import GraphView, NodeRef
from oracles.rule_schema import ANY_BACKEND, OpPattern, Rule
from oracles.verdict import Judgement, Verdict


@dataclass(frozen=True)
class CaseView:
    """What the rules see of one judged run: which backend, the model and its inputs, and
    the judgement (verdict, message, comparison naming the mismatching outputs)."""

    backend: str
    model: onnx.ModelProto
    inputs: Mapping[str, np.ndarray]
    judgement: Judgement


class RuleHit(BaseModel):
    model_config = ConfigDict(frozen=True)

    rule_id: str
    explanation: str
    """Why this case matched, with the nodes and values involved, for the report."""

    @property
    def count_key(self) -> str:
        return f"filtered:{self.rule_id}"


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
    check = tie if pattern.values == "ties" else nan_inputs
    found = check(anchor.ref, facts.values)
    return Anchor(anchor.ref, found + anchor.fed, anchor.fed) if found else None


TIE_DECIDED_OUTPUT = {"TopK": 1}
"""The output a tie decides, where it is not output 0: TopK's indices. Its values output
only trades near-equal values, by less than any tolerance, so a tie never explains it."""


def _decision_reaches_mismatch(ref: NodeRef, facts: CaseFacts) -> bool:
    cone = facts.tensor_cone
    index = TIE_DECIDED_OUTPUT.get(ref.node.op_type, 0)
    return cone is None or (index < len(ref.node.output) and ref.node.output[index] in cone)


def match_ops(patterns: list[OpPattern], facts: CaseFacts) -> list[Anchor]:
    """Every matched node, static conditions for all patterns before any value is computed."""
    candidates = [(p, a) for p in patterns for a in static_anchors(p, facts)]
    matched = [value_anchor(p, a, facts) for p, a in candidates]
    return [a for a in matched if a is not None]


def match_margin(facts: CaseFacts, anchors: list[Anchor] | None) -> str | None:
    """The first unsafe op within its margin, in the cone and among the anchors if any."""
    allowed = None if anchors is None else {a.ref.index for a in anchors}
    for failure in facts.values.failures:
        if facts.in_cone(failure.index) and (allowed is None or failure.index in allowed):
            return f"within the numeric margin: {failure.text}"
    return None


def evaluate(rule: Rule, facts: CaseFacts) -> RuleHit | None:
    """The rule's hit on this case: every kind of matcher it has must match (AND)."""
    if not in_scope(rule, facts):
        return None
    reasons: list[str] = []
    if rule.match.message:
        found = match_message(rule.match.message, facts.case.judgement.message)
        if found is None:
            return None
        reasons.append(found)
    anchors: list[Anchor] | None = None
    if rule.match.ops:
        anchors = match_ops(rule.match.ops, facts)
        if not anchors:
            return None
        reasons.append(anchors[0].why)
    if rule.match.margin:
        found = match_margin(facts, anchors)
        if found is None:
            return None
        reasons.append(found)
    if facts.bad_outputs:
        reasons.append(f"mismatching output(s): {', '.join(facts.bad_outputs)}")
    return RuleHit(rule_id=rule.id, explanation="; ".join(reasons))
