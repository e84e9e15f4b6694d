"""A local, stateful fake of the GitHub REST v3 API, served over real HTTP on 127.0.0.1.

Why: GitHub cannot be reached from here, yet fuzzbot talks to it through the real PyGithub client
over real HTTP.  Serving GitHub-shaped JSON from a real socket exercises the code paths that
mocks of PyGithub objects would skip: URL building from ``base_url``, pagination through
``Link`` headers, PyGithub's mapping of status codes to exceptions, and connection handling.
Fault injection (5xx, primary and secondary rate limits, dropped connections) lets tests cover
the bot's error handling deterministically, and a movable clock lets them cover time rules such
as "at most one comment per day" without sleeping.

Tokens come in GitHub's two kinds, so the bot's identity rules are tested on both: a user token
(a PAT) for which ``GET /user`` answers, and an app installation token for which it answers 403
("Resource not accessible by integration") and only GraphQL's ``viewer { login }`` names the
app's bot account (``<slug>[bot]``).  Every write is attributed to the login of the token that
made it, so several bots and people can act on one repository over HTTP.

Only what fuzzbot uses is modelled; anything else answers 404 like GitHub does for unknown routes.
All state lives on the ``FakeGitHub`` instance behind one lock; nothing is global.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import re
import threading
import time
import urllib.parse
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, cast

Json = dict[str, Any]

_API_PREFIX = "/api/v3"  # GitHub Enterprise style base_url; PyGithub prepends it to every path
_GRAPHQL_ENTERPRISE = "/api/graphql"
_DEFAULT_PER_PAGE = 30
_MAX_PER_PAGE = 100
_RATE_LIMIT = 5000
BLOB_PREFIX = "/_blobs/"
"""Where artifact zips are served from, outside the API, as GitHub's storage is."""
_STATE_REASONS = {"completed", "not_planned", "reopened", None}
_VIEWER_LOGIN = re.compile(r"\bviewer\s*\{\s*login\s*\}")
TokenKind = Literal["user", "app"]


