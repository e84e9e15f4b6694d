"""Head of a change takes base's support answers for the ops the change did not touch
(bot.sides.probe.FromBase), on the toy compiler's real history: its `div` commit adds a Div
kernel, so head is asked about Div alone, and must end with the answers a full probe gives."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.api import op_specs
from tests.conftest import CliResult
from tests.toy_repo import BACKEND, TOY_OPS, ToyRepo, build_cache, toy_compiler_config, toy_repo

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

__all__ = ["build_cache", "toy_repo"]  # session fixtures: each toy commit is built once per run


def _campaign(cli: Callable[..., CliResult], tmp: Path, toy: ToyRepo, builds: Path, **extra: Any) -> dict[str, Any]:
    """A short campaign `readme` -> `div` in its own probe cache; the builds are the session's."""
    cache = tmp / "cache"
    cache.mkdir(parents=True)
    (cache / "sides").symlink_to(builds, target_is_directory=True)
    compiler = toy_compiler_config(toy, base="readme", head="div").model_dump(exclude_none=True)
    config = tmp / "fuzzbot.yml"
    data = {
        "backend": BACKEND,
        "compiler": compiler,
        "cache_dir": str(cache),
        "max_tests": 5,
        "budget": "60s",
        "generator": {"nodes": 3, "ops": [*TOY_OPS, "Div"], "dtypes": ["float32"]},
        **extra,
    }
    config.write_text(yaml.safe_dump(data))
    r = cli("fuzz", "--config", str(config), "--out", str(tmp / "out"))
    assert r.code in (0, 2), r.err
    summary: dict[str, Any] = json.loads((tmp / "out" / "summary.json").read_text())
    return summary


def test_head_is_asked_only_about_what_its_diff_touched_and_answers_as_a_full_probe(
    toy_repo: ToyRepo, build_cache: Path, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    shared = build_cache.parent / "toycc-probe-sides"
    shared.mkdir(exist_ok=True)
    lent = _campaign(cli, tmp_path / "lent", toy_repo, shared)
    full = _campaign(cli, tmp_path / "full", toy_repo, shared, probe_from_base=False)
    div = lent["support"]["head_only"]["Div"]
    assert list(lent["support"]["head_only"]) == ["Div"] and len(div) >= 3, lent["support"]
    for key in ("supported", "unsupported", "head_only", "base_only"):
        assert lent["support"][key] == full["support"][key], key
    pairs = lent["support"]["supported"] + lent["support"]["unsupported"]
    (spec,) = op_specs(["Div"], lent["backend"]["highest_opset"])
    assert lent["support"]["from_base"] == pairs - len(spec.dtypes), lent["support"]  # every pair but Div's
    assert full["support"]["from_base"] == 0
