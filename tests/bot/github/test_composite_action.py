"""The composite action (composite/action.yml) is the Docker action run in the job's own
environment: the same inputs and outputs, each input handed to the entry point as the
runner hands a Docker action its inputs. Its fuzz step is run here as the runner runs
it: bash, with the step's env after GitHub's `${{ inputs.* }}` substitution, on a real
two-commit history of the toy compiler."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.paths import ROOT
from tests.toy_repo import BACKEND, ToyRepo, action_user_config, build_cache, toy_repo

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

__all__ = ["build_cache", "toy_repo"]  # session fixtures: each toy commit is built once per run


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


DOCKER = _load(ROOT / "action.yml")
COMPOSITE = _load(ROOT / "composite" / "action.yml")


def _step(step_id: str) -> dict[str, Any]:
    steps: list[dict[str, Any]] = COMPOSITE["runs"]["steps"]
    return next(s for s in steps if s.get("id") == step_id)


def test_the_composite_takes_and_gives_what_the_docker_action_does() -> None:
    docker, composite = DOCKER["inputs"], COMPOSITE["inputs"]
    assert set(composite) == set(docker) | {"python"}
    assert {k: composite[k].get("default", "") for k in docker} == {k: v.get("default", "") for k, v in docker.items()}
    assert set(COMPOSITE["outputs"]) == set(DOCKER["outputs"])
    for name, output in COMPOSITE["outputs"].items():
        assert output["value"] == f"${{{{ steps.fuzzbot.outputs.{name} }}}}"
    env = _step("fuzzbot")["env"]
    assert env == {f"INPUT_{k.upper().replace('-', '_')}": f"${{{{ inputs.{k} }}}}" for k in docker}


def _substituted(env: dict[str, str], inputs: dict[str, str]) -> dict[str, str]:
    """GitHub's expression substitution, for `${{ inputs.NAME }}` (an input not given is its default)."""
    defaults = {k: str(v.get("default", "")) for k, v in COMPOSITE["inputs"].items()}

    def value(m: re.Match[str]) -> str:
        return inputs.get(m.group(1), defaults[m.group(1)])

    return {k: re.sub(r"\$\{\{ inputs\.([a-z-]+) \}\}", value, v) for k, v in env.items()}


def test_the_composite_fuzz_step_finds_the_regression(toy_repo: ToyRepo, build_cache: Path, tmp_path: Path) -> None:
    """The install step's venv stands in as this checkout's .venv (tests/product/test_wheel_install.py
    installs the wheel for real); the step itself runs as written."""
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    (runner_temp / "fuzzbot-venv").symlink_to(sys.prefix, target_is_directory=True)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    config = action_user_config(workspace, toy_repo, build_cache)
    inputs = {
        "mode": "fuzz-only",
        "compiler-repo": str(toy_repo.path),
        "base-ref": "fusion",
        "head-ref": "docs",
        "build": "pip install --no-build-isolation .\n",
        "backend": BACKEND,
        "budget": "60s",
        "config": config,
        "github-token": "",
    }
    step = _step("fuzzbot")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_"))}
    env |= _substituted(step["env"], inputs)
    output = tmp_path / "github_output"
    env |= {"GITHUB_WORKSPACE": str(workspace), "GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(runner_temp)}
    env |= {"GITHUB_REPOSITORY": "toy/toycc", "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary.md")}
    done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=workspace, env=env, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr[-3000:]  # new regressions fail the check
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert int(outputs["new-regressions"]) >= 1 and int(outputs["tests"]) >= 1
    assert outputs["report-path"] == "fuzzbot-out" and (workspace / "fuzzbot-out" / "summary.json").is_file()
