"""Known false positives: rules, kept as data, that take a bad-looking case off the report.

A maintainer stops reading a bot that cries wolf, so a case that only shows rounding at a
discontinuity, a tie, NaN handling the ONNX spec leaves open, or a resource limit is
counted under `filtered:<rule id>` and never reported. The rules ship in
`oracles/known_false_positives.yml` (next to this module, so it is package data) and a
campaign may add its own file.

Files: a top-level `rules:` list of rules (schema: oracles.rule_schema). Order matters: the
shipped rules in file order, then the user's in theirs; the first rule that matches a
case wins. A user rule whose id is a shipped rule's id must say `overrides: true`, and then
replaces the shipped rule in its place; without it, the clash is an error, as is a
duplicate id within one file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from oracles.matchers import CaseFacts, CaseView, RuleHit, evaluate
from oracles.rule_schema import Rule, RulesFile

__all__ = ["SHIPPED_RULES", "CaseView", "Rule", "RuleHit", "RuleSet", "RulesError", "load_rules", "read_rules_file"]

SHIPPED_RULES = Path(__file__).resolve().with_name("known_false_positives.yml")


class RulesError(ValueError):
    """A rules file that cannot be used, as one line: the file, the rule, the reason."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.splitlines()))


class RuleSet:
    """Rules in match order; `match` tells the first one that explains a case."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.rules]

    def match(self, case: CaseView) -> RuleHit | None:
        """The first rule that matches, or None: the case is what it looks like.

        Passes and declared unsupported models are never filtered (there is nothing to
        hide), and every fact about the case is computed at most once across the rules."""
        if not case.judgement.verdict.is_bug:
            return None
        facts = CaseFacts(case)
        for rule in self.rules:
            hit = evaluate(rule, facts)
            if hit is not None:
                return hit
        return None


def load_rules(extra: Path | None = None) -> RuleSet:
    """The shipped rules, extended (and, by `overrides: true`, amended) by a user file."""
    rules = read_rules_file(SHIPPED_RULES)
    if extra is None:
        return RuleSet(rules)
    merged = {r.id: r for r in rules}
    for i, rule in enumerate(read_rules_file(extra)):
        if rule.id in merged and not rule.overrides:
            raise RulesError(
                f"{extra}: rule {rule.id!r} (#{i}): id already used by a shipped rule; "
                "set overrides: true to replace it"
            )
        if rule.id not in merged and rule.overrides:
            raise RulesError(f"{extra}: rule {rule.id!r} (#{i}): overrides: true but no shipped rule has this id")
        merged[rule.id] = rule
    return RuleSet(list(merged.values()))


def read_rules_file(path: Path) -> list[Rule]:
    """One file's rules, validated; any problem is a one-line RulesError."""
    try:
        data: Any = yaml.safe_load(path.read_text())
    except OSError as e:
        raise RulesError(f"{path}: cannot read: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise RulesError(f"{path}: not a text file (byte {e.start} is not UTF-8)") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or type(e).__name__
        raise RulesError(f"{path}: invalid YAML{where}: {problem}") from e
    try:
        parsed = RulesFile.model_validate(data)
    except ValidationError as e:
        raise RulesError(f"{path}: {_first_error(e, data)}") from e
    seen: set[str] = set()
    for i, rule in enumerate(parsed.rules):
        if rule.id in seen:
            raise RulesError(f"{path}: rule {rule.id!r} (#{i}): duplicate id")
        seen.add(rule.id)
    return parsed.rules


def _first_error(error: ValidationError, data: Any) -> str:
    """The first validation error, named by rule id (or index) and the key path in it."""
    first = error.errors()[0]
    loc = list(first["loc"])
    reason = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        reason = f"unknown key {loc[-1]!r}"
        loc = loc[:-1]
    if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
        index = loc[1]
        raw = data["rules"][index] if isinstance(data, dict) and isinstance(data.get("rules"), list) else None
        rule_id = raw.get("id") if isinstance(raw, dict) else None
        rule = f"rule {rule_id!r} (#{index})" if isinstance(rule_id, str) else f"rule #{index}"
        where = ".".join(str(p) for p in loc[2:])
        return f"{rule}: {where + ': ' if where else ''}{reason}"
    where = ".".join(str(p) for p in loc)
    return f"{where + ': ' if where else ''}{reason}"
