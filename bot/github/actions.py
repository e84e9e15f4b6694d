"""Writes as idempotent "ensure" steps: each looks up its marker first and writes only what is
missing, so replaying one after a crash, a dropped response or a second run of the same report
never duplicates an issue or a comment.

Every lookup goes through the reader's `bot_issues` and `bot_comments`, which hold only what the
bot's own account wrote: a person's comment that quotes a marker is never edited, counted or
taken for the bot's, and an issue found again by its fingerprint needs no label to be found.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, Field

from bot.github.client import CommentInfo, IssueInfo, Reader, Tracker
from bot.github.text import (
    CLOSE_MARKER,
    PR_MARKER,
    STATUS_MARKER,
    find_fingerprint,
    find_recurrence,
    is_occurrence,
)

BOT_LABEL = "fuzzbot"
KEEP_OPEN_LABEL = "fuzzbot:keep-open"
OCCURRENCE_EVERY = timedelta(days=1)

Kind = Literal["pr_comment", "open_issue", "occurrence", "status", "close", "labels"]


class Action(BaseModel):
    """One write, complete enough to be replayed from the queue alone."""

    kind: Kind
    key: str
    """Names the action in the queue, the dry run's files and logs."""
    number: int | None = None
    """The PR or issue it targets (none for a new issue)."""
    title: str = ""
    body: str = ""
    labels: list[str] = Field(default_factory=list)
    """A new issue's labels; for `labels`, the ones the issue must carry (added when missing)."""
    fingerprint: str = ""
    recurrence: int = 1
    marker: str = ""
    """The marker whose presence means done (an occurrence comment's run marker)."""


def _same(a: str, b: str) -> bool:
    """Bodies as GitHub keeps them: it may turn newlines into CRLF and drop trailing space."""
    return a.replace("\r\n", "\n").strip() == b.replace("\r\n", "\n").strip()


def _mine(comments: list[CommentInfo], marker: str) -> CommentInfo | None:
    """The first comment that opens with `marker`, as every body the bot writes does: a marker
    quoted further down (a compiler message, a model text) does not make it that comment."""
    return next((c for c in comments if c.body.lstrip().startswith(marker)), None)


def bot_comment(reader: Reader, number: int, marker: str) -> CommentInfo | None:
    """The bot's own comment of one kind (status, close, PR) on an issue or PR, if any."""
    return _mine(reader.bot_comments(number), marker)


def missing_labels(issue: IssueInfo, wanted: list[str]) -> list[str]:
    """GitHub matches label names without case, so the bot does too."""
    have = {lb.lower() for lb in issue.labels}
    return [lb for lb in wanted if lb.lower() not in have]


def issue_for(issues: list[IssueInfo], fingerprint: str, recurrence: int) -> IssueInfo | None:
    return next(
        (i for i in issues if find_fingerprint(i.body) == fingerprint and find_recurrence(i.body) == recurrence),
        None,
    )


def reopened_by_person(reader: Reader, issue: IssueInfo) -> bool:
    """A person reopened it: the bot must never close it again (any reopen not by its author, the bot)."""
    return any(actor != issue.author for actor in reader.reopened_by(issue.number))


def may_close(reader: Reader, issue: IssueInfo) -> bool:
    return issue.state == "open" and KEEP_OPEN_LABEL not in issue.labels and not reopened_by_person(reader, issue)


def occurrence_due(reader: Reader, issue: IssueInfo) -> bool:
    """At most one occurrence comment a day, by the server's clock: the last one (or the
    issue's opening) must be a day old."""
    times = [c.created_at for c in reader.bot_comments(issue.number) if is_occurrence(c.body)]
    last = max([issue.created_at, *times])
    return reader.now() - last >= OCCURRENCE_EVERY


def apply(action: Action, tracker: Tracker) -> str:
    """Do `action` unless already done; says what happened (created, edited, unchanged, ...)."""
    if action.kind == "open_issue":
        found = issue_for(tracker.bot_issues(), action.fingerprint, action.recurrence)
        if found is not None:
            return f"exists #{found.number}"
        return f"created #{tracker.create_issue(action.title, action.body, action.labels)}"
    assert action.number is not None, action.key
    if action.kind in ("pr_comment", "status"):
        marker = PR_MARKER if action.kind == "pr_comment" else STATUS_MARKER
        old = bot_comment(tracker, action.number, marker)
        if old is None:
            return f"created comment {tracker.create_comment(action.number, action.body)}"
        if _same(old.body, action.body):
            return "unchanged"
        tracker.edit_comment(action.number, old.id, action.body)
        return f"edited comment {old.id}"
    if action.kind == "occurrence":
        return _occurrence(action, tracker)
    if action.kind == "labels":
        return _labels(action, tracker)
    return _close(action, tracker)


def _labels(action: Action, tracker: Tracker) -> str:
    """Puts back the labels a person took off a bot issue; adds only, so labels people set stay."""
    assert action.number is not None
    issue = next((i for i in tracker.bot_issues() if i.number == action.number), None)
    if issue is None:
        return "not the bot's issue"
    missing = missing_labels(issue, action.labels)
    if not missing:
        return "unchanged"
    tracker.add_labels(action.number, missing)
    return "labelled " + ", ".join(missing)


def _occurrence(action: Action, tracker: Tracker) -> str:
    assert action.number is not None
    if bot_comment(tracker, action.number, action.marker) is not None:
        return "exists"
    issue = next((i for i in tracker.bot_issues() if i.number == action.number), None)
    if issue is None or issue.state != "open" or not occurrence_due(tracker, issue):
        return "not due"
    return f"created comment {tracker.create_comment(action.number, action.body)}"


def _close(action: Action, tracker: Tracker) -> str:
    """The safety rules are checked again here, at the moment of writing, so a replayed close
    never overrides a person who reopened the issue or labelled it keep-open in between."""
    assert action.number is not None
    issue = next((i for i in tracker.bot_issues() if i.number == action.number), None)
    if issue is None or not may_close(tracker, issue):
        return "left open"
    if bot_comment(tracker, action.number, CLOSE_MARKER) is None:
        tracker.create_comment(action.number, action.body)
    tracker.close_issue(action.number)
    return "closed"
