"""`fuzzbot reduce TARGET --config CFG`: a model someone already has, reduced across the
config's two builds.

A model found outside a campaign (a user's file, a bundle from another run) is judged
exactly as `fuzzbot check` judges it, and its finding is then reduced as a campaign's are:
every candidate must keep head's failure, the same signature, and base's right answer, and
must not fall under a false-positive rule. The result is an output folder like a campaign's
(summary.json, the finding bundle and its reduced bundle), so `fuzzbot report` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from bot.campaign.sides import open_campaign
from bot.cases.user_cases import find_targets, load_user_case, user_case_config
from bot.errors import UserError
from bot.findings.summary import FindingRef, in_output


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
