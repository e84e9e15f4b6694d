"""`fuzzbot check`: the verdict across base and head for models a user already has.

Everything a campaign does to a generated case is done to each given one: both sides
built (or reused) from the config's `compiler:` section and proven isolated, the
reference with its fallbacks, the false-positive rules and their evidence, the
confirmation of wrong results, k runs per side and localization at the lowest level.
With `--out`, findings are written as bundles beside summary.json, as a campaign's are.

Exit status: 0 when nothing is reported, 2 when a new regression (or a model head runs
wrong and base declines, `new_in_head`) is found, or, for one build, any bug; 1 for a
usage or internal error.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from backends.results import RunResult
from bot.campaign.sides import open_campaign
from bot.cases.user_cases import UserCase, find_targets, load_user_case, user_case_config
from oracles.sides import CrossJudgement

EXIT_OK, EXIT_FINDINGS = 0, 2


def _side_row(name: str, result: RunResult, cross: CrossJudgement) -> dict[str, Any]:
    runs = cross.head if name == "head" else cross.base
    first = runs.first if runs is not None else None
    info = result.backend
    build = f"{info.name} {info.version}" + (f" @ {info.commit[:12]}" if info.commit else "") if info else ""
    return {
        "build": build,
        "status": result.status.value,
        "stage": result.stage.value if result.stage else None,
        "verdict": first.verdict.value if first else None,
        "judged_by": first.judged_by if first else "",
        "rule": runs.rule if runs is not None else None,
        "max_abs": first.comparison.max_abs if first and first.comparison else None,
        "max_rel": first.comparison.max_rel if first and first.comparison else None,
        "message": (first.message if first else result.message)[:500],
    }


def case_row(case: UserCase, cross: CrossJudgement, results: list[RunResult], names: list[str]) -> dict[str, Any]:
    culprit = cross.culprit.first
    return {
        "model": case.path,
        "verdict": cross.verdict.value,
        "rule": cross.rule,
        "fingerprint": culprit.fingerprint or None,
        "signature": culprit.signature or None,
        "note": cross.note,
        "reference": case.source.value,
        "inputs": case.inputs_from,
        "sides": {n: _side_row(n, r, cross) for n, r in zip(names, results, strict=True)},
    }


def check_command(
    paths: Annotated[list[Path], typer.Argument(help=".onnx files, bundle folders, or folders of either")],
    config: Annotated[Path | None, typer.Option(help="fuzzbot.yml: backend, and compiler: for base and head")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    out: Annotated[Path | None, typer.Option(help="write findings and summary.json here")] = None,
    timeout: Annotated[str | None, typer.Option(help="per-test run-stage limit [10s]")] = None,
    seed: Annotated[int, typer.Option(help="seed for the inputs of a bare .onnx without an .npz")] = 0,
) -> int:
    """The verdict across base and head (or of one build) for models you already have."""
    targets = find_targets(paths)
    console = Console(stderr=True, highlight=False)
    with tempfile.TemporaryDirectory(prefix="fuzzbot-check-") as scratch:
        cfg = user_case_config(config, out or Path(scratch), timeout, {"enabled": False})
        cases = [load_user_case(given, path, seed) for given, path in targets]
        for case in cases:
            if case.inputs_from not in ("bundle",) and not case.inputs_from.endswith(".npz"):
                console.print(f"{case.path}: inputs {case.inputs_from}", markup=False)
        campaign = open_campaign(cfg, on_side=lambda name, r: console.print(f"{name}: {r.label}", markup=False))
        judged = campaign.run_cases(list(cases))
        names = [s.name for s in campaign.setups]
        rows = [case_row(c, cross, results, names) for c, (cross, results) in zip(cases, judged, strict=True)]
        counts = campaign.summary.counts
    if json_output:
        typer.echo(json.dumps({"cases": rows, "counts": counts}, indent=2))
    else:
        for row in rows:
            rule = f" ({row['rule']})" if row["rule"] else ""
            note = f": {row['note']}" if row["note"] else ""
            typer.echo(f"{row['model']}: {row['verdict']}{rule}{note}")
    if campaign.two_sided:
        return EXIT_FINDINGS if campaign.summary.fails_a_change else EXIT_OK
    return EXIT_FINDINGS if campaign.summary.finding_count else EXIT_OK