def _ts(moment: datetime | None) -> str | None:
    """GitHub's timestamp format (second resolution, 'Z' suffix), which PyGithub parses."""
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_ts(text: str) -> datetime:
    """Parse a ``since`` parameter; GitHub accepts ISO 8601 with 'Z' or an offset."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class _HttpError(Exception):
    """Raised by route handlers to answer with a GitHub-style JSON error."""

    def __init__(self, status: int, message: str, errors: list[Json] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors


@dataclass
class _Response:
    status: int
    body: Any = None  # JSON-serialisable, a str sent as HTML, or bytes sent as they are
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Token:
    login: str
    kind: TokenKind


@dataclass
class _Label:
    id: int
    name: str
    color: str = "ededed"
    description: str | None = None


@dataclass
class _Event:
    id: int
    event: str
    actor: str
    created_at: datetime
    label: str | None = None


@dataclass
class _Comment:
    id: int
    issue: int
    body: str
    user: str
    created_at: datetime
    updated_at: datetime


@dataclass
class _Pull:
    head_sha: str
    base_sha: str
    head_ref: str
    base_ref: str


@dataclass
class _Issue:
    number: int
    id: int
    title: str
    body: str | None
    user: str
    created_at: datetime
    updated_at: datetime
    state: str = "open"
    state_reason: str | None = None
    closed_at: datetime | None = None
    closed_by: str | None = None
    labels: list[str] = field(default_factory=list)
    assignees: list[str] = field(default_factory=list)
    comment_ids: list[int] = field(default_factory=list)
    events: list[_Event] = field(default_factory=list)
    pull: _Pull | None = None


@dataclass
class _Artifact:
    id: int
    run: int
    name: str
    zipped: bytes
    created_at: datetime
    expired: bool = False


@dataclass
class _Repo:
    full_name: str
    id: int
    created_at: datetime
    labels: dict[str, _Label] = field(default_factory=dict)  # keyed by lower-cased name, as GitHub matches
    issues: dict[int, _Issue] = field(default_factory=dict)
    comments: dict[int, _Comment] = field(default_factory=dict)
    artifacts: dict[int, _Artifact] = field(default_factory=dict)

    def next_number(self) -> int:
        return max(self.issues, default=0) + 1


@dataclass
class _Fault:
    kind: str  # "fail" | "rate" | "secondary" | "drop"
    status: int = 0
    seconds: float = 0.0
    apply: bool = False  # drop only: carry the request out before hanging up


@dataclass
class _Ctx:
    """One request as the handlers see it: the roots used to build URLs, query and JSON body."""

    api_root: str  # scheme://host:port plus the prefix the client used, so returned URLs pass PyGithub's checks
    html_root: str
    path: str  # request path without prefix and query
    query: dict[str, str]
    body: Json
    raw: Any  # the decoded JSON as sent: some endpoints (issue labels) take a bare list
    actor: str = ""  # the login of the token that made the request: every write is theirs
    kind: TokenKind = "user"


Handler = Callable[..., _Response]


class FakeGitHub:
    """Stateful GitHub REST server for tests; see the module docstring for why it exists."""

    def __init__(
        self, token: str = "test-token", bot_login: str = "fuzzbot[bot]", token_kind: TokenKind = "user"
    ) -> None:
        self.token = token
        self.bot_login = bot_login
        self._tokens: dict[str, _Token] = {token: _Token(bot_login, token_kind)}
        self.url = ""
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.RLock()
        self._ids = itertools.count(1001)
        self._user_ids: dict[str, int] = {}
        self._repos: dict[str, _Repo] = {}
        self._faults: list[_Fault] = []
        self._clock_offset = 0.0
        self._rate_used = 0
        self._rate_reset = int(time.time()) + 3600
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._routes = self._route_table()

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> FakeGitHub:
        """Bind an ephemeral port and serve in a daemon thread, so tests never collide on ports."""
        server = _Server(("127.0.0.1", 0), _RequestHandler)
        server.fake = self
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="fake-github", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; idle keep-alive threads are daemons and time out."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ----------------------------------------------------------------- test-side API

    def add_token(self, token: str, login: str, kind: TokenKind = "user") -> None:
        """Another account that may call the API: a person or bot (``kind="user"``), or a GitHub App's
        installation (``kind="app"``, ``login`` its ``<slug>[bot]``)."""
        with self._lock:
            self._tokens[token] = _Token(login, kind)

    def add_repo(self, full_name: str) -> None:
        """Create an empty repository the bot may act on (unknown repositories answer 404)."""
        with self._lock:
            key = full_name.lower()
            if key not in self._repos:
                self._repos[key] = _Repo(full_name=full_name, id=next(self._ids), created_at=self._now())

    def add_pull(
        self,
        full_name: str,
        number: int,
        head_sha: str,
        base_sha: str,
        head_ref: str = "feature",
        base_ref: str = "main",
    ) -> None:
        """Add a pull request; like GitHub it shares the issue number space and shows in issue lists."""
        with self._lock:
            repo = self._repo_or_raise(full_name)
            now = self._now()
            repo.issues[number] = _Issue(
                number=number,
                id=next(self._ids),
                title=f"Pull request #{number}",
                body=None,
                user="contributor",
                created_at=now,
                updated_at=now,
                pull=_Pull(head_sha, base_sha, head_ref, base_ref),
            )

    def issues(self, full_name: str, include_pulls: bool = False) -> list[Json]:
        """Snapshot of the repository's issues (plain data, safe to keep after further requests)."""
        with self._lock:
            repo = self._repo_or_raise(full_name)
            return [
                self._snapshot(repo, issue)
                for _, issue in sorted(repo.issues.items())
                if include_pulls or issue.pull is None
            ]

    def human_reopen(self, full_name: str, number: int, login: str = "maintainer") -> None:
        """A person reopens the issue in the web UI: state open plus a 'reopened' event by them."""
        with self._lock:
            self._set_state(self._issue_or_raise(full_name, number), "open", None, login)

    def human_close(self, full_name: str, number: int, login: str = "maintainer") -> None:
        """A person closes the issue as completed: state closed plus a 'closed' event by them."""
        with self._lock:
            self._set_state(self._issue_or_raise(full_name, number), "closed", None, login)

    def add_label(self, full_name: str, number: int, name: str, login: str = "maintainer") -> None:
        """A person labels the issue (label auto-created like GitHub's UI does), with a 'labeled' event."""
        with self._lock:
            repo = self._repo_or_raise(full_name)
            issue = self._issue_or_raise(full_name, number)
            self._add_labels(repo, issue, [name], login)

    def human_comment(self, full_name: str, number: int, body: str, login: str = "maintainer") -> int:
        """A person comments in the web UI; returns the comment's id."""
        with self._lock:
            repo = self._repo_or_raise(full_name)
            issue = self._issue_or_raise(full_name, number)
            return self._new_comment(repo, issue, body, login).id

    def human_remove_label(self, full_name: str, number: int, name: str, login: str = "maintainer") -> None:
        """A person takes a label off the issue, with an 'unlabeled' event by them."""
        with self._lock:
            repo = self._repo_or_raise(full_name)
            issue = self._issue_or_raise(full_name, number)
            self._replace_labels(repo, issue, [lb for lb in issue.labels if lb.lower() != name.lower()], login)

    def add_artifact(self, full_name: str, run: int, name: str, files: dict[str, bytes], expired: bool = False) -> int:
        """An artifact a workflow run uploaded: `files` by their path inside it, zipped as
        GitHub serves them. Its zip URL redirects, as GitHub's does, to storage that takes no
        token (`BLOB_PREFIX`)."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for path, data in files.items():
                archive.writestr(path, data)
        with self._lock:
            repo = self._repo_or_raise(full_name)
            artifact = _Artifact(next(self._ids), run, name, buffer.getvalue(), self._now(), expired)
            repo.artifacts[artifact.id] = artifact
            return artifact.id

    def fail_next(self, n: int, status: int = 502) -> None:
        """The next n requests answer ``status``: an HTML page for 5xx (as GitHub's edge does), else JSON."""
        with self._lock:
            self._faults.extend(_Fault("fail", status=status) for _ in range(n))

    def rate_limit_next(self, n: int, reset_in_s: float = 1.0) -> None:
        """The next n requests hit the primary rate limit: 403, Remaining 0, Reset = real now + reset_in_s."""
        with self._lock:
            self._faults.extend(_Fault("rate", seconds=reset_in_s) for _ in range(n))

    def secondary_rate_limit_next(self, n: int, retry_after_s: int = 1, status: int = 429) -> None:
        """The next n requests hit a secondary rate limit: ``status`` (429 or 403) with Retry-After."""
        with self._lock:
            self._faults.extend(_Fault("secondary", status=status, seconds=retry_after_s) for _ in range(n))

    def drop_next(self, n: int, apply: bool = False) -> None:
        """The next n requests get no answer: the server closes the connection after reading them.

        With ``apply=True`` each request is carried out first and only the answer is lost, the case
        that makes a blind retry of a POST create a duplicate issue or comment.
        """
        with self._lock:
            self._faults.extend(_Fault("drop", apply=apply) for _ in range(n))

    def advance_clock(self, seconds: float) -> None:
        """Move the server's notion of now (all timestamps it writes) forward, so tests need not sleep."""
        with self._lock:
            self._clock_offset += seconds

    # ----------------------------------------------------------------- request entry points (server thread)

    def _begin(self, method: str, raw_path: str) -> _Fault | None:
        """Record the request and pop the next injected fault, if any; faults apply before auth."""
        with self._lock:
            self.requests.append((method, _strip_prefix(raw_path)[1]))
            self._rate_used += 1
            return self._faults.pop(0) if self._faults else None

    def _fault_response(self, fault: _Fault) -> _Response:
        with self._lock:
            return self._fault_response_locked(fault)

    def _fault_response_locked(self, fault: _Fault) -> _Response:
        if fault.kind == "rate":
            reset = math.ceil(time.time() + fault.seconds)
            body = {
                "message": f"API rate limit exceeded for user ID {self._user_id(self.bot_login)}.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
            }
            return _Response(403, body, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)})
        if fault.kind == "secondary":
            body = {
                "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
            }
            return _Response(fault.status, body, {"Retry-After": str(int(fault.seconds))})
        if fault.status >= 500:
            page = f"<html><body><h1>{fault.status} Server Error</h1>Unicorn!</body></html>"
            return _Response(fault.status, page, {"Content-Type": "text/html; charset=utf-8"})
        return _Response(fault.status, {"message": "Injected failure"})

    def _dispatch(self, method: str, raw_path: str, query: str, headers: dict[str, str], body: bytes) -> _Response:
        """Authenticate, route and run the handler under the state lock."""
        prefix, path = _strip_prefix(raw_path)
        if path.startswith(BLOB_PREFIX):
            return self._blob(path[len(BLOB_PREFIX) :], headers)
        auth = headers.get("authorization", "")
        scheme, _, given = auth.partition(" ")
        with self._lock:
            caller = self._tokens.get(given)
        if scheme.lower() not in ("token", "bearer") or caller is None:
            return _error(401, "Bad credentials")
        try:
            payload = json.loads(body) if body else {}
        except ValueError:
            return _error(400, "Problems parsing JSON")
        params = {k: v[-1] for k, v in urllib.parse.parse_qs(query).items()}
        body_dict = payload if isinstance(payload, dict) else {}
        ctx = _Ctx(f"{self.url}{prefix}", self.url, path, params, body_dict, payload, caller.login, caller.kind)
        for route_method, pattern, handler in self._routes:
            match = pattern.match(path)
            if match and route_method == method:
                args = {k: urllib.parse.unquote(v) for k, v in match.groupdict().items()}
                try:
                    with self._lock:
                        return handler(ctx, **args)
                except _HttpError as err:
                    return _error(err.status, err.message, err.errors)
        return _error(404, "Not Found")

    def _rate_headers(self) -> dict[str, str]:
        with self._lock:
            return {
                "X-RateLimit-Limit": str(_RATE_LIMIT),
                "X-RateLimit-Remaining": str(max(_RATE_LIMIT - self._rate_used, 0)),
                "X-RateLimit-Reset": str(self._rate_reset),
                "X-RateLimit-Used": str(self._rate_used),
                "X-RateLimit-Resource": "core",
            }

    # ----------------------------------------------------------------- routes

    def _route_table(self) -> list[tuple[str, re.Pattern[str], Handler]]:
        """Method, path pattern (matched on the still percent-encoded path) and handler."""
        repo = r"^/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"
        issue = repo + r"/issues/(?P<number>\d+)"
        table: list[tuple[str, str, Handler]] = [
            ("GET", r"^/user$", self._get_user),
            ("POST", r"^/graphql$", self._graphql),
            ("GET", r"^/users/(?P<login>[^/]+)$", self._get_named_user),
            ("GET", r"^/rate_limit$", self._get_rate_limit),
            ("GET", repo + "$", self._get_repo),
            ("GET", repo + "/issues$", self._list_issues),
            ("POST", repo + "/issues$", self._create_issue),
            ("GET", repo + "/issues/comments$", self._list_repo_comments),
            ("GET", repo + r"/issues/comments/(?P<cid>\d+)$", self._get_comment),
            ("PATCH", repo + r"/issues/comments/(?P<cid>\d+)$", self._edit_comment),
            ("DELETE", repo + r"/issues/comments/(?P<cid>\d+)$", self._delete_comment),
            ("GET", issue + "$", self._get_issue),
            ("PATCH", issue + "$", self._edit_issue),
            ("GET", issue + "/comments$", self._list_comments),
            ("POST", issue + "/comments$", self._create_comment),
            ("GET", issue + "/events$", self._list_events),
            ("GET", issue + "/labels$", self._list_issue_labels),
            ("POST", issue + "/labels$", self._add_issue_labels),
            ("PUT", issue + "/labels$", self._set_issue_labels),
            ("DELETE", issue + "/labels$", self._clear_issue_labels),
            ("DELETE", issue + "/labels/(?P<label>[^/]+)$", self._remove_issue_label),
            ("GET", repo + "/labels$", self._list_labels),
            ("POST", repo + "/labels$", self._create_label),
            ("GET", repo + "/labels/(?P<label>[^/]+)$", self._get_label),
            ("GET", repo + r"/pulls/(?P<number>\d+)$", self._get_pull),
            ("GET", repo + "/commits/(?P<sha>[0-9a-fA-F]{4,40})$", self._get_commit),
            ("GET", repo + r"/actions/runs/(?P<run>\d+)$", self._get_run),
            ("GET", repo + r"/actions/runs/(?P<run>\d+)/artifacts$", self._list_artifacts),
            ("GET", repo + r"/actions/artifacts/(?P<aid>\d+)/zip$", self._artifact_zip),
        ]
        return [(method, re.compile(pattern), handler) for method, pattern, handler in table]

    def _get_user(self, ctx: _Ctx) -> _Response:
        """The token's own account; an installation token has none, and GitHub answers 403."""
        if ctx.kind == "app":
            raise _HttpError(403, "Resource not accessible by integration")
        user = self._user_json(ctx, ctx.actor)
        return _Response(200, {**user, "name": ctx.actor, "created_at": _ts(self._now())})

    def _graphql(self, ctx: _Ctx) -> _Response:
        """Only ``query { viewer { login } }``, the one way an installation token learns its
        bot login; anything else is a GraphQL error (HTTP 200 with ``errors``, as GitHub answers)."""
        query = ctx.body.get("query")
        if not isinstance(query, str) or not _VIEWER_LOGIN.search(query):
            return _Response(200, {"errors": [{"message": "fake GitHub answers only viewer { login }"}]})
        return _Response(200, {"data": {"viewer": {"login": ctx.actor}}})

    def _get_named_user(self, ctx: _Ctx, login: str) -> _Response:
        """Any login exists: PyGithub fetches users lazily when e.g. ``issue.user.name`` is read."""
        return _Response(200, {**self._user_json(ctx, login), "name": login})

    def _get_rate_limit(self, ctx: _Ctx) -> _Response:
        core = {
            "limit": _RATE_LIMIT,
            "remaining": max(_RATE_LIMIT - self._rate_used, 0),
            "reset": self._rate_reset,
            "used": self._rate_used,
            "resource": "core",
        }
        resources = {name: {**core, "resource": name} for name in ("core", "search", "graphql")}
        return _Response(200, {"resources": resources, "rate": core})

    def _get_repo(self, ctx: _Ctx, owner: str, name: str) -> _Response:
        return _Response(200, self._repo_json(ctx, self._repo(owner, name)))

    def _list_issues(self, ctx: _Ctx, owner: str, name: str) -> _Response:
        """GitHub's issue list: includes pull requests; filters state, labels (all must match), creator, since."""
        repo = self._repo(owner, name)
        state = ctx.query.get("state", "open")
        wanted = [w.strip().lower() for w in ctx.query.get("labels", "").split(",") if w.strip()]
        creator = ctx.query.get("creator")
        since = _parse_ts(ctx.query["since"]) if "since" in ctx.query else None
        found = [
            issue
            for issue in repo.issues.values()
            if state in ("all", issue.state)
            and all(w in {lb.lower() for lb in issue.labels} for w in wanted)
            and (creator is None or issue.user.lower() == creator.lower())
            and (since is None or issue.updated_at >= since)
        ]
        sort_keys: dict[str, Callable[[_Issue], Any]] = {
            "created": lambda i: (i.created_at, i.number),
            "updated": lambda i: (i.updated_at, i.number),
            "comments": lambda i: (len(i.comment_ids), i.number),
        }
        found.sort(key=sort_keys.get(ctx.query.get("sort", "created"), sort_keys["created"]))
        if ctx.query.get("direction", "desc") == "desc":
            found.reverse()
        return self._paginate(ctx, [self._issue_json(ctx, repo, issue) for issue in found])

    def _create_issue(self, ctx: _Ctx, owner: str, name: str) -> _Response:
        repo = self._repo(owner, name)
        title = ctx.body.get("title")
        if not isinstance(title, str) or not title:
            missing = [{"resource": "Issue", "code": "missing_field", "field": "title"}]
            raise _HttpError(422, "Validation Failed", missing)
        now = self._now()
        issue = _Issue(
            number=repo.next_number(),
            id=next(self._ids),
            title=title,
            body=ctx.body.get("body"),
            user=ctx.actor,
            created_at=now,
            updated_at=now,
            assignees=list(ctx.body.get("assignees") or []),
        )
        repo.issues[issue.number] = issue
        self._add_labels(repo, issue, _label_names(ctx.body.get("labels")), ctx.actor)
        return _Response(201, self._issue_json(ctx, repo, issue))

    def _get_issue(self, ctx: _Ctx, owner: str, name: str, number: str) -> _Response:
        repo = self._repo(owner, name)
        return _Response(200, self._issue_json(ctx, repo, self._issue(repo, number)))

    def _edit_issue(self, ctx: _Ctx, owner: str, name: str, number: str) -> _Response:
        """PATCH an issue; state changes record closed/reopened events by the authenticated user."""
        repo = self._repo(owner, name)
        issue = self._issue(repo, number)
        reason = ctx.body.get("state_reason")
        if reason not in _STATE_REASONS or ctx.body.get("state") not in ("open", "closed", None):
            raise _HttpError(422, "Validation Failed", [{"resource": "Issue", "code": "invalid", "field": "state"}])
        for key in ("title", "body"):
            if key in ctx.body:
                setattr(issue, key, ctx.body[key])
        if "assignees" in ctx.body:
            issue.assignees = list(ctx.body["assignees"] or [])
        if "labels" in ctx.body:
            self._replace_labels(repo, issue, _label_names(ctx.body["labels"]), ctx.actor)
        if "state" in ctx.body:
            self._set_state(issue, ctx.body["state"], reason, ctx.actor)
        elif reason is not None and issue.state == "closed":
            issue.state_reason = reason
        issue.updated_at = self._now()
        return _Response(200, self._issue_json(ctx, repo, issue))

    def _list_comments(self, ctx: _Ctx, owner: str, name: str, number: str) -> _Response:
        repo = self._repo(owner, name)
        issue = self._issue(repo, number)
        since = _parse_ts(ctx.query["since"]) if "since" in ctx.query else None
        comments = [repo.comments[cid] for cid in issue.comment_ids]
        kept = [c for c in comments if since is None or c.updated_at >= since]
        return self._paginate(ctx, [self._comment_json(ctx, repo, c) for c in kept])

    def _list_repo_comments(self, ctx: _Ctx, owner: str, name: str) -> _Response:
        repo = self._repo(owner, name)
        comments = sorted(repo.comments.values(), key=lambda c: (c.created_at, c.id))
        return self._paginate(ctx, [self._comment_json(ctx, repo, c) for c in comments])

    def _create_comment(self, ctx: _Ctx, owner: str, name: str, number: str) -> _Response:
        repo = self._repo(owner, name)
        issue = self._issue(repo, number)
        body = ctx.body.get("body")
        if not isinstance(body, str) or not body:
            raise _HttpError(422, "Validation Failed", [{"resource": "IssueComment", "code": "missing_field"}])
        return _Response(201, self._comment_json(ctx, repo, self._new_comment(repo, issue, body, ctx.actor)))

    def _get_comment(self, ctx: _Ctx, owner: str, name: str, cid: str) -> _Response:
        repo = self._repo(owner, name)
        return _Response(200, self._comment_json(ctx, repo, self._comment(repo, cid)))

    def _edit_comment(self, ctx: _Ctx, owner: str, name: str, cid: str) -> _Response:
        repo = self._repo(owner, name)
        comment = self._comment(repo, cid)
        if isinstance(ctx.body.get("body"), str):
            comment.body = ctx.body["body"]
        comment.updated_at = self._now()
        return _Response(200, self._comment_json(ctx, repo, comment))

    def _delete_comment(self, ctx: _Ctx, owner: str, name: str, cid: str) -> _Response:
        repo = self._repo(owner, name)
        comment = self._comment(repo, cid)
        del repo.comments[comment.id]
        repo.issues[comment.issue].comment_ids.remove(comment.id)
        return _Response(204)

    def _list_events(self, ctx: _Ctx, owner: str, name: str, number: str) -> _Response:
        repo = self._repo(owner, name)
        issue = self._issue(repo, number)
        return self._paginate(ctx, [self._event_json(ctx, repo, ev) for ev in issue.events])

    def _list_issue_labels(self, ctx: _Ctx, owner: str, name: str, number: str) -> _Response:
        repo = self._repo(owner, name)
        return self._paginate(ctx, self._labels_json(ctx, repo, self._issue(repo, number).labels))

    def _add_issue_labels(self, ctx: _Ctx, owner: str, name: str, number: str) -> _Response:
        repo = self._repo(owner, name)
        issue = self._issue(repo, number)
        self._add_labels(repo, issue, _label_names(ctx.body.get("labels", ctx.raw)), ctx.actor)
        issue.updated_at = self._now()
        return _Response(200, self._labels_json(ctx, repo, issue.labels))

    def _set_issue_labels(self, ctx: _Ctx, owner: str, name: str, number: str) -> _Response:
        repo = self._repo(owner, name)
        issue = self._issue(repo, number)
        self._replace_labels(repo, issue, _label_names(ctx.body.get("labels", ctx.raw)), ctx.actor)
        issue.updated_at = self._now()
        return _Response(200, self._labels_json(ctx, repo, issue.labels))

    def _clear_issue_labels(self, ctx: _Ctx, owner: str, name: str, number: str) -> _Response:
        repo = self._repo(owner, name)
        issue = self._issue(repo, number)
        self._replace_labels(repo, issue, [], ctx.actor)
        return _Response(204)

    def _remove_issue_label(self, ctx: _Ctx, owner: str, name: str, number: str, label: str) -> _Response:
        repo = self._repo(owner, name)
        issue = self._issue(repo, number)
        if label.lower() not in {lb.lower() for lb in issue.labels}:
            raise _HttpError(404, "Label does not exist")
        self._replace_labels(repo, issue, [lb for lb in issue.labels if lb.lower() != label.lower()], ctx.actor)
        issue.updated_at = self._now()
        return _Response(200, self._labels_json(ctx, repo, issue.labels))

    def _list_labels(self, ctx: _Ctx, owner: str, name: str) -> _Response:
        repo = self._repo(owner, name)
        return self._paginate(ctx, [self._label_json(ctx, repo, lb) for lb in repo.labels.values()])

    def _create_label(self, ctx: _Ctx, owner: str, name: str) -> _Response:
        repo = self._repo(owner, name)
        label_name = ctx.body.get("name")
        if not isinstance(label_name, str) or not label_name:
            raise _HttpError(422, "Validation Failed", [{"resource": "Label", "code": "missing_field"}])
        if label_name.lower() in repo.labels:
            raise _HttpError(422, "Validation Failed", [{"resource": "Label", "code": "already_exists"}])
        color = str(ctx.body.get("color", "ededed")).lstrip("#")
        label = _Label(next(self._ids), label_name, color, ctx.body.get("description"))
        repo.labels[label_name.lower()] = label
        return _Response(201, self._label_json(ctx, repo, label))

    def _get_label(self, ctx: _Ctx, owner: str, name: str, label: str) -> _Response:
        repo = self._repo(owner, name)
        if label.lower() not in repo.labels:
            raise _HttpError(404, "Not Found")
        return _Response(200, self._label_json(ctx, repo, repo.labels[label.lower()]))

    def _get_pull(self, ctx: _Ctx, owner: str, name: str, number: str) -> _Response:
        repo = self._repo(owner, name)
        issue = repo.issues.get(int(number))
        if issue is None or issue.pull is None:
            raise _HttpError(404, "Not Found")
        return _Response(200, self._pull_json(ctx, repo, issue, issue.pull))

    def _get_commit(self, ctx: _Ctx, owner: str, name: str, sha: str) -> _Response:
        """Any hex sha resolves: fuzzbot only needs the commit to exist and echo its sha."""
        repo = self._repo(owner, name)
        api = f"{ctx.api_root}/repos/{repo.full_name}"
        person = {"name": "Dev", "email": "dev@example.com", "date": _ts(repo.created_at)}
        body: Json = {
            "sha": sha,
            "node_id": f"C_{sha}",
            "url": f"{api}/commits/{sha}",
            "html_url": f"{ctx.html_root}/{repo.full_name}/commit/{sha}",
            "commit": {
                "message": f"commit {sha[:7]}",
                "author": person,
                "committer": person,
                "url": f"{api}/git/commits/{sha}",
                "tree": {"sha": sha, "url": f"{api}/git/trees/{sha}"},
            },
            "author": None,
            "committer": None,
            "parents": [],
            "stats": {"additions": 0, "deletions": 0, "total": 0},
            "files": [],
        }
        return _Response(200, body)

    def _get_run(self, ctx: _Ctx, owner: str, name: str, run: str) -> _Response:
        """A run is known once an artifact of it is: fuzzbot reads only its artifacts."""
        repo = self._repo(owner, name)
        if not any(a.run == int(run) for a in repo.artifacts.values()):
            raise _HttpError(404, "Not Found")
        api = f"{ctx.api_root}/repos/{repo.full_name}/actions/runs/{run}"
        return _Response(200, {"id": int(run), "url": api, "artifacts_url": f"{api}/artifacts", "status": "completed"})

    def _list_artifacts(self, ctx: _Ctx, owner: str, name: str, run: str) -> _Response:
        repo = self._repo(owner, name)
        mine = [a for a in repo.artifacts.values() if a.run == int(run)]
        if not mine:
            raise _HttpError(404, "Not Found")
        items = [self._artifact_json(ctx, repo, a) for a in mine]
        return _Response(200, {"total_count": len(items), "artifacts": items})

    def _artifact_zip(self, ctx: _Ctx, owner: str, name: str, aid: str) -> _Response:
        """GitHub answers 302 to a signed storage URL, or 410 once the artifact expired."""
        artifact = self._repo(owner, name).artifacts.get(int(aid))
        if artifact is None:
            raise _HttpError(404, "Not Found")
        if artifact.expired:
            raise _HttpError(410, "Artifact has expired")
        return _Response(302, None, {"Location": f"{self.url}{BLOB_PREFIX}{aid}?sig=signed"})

    def _blob(self, key: str, headers: dict[str, str]) -> _Response:
        """Storage: the signature is the credential, and a token sent along is refused, as
        Azure's blob storage refuses a second credential."""
        if headers.get("authorization"):
            return _Response(400, "<Error>Authentication information is not given in the correct format</Error>")
        with self._lock:
            found = next((a for r in self._repos.values() for a in r.artifacts.values() if str(a.id) == key), None)
        if found is None:
            return _Response(404, "<Error>BlobNotFound</Error>")
        return _Response(200, found.zipped, {"Content-Type": "application/zip"})

    def _artifact_json(self, ctx: _Ctx, repo: _Repo, a: _Artifact) -> Json:
        api = f"{ctx.api_root}/repos/{repo.full_name}/actions"
        return {
            "id": a.id,
            "node_id": f"MDg6QXJ0aWZhY3Q{a.id}",
            "name": a.name,
            "size_in_bytes": len(a.zipped),
            "url": f"{api}/artifacts/{a.id}",
            "archive_download_url": f"{api}/artifacts/{a.id}/zip",
            "expired": a.expired,
            "created_at": _ts(a.created_at),
            "updated_at": _ts(a.created_at),
            "expires_at": _ts(a.created_at + timedelta(days=90)),
            "workflow_run": {"id": a.run},
        }

    # ----------------------------------------------------------------- state helpers (lock held)

    def _now(self) -> datetime:
        return (datetime.now(UTC) + timedelta(seconds=self._clock_offset)).replace(microsecond=0)

    def _repo_or_raise(self, full_name: str) -> _Repo:
        repo = self._repos.get(full_name.lower())
        if repo is None:
            raise KeyError(f"unknown repository {full_name!r}; call add_repo first")
        return repo

    def _issue_or_raise(self, full_name: str, number: int) -> _Issue:
        return self._repo_or_raise(full_name).issues[number]

    def _repo(self, owner: str, name: str) -> _Repo:
        repo = self._repos.get(f"{owner}/{name}".lower())
        if repo is None:
            raise _HttpError(404, "Not Found")
        return repo

    def _issue(self, repo: _Repo, number: str) -> _Issue:
        issue = repo.issues.get(int(number))
        if issue is None:
            raise _HttpError(404, "Not Found")
        return issue

    def _comment(self, repo: _Repo, cid: str) -> _Comment:
        comment = repo.comments.get(int(cid))
        if comment is None:
            raise _HttpError(404, "Not Found")
        return comment

    def _user_id(self, login: str) -> int:
        return self._user_ids.setdefault(login, 500 + len(self._user_ids))

    def _new_comment(self, repo: _Repo, issue: _Issue, body: str, login: str) -> _Comment:
        now = self._now()
        comment = _Comment(next(self._ids), issue.number, body, login, now, now)
        repo.comments[comment.id] = comment
        issue.comment_ids.append(comment.id)
        issue.updated_at = now
        return comment

    def _ensure_label(self, repo: _Repo, name: str) -> _Label:
        """GitHub creates unknown labels (grey) when an issue is labelled with them."""
        key = name.lower()
        if key not in repo.labels:
            repo.labels[key] = _Label(next(self._ids), name)
        return repo.labels[key]

    def _add_labels(self, repo: _Repo, issue: _Issue, names: list[str], actor: str) -> None:
        present = {lb.lower() for lb in issue.labels}
        for name in names:
            label = self._ensure_label(repo, name)
            if label.name.lower() not in present:
                present.add(label.name.lower())
                issue.labels.append(label.name)
                issue.events.append(_Event(next(self._ids), "labeled", actor, self._now(), label.name))

    def _replace_labels(self, repo: _Repo, issue: _Issue, names: list[str], actor: str) -> None:
        keep = {n.lower() for n in names}
        for old in [lb for lb in issue.labels if lb.lower() not in keep]:
            issue.labels.remove(old)
            issue.events.append(_Event(next(self._ids), "unlabeled", actor, self._now(), old))
        self._add_labels(repo, issue, names, actor)

    def _set_state(self, issue: _Issue, state: str, reason: str | None, actor: str) -> None:
        """Apply a state change and record the closed/reopened event; a no-op change records nothing."""
        now = self._now()
        if state == "closed" and issue.state != "closed":
            issue.state, issue.state_reason = "closed", reason or "completed"
            issue.closed_at, issue.closed_by = now, actor
            issue.events.append(_Event(next(self._ids), "closed", actor, now))
        elif state == "closed" and reason is not None:
            issue.state_reason = reason
        elif state == "open" and issue.state != "open":
            issue.state, issue.state_reason, issue.closed_at = "open", "reopened", None
            issue.events.append(_Event(next(self._ids), "reopened", actor, now))
        issue.updated_at = now

    def _snapshot(self, repo: _Repo, issue: _Issue) -> Json:
        comments = [repo.comments[cid] for cid in issue.comment_ids]
        return {
            "number": issue.number,
            "title": issue.title,
            "body": issue.body,
            "user": issue.user,
            "state": issue.state,
            "state_reason": issue.state_reason,
            "labels": list(issue.labels),
            "assignees": list(issue.assignees),
            "is_pull": issue.pull is not None,
            "created_at": issue.created_at,
            "updated_at": issue.updated_at,
            "closed_at": issue.closed_at,
            "comments": [
                {"id": c.id, "body": c.body, "user": c.user, "created_at": c.created_at, "updated_at": c.updated_at}
                for c in comments
            ],
            "events": [
                {"event": e.event, "actor": e.actor, "created_at": e.created_at, "label": e.label} for e in issue.events
            ],
        }

    # ----------------------------------------------------------------- JSON renderers (lock held)

    def _user_json(self, ctx: _Ctx, login: str) -> Json:
        quoted = urllib.parse.quote(login, safe="")
        return {
            "login": login,
            "id": self._user_id(login),
            "node_id": f"U_{self._user_id(login)}",
            "type": "Bot" if login.endswith("[bot]") else "User",
            "site_admin": False,
            "avatar_url": "",
            "url": f"{ctx.api_root}/users/{quoted}",
            "html_url": f"{ctx.html_root}/{quoted}",
        }

    def _repo_json(self, ctx: _Ctx, repo: _Repo) -> Json:
        owner, name = repo.full_name.split("/", 1)
        return {
            "id": repo.id,
            "node_id": f"R_{repo.id}",
            "name": name,
            "full_name": repo.full_name,
            "owner": self._user_json(ctx, owner),
            "private": False,
            "fork": False,
            "archived": False,
            "visibility": "public",
            "description": None,
            "default_branch": "main",
            "has_issues": True,
            "open_issues_count": sum(1 for i in repo.issues.values() if i.state == "open"),
            "created_at": _ts(repo.created_at),
            "updated_at": _ts(repo.created_at),
            "pushed_at": _ts(repo.created_at),
            "url": f"{ctx.api_root}/repos/{repo.full_name}",
            "html_url": f"{ctx.html_root}/{repo.full_name}",
        }

    def _label_json(self, ctx: _Ctx, repo: _Repo, label: _Label) -> Json:
        quoted = urllib.parse.quote(label.name, safe="")
        return {
            "id": label.id,
            "node_id": f"LA_{label.id}",
            "url": f"{ctx.api_root}/repos/{repo.full_name}/labels/{quoted}",
            "name": label.name,
            "color": label.color,
            "description": label.description,
            "default": False,
        }

    def _labels_json(self, ctx: _Ctx, repo: _Repo, names: list[str]) -> list[Json]:
        return [self._label_json(ctx, repo, repo.labels[n.lower()]) for n in names]

    def _issue_json(self, ctx: _Ctx, repo: _Repo, issue: _Issue) -> Json:
        api = f"{ctx.api_root}/repos/{repo.full_name}"
        url = f"{api}/issues/{issue.number}"
        html = f"{ctx.html_root}/{repo.full_name}/{'pull' if issue.pull else 'issues'}/{issue.number}"
        body: Json = {
            "url": url,
            "repository_url": api,
            "labels_url": f"{url}/labels{{/name}}",
            "comments_url": f"{url}/comments",
            "events_url": f"{url}/events",
            "html_url": html,
            "id": issue.id,
            "node_id": f"I_{issue.id}",
            "number": issue.number,
            "title": issue.title,
            "user": self._user_json(ctx, issue.user),
            "labels": self._labels_json(ctx, repo, issue.labels),
            "state": issue.state,
            "state_reason": issue.state_reason,
            "locked": False,
            "assignee": self._user_json(ctx, issue.assignees[0]) if issue.assignees else None,
            "assignees": [self._user_json(ctx, a) for a in issue.assignees],
            "milestone": None,
            "comments": len(issue.comment_ids),
            "created_at": _ts(issue.created_at),
            "updated_at": _ts(issue.updated_at),
            "closed_at": _ts(issue.closed_at),
            "closed_by": self._user_json(ctx, issue.closed_by) if issue.closed_by else None,
            "author_association": "NONE",
            "body": issue.body,
        }
        if issue.pull is not None:
            pull_url = f"{api}/pulls/{issue.number}"
            body["pull_request"] = {
                "url": pull_url,
                "html_url": html,
                "diff_url": f"{html}.diff",
                "patch_url": f"{html}.patch",
                "merged_at": None,
            }
        return body

    def _comment_json(self, ctx: _Ctx, repo: _Repo, comment: _Comment) -> Json:
        api = f"{ctx.api_root}/repos/{repo.full_name}"
        return {
            "id": comment.id,
            "node_id": f"IC_{comment.id}",
            "url": f"{api}/issues/comments/{comment.id}",
            "html_url": f"{ctx.html_root}/{repo.full_name}/issues/{comment.issue}#issuecomment-{comment.id}",
            "issue_url": f"{api}/issues/{comment.issue}",
            "body": comment.body,
            "user": self._user_json(ctx, comment.user),
            "created_at": _ts(comment.created_at),
            "updated_at": _ts(comment.updated_at),
            "author_association": "NONE",
        }

    def _event_json(self, ctx: _Ctx, repo: _Repo, event: _Event) -> Json:
        body: Json = {
            "id": event.id,
            "node_id": f"E_{event.id}",
            "url": f"{ctx.api_root}/repos/{repo.full_name}/issues/events/{event.id}",
            "actor": self._user_json(ctx, event.actor),
            "event": event.event,
            "commit_id": None,
            "commit_url": None,
            "created_at": _ts(event.created_at),
        }
        if event.label is not None:
            label = repo.labels.get(event.label.lower())
            body["label"] = {"name": event.label, "color": label.color if label else "ededed"}
        return body

    def _pull_json(self, ctx: _Ctx, repo: _Repo, issue: _Issue, pull: _Pull) -> Json:
        owner = repo.full_name.split("/", 1)[0]
        api = f"{ctx.api_root}/repos/{repo.full_name}"

        def branch(ref: str, sha: str) -> Json:
            return {
                "label": f"{owner}:{ref}",
                "ref": ref,
                "sha": sha,
                "user": self._user_json(ctx, owner),
                "repo": self._repo_json(ctx, repo),
            }

        issue_body = self._issue_json(ctx, repo, issue)
        extra = {
            "url": f"{api}/pulls/{issue.number}",
            "issue_url": f"{api}/issues/{issue.number}",
            "diff_url": f"{issue_body['html_url']}.diff",
            "patch_url": f"{issue_body['html_url']}.patch",
            "head": branch(pull.head_ref, pull.head_sha),
            "base": branch(pull.base_ref, pull.base_sha),
            "merged": False,
            "merged_at": None,
            "mergeable": None,
            "draft": False,
        }
        keep = ["id", "node_id", "number", "state", "title", "body", "user", "labels", "html_url", "locked"]
        keep += ["created_at", "updated_at", "closed_at", "assignee", "assignees", "milestone", "comments"]
        return {**{k: issue_body[k] for k in keep}, **extra}

    def _paginate(self, ctx: _Ctx, items: list[Json]) -> _Response:
        """Slice a list like GitHub (per_page default 30, max 100) and add the Link header PyGithub follows."""
        try:
            per_page = min(max(int(ctx.query.get("per_page", _DEFAULT_PER_PAGE)), 1), _MAX_PER_PAGE)
            page = max(int(ctx.query.get("page", 1)), 1)
        except ValueError as exc:
            raise _HttpError(422, "Invalid page parameters") from exc
        last = max(math.ceil(len(items) / per_page), 1)

        def link(target: int, rel: str) -> str:
            params = urllib.parse.urlencode({**ctx.query, "per_page": per_page, "page": target})
            return f'<{ctx.api_root}{ctx.path}?{params}>; rel="{rel}"'

        rels = []
        if page < last:
            rels += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            rels += [link(1, "first"), link(page - 1, "prev")]
        headers = {"Link": ", ".join(rels)} if rels else {}
        return _Response(200, items[(page - 1) * per_page : page * per_page], headers)


