"""The `fuzzbot` command line.

Exit codes: 0 no finding, 2 findings, 1 usage or internal error. Every error a
user can cause is one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from backends.client import BackendUnavailable, WorkerClient
from backends.reference import ReferenceError, run_reference
from backends.spec import BackendSpecError, parse_backend
from bot.bundle import BundleError, load_bundle, write_bundle
from bot.campaign import Campaign, op_signature
from bot.config import ConfigError, TestFault, load_config, parse_duration
from bot.display import live_progress, summary_table
from generator.api import GenConfig, generate, inputs_for_model
from oracles.verdict import Verdict, judge

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Regression fuzzing for deep-learning compilers.",
)

EXIT_OK, EXIT_ERROR, EXIT_FINDINGS = 0, 1, 2


class UserError(Exception):
    """Bad input from the person at the keyboard: reported in one line, exit 1."""


def _fault(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    kind, _, every = text.partition(":")
    try:
        return TestFault(kind=kind, every=int(every or 1)).model_dump()
    except ValueError as e:
        raise UserError(f"--test-fault {text!r}: expected KIND[:EVERY] with KIND in segv, abort, hang, perturb") from e


@app.command()
def fuzz(
    config: Annotated[Path | None, typer.Option(help="fuzzbot.yml")] = None,
    budget: Annotated[str | None, typer.Option(help="campaign length, e.g. 120s, 2m")] = None,
    out: Annotated[Path | None, typer.Option(help="output folder [fuzzbot-out]")] = None,
    seed: Annotated[int | None, typer.Option(help="first seed [0]")] = None,
    backend: Annotated[str | None, typer.Option(help="NAME[:LEVEL], e.g. onnxruntime:all")] = None,
    nodes: Annotated[int | None, typer.Option(help="operators per model [10]")] = None,
    python: Annotated[str | None, typer.Option(help="interpreter for the backend worker")] = None,
    timeout: Annotated[str | None, typer.Option(help="per-test limit [10s]")] = None,
    max_tests: Annotated[int | None, typer.Option(help="stop after N tests")] = None,
    test_fault: Annotated[str | None, typer.Option(hidden=True)] = None,
) -> None:
    """Fuzz a backend against the reference and keep every finding as a bundle."""
    overrides = {
        "budget": budget,
        "out": out,
        "seed": seed,
        "backend": backend,
        "nodes": nodes,
        "python": python,
        "timeout": timeout,
        "max_tests": max_tests,
        "test_fault": _fault(test_fault),
    }
    cfg = load_config(config, overrides)
    console = Console(stderr=True)
    campaign = Campaign(cfg)
    campaign.start()
    with live_progress(console, cfg.budget) as on_test:
        summary = campaign.run(on_test)
    console.print(summary_table(summary))
    console.print(f"summary: {cfg.out / 'summary.json'}")
    raise typer.Exit(EXIT_FINDINGS if summary.finding_count else EXIT_OK)


@app.command()
def gen(
    seed: Annotated[int, typer.Option(help="first seed")] = 0,
    count: Annotated[int, typer.Option(min=1, help="models to write")] = 1,
    nodes: Annotated[int, typer.Option(min=1, max=200, help="operators per model")] = 10,
    out: Annotated[Path, typer.Option(help="output folder")] = Path("fuzzbot-gen"),
) -> None:
    """Write generated cases as bundles (model, inputs, reference) without running a backend."""
    cfg = GenConfig(nodes=nodes)
    for s in range(seed, seed + count):
        case = generate(s, cfg)
        reference = run_reference(case.model, case.inputs)
        write_bundle(out / f"seed-{s}", case.model, case.inputs, reference)
    typer.echo(f"wrote {count} bundle(s) to {out}")


@app.command()
def run(
    target: Annotated[Path, typer.Argument(help="a bundle folder or an .onnx file")],
    backend: Annotated[list[str] | None, typer.Option(help="NAME[:LEVEL]; repeatable")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
    python: Annotated[str | None, typer.Option(help="interpreter for the backend worker")] = None,
    timeout: Annotated[str, typer.Option(help="per-run limit")] = "30s",
    seed: Annotated[int, typer.Option(help="seed for inputs of a bare .onnx file")] = 0,
) -> None:
    """Run one case on one or more backends and judge it against the reference."""
    specs = [parse_backend(b) for b in (backend or ["onnxruntime:all"])]
    limit = _duration(timeout, "--timeout")
    bundle = load_bundle(target)
    inputs = bundle.inputs or _inputs(bundle.model, seed)
    reference = bundle.reference if bundle.reference is not None else run_reference(bundle.model, inputs)
    rows = []
    for spec in specs:
        with WorkerClient(spec, python or sys.executable, limit) as client:
            result = client.run(bundle.model.SerializeToString(), inputs)
        j = judge(result, reference, op_signature(bundle.model))
        rows.append(
            {
                "backend": str(spec),
                "version": result.backend.version if result.backend else "",
                "status": result.status.value,
                "stage": result.stage.value if result.stage else None,
                "verdict": j.verdict.value,
                "seconds": round(result.wall_s, 4),
                "max_abs": j.comparison.max_abs if j.comparison else None,
                "max_rel": j.comparison.max_rel if j.comparison else None,
                "message": j.message,
                "fingerprint": j.fingerprint,
            }
        )
    if json_output:
        typer.echo(json.dumps({"target": str(target), "results": rows}, indent=2))
    else:
        _print_runs(rows)
    raise typer.Exit(EXIT_OK if all(r["verdict"] == Verdict.pass_.value for r in rows) else EXIT_FINDINGS)


def _duration(text: str, flag: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise UserError(f"{flag}: {e}") from e


def _inputs(model: Any, seed: int) -> dict[str, Any]:
    try:
        return inputs_for_model(model, seed)
    except ValueError as e:
        raise UserError(str(e)) from e


RUN_COLUMNS = ("backend", "version", "verdict", "stage", "seconds", "max_abs", "max_rel")


def _print_runs(rows: list[dict[str, Any]]) -> None:
    console = Console()
    if not console.is_terminal:  # logs and pipes get every column, not an 80-column cut
        console = Console(width=160)
    table = Table()
    for col in RUN_COLUMNS:
        table.add_column(col, no_wrap=True)
    for r in rows:
        fmt = {k: ("" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)) for k, v in r.items()}
        table.add_row(*(fmt[c] for c in RUN_COLUMNS))
    console.print(table)
    for r in rows:
        if r["message"]:
            console.print(f"{r['backend']}: {r['message']}", markup=False, highlight=False)


_USER_ERRORS = (UserError, ConfigError, BackendSpecError, BackendUnavailable, BundleError, ReferenceError)


def main(argv: list[str] | None = None) -> int:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        code = app(args=argv, standalone_mode=False, prog_name="fuzzbot")
        return code if isinstance(code, int) else EXIT_OK
    except typer.TyperException as e:  # usage errors and bad parameters
        err.print(f"error: {e.format_message()}", markup=False)
    except typer.Abort:
        err.print("error: interrupted", markup=False)
    except _USER_ERRORS as e:
        err.print(f"error: {e}", markup=False)
    except KeyboardInterrupt:
        err.print("error: interrupted", markup=False)
    except Exception as e:  # noqa: BLE001 - the last line of defence keeps it to one line
        err.print(f"internal error: {type(e).__name__}: {e}", markup=False)
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
