"""`fuzzbot reduce`: the command-line verb over bot/reduce (one finding's bundle), registered
by bot/cli.py.

Kept apart from cli.py so the reducer's options, progress bar and error wording live
with the reducer; every user mistake becomes a `ReduceError`, which cli.py prints as
one `error:` line.

With `--config`, a model someone already has is reduced across the config's two builds:
judged exactly as `fuzzbot check` judges it, by a one-case campaign, whose finding is then
reduced as a campaign's are (bot.reduce.campaign): every candidate must keep head's failure,
the same signature, and base's right answer, and must not fall under a false-positive rule.
The result is an output folder like a campaign's (summary.json, the finding bundle and its
reduced bundle), so `fuzzbot report` reads it.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from bot.errors import UserError

if TYPE_CHECKING:  # imported where the command runs: `fuzzbot --help` needs none of it
    from bot.findings.smaller import Outcome
    from bot.findings.summary import FindingRef
    from reducers.driver import Progress as ReduceProgress


class ReduceError(UserError):
    """A bad `fuzzbot reduce` invocation, reported in one line."""


@contextmanager
def reduce_progress(console: Console, budget_s: float) -> Iterator[Callable[[ReduceProgress], None]]:
    """A bar over the time budget, with the tests run and the current node count."""
    progress = Progress(
        TextColumn("[bold]reducing"),
        BarColumn(),
        TimeElapsedColumn(),
        TextColumn("tests {task.fields[tests]}  nodes {task.fields[nodes]}  {task.fields[pass_name]}"),
        console=console,
        transient=True,
    )
    start = time.monotonic()
    task = progress.add_task("reduce", total=budget_s, tests=0, nodes="?", pass_name="")

    def update(p: ReduceProgress) -> None:
        elapsed = min(time.monotonic() - start, budget_s)
        progress.update(task, completed=elapsed, tests=p.tests, nodes=p.nodes, pass_name=p.pass_name)

    with progress:
        yield update


def reduce_command(
    target: Annotated[Path, typer.Argument(help="a finding bundle folder, or an .onnx file with --config or --check")],
    jobs: Annotated[int, typer.Option(min=1, max=64, help="candidates tested at once")] = 1,
    max_tests: Annotated[int | None, typer.Option(min=1, help="stop after N tests")] = None,
    budget: Annotated[str, typer.Option(help="time limit, e.g. 90s, 5m")] = "5m",
    out: Annotated[
        Path | None, typer.Option(help="reduced bundle folder; with --check, OUT.onnx [default: BUNDLE/reduced]")
    ] = None,
    check: Annotated[
        str | None, typer.Option(help="shell command with {model}; non-zero exit = still failing = keep")
    ] = None,
    fail_code: Annotated[
        int | None, typer.Option(help="with --check: the exit code that means still failing [default: the original's]")
    ] = None,
    fail_regex: Annotated[
        str | None, typer.Option(help="with --check: a regex the check's output must match to count as failing")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="fuzzbot.yml: judge and reduce TARGET across its compiler's base and head builds"),
    ] = None,
    backend: Annotated[str | None, typer.Option(help="override the finding's NAME[:LEVEL]")] = None,
    python: Annotated[str | None, typer.Option(help="interpreter for the backend worker")] = None,
    timeout: Annotated[str, typer.Option(help="per-test limit")] = "10s",
    force: Annotated[
        bool, typer.Option("--force", help="with --config: clear an earlier run's results from the output folder")
    ] = False,
    memory: Annotated[
        str | None,
        typer.Option(
            help="a bundle: how much this process may grow judging candidates (none: no bound) [default: 4GiB]"
        ),
    ] = None,
    test_fault: Annotated[str | None, typer.Option(hidden=True)] = None,
) -> None:
    """Shrink a failing model to a minimal one that fails the same way, with a repro."""
    from backends.memory import bounded, out_of_memory
    from bot.config import DEFAULT_MEMORY, parse_duration, parse_test_fault
    from bot.findings.out_folder import claim_out
    from bot.findings.smaller import check_dest, reduce_keeping_smaller
    from bot.findings.store import REDUCED_DIR
    from bot.reduce.candidates import reduce_bundle
    from oracles.judging import Judging

    budget_s = parse_duration(budget, "--budget")
    console = Console(stderr=True)
    if force and config is None:
        raise ReduceError("--force goes with --config (a bundle's reduced/ is only ever replaced by a smaller one)")
    if memory is not None and (check is not None or config is not None):
        raise ReduceError(
            "--memory goes with a bundle (--config reduces under the config's memory, --check computes nothing)"
        )
    if check is not None:
        _reduce_with_check(console, target, check, out, budget_s, jobs, max_tests, (fail_code, fail_regex))
        return
    if fail_code is not None or fail_regex is not None:
        raise ReduceError("--fail-code and --fail-regex go with --check")
    if config is not None:
        if backend is not None or python is not None:
            raise ReduceError("--config names the builds: drop --backend and --python")
        claim_out(out or default_out(target), force)
        _reduce_across(console, target, config, out, budget_s, max_tests, timeout)
        return
    if target.is_file():
        raise ReduceError(
            f'{target}: a bare model needs --config fuzzbot.yml or --check "CMD {{model}}" (or give a finding bundle)'
        )
    dest = out or target / REDUCED_DIR
    check_dest(dest)
    reduce_one = partial(
        reduce_bundle,
        target,
        budget_s,
        jobs,
        max_tests,
        backend=backend,
        python=python or sys.executable,
        timeout_s=parse_duration(timeout, "--timeout"),
        fault=fault.spec() if (fault := parse_test_fault(test_fault)) else None,
        judging=Judging.shipped(),  # a bundle given without a config: the shipped rules and tolerances
    )
    with bounded(_headroom(memory)), reduce_progress(console, budget_s) as on_progress:
        try:
            done = reduce_keeping_smaller(dest, lambda into: reduce_one(into, on_progress=on_progress))
        except (MemoryError, RuntimeError, OSError) as e:
            if not out_of_memory(e):
                raise
            bound = memory or DEFAULT_MEMORY
            raise ReduceError(f"{target}: judging the finding asks for more memory than --memory {bound}") from e
    _say_kept(console, done)


def _headroom(memory: str | None) -> int | None:
    """The bound a bundle's reduction runs under (backends.memory), as a campaign's does: its
    reference and every candidate's are computed in this process, on models a campaign
    made, and one may ask for a tensor of any size. A `--config` reduction is a campaign,
    bounded by the config's `memory`; a `--check` one computes nothing itself."""
    from bot.config import ConfigError, memory_option

    try:
        return memory_option(memory)
    except ConfigError as e:
        raise ReduceError(str(e)) from e


