"""`fuzzbot report`: post a campaign's output to GitHub, registered by bot/cli.py.

Configuration follows GitHub Actions: GITHUB_TOKEN, GITHUB_API_URL (GitHub Enterprise
works), GITHUB_REPOSITORY and GITHUB_EVENT_PATH (the pull request's number) fill in what
the flags leave out. Every mistake and every outage is a `ReportError`: one line, exit 1.
The GitHub client is imported only when a report runs, so the rest of fuzzbot needs no PyGithub.
"""

from __future__ import annotations

import json
import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from bot.github.errors import ReportError

__all__ = ["ReportError", "report_command"]

DEFAULT_API = "https://api.github.com"


class Mode(StrEnum):
    pr = "pr"
    schedule = "schedule"


def _pr_number(flag: int | None) -> int:
    """--pr, else pull_request.number of the event that started the workflow."""
    if flag is not None:
        return flag
    event = os.environ.get("GITHUB_EVENT_PATH")
    if not event:
        raise ReportError("--mode pr needs --pr N (or GITHUB_EVENT_PATH of a pull_request event)")
    try:
        number = json.loads(Path(event).read_text()).get("pull_request", {}).get("number")
    except (OSError, ValueError, AttributeError) as e:
        raise ReportError(f"GITHUB_EVENT_PATH {event}: cannot read the event ({type(e).__name__})") from e
    if not isinstance(number, int):
        raise ReportError(f"GITHUB_EVENT_PATH {event}: no pull_request.number (not a pull_request event?); give --pr")
    return number


def report_command(
    out_dir: Annotated[Path, typer.Argument(help="a campaign or merge output folder")],
    repo: Annotated[str | None, typer.Option(help="OWNER/NAME [default: GITHUB_REPOSITORY]")] = None,
    mode: Annotated[Mode, typer.Option(help="pr: one sticky comment; schedule: issues")] = Mode.pr,
    pr: Annotated[int | None, typer.Option(min=1, help="pull request number [default: from GITHUB_EVENT_PATH]")] = None,
    dry_run: Annotated[Path | None, typer.Option(help="write the Markdown and plan.json here; send nothing")] = None,
    fail_on_regression: Annotated[
        bool, typer.Option("--fail-on-regression/--no-fail-on-regression", help="pr mode: exit 2 on new regressions")
    ] = True,
    close_after: Annotated[int, typer.Option(min=1, help="close an issue after K clean runs in a row")] = 3,
    python: Annotated[
        str | None,
        typer.Option(help="head's interpreter for re-running repros [default: the campaign's, or head rebuilt]"),
    ] = None,
    cache_dir: Annotated[
        Path, typer.Option(help="where head is found built, or built from summary.json's pinned config")
    ] = Path(".fuzzbot-cache"),
    repro_timeout: Annotated[float, typer.Option(min=1, help="seconds per repro re-run")] = 300.0,
    api_url: Annotated[
        str | None, typer.Option(help=f"REST API address [default: GITHUB_API_URL or {DEFAULT_API}]")
    ] = None,
    retries: Annotated[int, typer.Option(min=1, max=20, help="tries per GitHub step")] = 5,
    max_wait: Annotated[float, typer.Option(min=0, help="longest wait in seconds for a rate limit or backoff")] = 60.0,
    backoff: Annotated[float, typer.Option(min=0, hidden=True)] = 1.0,
) -> None:
    """Report an output folder on GitHub: a PR comment, or one issue per bug that closes itself."""
    try:
        from bot.github.run import ReportOptions, run_report
    except ImportError as e:
        raise ReportError(f"fuzzbot report needs PyGithub ({e.name} is missing): pip install pygithub==2.10.0") from e
    opts = ReportOptions(
        out_dir=out_dir,
        token=os.environ.get("GITHUB_TOKEN", ""),
        api_url=(api_url or os.environ.get("GITHUB_API_URL") or DEFAULT_API).rstrip("/"),
        repo=repo or os.environ.get("GITHUB_REPOSITORY", ""),
        pr=_pr_number(pr) if mode is Mode.pr else None,
        dry_run=dry_run,
        fail_on_regression=fail_on_regression,
        close_after=close_after,
        python=python,
        cache_dir=cache_dir,
        repro_timeout_s=repro_timeout,
        retries=retries,
        max_wait_s=max_wait,
        backoff_s=backoff,
    )
    raise typer.Exit(run_report(opts))
