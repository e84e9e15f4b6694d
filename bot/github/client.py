"""GitHub through PyGithub, behind a small interface the deciding code can be tested and
dry-run against.

PyGithub's own retry and request pacing are turned off: `RetryPolicy` retries whole
idempotent steps (look up by marker, then write), never a bare POST, so a response lost
after the server acted cannot make a duplicate.

The bot's memory is its markers, and anyone who can comment can type a marker: so a reader
returns only what the token's own account wrote. That account is asked of GitHub, never
guessed from a name: `GET /user` for a user token, GraphQL's `viewer` for an app
installation token (which has no user, and whose bot login `<slug>[bot]` any other app's
`...[bot]` must not pass for).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal, Protocol, TypeVar

import requests
from github import Auth, Github, GithubException
from github.Issue import Issue
from github.NamedUser import NamedUser
from github.Organization import Organization

from bot.github.errors import GitHubUnavailable, ReportError
from bot.github.text import scrub

T = TypeVar("T")
SECONDARY_WAIT_S = 60.0
VIEWER_QUERY = "query { viewer { login } }"


@dataclass(frozen=True)
class Identity:
    """The account the token acts as: everything it wrote, and nothing else, is the bot's."""

    login: str
    kind: Literal["user", "app"]


@dataclass(frozen=True)
class IssueInfo:
    number: int
    title: str
    body: str
    state: str
    state_reason: str | None
    labels: tuple[str, ...]
    author: str
    """Who opened it: for a bot issue, the bot's own login."""
    created_at: datetime


@dataclass(frozen=True)
class CommentInfo:
    id: int
    body: str
    author: str
    created_at: datetime


class Reader(Protocol):
    def bot_issues(self) -> list[IssueInfo]:
        """Every issue the bot opened, open or closed, whatever its labels now."""
        ...

    def bot_comments(self, number: int) -> list[CommentInfo]:
        """The bot's own comments on an issue or PR: a person's comment never counts."""
        ...

    def reopened_by(self, number: int) -> list[str]: ...
    def now(self) -> datetime: ...


class Tracker(Reader, Protocol):
    def create_issue(self, title: str, body: str, labels: list[str]) -> int: ...
    def create_comment(self, number: int, body: str) -> int: ...
    def edit_comment(self, number: int, comment_id: int, body: str) -> None: ...
    def close_issue(self, number: int) -> None: ...
    def add_labels(self, number: int, labels: list[str]) -> None: ...


class EmptyRepo:
    """The reader of a dry run without a token: a repository with no bot issue or comment yet."""

    def bot_issues(self) -> list[IssueInfo]:
        return []

    def bot_comments(self, number: int) -> list[CommentInfo]:
        return []

    def reopened_by(self, number: int) -> list[str]:
        return []

    def now(self) -> datetime:
        return datetime.now(UTC)


def _aware(when: datetime | None) -> datetime:
    if when is None:
        return datetime.now(UTC)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _header(headers: dict[str, Any] | None, name: str) -> str | None:
    for k, v in (headers or {}).items():
        if k.lower() == name:
            return str(v)
    return None


class LiveRepo:
    """One repository over the REST API. Each method is one step; the caller retries it."""

    def __init__(self, token: str, base_url: str, full_name: str, timeout_s: int = 30) -> None:
        self._gh = Github(
            auth=Auth.Token(token),
            base_url=base_url.rstrip("/"),
            timeout=timeout_s,
            retry=None,
            seconds_between_requests=None,
            seconds_between_writes=None,
            lazy=True,
            user_agent="fuzzbot",
            per_page=100,
        )
        self._repo = self._gh.get_repo(full_name)
        self._me: Identity | None = None

    def identity(self) -> Identity:
        """Asked once per report; a 5xx or a rate limit is raised for the caller's retry."""
        if self._me is None:
            self._me = whoami(self._gh)
        return self._me

    def bot_issues(self) -> list[IssueInfo]:
        """Listed by creator, not by label: a person may take the label off, and anyone may put it
        on an issue of theirs. The author is checked again here, whatever the server filtered."""
        me = self.identity().login
        listed = self._repo.get_issues(
            state="all",
            creator=me,  # type: ignore[arg-type]  # PyGithub takes a login string at runtime
            sort="created",
            direction="asc",
        )
        return [_issue_info(i) for i in listed if i.pull_request is None and _login(i.user) == me]

    def bot_comments(self, number: int) -> list[CommentInfo]:
        me = self.identity().login
        return [
            CommentInfo(c.id, c.body or "", me, _aware(c.created_at))
            for c in self._repo.get_issue(number).get_comments()
            if _login(c.user) == me
        ]

    def reopened_by(self, number: int) -> list[str]:
        return [
            e.actor.login if e.actor else "" for e in self._repo.get_issue(number).get_events() if e.event == "reopened"
        ]

    def now(self) -> datetime:
        """The server's clock (its Date header): comment times are the server's, so is "a day"."""
        headers, _ = self._gh.requester.requestJsonAndCheck("GET", self._repo.url)
        date = _header(headers, "date")
        return _aware(parsedate_to_datetime(date)) if date else datetime.now(UTC)

    def create_issue(self, title: str, body: str, labels: list[str]) -> int:
        return self._repo.create_issue(title=title, body=body, labels=labels).number

    def create_comment(self, number: int, body: str) -> int:
        return self._repo.get_issue(number).create_comment(body).id

    def edit_comment(self, number: int, comment_id: int, body: str) -> None:
        self._repo.get_issue(number).get_comment(comment_id).edit(body)

    def close_issue(self, number: int) -> None:
        self._repo.get_issue(number).edit(state="closed", state_reason="completed")

    def add_labels(self, number: int, labels: list[str]) -> None:
        """Adds only: a label a person put on the issue stays."""
        self._repo.get_issue(number).add_to_labels(*labels)


