"""PR mode: one sticky comment per pull request, found again by its marker and edited in
place (left alone when nothing changed), and the check's exit code."""

from __future__ import annotations

from bot.github.actions import Action
from bot.github.findings import Report
from bot.github.render import by_label, pr_comment
from oracles.sides import CrossVerdict

EXIT_REGRESSIONS = 2


def pr_action(report: Report, number: int) -> Action:
    return Action(kind="pr_comment", key=f"pr-{number}", number=number, body=pr_comment(report))


def new_regressions(report: Report) -> int:
    """What head broke, or brought in broken (`new_in_head`): what fails the check, counted
    as the comment counts it (findings, one per fingerprint)."""
    by = by_label(report)
    return sum(len(by.get(key, [])) for key in (CrossVerdict.new_regression, CrossVerdict.new_in_head))


def dropped_support(report: Report) -> int:
    """Kinds of model head stopped running, when the config makes that fail the check."""
    lost = report.summary.support_changes
    return len(lost.dropped_keys) if lost is not None and lost.fails_check else 0


def exit_code(report: Report, fail_on_regression: bool) -> int:
    """A PR check fails on what head broke (and, if configured, the support it dropped),
    never on old bugs, fixed ones or flaky ones."""
    return EXIT_REGRESSIONS if fail_on_regression and (new_regressions(report) or dropped_support(report)) else 0
