"""`fuzzbot check`: the verdict across base and head for models a user already has.

Everything a campaign does to a generated case is done to each given one: both sides
built (or reused) from the config's `compiler:` section and proven isolated, the
reference with its fallbacks, the false-positive rules and their evidence, the
confirmation of wrong results, k runs per side and localization at the lowest level.
With `--out`, findings are written as bundles beside summary.json, as a campaign's are.

A target that cannot be judged (an unreadable file, inputs that do not fit the model, none
that can be drawn) is one `error:` line, in --json's `unreadable` too, and the others are
still checked. Exit status: 2 when a new regression (or a model head runs wrong and base
declines, `new_in_head`) is found, or, for one build, any bug (bot.findings.outcome); else
1 when a target could not be judged, or for a usage or internal error; else 0.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from bot.errors import UserError

if TYPE_CHECKING:  # imported when the command runs: `fuzzbot --help` needs none of it
    from backends.results import RunResult
    from bot.campaign.run import Campaign
    from bot.cases.user_cases import UserCase
    from oracles.sides import CrossJudgement


def _unreadable() -> tuple[type[Exception], ...]:
    """What keeps one target from being judged: a bad file or inputs, said in its line."""
    from backends.reference import ReferenceError

    return (UserError, ReferenceError)


def _side_row(name: str, result: RunResult, cross: CrossJudgement) -> dict[str, Any]:
    from oracles.sides import SideName

    runs = cross.head if name == SideName.head else cross.base
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


def case_row(
    case: UserCase, cross: CrossJudgement, results: list[RunResult], names: list[str], two_sided: bool = True
) -> dict[str, Any]:
    failing = cross.failing.first
    return {
        "model": case.path,
        "verdict": verdict_of(cross, two_sided),
        "rule": cross.rule,
        "fingerprint": failing.fingerprint or None,
        "signature": failing.signature or None,
        "note": cross.note,
        "reference": case.source.value,
        "inputs": case.inputs_from,
        "sides": {n: _side_row(n, r, cross) for n, r in zip(names, results, strict=True)},
    }


def verdict_of(cross: CrossJudgement, two_sided: bool) -> str:
    """The label a case is counted under (summary.json's counts, summary.md): across the
    builds with two; with one there is nothing to compare, so a bug is its own verdict
    (crash, wrong_result, timeout), never `persistent`."""
    if cross.verdict.is_reported and not two_sided:
        return cross.failing.first.verdict.value
    return cross.verdict.value


def load_cases(targets: list[tuple[str, Path]], seed: int) -> tuple[list[UserCase], list[dict[str, str]]]:
    """Every target that can be judged, and one `{"model", "error"}` for each that cannot
    (unreadable, inputs that do not fit, none that can be drawn): one bad file beside
    good ones must not keep those from being checked."""
    from bot.cases.user_cases import load_user_case

    cases: list[UserCase] = []
    unreadable: list[dict[str, str]] = []
    for given, path in targets:
        try:
            cases.append(load_user_case(given, path, seed))
        except _unreadable() as e:
            unreadable.append({"model": given, "error": " ".join(str(e).split())})
    return cases, unreadable


def check_command(
    paths: Annotated[list[Path], typer.Argument(help=".onnx files, bundle folders, or folders of either")],
    config: Annotated[Path | None, typer.Option(help="fuzzbot.yml: backend, and compiler: for base and head")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    out: Annotated[Path | None, typer.Option(help="write findings and summary.json here")] = None,
    timeout: Annotated[str | None, typer.Option(help="per-test run-stage limit [default: 10s]")] = None,
    seed: Annotated[int, typer.Option(help="seed for the inputs of a bare .onnx without an .npz")] = 0,
    force: Annotated[bool, typer.Option("--force", help="clear an earlier run's results from --out first")] = False,
) -> int:
    """The verdict across base and head (or of one build) for models you already have."""
    from bot.campaign.sides import open_campaign
    from bot.cases.user_cases import find_targets, user_case_config
    from bot.findings.out_folder import claim_out
    from bot.findings.outcome import EXIT_ERROR, EXIT_OK, findings_exit

    if out is not None:
        claim_out(out, force)
    targets = find_targets(paths)
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="fuzzbot-check-") as scratch:
        cfg = user_case_config(config, out or Path(scratch), timeout, {"enabled": False})
        cases, unreadable = load_cases(targets, seed)
        for bad in unreadable:
            console.print(f"error: {bad['error']}", markup=False)
        if not cases:
            _print(json_output, [], unreadable, {})
            return EXIT_ERROR
        for case in cases:
            if case.inputs_from not in ("bundle",) and not case.inputs_from.endswith(".npz"):
                console.print(f"{case.path}: inputs {case.inputs_from}", markup=False)
        campaign = open_campaign(cfg, on_side=lambda name, r: console.print(f"{name}: {r.label}", markup=False))
        judged = campaign.run_cases(list(cases))
        asked = asked_levels(campaign)
        if len(asked["declared"]) > 1:
            console.print(levels_note(campaign.cfg.backend, asked), markup=False)
        names = [s.name for s in campaign.setups]
        rows = [
            case_row(c, cross, results, names, campaign.two_sided)
            for c, (cross, results) in zip(cases, judged, strict=True)
        ]
    _print(json_output, rows, unreadable, campaign.summary.counts, asked)
    code = findings_exit(campaign.summary)
    return code if code != EXIT_OK or not unreadable else EXIT_ERROR


def asked_levels(campaign: Campaign) -> dict[str, list[str]]:
    """The level the cases ran at, and every level head's build declares. A bug that needs
    one of the others (two TVM bugs need FoldConstant before the default pipeline) passes
    at the one asked, so the answer says which it was."""
    client = campaign.lanes[0][-1].client
    level = client.level or ""
    declared = [str(v) for v in client.handshake.get("levels") or [level] if v]
    return {"asked": [level] if level else [], "declared": declared}


def levels_note(backend: str, asked: dict[str, list[str]]) -> str:
    name = backend.split(":", 1)[0]
    others = [lv for lv in asked["declared"] if lv not in asked["asked"]]
    at = ", ".join(f"{name}:{lv}" for lv in asked["asked"]) or name
    return (
        f"note: judged at {at} only; the build also runs at {', '.join(others)}, and a bug that needs one of"
        f" them passes here (backend: {name}:LEVEL asks one)"
    )


def _print(
    json_output: bool,
    rows: list[dict[str, Any]],
    unreadable: list[dict[str, str]],
    counts: dict[str, int],
    levels: dict[str, list[str]] | None = None,
) -> None:
    if json_output:
        data = {"cases": rows, "unreadable": unreadable, "counts": counts, "levels": levels or {}}
        typer.echo(json.dumps(data, indent=2))
        return
    for row in rows:
        rule = f" ({row['rule']})" if row["rule"] else ""
        note = f": {row['note']}" if row["note"] else ""
        typer.echo(f"{row['model']}: {row['verdict']}{rule}{note}")
