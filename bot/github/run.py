"""One report, start to end: connect (or not, in a dry run), replay the queue, decide, send.

Kept apart from the command line so `fuzzbot` starts, and every other command works,
without PyGithub: bot/commands/report.py imports this module only when a report runs.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from bot.github.actions import Action
from bot.github.autoclose import ReproRunner, plan_closes
from bot.github.client import EmptyRepo, LiveRepo, Reader, RetryingReader, RetryPolicy
from bot.github.dispatch import DryRunSink, LiveSink, Sink
from bot.github.errors import ReportError
from bot.github.findings import Report, load_report
from bot.github.head_build import HeadUnavailable, head_python
from bot.github.pr import exit_code, pr_action
from bot.github.queue import ReportQueue
from bot.github.schedule import Plan, latest_by_fingerprint, plan_issues, reportable
from bot.github.text import find_fingerprint, scrub


@dataclass(frozen=True)
class ReportOptions:
    out_dir: Path
    token: str
    api_url: str
    repo: str
    pr: int | None
    """The pull request (PR mode); None in schedule mode."""
    dry_run: Path | None = None
    fail_on_regression: bool = True
    close_after: int = 3
    python: str | None = None
    """Head's interpreter for re-running repros; else the campaign's, or head rebuilt."""
    cache_dir: Path = Path(".fuzzbot-cache")
    """Where head is found built, or built, from summary.json's pinned config."""
    repro_timeout_s: float = 300.0
    retries: int = 5
    max_wait_s: float = 60.0
    backoff_s: float = 1.0


def run_report(opts: ReportOptions) -> int:
    """The exit code: 2 for a PR with new regressions (unless told not to fail), else 0."""
    secrets = sink_secrets(opts)
    report = load_report(opts.out_dir)
    policy = RetryPolicy(tries=opts.retries, backoff_s=opts.backoff_s, max_wait_s=opts.max_wait_s, secrets=secrets)
    reader, sink = _connect(opts, policy)
    code = 0
    if opts.pr is not None:
        report = _with_filed(report, reader)
        action = pr_action(report, opts.pr)
        sink.send(action)
        _step_summary(action.body, secrets)
        code = exit_code(report, opts.fail_on_regression)
    else:
        code = _schedule(report, reader, sink, opts)
        _step_summary(_outcomes(sink.log), secrets)
    sink.finish()
    return code


def _with_filed(report: Report, reader: Reader) -> Report:
    """The report with the issues filed for the known bugs that came back, when there are
    any; GitHub away only costs the links, never the comment."""
    wanted = {item.ref.regression_of for item in report.items if item.ref.regression_of}
    if not wanted:
        return report
    try:
        issues = latest_by_fingerprint(reader.bot_issues())
    except ReportError:
        return report
    return replace(report, filed={fp: issues[fp].number for fp in sorted(wanted) if fp in issues})


def _checked_repo(repo: str) -> str:
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise ReportError(f"--repo: expected OWNER/NAME (or GITHUB_REPOSITORY), got {repo!r}")
    return repo


def _connect(opts: ReportOptions, policy: RetryPolicy) -> tuple[Reader, DryRunSink | LiveSink]:
    """A dry run reads the repository when it has a token (so its plan is the real one) and
    never writes; a live run first replays what an interrupted report left queued."""
    if opts.dry_run is not None:
        live = identified_repo(opts, policy) if opts.token else None
        reader: Reader = RetryingReader(live, policy) if live else EmptyRepo()
        return reader, DryRunSink(opts.dry_run, policy.secrets, [a for _, a in ReportQueue(opts.out_dir).pending()])
    if not opts.token:
        raise ReportError("GITHUB_TOKEN is not set (give a token, or --dry-run DIR to see what would be posted)")
    tracker = identified_repo(opts, policy)
    sink = LiveSink(tracker, policy, ReportQueue(opts.out_dir))
    sink.replay()
    return RetryingReader(tracker, policy), sink


def identified_repo(opts: ReportOptions, policy: RetryPolicy) -> LiveRepo:
    """The repository, once GitHub has said whose token this is: before anything is read, so a
    token that names no account stops the report before it trusts any marker."""
    repo = LiveRepo(opts.token, opts.api_url, _checked_repo(opts.repo))
    me = policy.call("who the token is", repo.identity)
    print(scrub(f"reporting as {me.login} ({me.kind} token)", policy.secrets), file=sys.stderr)
    return repo


def _schedule(report: Report, reader: Reader, sink: Sink, opts: ReportOptions) -> int:
    """File or update issues, then re-run the repros of open issues this run did not see.
    1 when no build of head could be had to re-run them: auto-close that cannot work must
    not look like a clean report."""
    issues = reader.bot_issues()
    _send(sink, plan_issues(report, reader, issues))
    seen = {item.ref.fingerprint for item in reportable(report)}
    if not any(i.state == "open" and find_fingerprint(i.body) not in (None, *seen) for i in issues):
        return 0
    try:
        python = opts.python or head_python(report.summary, opts.cache_dir)
    except HeadUnavailable as e:
        sink.note(f"no issue closed: {e}")
        print(scrub(f"error: {e}", sink_secrets(opts)), file=sys.stderr)
        return 1
    _send(sink, plan_closes(report, reader, issues, seen, ReproRunner(python, opts.repro_timeout_s), opts.close_after))
    return 0


def _send(sink: Sink, plan: Plan) -> None:
    for note in plan.notes:
        sink.note(note)
    for action in plan.actions:
        sink.send(action)


def sink_secrets(opts: ReportOptions) -> tuple[str, ...]:
    return (opts.token,) if opts.token else ()


def _step_summary(markdown: str, secrets: tuple[str, ...]) -> None:
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(scrub(markdown, secrets) + "\n")


def _outcomes(log: list[tuple[Action, str]]) -> str:
    lines = [f"- {a.key}: {outcome}" + (f" ({a.title})" if a.title else "") for a, outcome in log]
    return "\n".join(["## fuzzbot report", "", *(lines or ["- nothing to report"])])