def _say_kept(console: Console, done: Outcome) -> None:
    if done.replaced:
        console.print(f"reduced bundle: {done.dest} (run {done.dest / 'repro.py'})", markup=False, highlight=False)
        return
    console.print(
        f"kept the reduced bundle already at {done.dest} ({done.kept_nodes} node(s)): this reduction ended at "
        f"{done.new_nodes if done.new_nodes is not None else '?'} node(s), no smaller (run {done.dest / 'repro.py'})",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _reduce_across(
    console: Console, target: Path, config: Path, out: Path | None, budget_s: float, max_tests: int | None, timeout: str
) -> None:
    from bot.findings.bundle import load_bundle

    done = reduce_across(target, config, out, budget_s, max_tests, console, timeout)
    ref, kept = done.ref, load_bundle(done.reduced).finding
    checked = ", ".join(f"{side} {what}" for side, what in kept.kept.items()) if kept else ""
    console.print(
        f"{ref.across or ref.verdict.value}: {ref.signature}\n"
        f"reduced to {ref.reduced_nodes} node(s), every step keeping {checked}: {done.reduced / 'repro.py'}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@dataclass(frozen=True)
class AcrossResult:
    """The reduced bundle, and the finding as the campaign named and labelled it."""

    reduced: Path
    ref: FindingRef


def default_out(target: Path) -> Path:
    """`model.reduced/` beside `model.onnx` (or beside a bundle folder)."""
    return target.with_name(target.stem + ".reduced")


def reduce_across(
    target: Path,
    config: Path,
    out: Path | None,
    budget_s: float,
    max_tests: int | None,
    console: Console,
    timeout: str | None = None,
) -> AcrossResult:
    """Judge `target` on the config's sides, then reduce its finding on them; UserError when
    there is nothing to reduce (it passes, or a rule explains it) or it does not reproduce."""
    from bot.campaign.sides import open_campaign
    from bot.cases.user_cases import find_targets, load_user_case, user_case_config
    from bot.findings.summary import in_output

    found = find_targets([target])
    if len(found) != 1:
        raise UserError(f"{target}: give one model or bundle to reduce, not a folder of {len(found)}")
    dest = out or default_out(target)
    reduce = {"enabled": True, "budget": budget_s, "share": 1.0, "max_findings": 1}
    cfg = user_case_config(config, dest, timeout, reduce | ({"max_tests": max_tests} if max_tests else {}))
    cfg = cfg.model_copy(update={"budget": budget_s, "bisect": False})
    case = load_user_case(*found[0])
    campaign = open_campaign(
        cfg, on_side=lambda name, r: console.print(f"{name}: {r.label}", markup=False, soft_wrap=True)
    )
    [(cross, _)] = campaign.run_cases([case], reduce=True)
    if not campaign.summary.findings:
        rule = f" ({cross.rule})" if cross.rule else ""
        raise UserError(f"{target}: {cross.verdict.value}{rule} across the sides, so there is nothing to reduce")
    ref = campaign.summary.findings[0]
    if ref.reduced_path is None:
        raise UserError(f"{target}: the {ref.across or ref.verdict.value} did not reproduce while reducing")
    return AcrossResult(in_output(dest, ref.reduced_path), ref)


def _reduce_with_check(
    console: Console,
    target: Path,
    check: str,
    out: Path | None,
    budget_s: float,
    jobs: int,
    max_tests: int | None,
    failure: tuple[int | None, str | None],
) -> None:
    from bot.reduce.candidates import reduce_model_file
    from reducers.driver import NotInteresting

    if "{model}" not in check:
        raise ReduceError("--check: the command must contain {model}, the candidate's path")
    fail_code, fail_regex = failure
    if fail_code == 0:
        raise ReduceError("--fail-code: 0 means passing; give the exit code of the failure to keep")
    if fail_regex is not None:
        try:
            re.compile(fail_regex)
        except re.error as e:
            raise ReduceError(f"--fail-regex: not a regular expression: {e}") from e
    dest = out or target.with_name(target.stem + ".reduced.onnx")
    if dest.is_dir():
        raise ReduceError(f"--out {dest} is a folder; with --check, give the reduced model's file name (OUT.onnx)")
    try:
        with reduce_progress(console, budget_s) as on_progress:
            result = reduce_model_file(
                target, check, dest, budget_s, jobs, max_tests, on_progress, fail_code=fail_code, fail_regex=fail_regex
            )
    except NotInteresting as e:
        raise ReduceError(f"--check: {e}, so there is nothing to reduce") from e
    stats = result.stats
    console.print(
        f"reduced {result.nodes_before} -> {result.nodes_after} nodes in {stats.tests} checks "
        f"({stats.cache_hits} cached, {stats.elapsed_s:.1f}s): {dest}",
        markup=False,
        highlight=False,
    )
