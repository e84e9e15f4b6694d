"""What a person or a CI log sees while a campaign runs."""

from __future__ import annotations

import io
import re
import time

from rich.console import Console

from bot.campaign.display import live_progress
from bot.findings.summary import Summary


def test_a_log_that_is_no_terminal_gets_a_plain_progress_line_at_most_every_interval() -> None:
    """A CI job's log never renders a live bar; it gets one plain line per interval instead."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    summary = Summary()
    with live_progress(console, budget_s=120, plain_every_s=0.2) as on_test:
        for tests in range(1, 41):
            summary.tests = tests
            on_test(summary)
            time.sleep(0.02)
    lines = out.getvalue().splitlines()
    assert 2 <= len(lines) <= 5, lines  # 0.8 s of tests at 0.2 s: about four lines, not forty
    for line in lines:
        assert re.fullmatch(r"fuzzing: 0:00:0\d of 0:02:00, \d+ tests, [\d.]+/s, 0 findings", line), line
    assert "\x1b" not in out.getvalue()  # no terminal control codes in a log


def test_a_terminal_gets_the_live_bar_and_no_plain_lines() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    summary = Summary()
    with live_progress(console, budget_s=10, plain_every_s=0.0) as on_test:
        summary.tests = 5
        on_test(summary)
    assert "fuzzing:" not in out.getvalue() and "tests 5" in out.getvalue()
