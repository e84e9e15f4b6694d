"""Scheduled runs: one issue per fingerprint. A new bug opens an issue; a bug whose issue is
open gets an occurrence comment (at most daily); a bug whose issue was closed as fixed and
that is back opens a new issue, `(2)`, `(3)` like syzbot, linking the old one. An issue a
person closed as not planned stays closed: the bot does not argue with a triage decision.

Issues are the bot's own (see `Reader.bot_issues`), found by their fingerprint marker; the
`fuzzbot` label is for people to filter by, so one a person took off is put back, and its
absence never makes the bot file a duplicate.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.github.actions import BOT_LABEL, Action, bot_comment, missing_labels, occurrence_due
from bot.github.client import IssueInfo, Reader
from bot.github.findings import Item, Report
from bot.github.render import head_commit, issue_body, issue_title, occurrence_comment, status_comment
from bot.github.text import (
    CANNOT_TELL,
    STATUS_MARKER,
    find_clean_runs,
    find_fingerprint,
    find_recurrence,
    occurrence_marker,
)
from oracles.sides import CrossVerdict

ONE_BUILD_LABEL = "fuzzbot:bug"
"""A one-build campaign has no base to compare with: its findings are bugs of that build, not
"persistent" ones (nothing says they were there before)."""


@dataclass
class Plan:
    actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Decisions that write nothing (an issue left closed or open, and why)."""


def reportable(report: Report) -> list[Item]:
    """The bugs of the run, one per fingerprint: fixed findings are good news, not issues."""
    seen: dict[str, Item] = {}
    for item in report.items:
        if item.across != CrossVerdict.fixed:
            seen.setdefault(item.ref.fingerprint, item)
    return list(seen.values())


def latest_by_fingerprint(issues: Iterable[IssueInfo]) -> dict[str, IssueInfo]:
    latest: dict[str, IssueInfo] = {}
    for issue in issues:
        fp = find_fingerprint(issue.body)
        if fp is None:
            continue
        old = latest.get(fp)
        if old is None or find_recurrence(issue.body) > find_recurrence(old.body):
            latest[fp] = issue
    return latest


def verdict_label(item: Item) -> str:
    return f"fuzzbot:{item.ref.verdict.value}"


def labels_for(item: Item, report: Report) -> list[str]:
    labels = [BOT_LABEL, verdict_label(item)]
    if report.summary.base is None:
        labels.append(ONE_BUILD_LABEL)
    elif item.across == CrossVerdict.new_regression:
        labels.append("fuzzbot:regression")
    elif item.across == CrossVerdict.new_in_head:
        labels.append("fuzzbot:new-in-head")
    return labels


def plan_issues(report: Report, reader: Reader, issues: list[IssueInfo]) -> Plan:
    plan = Plan()
    latest = latest_by_fingerprint(issues)
    plan.actions += plan_labels(report, issues)
    for item in reportable(report):
        fp = item.ref.fingerprint
        issue = latest.get(fp)
        if issue is None:
            plan.actions.append(_open(item, report, 1, None))
        elif issue.state == "open":
            _seen_open(plan, item, report, reader, issue)
        elif issue.state_reason == "not_planned":
            plan.notes.append(f"#{issue.number} ({fp}) was closed as not planned: not reopened")
        else:
            plan.actions.append(_open(item, report, find_recurrence(issue.body) + 1, issue.number))
    return plan


def plan_labels(report: Report, issues: list[IssueInfo]) -> list[Action]:
    """Every open bot issue gets `fuzzbot` back when a person took it off; one whose bug this run
    saw gets its verdict label back too (the run is what says which verdict that is)."""
    seen = {item.ref.fingerprint: item for item in reportable(report)}
    actions = []
    for issue in issues:
        fp = find_fingerprint(issue.body)
        if issue.state != "open" or fp is None:
            continue
        item = seen.get(fp)
        wanted = [BOT_LABEL, *([verdict_label(item)] if item is not None else [])]
        if missing_labels(issue, wanted):
            actions.append(Action(kind="labels", key=f"labels-{issue.number}", number=issue.number, labels=wanted))
    return actions


def _open(item: Item, report: Report, recurrence: int, previous: int | None) -> Action:
    return Action(
        kind="open_issue",
        key=f"issue-{item.ref.fingerprint}-{recurrence}",
        title=issue_title(item, recurrence),
        body=issue_body(item, report, recurrence, previous),
        labels=labels_for(item, report),
        fingerprint=item.ref.fingerprint,
        recurrence=recurrence,
    )


def _seen_open(plan: Plan, item: Item, report: Report, reader: Reader, issue: IssueInfo) -> None:
    """Seen again: an occurrence comment when due, and the auto-close count back to zero."""
    if occurrence_due(reader, issue):
        plan.actions.append(
            Action(
                kind="occurrence",
                key=f"occurrence-{issue.number}",
                number=issue.number,
                body=occurrence_comment(item, report),
                marker=occurrence_marker(report.run_id),
            )
        )
    status = bot_comment(reader, issue.number, STATUS_MARKER)
    if status is not None and (find_clean_runs(status.body)[0] > 0 or CANNOT_TELL in status.body):
        body = status_comment(0, 0, head_commit(report), report.run_id)
        plan.actions.append(Action(kind="status", key=f"status-{issue.number}", number=issue.number, body=body))
