"""The schema of a known-false-positive rules file (oracles/known_false_positives.yml and
the user's own), as strict pydantic models: a typo in a key, an op name or a regex is an
error when the file is loaded, never a rule that silently matches nothing (or everything).

Matcher semantics, which every rule file relies on:
  - the kinds of matcher of one rule (`message`, `ops`, `margin`) are ANDed: each kind given
    narrows the rule;
  - the entries of one list (several regexes, several op patterns, several op types in
    `op` or `after`) are ORed.
"""

from __future__ import annotations

import re
from typing import Literal

import onnx.defs
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from backends.spec import ADAPTERS
from oracles.count_keys import CountKey
from oracles.patterns import ANY_PRODUCER, TIE_OPS
from oracles.verdict import Verdict

RuleVerdict = Literal["crash", "wrong_result", "timeout"]
DtypeClass = Literal["float", "int", "bool"]
ValueCondition = Literal["ties", "nan", "near"]
NAN_CHOICE_OPS = ("Max", "Min", "Clip", "ReduceMax", "ReduceMin")
"""Ops whose NaN handling ONNX leaves open (`values: nan`)."""
COMPARISON_OPS = ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")
"""Ops a near-equal pair of operands can flip (`values: near`)."""
ANY_BACKEND = "*"


def _known_ops(names: list[str], allow_any: bool = False) -> list[str]:
    for name in names:
        if not (allow_any and name == ANY_PRODUCER) and not onnx.defs.has(name):
            raise ValueError(f"unknown ONNX op type {name!r}")
    return names


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Scope(Strict):
    """Where a rule may apply at all: checked before any matcher runs."""

    backends: list[str] = Field(default_factory=lambda: [ANY_BACKEND], min_length=1)
    """Backend names (as in a backend spec: onnxruntime, tvm, openvino, torch.compile,
    tensorrt, or a plugin's module:Class), or `*` for every backend."""
    verdicts: list[RuleVerdict] = Field(min_length=1)
    ops: list[str] = Field(default_factory=list)
    """The model must contain one of these op types; empty: any model."""

    @field_validator("backends")
    @classmethod
    def _backends(cls, names: list[str]) -> list[str]:
        for name in names:
            if name != ANY_BACKEND and name not in ADAPTERS and ":" not in name:
                raise ValueError(f"unknown backend {name!r} (known: {', '.join(sorted(ADAPTERS))}, or *)")
        return names

    @field_validator("ops")
    @classmethod
    def _ops(cls, names: list[str]) -> list[str]:
        return _known_ops(names)


class OpPattern(Strict):
    """A node of one of the `op` types, optionally fed by an `after` op (looking through
    data movement such as Reshape or Transpose; `*`: any op that computes, as opposed to a
    graph input or a constant), optionally with input/output element type classes, and
    optionally a condition on its input values at run time (`ties`, `nan`).

    For a wrong result, the node must lie in the ancestor cone of an output that mismatched,
    so a rule never hides a bug in an unrelated output."""

    op: list[str] = Field(min_length=1)
    after: list[str] = Field(default_factory=list)
    input_dtype: DtypeClass | None = None
    """Of the node's first input."""
    output_dtype: DtypeClass | None = None
    """Of the node's first output."""
    values: ValueCondition | None = None
    """A run-time condition, and the evidence that it explains the difference: `ties`, the
    deciding elements of ArgMax/ArgMin/Hardmax/TopK tie (equal, or within a relative 2^-10
    in float32, 2^-5 in float16, 2^-20 in float64) and breaking them the other way moves
    every mismatching element; `nan`, a NaN reaches Max/Min/Clip/ReduceMax/ReduceMin and
    another NaN semantics ONNX allows moves every mismatching element; `near`, a comparison
    whose operands are that close, flipped, does."""

    @field_validator("op")
    @classmethod
    def _op(cls, names: list[str]) -> list[str]:
        return _known_ops(names)

    @field_validator("after")
    @classmethod
    def _after(cls, names: list[str]) -> list[str]:
        return _known_ops(names, allow_any=True)

    @model_validator(mode="after")
    def _values_fit_the_ops(self) -> OpPattern:
        allowed = {"ties": tuple(TIE_OPS), "nan": NAN_CHOICE_OPS, "near": COMPARISON_OPS}
        if self.values is not None and not set(self.op) <= set(allowed[self.values]):
            raise ValueError(f"values: {self.values} applies to {', '.join(allowed[self.values])} only")
        return self


class Matchers(Strict):
    message: list[str] = Field(default_factory=list)
    """Regular expressions searched for in the judgement's message (the backend's error for
    a crash or timeout, the comparison summary for a wrong result)."""
    ops: list[OpPattern] = Field(default_factory=list)
    margin: bool = False
    """The numeric-margin check (oracles.margin): an operand of an unsafe op within δ of
    its invalid domain. With `ops`, the unsafe op must be one the patterns matched; for a
    wrong result, it must lie in the cone of a mismatching output."""

    @field_validator("message")
    @classmethod
    def _regexes(cls, patterns: list[str]) -> list[str]:
        for p in patterns:
            try:
                re.compile(p)
            except re.error as e:
                raise ValueError(f"bad regex {p!r}: {e}") from e
        return patterns

    @model_validator(mode="after")
    def _not_empty(self) -> Matchers:
        if not (self.message or self.ops or self.margin):
            raise ValueError("a rule needs at least one matcher (message, ops or margin)")
        return self


class Rule(Strict):
    """A wrong result is taken off the report only on run-time evidence: a rule for wrong
    results that names ops must also name a value condition or the margin check, whose
    re-run shows that the mismatching elements are the ones the condition explains."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    description: str = Field(min_length=1)
    reason: str = Field(min_length=1)
    """Why a hit is not a bug in the system under test: what a maintainer reads."""
    overrides: bool = False
    """In a user file: replace the shipped rule of the same id (otherwise a clash is an error)."""
    scope: Scope
    match: Matchers

    @property
    def count_key(self) -> str:
        """The campaign's counter for cases this rule filtered."""
        return str(CountKey.filtered(self.id))

    @model_validator(mode="after")
    def _wrong_results_need_evidence(self) -> Rule:
        static = [p for p in self.match.ops if p.values is None]
        if Verdict.wrong_result in self.scope.verdicts and static and not self.match.margin:
            raise ValueError(
                "match.ops: a rule for wrong results needs run-time evidence: give each op pattern "
                "a values condition (ties, nan, near) or set margin: true"
            )
        return self


class RulesFile(Strict):
    rules: list[Rule]
