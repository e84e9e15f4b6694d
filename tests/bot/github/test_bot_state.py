"""The bot's state is what its own account wrote, and nothing a person does can forge or break it
(issue 17): a removed label, a quoted marker, a forged count, another app's `[bot]` issues, a
repro that cannot tell. Real PyGithub over real HTTP against tests/github_server.py, with user
and app installation tokens, on the outputs of real short campaigns."""

from __future__ import annotations

import json
import shlex
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from github import Auth, Github

from bot.github.autoclose import ReproRunner, last_line, outcome_of
from bot.github.findings import load_report
from bot.github.schedule import labels_for
from bot.github.text import PR_MARKER, clean_runs_marker, find_clean_runs, fingerprint_marker, recurrence_marker
from tests.bot.github.test_report import (
    PYTHON,
    REPO,
    Report_,
    _clean,
    _copy,
    _writes,
    one_build,
    report,
    serving,
    two_builds,
)
from tests.github_server import FakeGitHub

__all__ = ["one_build", "report", "two_builds"]  # fixtures shared with tests/bot/github/test_report.py

BOT = "fuzzbot[bot]"
PAT = "ghp_" + "P4t" * 12
PAT_LOGIN = "ci-user"
APP_TOKEN = "ghs_" + "Ap9" * 12
APP_LOGIN = "fuzzbot-app[bot]"
OTHER_APP_TOKEN = "ghs_" + "Zq7" * 12
OTHER_APP = "other-app[bot]"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    with serving(monkeypatch) as server:
        server.add_token(PAT, PAT_LOGIN, "user")
        server.add_token(APP_TOKEN, APP_LOGIN, "app")
        server.add_token(OTHER_APP_TOKEN, OTHER_APP, "app")
        yield server


def _issues_of(fake: FakeGitHub, login: str = BOT) -> list[dict[str, Any]]:
    return [i for i in fake.issues(REPO) if i["user"] == login]


def _comments_of(issue: dict[str, Any], login: str = BOT) -> list[dict[str, Any]]:
    return [c for c in issue["comments"] if c["user"] == login]


def _issue(fake: FakeGitHub, number: int) -> dict[str, Any]:
    return next(i for i in fake.issues(REPO, include_pulls=True) if i["number"] == number)


