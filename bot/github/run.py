"""One report, start to end: connect (or not, in a dry run), replay the queue, decide, send.

Kept apart from the command line so `fuzzbot` starts, and every other command works,
without PyGithub: bot/report_cli.py imports this module only when a report runs.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from bot.github.actions import BOT_LABEL, Action
from bot.github.autoclose import ReproRunner, plan_closes
from bot.github.client import EmptyRepo, LiveRepo, Reader, RetryingReader, RetryPolicy
from bot.github.dispatch import DryRunSink, LiveSink, Sink
from bot.github.errors import ReportError
from bot.github.findings import Report, load_report
from bot.github.pr import exit_code, pr_action
from bot.github.queue import ReportQueue
from bot.github.schedule import plan_issues, reportable
from bot.github.text import scrub


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
    repro_timeout_s: float = 300.0
    retries: int = 5
    max_wait_s: float = 60.0
    backoff_s: float = 1.0


def run_report(opts: ReportOptions) -> int:
    """The exit code: 2 for a PR with new regressions (unless told not to fail), else 0."""
    secrets = (opts.token,) if opts.token else ()
    report = load_report(opts.out_dir)
    policy = RetryPolicy(tries=opts.retries, backoff_s=opts.backoff_s, max_wait_s=opts.max_wait_s, secrets=secrets)
    reader, sink = _connect(opts, policy)
    code = 0
    if opts.pr is not None:
        action = pr_action(report, opts.pr)
        sink.send(action)
        _step_summary(action.body, secrets)
        code = exit_code(report, opts.fail_on_regression)
    else:
        python = _head_python(report, opts.python)
        if python is None:
            print("warning: head's interpreter is not here: no issue closed (give --python)", file=sys.stderr)
        runner = ReproRunner(python, opts.repro_timeout_s) if python else None
        _schedule(report, reader, sink, runner, opts.close_after)
        _step_summary(_outcomes(sink.log), secrets)
    sink.finish()
    return code


def _checked_repo(repo: str) -> str:
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise ReportError(f"--repo: expected OWNER/NAME (or GITHUB_REPOSITORY), got {repo!r}")
    return repo


def _connect(opts: ReportOptions, policy: RetryPolicy) -> tuple[Reader, DryRunSink | LiveSink]:
    """A dry run reads the repository when it has a token (so its plan is the real one) and
    never writes; a live run first replays what an interrupted report left queued."""
    if opts.dry_run is not None:
        live = LiveRepo(opts.token, opts.api_url, _checked_repo(opts.repo)) if opts.token else None
        reader: Reader = RetryingReader(live, policy) if live else EmptyRepo()
        return reader, DryRunSink(opts.dry_run, policy.secrets, [a for _, a in ReportQueue(opts.out_dir).pending()])
    if not opts.token:
        raise ReportError("GITHUB_TOKEN is not set (give a token, or --dry-run DIR to see what would be posted)")
    tracker = LiveRepo(opts.token, opts.api_url, _checked_repo(opts.repo))
    sink = LiveSink(tracker, policy, ReportQueue(opts.out_dir))
    sink.replay()
    return RetryingReader(tracker, policy), sink


def _head_python(report: Report, flag: str | None) -> str | None:
    """The interpreter with head's build: --python, else the campaign's head side, when it
    exists on this machine. Never this process's own interpreter: a repro that passes on
    another build would close an issue that is not fixed (a merge job on a fresh runner
    has none of the shards' venvs; it needs --python)."""
    if flag:
        return flag
    head = report.summary.sides.get("head")
    recorded = [head.python if head is not None else None]
    recorded.append(report.summary.backend.executable if report.summary.backend is not None else None)
    for path in recorded:
        if path and Path(path).is_file():
            return path
    return None


def _schedule(report: Report, reader: Reader, sink: Sink, runner: ReproRunner | None, close_after: int) -> None:
    issues = reader.bot_issues(BOT_LABEL)
    opened = plan_issues(report, reader, issues)
    for note in opened.notes:
        sink.note(note)
    for action in opened.actions:
        sink.send(action)
    if runner is None:  # no build of head to ask: leave every count as it is
        return
    seen = {item.ref.fingerprint for item in reportable(report)}
    closing = plan_closes(report, reader, issues, seen, runner, close_after)
    for note in closing.notes:
        sink.note(note)
    for action in closing.actions:
        sink.send(action)


def _step_summary(markdown: str, secrets: tuple[str, ...]) -> None:
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(scrub(markdown, secrets) + "\n")


def _outcomes(log: list[tuple[Action, str]]) -> str:
    lines = [f"- {a.key}: {outcome}" + (f" ({a.title})" if a.title else "") for a, outcome in log]
    return "\n".join(["## fuzzbot report", "", *(lines or ["- nothing to report"])])
