"""fuzzbot as a maintainer installs it: the wheel built from this tree, installed into a
fresh venv (no checkout on its path, no fuzzbot beforehand), then `fuzzbot --version`,
`fuzzbot gen` and a short `fuzzbot fuzz` on onnxruntime, run from a folder of their own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import bot
from tests.paths import ROOT

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

SHIPPED = ["pyproject.toml", "README.md", "LICENSE", "generator", "backends", "oracles", "reducers", "bot"]
"""What the wheel is built from: a copy, so that no build/ folder lands in the checkout."""


def _run(args: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode in (0, 2), f"{args}: exit {done.returncode}\n{done.stderr[-3000:]}"
    return done.stdout


def _wheel(tmp: Path) -> Path:
    source = tmp / "source"
    source.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SHIPPED:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=skip)
        else:
            shutil.copy(path, source / name)
    build: list[str | Path] = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    build += ["-w", tmp / "dist"]
    _run([*build, source], tmp)
    (wheel,) = (tmp / "dist").glob("fuzzbot-*.whl")
    return wheel


def _clean_env(venv: Path) -> dict[str, str]:
    """The environment of a shell in which only the fresh venv is active."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    return env


@pytest.mark.timeout(1200)
def test_the_wheel_installs_into_a_fresh_venv_and_fuzzes_without_the_checkout(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "oracles/known_false_positives.yml" in names, "package data the judging reads"
    assert f"fuzzbot-{bot.__version__}.dist-info/licenses/LICENSE" in names
    assert not any(n.startswith(("tests/", "bench/", "examples/")) for n in names)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], tmp_path)
    _run([venv / "bin" / "python", "-m", "pip", "install", "-q", f"{wheel}[onnxruntime]"], tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    env = _clean_env(venv)

    assert _run(["fuzzbot", "--version"], work, env).strip() == f"fuzzbot {bot.__version__}"
    where = _run(["python", "-c", "import bot, generator; print(bot.__file__, generator.__file__)"], work, env)
    assert all(Path(p).is_relative_to(venv) for p in where.split()), where
    _run(["fuzzbot", "gen", "--seed", "3", "--nodes", "3", "--out", "gen"], work, env)
    assert (work / "gen" / "seed-3" / "model.onnx").is_file()

    (work / "fuzzbot.yml").write_text("backend: onnxruntime\nreduce:\n  enabled: false\n")
    fuzz = ["fuzzbot", "fuzz", "--config", "fuzzbot.yml", "--max-tests", "20", "--no-probe", "--out", "out"]
    _run([*fuzz, "--cache-dir", "cache"], work, env)
    summary = json.loads((work / "out" / "summary.json").read_text())
    assert summary["tests"] == 20 and summary["fuzzbot_version"] == bot.__version__
    assert summary["backend"]["name"] == "onnxruntime"
