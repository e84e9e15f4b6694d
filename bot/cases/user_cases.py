"""Models a user already has, turned into cases the oracles can judge (`fuzzbot check`,
`fuzzbot run`).

A path is an `.onnx` file, a bundle folder (model.onnx, inputs.npz, ...), or a folder of
either. A bare `.onnx` takes its inputs from `<stem>.npz` or `inputs.npz` beside it; where
there is neither, they are drawn and then searched with the generator's value search so
that every tensor stays finite and off its edges, and the case says which it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from backends.reference import refusals
from bot.cases.making import Prepared
from bot.config import FuzzConfig, load_config
from bot.errors import UserError
from bot.findings.bundle import BundleError, load_bundle, load_npz
from generator.api import inputs_for_model
from generator.values import apply_values, find_values
from oracles.references import read_reference


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
            missing = _missing_inputs(model, inputs)
            if missing:
                raise UserError(f"{candidate} has no array for graph input(s) {', '.join(missing)}")
            return inputs, candidate.name
    return None


def _missing_inputs(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[str]:
    initialized = {i.name for i in model.graph.initializer}
    return [v.name for v in model.graph.input if v.name not in initialized and v.name not in inputs]


def _searched_inputs(model: onnx.ModelProto, seed: int) -> tuple[dict[str, np.ndarray], str]:
    try:
        drawn = inputs_for_model(model, seed)
    except ValueError as e:
        raise UserError(str(e)) from e
    found = find_values(model, drawn, set(drawn), seed)
    if not found.outcome.found:
        return drawn, f"drawn with seed {seed}; the value search found none safer ({found.outcome.reason})"
    _, inputs = apply_values(model, drawn, found.values)
    return inputs, f"generated with seed {seed} by the value search"


def load_user_case(given: str, path: Path, seed: int = 0) -> UserCase:
    """The case at `path`; its reference is computed afresh (torch, else onnx.reference)."""
    bundle = load_bundle(path)
    model = bundle.model
    refused = refusals(model)
    if refused:
        # Not judged at all: onnx.reference standing in would hide the hole behind a verdict.
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise UserError(f"{given}: the torch reference cannot judge this model: {refused[0]}{more}")
    if bundle.inputs:
        inputs, origin = bundle.inputs, "bundle"
        missing = _missing_inputs(model, inputs)
        if missing:
            raise BundleError(f"{path / 'inputs.npz'} has no array for graph input(s) {', '.join(missing)}")
    else:
        beside = _inputs_beside(path, model) if path.is_file() else None
        inputs, origin = beside or _searched_inputs(model, seed)
    reading = read_reference(model, inputs)
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
