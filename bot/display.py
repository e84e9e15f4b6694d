"""What a person watching a campaign sees: a live progress line and a closing table."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bot.summary import Summary
from generator.coverage import Coverage


@contextmanager
def live_progress(console: Console, budget_s: float) -> Iterator[Callable[[Summary], None]]:
    """Yields the per-test callback that refreshes the bar (time against budget)."""
    progress = Progress(
        TextColumn("[bold]fuzzing"),
        BarColumn(),
        TimeElapsedColumn(),
        TextColumn("tests {task.fields[tests]}  {task.fields[rate]:.1f}/s  findings {task.fields[findings]}"),
        console=console,
    )
    start = time.monotonic()
    task = progress.add_task("fuzz", total=budget_s, tests=0, rate=0.0, findings=0)

    def update(s: Summary) -> None:
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


def summary_table(s: Summary) -> Table:
    table = Table(title=f"fuzzbot: {s.tests} tests in {s.wall_s:.1f}s on {s.backend.name if s.backend else '?'}")
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
