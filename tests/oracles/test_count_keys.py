"""The count keys of summary.json read one way: rank, bug or not, and the folder of a set-aside key."""

from __future__ import annotations

import pytest

from oracles.count_keys import ORDER, PERF_REGRESSION, CountKey
from oracles.matchers import RuleHit
from oracles.rules import load_rules
from oracles.sides import CrossVerdict
from oracles.verdict import Verdict

pytestmark: list[pytest.MarkDecorator] = []


def test_every_verdict_across_builds_and_of_one_build_has_a_rank_and_unknown_keys_sort_last() -> None:
    keys = [v.value for v in CrossVerdict if v is not CrossVerdict.filtered] + [v.value for v in Verdict]
    assert all(CountKey(k).rank[0] < len(ORDER) for k in keys)
    assert CountKey("something_new").rank[0] == len(ORDER)
    ranked = sorted(["pass", "filtered:x", "fixed", "new_regression", "crash"], key=lambda k: CountKey(k).rank)
    assert ranked == ["new_regression", "fixed", "crash", "filtered:x", "pass"]


def test_bugs_are_failures_of_some_build_and_never_good_news_or_set_aside() -> None:
    bugs = {k for k in [*CrossVerdict, *Verdict, PERF_REGRESSION, "filtered:known-tanh-drift"] if CountKey(k).is_bug}
    assert bugs == {"new_regression", "new_in_head", "persistent", "crash", "timeout", "wrong_result"}


def test_a_set_aside_key_names_its_folder_and_a_filtered_key_its_rule() -> None:
    assert CountKey("flaky").aside_folder == "flaky/" and CountKey(PERF_REGRESSION).aside_folder == "perf/"
    filtered = CountKey.filtered("known-tanh-drift")
    assert filtered.rule == "known-tanh-drift" and filtered.aside_folder == "filtered/known-tanh-drift/"
    assert not CountKey("new_regression").is_aside and CountKey("new_regression").rule is None


def test_the_keys_a_rule_and_its_hit_write_are_the_keys_read_here() -> None:
    rule = load_rules().rules[0]
    assert CountKey(rule.count_key).rule == rule.id
    assert CountKey(RuleHit(rule_id=rule.id, explanation="").count_key).rule == rule.id
