"""The exit status of a campaign's results: one rule for `fuzz`, `check`, `merge` and the
Action, so the same findings give the same status whichever of them reports them.

With one build every bug fails (there is nothing to compare, so a bug is the news). With
two, only what the change broke fails a PR check: new regressions, models new in head
that run wrong, and (with `oracles.fail_on_dropped_support`) support head dropped; bugs
both builds share (persistent) and fixed ones are reported but pass.
"""

from __future__ import annotations

from bot.findings.summary import Summary

EXIT_OK, EXIT_ERROR, EXIT_FINDINGS = 0, 1, 2


def two_builds(summary: Summary) -> bool:
    """Whether the results compare base and head (a campaign's, a check's or a merge's)."""
    return summary.compiler is not None or summary.base is not None


def findings_exit(summary: Summary) -> int:
    """EXIT_FINDINGS when the results hold what fails a run, else EXIT_OK."""
    failing = summary.fails_a_change if two_builds(summary) else summary.finding_count
    return EXIT_FINDINGS if failing else EXIT_OK