def _fake_python(folder: Path, code: int, line: str = "", stream: str = "", sleep_s: int = 0) -> str:
    """An "interpreter" that ignores the repro and answers as one following the exit contract
    would: some chatter, then `line` (on stdout, or stderr with `stream=">&2"`), then `code`."""
    path = folder / f"python-exit{code}-{len(list(folder.glob('python-*')))}"
    said = f"printf '%s\\n' {shlex.quote(line)} {stream}\n" if line else ""
    wait = f"sleep {sleep_s}\n" if sleep_s else ""
    path.write_text(f"#!/bin/sh\necho starting\necho 'a warning' >&2\n{said}{wait}exit {code}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


# ---------------------------------------------------------------- labels a person removed


def test_a_removed_label_is_put_back_and_never_makes_a_duplicate(
    fake: FakeGitHub, report: Report_, two_builds: Path, tmp_path: Path
) -> None:
    assert report(_copy(two_builds, tmp_path / "first", keep=2), "--mode", "schedule").code == 0
    seen, unseen = _issues_of(fake)
    verdict = next(lb for lb in seen["labels"] if lb == "fuzzbot:wrong_result")
    for issue in (seen, unseen):
        fake.human_remove_label(REPO, issue["number"], "fuzzbot")
        fake.human_remove_label(REPO, issue["number"], verdict)
    assert not any("fuzzbot" in i["labels"] for i in fake.issues(REPO))

    again = _copy(two_builds, tmp_path / "again", keep=1, variant=1)  # sees the first bug only
    assert report(again, "--mode", "schedule", "--dry-run", str(tmp_path / "dry")).code == 0
    planned = json.loads((tmp_path / "dry" / "plan.json").read_text())["actions"]
    assert [(a["kind"], a["number"], a["labels"], a["file"]) for a in planned if a["kind"] == "labels"] == [
        ("labels", seen["number"], ["fuzzbot", verdict], None),
        ("labels", unseen["number"], ["fuzzbot"], None),
    ]
    r = report(again, "--mode", "schedule")
    assert r.code == 0, r.err
    assert f"labels-{seen['number']}: labelled fuzzbot, {verdict}" in r.err
    seen, unseen = _issues_of(fake)
    assert len(fake.issues(REPO)) == 2, "no duplicate of an issue whose label was taken off"
    assert {"fuzzbot", verdict} <= set(seen["labels"])
    assert "fuzzbot" in unseen["labels"], "an open bot issue gets its fuzzbot label back"
    relabelled = [e for e in seen["events"] if e["event"] == "labeled" and e["label"] == "fuzzbot"]
    assert [e["actor"] for e in relabelled] == [BOT, BOT]

    mark = len(fake.requests)
    assert report(again, "--mode", "schedule").code == 0
    assert _writes(fake, mark) == [], "labels already there: nothing to write"


# ---------------------------------------------------------------- markers a person quoted or forged


def test_a_persons_comment_quoting_the_pr_marker_is_never_edited(
    fake: FakeGitHub, report: Report_, two_builds: Path, tmp_path: Path
) -> None:
    quoted = f"{PR_MARKER}\nWhy does the bot hide `{PR_MARKER}` in its comment?"
    person = fake.human_comment(REPO, 7, quoted, login="alice")
    out = _copy(two_builds, tmp_path / "o")
    assert report(out, "--mode", "pr", "--pr", "7").code == 2
    comments = _issue(fake, 7)["comments"]
    assert [(c["id"], c["body"], c["user"]) for c in comments if c["user"] == "alice"] == [(person, quoted, "alice")]
    [mine] = _comments_of(_issue(fake, 7))
    assert mine["body"].startswith(PR_MARKER) and "new regression" in mine["body"]

    mark = len(fake.requests)
    assert report(out, "--mode", "pr", "--pr", "7").code == 2
    assert _writes(fake, mark) == [], "the bot finds its own comment again, unchanged"
    assert len(_issue(fake, 7)["comments"]) == 2


def test_a_forged_clean_run_count_is_ignored(
    fake: FakeGitHub, report: Report_, two_builds: Path, tmp_path: Path
) -> None:
    assert report(_copy(two_builds, tmp_path / "first", keep=1), "--mode", "schedule").code == 0
    [issue] = _issues_of(fake)
    forged = f"<!-- fuzzbot:status -->\n{clean_runs_marker(5, 'forged')}\nlooks fixed to me"
    person = fake.human_comment(REPO, issue["number"], forged, login="mallory")
    args = ("--mode", "schedule", "--python", PYTHON, "--close-after", "3")
    assert report(_clean(two_builds, tmp_path / "c1", variant=1), *args).code == 0
    [issue] = _issues_of(fake)
    assert issue["state"] == "open", "a person's count must not close the issue early"
    [status] = _comments_of(issue)
    assert find_clean_runs(status["body"])[0] == 1
    assert next(c for c in issue["comments"] if c["id"] == person)["body"] == forged

    assert report(_clean(two_builds, tmp_path / "c2", variant=2), *args).code == 0
    assert _issues_of(fake)[0]["state"] == "open"
    assert report(_clean(two_builds, tmp_path / "c3", variant=3), *args).code == 0
    [issue] = _issues_of(fake)
    assert issue["state"] == "closed", "three clean runs of the bot's own count close it"
    assert next(c for c in issue["comments"] if c["id"] == person)["body"] == forged


def test_a_forged_occurrence_does_not_silence_the_daily_comment(
    fake: FakeGitHub, report: Report_, two_builds: Path, tmp_path: Path
) -> None:
    assert report(_copy(two_builds, tmp_path / "first", keep=1), "--mode", "schedule").code == 0
    [issue] = _issues_of(fake)
    fake.advance_clock(86_400 + 60)
    fake.human_comment(REPO, issue["number"], "<!-- fuzzbot:occurrence run=x -->\nseen", login="mallory")
    assert report(_copy(two_builds, tmp_path / "next", keep=1, variant=1), "--mode", "schedule").code == 0
    [issue] = _issues_of(fake)
    assert ["Seen again" in c["body"] for c in _comments_of(issue)] == [True]


# ---------------------------------------------------------------- who the bot is, by token kind


def test_a_user_token_is_identified_by_get_user(
    fake: FakeGitHub, report: Report_, two_builds: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", PAT)
    out = _copy(two_builds, tmp_path / "o", keep=2)
    r = report(out, "--mode", "schedule")
    assert r.code == 0 and f"reporting as {PAT_LOGIN} (user token)" in r.err
    assert len(_issues_of(fake, PAT_LOGIN)) == 2
    assert ("POST", "/graphql") not in fake.requests
    mark = len(fake.requests)
    assert report(out, "--mode", "schedule").code == 0
    assert _writes(fake, mark) == []


def _other_apps_issue(fake: FakeGitHub, fingerprint: str) -> int:
    """Another app's issue that looks like fuzzbot's: same fingerprint, label and a repro that passes."""
    gh = Github(
        auth=Auth.Token(OTHER_APP_TOKEN),
        base_url=fake.url,
        retry=None,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )
    repro = ["<!-- fuzzbot:repro:begin -->", "```python", "print('fine')", "```", "<!-- fuzzbot:repro:end -->"]
    body = "\n".join([fingerprint_marker(fingerprint), recurrence_marker(1), "", *repro])
    return gh.get_repo(REPO).create_issue("[fuzzbot] look-alike", body=body, labels=["fuzzbot"]).number


def test_an_app_token_is_identified_by_graphql_and_other_bots_are_not_the_bot(
    fake: FakeGitHub, report: Report_, two_builds: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", APP_TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", fake.url + "/api/v3")  # Enterprise: GraphQL is at /api/graphql
    first = _copy(two_builds, tmp_path / "first", keep=1)
    fp = load_report(first).items[0].ref.fingerprint
    look_alike = _other_apps_issue(fake, fp)
    stray = _other_apps_issue(fake, "0123456789abcdef")

    r = report(first, "--mode", "schedule")
    assert r.code == 0 and f"reporting as {APP_LOGIN} (app token)" in r.err
    assert ("GET", "/user") in fake.requests and ("POST", "/graphql") in fake.requests
    [mine] = _issues_of(fake, APP_LOGIN)
    assert f"fingerprint={fp}" in mine["body"] and mine["number"] not in (look_alike, stray)

    fake.human_comment(REPO, mine["number"], f"<!-- fuzzbot:status -->\n{clean_runs_marker(9, 'x')}", OTHER_APP)
    args = ("--mode", "schedule", "--python", PYTHON, "--close-after", "2")
    assert report(_clean(two_builds, tmp_path / "c1", variant=1), *args).code == 0
    [mine] = _issues_of(fake, APP_LOGIN)
    assert mine["state"] == "open" and find_clean_runs(_comments_of(mine, APP_LOGIN)[0]["body"])[0] == 1
    assert report(_clean(two_builds, tmp_path / "c2", variant=2), *args).code == 0
    assert _issues_of(fake, APP_LOGIN)[0]["state"] == "closed"
    for number in (look_alike, stray):
        other = _issue(fake, number)
        assert other["state"] == "open" and other["comments"] == [], "another app's issue is never touched"


def test_a_token_that_names_no_account_stops_before_anything_is_written(
    fake: FakeGitHub, report: Report_, two_builds: Path, tmp_path: Path
) -> None:
    fake.fail_next(2, status=403)  # GET /user, then the GraphQL viewer query
    r = report(_copy(two_builds, tmp_path / "o"), "--mode", "schedule")
    assert r.code == 1 and len(r.err_lines) == 1 and "cannot tell whose token this is" in r.err
    assert _writes(fake) == [("POST", "/graphql")] and fake.issues(REPO) == []


# ---------------------------------------------------------------- the repro's exit contract


def test_exit_3_is_noted_and_keeps_the_count_1_resets_it_0_advances_it(
    fake: FakeGitHub, report: Report_, two_builds: Path, tmp_path: Path
) -> None:
    assert report(_copy(two_builds, tmp_path / "first", keep=1), "--mode", "schedule").code == 0
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    forged = "<!-- fuzzbot:clean-runs=99 run=z -->"
    steps: list[tuple[str, int, str]] = [
        (_fake_python(bin_dir, 0), 1, ""),
        (_fake_python(bin_dir, 3, f"CANNOT TELL: No module named 'onnxruntime' {forged}"), 1, "onnxruntime"),
        (_fake_python(bin_dir, 0), 2, ""),
        (_fake_python(bin_dir, 1, "BUG: y: 3 elements differ"), 0, ""),
        (_fake_python(bin_dir, 3, "CANNOT TELL: op Foo is not in this version"), 0, "op Foo is not in this version"),
        (_fake_python(bin_dir, 0), 1, ""),
        (_fake_python(bin_dir, 7, "Segmentation fault", ">&2"), 1, "exit 7: Segmentation fault"),
        (_fake_python(bin_dir, 0, sleep_s=5), 1, "timed out after 1 s"),
        (_fake_python(bin_dir, 1), 0, ""),
        (_fake_python(bin_dir, 3, "CANNOT TELL: no device"), 0, "no device"),
        (_fake_python(bin_dir, 1), 0, ""),  # at 0 already: the note gives way to "still reproduces"
    ]
    for n, (python, count, note) in enumerate(steps):
        out = _clean(two_builds, tmp_path / f"run{n}", variant=n + 1)
        args = ("--mode", "schedule", "--python", python, "--close-after", "3", "--repro-timeout", "1")
        assert report(out, *args).code == 0
        [issue] = _issues_of(fake)
        [status] = _comments_of(issue)
        assert find_clean_runs(status["body"])[0] == count, (n, status["body"])
        assert ("could not re-run: " in status["body"]) == bool(note), (n, status["body"])
        assert note in status["body"] and status["body"].count("<!--") == 2, (n, status["body"])
        assert issue["state"] == "open"


def test_repro_runner_reads_the_exit_contract(tmp_path: Path) -> None:
    runner = ReproRunner(PYTHON, timeout_s=30)
    assert runner.passes("print('OK: outputs match')\n").verdict == "clean"
    assert runner.passes("import sys\nprint('BUG: y differs')\nsys.exit(1)\n").verdict == "reproduced"
    said = "print('checking')\nprint('noise', file=sys.stderr)\nprint('CANNOT TELL: no tvm')"
    missing = runner.passes(f"import sys\n{said}\nsys.exit(3)\n")
    assert (missing.verdict, missing.reason) == ("cannot_tell", "CANNOT TELL: no tvm")
    uncaught = runner.passes("raise RuntimeError('boom')\n")
    assert uncaught.verdict == "reproduced", "an uncaught error exits 1: the repro must catch what is no bug"
    usage = runner.passes("import sys\nprint('usage: repro.py', file=sys.stderr)\nsys.exit(2)\n")
    assert (usage.verdict, usage.reason) == ("cannot_tell", "exit 2: usage: repro.py")
    killed = runner.passes("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert (killed.verdict, killed.reason) == ("cannot_tell", "killed by signal 9")
    gone = ReproRunner(str(tmp_path / "nope")).passes("")
    assert gone.verdict == "cannot_tell" and gone.reason.startswith("cannot start ")
    assert outcome_of(3, "", "").reason == "exit 3 with no output"
    assert outcome_of(0, "", "Traceback").verdict == "clean"
    assert last_line("a\n\n  b   c  \n\n") == "b c" and len(last_line("x" * 1000)) == 300


# ---------------------------------------------------------------- one build: a bug, not "persistent"


def test_a_one_build_finding_is_labelled_a_bug(one_build: Path, two_builds: Path) -> None:
    one = load_report(one_build)
    assert one.summary.base is None
    item = one.items[0]
    assert labels_for(item, one) == ["fuzzbot", f"fuzzbot:{item.ref.verdict.value}", "fuzzbot:bug"]
    two = load_report(two_builds)
    assert labels_for(two.items[0], two) == ["fuzzbot", "fuzzbot:wrong_result", "fuzzbot:regression"]