def _login(user: NamedUser | Organization | None) -> str:
    return user.login if user is not None else ""


def _issue_info(i: Issue) -> IssueInfo:
    return IssueInfo(
        number=i.number,
        title=i.title,
        body=i.body or "",
        state=i.state,
        state_reason=i.state_reason,
        labels=tuple(lb.name for lb in i.labels),
        author=_login(i.user),
        created_at=_aware(i.created_at),
    )


def whoami(gh: Github) -> Identity:
    """`GET /user` names a user token's account. An installation token is refused there (403,
    "Resource not accessible by integration"); GraphQL's `viewer` then names its bot, spelt as
    REST spells the author of what it wrote: `<slug>[bot]`. The login is taken as given, never
    patched to look like a bot's: a wrong identity would file every issue again."""
    try:
        _, user = gh.requester.requestJsonAndCheck("GET", "/user")
    except GithubException as e:
        if e.status != 403 or _rate_limit_wait(e) is not None:
            raise
    else:
        login = user.get("login") if isinstance(user, dict) else None
        if isinstance(login, str) and login:
            return Identity(login, "user")
        raise ReportError("GET /user gave no login: cannot tell which comments and issues are the bot's")
    try:
        _, answer = gh.requester.graphql_query(VIEWER_QUERY, {})
    except GithubException as e:
        if e.status >= 500 or _rate_limit_wait(e) is not None:
            raise
        raise ReportError(
            f"cannot tell whose token this is: GET /user answered 403 and GraphQL viewer {e.status} {_message(e)}"
        ) from e
    data = answer.get("data")
    viewer = data.get("viewer") if isinstance(data, dict) else None
    login = viewer.get("login") if isinstance(viewer, dict) else None
    if not isinstance(login, str) or not login:
        raise ReportError("GraphQL viewer gave no login: cannot tell which comments and issues are the bot's")
    return Identity(login, "app" if login.endswith("[bot]") else "user")


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries: exponential backoff on 5xx and connection errors, and on a rate limit a
    wait until its reset (capped by `max_wait_s`); a 4xx other than a rate limit is final."""

    tries: int = 5
    backoff_s: float = 1.0
    max_wait_s: float = 60.0
    secrets: tuple[str, ...] = ()
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    def call(self, what: str, step: Callable[[], T]) -> T:
        last = ""
        for attempt in range(self.tries):
            try:
                return step()
            except GithubException as e:
                wait = _rate_limit_wait(e)
                if wait is None and e.status < 500:
                    raise ReportError(scrub(f"GitHub refused {what}: {e.status} {_message(e)}", self.secrets)) from e
                last = f"{e.status} {_message(e)}"
                delay = wait if wait is not None else self.backoff_s * 2**attempt
            except requests.RequestException as e:
                last = f"{type(e).__name__}"
                delay = self.backoff_s * 2**attempt
            if attempt + 1 < self.tries:
                self.sleep(min(delay, self.max_wait_s))
        raise GitHubUnavailable(scrub(f"GitHub unavailable ({what}, {self.tries} tries): {last}", self.secrets))


def _message(e: GithubException) -> str:
    data = e.data
    text = str((data.get("message") or data.get("data") if isinstance(data, dict) else data) or "")
    return " ".join(re.sub(r"<[^>]*>", " ", text).split())[:200]  # a 5xx page from the edge is HTML


def _rate_limit_wait(e: GithubException) -> float | None:
    """Seconds until the limit resets, from Retry-After or X-RateLimit-Reset against the
    response's own Date (the server's clock, not ours); None when `e` is no rate limit."""
    headers = e.headers or {}
    retry_after = _header(headers, "retry-after")
    remaining = _header(headers, "x-ratelimit-remaining")
    if e.status not in (403, 429):
        return None
    if retry_after is None and remaining != "0":
        # a secondary limit may come with neither header: GitHub says to wait at least a minute
        return SECONDARY_WAIT_S if "rate limit" in _message(e).lower() else None
    if retry_after is not None:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            pass
    reset = _header(headers, "x-ratelimit-reset")
    date = _header(headers, "date")
    now = parsedate_to_datetime(date).timestamp() if date else time.time()
    try:
        return max(0.0, float(reset or 0) - now) + 0.5
    except ValueError:
        return 1.0


class RetryingReader:
    """A reader whose every lookup is retried by `policy` (reads are always safe to repeat)."""

    def __init__(self, reader: Reader, policy: RetryPolicy) -> None:
        self._reader, self._policy = reader, policy
        self._now: datetime | None = None

    def bot_issues(self) -> list[IssueInfo]:
        return self._policy.call("list issues", self._reader.bot_issues)

    def bot_comments(self, number: int) -> list[CommentInfo]:
        return self._policy.call(f"comments of #{number}", lambda: self._reader.bot_comments(number))

    def reopened_by(self, number: int) -> list[str]:
        return self._policy.call(f"events of #{number}", lambda: self._reader.reopened_by(number))

    def now(self) -> datetime:
        """Asked once: a report takes seconds, and the day rule needs no finer clock."""
        if self._now is None:
            self._now = self._policy.call("server time", self._reader.now)
        return self._now
