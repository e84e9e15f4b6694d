"""`fuzzbot known-bugs FILE`: the open bot issues' triggers as a known-bugs.json.

The Action runs it before a campaign (with the token the campaign itself never sees) and
hands the file to `known_bugs.files`, so a PR check or a nightly run spends its budget on
bugs that are not already filed. Without a token or on a GitHub outage it is one error
line, and the Action fuzzes without the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from bot.commands.report import DEFAULT_API


def known_bugs_command(
    out_file: Annotated[Path, typer.Argument(help="known-bugs.json to write")],
    repo: Annotated[str | None, typer.Option(help="OWNER/NAME [default: GITHUB_REPOSITORY]")] = None,
    api_url: Annotated[
        str | None, typer.Option(help=f"REST API address [default: GITHUB_API_URL or {DEFAULT_API}]")
    ] = None,
    retries: Annotated[int, typer.Option(min=1, max=20, help="tries per GitHub step")] = 5,
    backoff: Annotated[float, typer.Option(min=0, hidden=True)] = 1.0,
) -> None:
    """Write the triggers of the bot's open issues, for `known_bugs: files:` in fuzzbot.yml."""
    from pydantic import ValidationError

    from bot.findings.known_bugs import KnownBug, write_known
    from bot.github.errors import ReportError

    try:
        from bot.github.client import RetryingReader, RetryPolicy
        from bot.github.known import open_issue_triggers
        from bot.github.run import ReportOptions, identified_repo, sink_secrets
    except ImportError as e:
        raise ReportError(f"fuzzbot known-bugs needs PyGithub ({e.name} is missing): pip install pygithub") from e

    token = os.environ.get("GITHUB_TOKEN", "")
    if not token:
        raise ReportError("known-bugs: GITHUB_TOKEN is not set")
    opts = ReportOptions(
        out_dir=out_file.parent,
        token=token,
        api_url=(api_url or os.environ.get("GITHUB_API_URL") or DEFAULT_API).rstrip("/"),
        repo=repo or os.environ.get("GITHUB_REPOSITORY", ""),
        pr=None,
        retries=retries,
        backoff_s=backoff,
    )
    policy = RetryPolicy(tries=retries, backoff_s=backoff, secrets=sink_secrets(opts))
    reader = RetryingReader(identified_repo(opts, policy), policy)
    bugs = []
    for row in open_issue_triggers(reader.bot_issues()):
        try:
            bugs.append(KnownBug.model_validate(row))
        except ValidationError:
            continue
    out_file.parent.mkdir(parents=True, exist_ok=True)
    write_known(out_file, bugs)
    typer.echo(f"{len(bugs)} known bug(s) from open issues: {out_file}", err=True)
