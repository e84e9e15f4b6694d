"""PR mode: one sticky comment per pull request, found again by its marker and edited in
place (left alone when nothing changed), and the check's exit code."""

from __future__ import annotations

from bot.github.actions import Action
from bot.github.findings import Report
from bot.github.render import pr_comment

EXIT_REGRESSIONS = 2


def pr_action(report: Report, number: int) -> Action:
    return Action(kind="pr_comment", key=f"pr-{number}", number=number, body=pr_comment(report))


def new_regressions(report: Report) -> int:
    return sum(1 for item in report.items if item.across == "new_regression") or report.summary.new_regressions


def exit_code(report: Report, fail_on_regression: bool) -> int:
    """A PR check fails on what head broke, never on old bugs, fixed ones or flaky ones."""
    return EXIT_REGRESSIONS if fail_on_regression and new_regressions(report) else 0
