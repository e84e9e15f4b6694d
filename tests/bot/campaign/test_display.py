"""What a person or a CI log sees while a campaign runs."""

from __future__ import annotations

import io
import re
import time

from rich.console import Console

from bot.campaign.display import MESSAGE_CHARS, live_progress, probe_failure_lines
from bot.findings.summary import Summary
from bot.sides.probe import ProbeFailure
from generator.dtypes import DType


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


def test_a_probe_that_aborts_at_every_opset_is_one_line_per_pair() -> None:
    """onnxruntime 1.17.3 aborts on RNN at each opset the probe asks and on both sides: the
    log gets one line for RNN/float32 and one for RNN/float16, not one multi-line block each."""
    out = io.StringIO()
    show = probe_failure_lines(Console(file=out, force_terminal=False, width=80))
    assertion = "/opt/rh/gcc-toolset-12/root/usr/include/c++/12/bits/stl_vector.h:1142:"
    abort = f"run: worker killed by SIGABRT: {assertion}\n" + "std::vector<_Tp, _Alloc>::const_reference " * 20
    for _ in range(7):
        for dtype in (DType.float32, DType.float16):
            show(ProbeFailure(op="RNN", dtype=dtype, status="crash", message=abort))
    show(ProbeFailure(op="RNN", dtype=DType.float32, status="timeout", message="no answer in 30 s"))
    lines = out.getvalue().splitlines()
    assert [line.split(" failed")[0] for line in lines] == [
        "warning: support probe RNN/float32",
        "warning: support probe RNN/float16",
        "warning: support probe RNN/float32",
    ]
    assert "(timeout)" in lines[2]
    assert all(len(line) <= MESSAGE_CHARS + 100 for line in lines), lines  # one line each, not wrapped at 80
