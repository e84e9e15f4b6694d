"""The fake GitHub server, driven by the real PyGithub client over real HTTP.

Why: fuzzbot's GitHub code is tested against tests/github_server.py, so the fake must look like
GitHub to PyGithub (object fields, URLs, pagination, error mapping).  These tests pin that down;
if they pass, a failure in the bot's own tests is the bot's, not the fake's.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import github
import pytest
import requests
from github import Auth, Github, GithubException

from tests.github_server import FakeGitHub

pytestmark = [pytest.mark.worker]

REPO = "acme/tvm"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.add_repo(REPO)
        yield server


def client(server: FakeGitHub, base_url: str | None = None, token: str = "test-token", per_page: int = 30) -> Github:
    """PyGithub as fuzzbot builds it, minus retries and throttling (its write throttle defaults to 1 s)."""
    return Github(
        auth=Auth.Token(token),
        base_url=base_url or server.url,
        retry=None,
        per_page=per_page,
        timeout=5,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )


def test_authenticated_user_and_rate_limit(fake: FakeGitHub) -> None:
    gh = client(fake)
    user = gh.get_user()
    assert user.login == "fuzzbot[bot]"
    assert user.type == "Bot"
    assert gh.get_user("alice").name == "alice"
    assert gh.get_rate_limit().resources.core.limit == 5000


def test_create_issue_with_labels_auto_creates_them(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(REPO)
    issue = repo.create_issue("crash in fuse", body="repro", labels=["fuzzbot", "bug: crash"], assignees=["alice"])
    assert issue.number == 1
    assert [label.name for label in issue.labels] == ["fuzzbot", "bug: crash"]
    assert issue.user.login == "fuzzbot[bot]"
    assert issue.pull_request is None
    assert issue.assignees[0].login == "alice"
    assert {label.name for label in repo.get_labels()} == {"fuzzbot", "bug: crash"}
    assert repo.get_label("bug: crash").color == "ededed"
    [snap] = fake.issues(REPO)
    assert (snap["title"], snap["body"], snap["state"], snap["labels"]) == (
        "crash in fuse",
        "repro",
        "open",
        ["fuzzbot", "bug: crash"],
    )


def test_list_open_issues_by_label_across_pages(fake: FakeGitHub) -> None:
    repo = client(fake, per_page=2).get_repo(REPO)
    for k in range(5):
        repo.create_issue(f"mine {k}", labels=["fuzzbot", "tvm"])
    repo.create_issue("other", labels=["tvm"])
    repo.create_issue("closed", labels=["fuzzbot", "tvm"]).edit(state="closed")
    before = len(fake.requests)
    found = repo.get_issues(state="open", labels=["fuzzbot", "tvm"])
    assert [i.title for i in found] == [f"mine {k}" for k in reversed(range(5))]  # newest first, like GitHub
    pages = [p for m, p in fake.requests[before:] if m == "GET" and p.endswith("/issues")]
    assert len(pages) == 3
    assert [i.title for i in repo.get_issues(state="closed")] == ["closed"]
    assert len(list(repo.get_issues(state="all", sort="created", direction="asc"))) == 7


def test_enterprise_base_url_prefix(fake: FakeGitHub) -> None:
    repo = client(fake, base_url=f"{fake.url}/api/v3", per_page=1).get_repo(REPO)
    repo.create_issue("a", labels=["x"])
    repo.create_issue("b", labels=["x"])
    assert repo.url.startswith(f"{fake.url}/api/v3/")
    assert [i.title for i in repo.get_issues(labels=["x"])] == ["b", "a"]
    assert fake.requests[-1] == ("GET", "/repos/acme/tvm/issues")  # recorded without the prefix


def test_edit_close_reopen_records_events_by_bot(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(REPO)
    issue = repo.create_issue("flaky")
    issue.edit(title="flaky (reduced)", body="new body", labels=["triaged"])
    issue.edit(state="closed", state_reason="not_planned")
    assert (issue.state, issue.state_reason) == ("closed", "not_planned")
    assert issue.closed_by is not None and issue.closed_by.login == "fuzzbot[bot]"
    assert issue.closed_at is not None
    issue.edit(state="open")
    assert (issue.state, issue.state_reason) == ("open", "reopened")
    assert issue.closed_at is None
    fetched = repo.get_issue(issue.number)
    assert (fetched.title, fetched.body) == ("flaky (reduced)", "new body")
    assert [lb.name for lb in fetched.labels] == ["triaged"]
    events = [(e.event, e.actor.login) for e in fetched.get_events()]
    assert events == [("labeled", "fuzzbot[bot]"), ("closed", "fuzzbot[bot]"), ("reopened", "fuzzbot[bot]")]


def test_comments_create_edit_list_delete_with_clock(fake: FakeGitHub) -> None:
    repo = client(fake, per_page=2).get_repo(REPO)
    issue = repo.create_issue("x")
    first = issue.create_comment("still failing")
    fake.advance_clock(86400 + 60)
    second = issue.create_comment("day two")
    third = issue.create_comment("day two, later")
    first.edit("still failing (edited)")
    assert (second.created_at - first.created_at).total_seconds() >= 86400
    listed = list(repo.get_issue(issue.number).get_comments())
    assert [c.body for c in listed] == ["still failing (edited)", "day two", "day two, later"]
    assert listed[0].user.login == "fuzzbot[bot]"
    assert repo.get_issue(issue.number).comments == 3
    third.delete()
    assert [c["body"] for c in fake.issues(REPO)[0]["comments"]] == ["still failing (edited)", "day two"]
    assert repo.get_issue(issue.number).get_comment(second.id).body == "day two"
    # since filters on updated_at like GitHub: the edited first comment counts as recent
    assert [c.body for c in issue.get_comments(since=second.created_at)] == ["still failing (edited)", "day two"]


def test_labels_add_remove_and_human_label(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(REPO)
    created = repo.create_label("regression", "ff0000", description="a regression")
    assert (created.name, created.color) == ("regression", "ff0000")
    with pytest.raises(GithubException) as dup:
        repo.create_label("Regression", "00ff00")
    assert dup.value.status == 422
    issue = repo.create_issue("x")
    issue.add_to_labels("regression", "needs repro")
    issue.remove_from_labels("needs repro")
    fake.add_label(REPO, issue.number, "wontfix")
    assert [lb.name for lb in repo.get_issue(issue.number).labels] == ["regression", "wontfix"]
    assert [e["actor"] for e in fake.issues(REPO)[0]["events"] if e["label"] == "wontfix"] == ["maintainer"]
    with pytest.raises(github.UnknownObjectException):
        repo.get_label("nope").color  # noqa: B018  (lazy object: the attribute access fetches)


def test_pull_request_fetch_and_issue_list_marks_it(fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 7, head_sha="a" * 40, base_sha="b" * 40, head_ref="fix")
    repo = client(fake).get_repo(REPO)
    pull = repo.get_pull(7)
    assert (pull.number, pull.head.sha, pull.head.ref) == (7, "a" * 40, "fix")
    assert (pull.base.sha, pull.base.ref) == ("b" * 40, "main")
    assert pull.html_url.endswith("/acme/tvm/pull/7")
    [listed] = list(repo.get_issues())
    assert listed.pull_request is not None
    assert fake.issues(REPO) == []
    assert [i["number"] for i in fake.issues(REPO, include_pulls=True)] == [7]
    assert repo.create_issue("next").number == 8  # PRs and issues share numbers
    assert repo.get_commit("a" * 40).sha == "a" * 40
    with pytest.raises(github.UnknownObjectException):
        repo.get_pull(8)


def test_events_after_human_close_and_reopen(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(REPO)
    issue = repo.create_issue("x")
    issue.edit(state="closed")
    fake.advance_clock(3600)
    fake.human_reopen(REPO, issue.number, login="alice")
    events = list(repo.get_issue(issue.number).get_events())
    assert [(e.event, e.actor.login) for e in events] == [("closed", "fuzzbot[bot]"), ("reopened", "alice")]
    assert events[1].created_at > events[0].created_at
    fake.human_close(REPO, issue.number)
    assert fake.issues(REPO)[0]["state"] == "closed"
    assert fake.issues(REPO)[0]["events"][-1]["actor"] == "maintainer"
    assert [i.number for i in repo.get_issues(state="open")] == []


def test_filters_creator_and_since(fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 1, "a" * 40, "b" * 40)
    repo = client(fake).get_repo(REPO)
    old = repo.create_issue("old")
    fake.advance_clock(7200)
    new = repo.create_issue("new")
    mine = repo.get_issues(creator="fuzzbot[bot]")  # type: ignore[arg-type]  # PyGithub accepts a login at runtime
    assert [i.number for i in mine] == [new.number, old.number]
    assert [i.number for i in repo.get_issues(since=new.created_at)] == [new.number]


def test_wrong_token_is_401(fake: FakeGitHub) -> None:
    with pytest.raises(github.BadCredentialsException) as err:
        client(fake, token="wrong").get_repo(REPO)
    assert err.value.status == 401


def test_unknown_routes_are_404(fake: FakeGitHub) -> None:
    gh = client(fake)
    with pytest.raises(github.UnknownObjectException):
        gh.get_repo("acme/missing")
    with pytest.raises(github.UnknownObjectException):
        gh.get_repo(REPO).get_issue(42)


def test_injected_502_then_recovers(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(REPO)
    fake.fail_next(1)
    with pytest.raises(GithubException) as err:
        repo.create_issue("x")
    assert err.value.status == 502
    assert fake.issues(REPO) == []  # a failed request changes nothing
    assert repo.create_issue("x").number == 1


def test_primary_rate_limit(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(REPO)
    fake.rate_limit_next(1, reset_in_s=30)
    with pytest.raises(github.RateLimitExceededException) as err:
        repo.get_issues().totalCount  # noqa: B018
    assert err.value.status == 403
    headers = {k.lower(): v for k, v in (err.value.headers or {}).items()}
    assert headers["x-ratelimit-remaining"] == "0"
    assert 25 <= int(headers["x-ratelimit-reset"]) - time.time() <= 32


def test_secondary_rate_limit(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(REPO)
    fake.secondary_rate_limit_next(1, retry_after_s=7)
    with pytest.raises(GithubException) as err:
        repo.create_issue("x")
    assert err.value.status == 429
    assert {k.lower(): v for k, v in (err.value.headers or {}).items()}["retry-after"] == "7"
    fake.secondary_rate_limit_next(1, status=403)
    with pytest.raises(github.RateLimitExceededException):
        repo.create_issue("x")


def test_dropped_connection(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(REPO)
    fake.drop_next(1)
    with pytest.raises(requests.exceptions.ConnectionError):
        repo.create_issue("x")
    assert repo.create_issue("y").number == 1
    assert [r for r in fake.requests if r[0] == "POST"] == [("POST", "/repos/acme/tvm/issues")] * 2


def test_raw_http_headers_and_404_body(fake: FakeGitHub) -> None:
    req = urllib.request.Request(f"{fake.url}/nope", headers={"Authorization": "Bearer test-token"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 404
    assert json.loads(err.value.read())["message"] == "Not Found"
    for name in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Used"):
        assert err.value.headers[name]
    assert err.value.headers["X-RateLimit-Resource"] == "core"


def test_dropped_answer_after_applying(fake: FakeGitHub) -> None:
    """The answer is lost but the issue exists: what a bot must survive without posting twice."""
    repo = client(fake).get_repo(REPO)
    fake.drop_next(1, apply=True)
    with pytest.raises(requests.exceptions.ConnectionError):
        repo.create_issue("x")
    assert [i["title"] for i in fake.issues(REPO)] == ["x"]


def test_default_pygithub_retry_recovers(fake: FakeGitHub) -> None:
    """With PyGithub's default retry policy, injected 502s and dropped connections are retried."""
    gh = Github(
        auth=Auth.Token("test-token"),
        base_url=fake.url,
        seconds_between_requests=None,
        seconds_between_writes=None,
        timeout=5,
    )
    repo = gh.get_repo(REPO)
    fake.fail_next(1)
    fake.drop_next(1)
    assert repo.get_issues().totalCount == 0
    assert fake.requests[-3:] == [("GET", "/repos/acme/tvm/issues")] * 3