def _label_names(value: Any) -> list[str]:
    """Labels arrive as names or as {"name": ...} objects, like GitHub accepts."""
    if not isinstance(value, list):
        return []
    return [item["name"] if isinstance(item, dict) else str(item) for item in value]


def _strip_prefix(raw_path: str) -> tuple[str, str]:
    """Split off the query and the Enterprise '/api/v3' prefix; returns (prefix, path)."""
    path = raw_path.split("?", 1)[0]
    if path == _GRAPHQL_ENTERPRISE:  # PyGithub's GraphQL address for an Enterprise base_url ".../api/v3"
        return "/api", "/graphql"
    if path == _API_PREFIX or path.startswith(_API_PREFIX + "/"):
        return _API_PREFIX, path[len(_API_PREFIX) :] or "/"
    return "", path


def _error(status: int, message: str, errors: list[Json] | None = None) -> _Response:
    body: Json = {"message": message, "documentation_url": "https://docs.github.com/rest"}
    if errors:
        body["errors"] = errors
    return _Response(status, body)


class _Server(ThreadingHTTPServer):
    """Carries the FakeGitHub instance to handlers (instead of module-level state)."""

    daemon_threads = True
    fake: FakeGitHub


class _RequestHandler(BaseHTTPRequestHandler):
    """Thin HTTP layer: reads the request, asks FakeGitHub for an answer, writes it (keep-alive)."""

    protocol_version = "HTTP/1.1"
    timeout = 10  # idle keep-alive connections give up their thread eventually

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The Date header follows the fake's movable clock, as clients read "now" from it."""
        return formatdate(cast(_Server, self.server).fake._now().timestamp(), usegmt=True)

    def _handle(self) -> None:
        fake = cast(_Server, self.server).fake
        raw_path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fault = fake._begin(self.command, raw_path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        if fault is not None and fault.kind == "drop":
            if fault.apply:
                fake._dispatch(self.command, raw_path, query, headers, body)
            self.close_connection = True
            return
        if fault is not None:
            response = fake._fault_response(fault)
        else:
            response = fake._dispatch(self.command, raw_path, query, headers, body)
        self._send(response, fake._rate_headers())

    def _send(self, response: _Response, rate_headers: dict[str, str]) -> None:
        if response.body is None:
            payload = b""
        elif isinstance(response.body, bytes):
            payload = response.body
        elif isinstance(response.body, str):
            payload = response.body.encode()
        else:
            payload = json.dumps(response.body).encode()
        headers = {**rate_headers, **response.headers}
        if payload and "Content-Type" not in headers:
            headers["Content-Type"] = "application/json; charset=utf-8"
        self.send_response(response.status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging; tests assert on FakeGitHub.requests instead."""
