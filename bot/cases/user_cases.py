"""Models a user already has, turned into cases the oracles can judge (`fuzzbot check`,
`fuzzbot run`).

A path is an `.onnx` file, a bundle folder (model.onnx, inputs.npz, ...), or a folder of
either. A bare `.onnx` takes its inputs from `<stem>.npz` or `inputs.npz` beside it, held
against the inputs the model declares first (bot.cases.input_check); where there is
neither, they are drawn valid for the model (bot.cases.drawn_inputs) and then searched with
the generator's value search so that every tensor stays finite and off its edges, and the
case says which it was. Drawn values that the reference refuses, or that give outputs of
other shapes than the model declares, are the draw's failure, not the compiler's: the user
is asked for the inputs instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from backends.reference import refusals
from bot.cases.drawn_inputs import CannotDraw, draw_inputs
from bot.cases.input_check import check_inputs
from bot.cases.making import Prepared
from bot.config import FuzzConfig, load_config
from bot.errors import UserError
from bot.findings.bundle import load_bundle, load_npz
from generator.values import apply_values, find_values
from oracles.references import invalid_by_reference, read_reference


@dataclass
class UserCase(Prepared):
    """A case from a user's file, with where it came from."""

    path: str = ""
    """The path as the user gave it (a JSON key, so it stays what they typed)."""
    inputs_from: str = ""
    """bundle, the .npz beside the model, or how the inputs were made."""


def find_targets(paths: list[Path]) -> list[tuple[str, Path]]:
    """(as given, path) of every model to check: files, bundles, and folders of either."""
    found: list[tuple[str, Path]] = []
    for given in paths:
        if not given.exists():
            raise UserError(f"no such file or folder: {given}")
        if given.is_file() or (given / "model.onnx").is_file():
            found.append((str(given), given))
            continue
        children = sorted(p for p in given.iterdir() if p.suffix == ".onnx" or (p / "model.onnx").is_file())
        if not children:
            raise UserError(f"{given}: no .onnx file or bundle folder in it")
        found.extend((str(given / c.name), c) for c in children)
    return found


def _inputs_beside(path: Path, model: onnx.ModelProto) -> tuple[dict[str, np.ndarray], str] | None:
    for candidate in (path.with_suffix(".npz"), path.with_name("inputs.npz")):
        if candidate.is_file():
            inputs = load_npz(candidate)
            check_inputs(model, inputs, str(candidate))
            return inputs, candidate.name
    return None


def _searched_inputs(model: onnx.ModelProto, seed: int) -> tuple[dict[str, np.ndarray], str, dict[str, str]]:
    """Drawn inputs, then searched so that every tensor stays finite and off its edges;
    the inputs that are not data (shapes, counts, indices) are never moved."""
    drawn = draw_inputs(model, seed)
    free = [name for name in drawn.inputs if name not in drawn.fixed]
    fixed = "; " + ", ".join(f"{k} set for the {v}" for k, v in drawn.fixed.items()) if drawn.fixed else ""
    found = find_values(model, drawn.inputs, free, seed)
    if not found.outcome.found:
        why = found.outcome.reason
        return drawn.inputs, f"drawn with seed {seed}{fixed}; the value search found none safer ({why})", drawn.fixed
    _, inputs = apply_values(model, drawn.inputs, found.values)
    return inputs, f"generated with seed {seed} by the value search{fixed}", drawn.fixed


def _where_inputs_go(given: str, path: Path) -> str:
    """Where a user puts the inputs fuzzbot could not draw."""
    if path.is_dir():
        return f"give the inputs as inputs.npz in {given}"
    return f"give the inputs as {path.with_suffix('.npz').name} beside {given}"


def load_user_case(given: str, path: Path, seed: int = 0) -> UserCase:
    """The case at `path`; its reference is computed afresh (torch, else onnx.reference)."""
    bundle = load_bundle(path)
    model = bundle.model
    refused = refusals(model)
    if refused:
        # Not judged at all: onnx.reference standing in would hide the hole behind a verdict.
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise UserError(f"{given}: the torch reference cannot judge this model: {refused[0]}{more}")
    fixed: dict[str, str] = {}
    if bundle.inputs:
        inputs, origin = bundle.inputs, "bundle"
        check_inputs(model, inputs, str(path / "inputs.npz"))
    elif (beside := _inputs_beside(path, model) if path.is_file() else None) is not None:
        inputs, origin = beside
    else:
        try:
            inputs, origin, fixed = _searched_inputs(model, seed)
        except CannotDraw as e:
            raise CannotDraw(f"{given}: {e}; {_where_inputs_go(given, path)}") from e
    reading = read_reference(model, inputs)
    if fixed and (why := invalid_by_reference(model, reading.outputs)) is not None:
        detail = reading.gap.strip().splitlines()[0] if reading.outputs is None and reading.gap.strip() else why
        names = ", ".join(f"{k} (the {v})" for k, v in fixed.items())
        raise CannotDraw(
            f"{given}: fuzzbot cannot draw valid values for {names}: {detail}; {_where_inputs_go(given, path)}"
        )
    return UserCase(
        seed=seed,
        model=model,
        model_bytes=model.SerializeToString(),
        inputs=inputs,
        reference=reading.outputs,
        source=reading.source,
        gap=reading.gap,
        path=given,
        inputs_from=origin,
    )


def user_case_config(config: Path | None, out: Path, timeout: str | None, reduce: dict[str, Any]) -> FuzzConfig:
    """The config that judges a user's models (`fuzzbot check`, `fuzzbot reduce --config`):
    no support probe (the model is given, not drawn) and no timing (the models are checked,
    not timed); `reduce` lies over the config's reduction settings."""
    cfg = load_config(config, {"out": out, "timeout": timeout, "probe": False})
    perf = cfg.oracles.perf.model_copy(update={"every": 0})
    oracles = cfg.oracles.model_copy(update={"perf": perf})
    return cfg.model_copy(update={"oracles": oracles, "reduce": cfg.reduce.model_copy(update=reduce)})