def test_concurrent_writes_get_distinct_numbers(fake: FakeGitHub) -> None:
    """One lock guards all state, so parallel clients never share an issue number."""
    repo = client(fake).get_repo(REPO)
    with ThreadPoolExecutor(max_workers=4) as pool:
        numbers = list(pool.map(lambda k: repo.create_issue(f"t{k}").number, range(12)))
    assert sorted(numbers) == list(range(1, 13))


def test_tokens_act_as_their_own_accounts_and_app_tokens_have_no_user(fake: FakeGitHub) -> None:
    """A user token is named by GET /user; an installation token is refused there, as on GitHub,
    and only GraphQL's viewer names its bot. Each token's writes are its own account's."""
    fake.add_token("pat", "alice", "user")
    fake.add_token("inst", "fuzzbot-app[bot]", "app")
    assert client(fake, token="pat").get_user().login == "alice"
    with pytest.raises(GithubException) as refused:
        client(fake, token="inst").get_user().login  # noqa: B018  (lazy object: the attribute access fetches)
    assert refused.value.status == 403 and refused.value.data["message"] == "Resource not accessible by integration"
    app = client(fake, token="inst")
    _, answer = app.requester.graphql_query("query { viewer { login } }", {})
    assert answer == {"data": {"viewer": {"login": "fuzzbot-app[bot]"}}}
    enterprise = client(fake, base_url=f"{fake.url}/api/v3", token="pat")
    assert enterprise.requester.graphql_query("query{viewer{login}}", {})[1]["data"]["viewer"]["login"] == "alice"
    assert fake.requests[-1] == ("POST", "/graphql")
    with pytest.raises(GithubException) as unknown:
        app.requester.graphql_query("query { repository(owner: 1) { id } }", {})
    assert unknown.value.status == 400  # PyGithub's mapping of a 200 answer with "errors"

    issue = app.get_repo(REPO).create_issue("by the app", labels=["fuzzbot"])
    issue.create_comment("app comment")
    client(fake, token="pat").get_repo(REPO).get_issue(issue.number).create_comment("alice's comment")
    [snap] = fake.issues(REPO)
    assert snap["user"] == "fuzzbot-app[bot]" and snap["events"][0]["actor"] == "fuzzbot-app[bot]"
    assert [c["user"] for c in snap["comments"]] == ["fuzzbot-app[bot]", "alice"]
    found = app.get_repo(REPO).get_issues(state="all", creator="FuzzBot-App[bot]")  # type: ignore[arg-type]
    assert [i.number for i in found] == [issue.number]  # logins match without case, as on GitHub


def test_people_comment_and_take_labels_off(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(REPO)
    issue = repo.create_issue("x", labels=["fuzzbot", "fuzzbot:crash"])
    cid = fake.human_comment(REPO, issue.number, "<!-- fuzzbot:pr --> quoted", login="bob")
    fake.human_remove_label(REPO, issue.number, "FUZZBOT", login="bob")
    fetched = repo.get_issue(issue.number)
    assert [lb.name for lb in fetched.labels] == ["fuzzbot:crash"]
    [comment] = list(fetched.get_comments())
    assert (comment.id, comment.user.login, comment.body) == (cid, "bob", "<!-- fuzzbot:pr --> quoted")
    events = [(e.event, e.actor.login) for e in fetched.get_events()]
    assert events[-1] == ("unlabeled", "bob")
