"""What a person watching a campaign sees: a live progress line and a closing table."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bot.findings.summary import Summary
from bot.sides.probe import ProbeFailure
from generator.coverage import Coverage

PLAIN_EVERY_S = 30.0
"""How often a log that is not a terminal (a CI job) gets a progress line."""


class Tally(Protocol):
    """What a watcher is shown after each test: a running campaign's state
    (bot.campaign.state.CampaignState), or a finished campaign's Summary."""

    @property
    def tests(self) -> int: ...

    @property
    def finding_count(self) -> int: ...


@contextmanager
def live_progress(
    console: Console, budget_s: float, plain_every_s: float = PLAIN_EVERY_S
) -> Iterator[Callable[[Tally], None]]:
    """Yields the per-test callback: a live bar on a terminal (time against budget); in a
    log, where a bar never renders, one plain line every `plain_every_s`."""
    if not console.is_terminal:
        yield plain_progress(console, budget_s, plain_every_s)
        return
    progress = Progress(
        TextColumn("[bold]fuzzing"),
        BarColumn(),
        TimeElapsedColumn(),
        TextColumn("tests {task.fields[tests]}  {task.fields[rate]:.1f}/s  findings {task.fields[findings]}"),
        console=console,
    )
    start = time.monotonic()
    task = progress.add_task("fuzz", total=budget_s, tests=0, rate=0.0, findings=0)

    def update(s: Tally) -> None:
        elapsed = time.monotonic() - start
        progress.update(
            task,
            completed=min(elapsed, budget_s),
            tests=s.tests,
            rate=s.tests / elapsed if elapsed > 0 else 0.0,
            findings=s.finding_count,
        )

    with progress:
        yield update
        progress.update(task, completed=budget_s)


def plain_progress(console: Console, budget_s: float, every_s: float) -> Callable[[Tally], None]:
    """One line, like "fuzzing: 0:01:30 of 0:02:00, 4021 tests, 44.7/s, 3 findings", per `every_s`."""
    start = time.monotonic()
    last = start

    def update(s: Tally) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < every_s:
            return
        last = now
        elapsed = now - start
        console.print(
            f"fuzzing: {timedelta(seconds=int(elapsed))} of {timedelta(seconds=int(budget_s))}, {s.tests} tests, "
            f"{s.tests / elapsed:.1f}/s, {s.finding_count} findings",
            markup=False,
            highlight=False,
        )

    return update


@contextmanager
def probe_progress(console: Console) -> Iterator[Callable[[int, int], None]]:
    """A transient bar while a backend build is probed (once; later runs read the cache)."""
    progress = Progress(
        TextColumn("[bold]probing support"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} op x dtype"),
        console=console,
        transient=True,
    )
    task = progress.add_task("probe", total=None)

    def update(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    with progress:
        yield update


def probe_failure_lines(console: Console) -> Callable[[ProbeFailure], None]:
    """One line for each op x dtype whose probe failed, however often it failed.

    A build that aborts on one op does so at every opset and on every side that shares the
    build, and the abort's text is a C++ assertion of several lines: a 1.17 onnxruntime
    printed 28 warning blocks for two RNN probes before its first test. The first failure
    of a pair says what happened; summary.json's `support.unexpected` keeps every one."""
    seen: set[tuple[str, str, str]] = set()

    def show(f: ProbeFailure) -> None:
        key = (f.op, f.dtype.value, f.status)
        if key in seen:
            return
        seen.add(key)
        message = " ".join(f.message.split())
        if len(message) > MESSAGE_CHARS:
            message = message[: MESSAGE_CHARS - 1] + "…"
        console.print(
            f"warning: support probe {f.op}/{f.dtype.value} failed unexpectedly ({f.status}): {message}",
            markup=False,
            soft_wrap=True,
        )

    return show


MESSAGE_CHARS = 240
"""A probe failure's message is cut to this on the console: the line says which pair failed
and how; summary.json keeps the rest."""


def builds_line(s: Summary) -> str:
    """The builds a campaign ran, as a maintainer names them: "onnxruntime 1.30.0 → 1.31.1"
    across two builds of one system, each in full otherwise."""
    head, base = s.backend, s.base
    if head is None:
        return "?"
    if base is None:
        return f"{head.name} {head.version}"
    if base.name == head.name:
        return f"{head.name} {base.version} → {head.version}"
    return f"{base.name} {base.version} → {head.name} {head.version}"


def summary_table(s: Summary) -> Table:
    title = f"fuzzbot: {s.tests} tests in {s.wall_s:.1f}s on {builds_line(s)}"
    table = Table(title=title, min_width=len(title))
    table.add_column("verdict")
    table.add_column("count", justify="right")
    for verdict, n in sorted(s.counts.items(), key=lambda kv: -kv[1]):
        table.add_row(verdict, str(n))
    for reason, n in s.dropped.items():
        table.add_row(f"[dim]dropped: {reason}[/dim]", f"[dim]{n}[/dim]")
    table.add_row("[bold]distinct findings", f"[bold]{len(s.occurrences)}")
    return table


def coverage_table(cov: Coverage, available_ops: int) -> Table:
    """The three COMET coverage kinds plus op and dtype reach, for `fuzzbot gen --stats`."""
    st = cov.stats()
    table = Table(title=f"coverage of {st.models} generated models")
    table.add_column("measure")
    table.add_column("covered", justify="right")
    table.add_row("op types", f"{st.op_types} / {available_ops}")
    table.add_row("op inputs (op, slot, dtype, rank, shape bucket)", str(st.op_inputs))
    table.add_row("attribute values (op, attribute, bin)", str(st.attr_values))
    table.add_row("directed op pairs (producer > consumer)", str(st.op_pairs))
    for dtype, n in st.dtypes.items():
        table.add_row(f"[dim]inputs of dtype {dtype}[/dim]", f"[dim]{n}[/dim]")
    rare = sorted(cov.ops.items(), key=lambda kv: kv[1])[:5]
    if rare:
        table.add_row("[dim]rarest op types[/dim]", "[dim]" + ", ".join(f"{op} {n}" for op, n in rare) + "[/dim]")
    return table
