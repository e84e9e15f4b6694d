"""Sides from builds that already exist: the wheels a compiler's CI built (a file, a folder,
a glob) and a package index serving a build (a nightly feed). Real wheels of the toy
compiler built at two commits of its history, a real PEP 503 index over local HTTP, and
a real campaign between them through the CLI."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.sides.artifact import fetch_artifact
from bot.sides.config import ArtifactSpec, CompilerConfig, SideSpec
from bot.sides.workspace import Workspace, wheel_files
from oracles.sides import SideName
from tests.conftest import CliResult
from tests.github_server import FakeGitHub
from tests.toy_repo import BACKEND, TOY_OPS, ToyRepo, toy_repo, toy_wheel

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

__all__ = ["toy_repo"]  # a session fixture: the toy history is made once per run

Cli = Callable[..., CliResult]
PACKAGES = ["numpy", "onnx"]


@pytest.fixture(scope="module")
def wheels(toy_repo: ToyRepo, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The good commit's wheel and the buggy head's, each in its own dist/ folder."""
    tmp = tmp_path_factory.mktemp("wheels")
    return {name: toy_wheel(toy_repo, name, tmp / name / "dist") for name in ("fusion", "docs")}


@contextlib.contextmanager
def _index(wheel: Path, root: Path) -> Iterator[str]:
    """A PEP 503 simple index serving `wheel` over HTTP on this machine."""
    project = root / "simple" / "toycc"
    project.mkdir(parents=True)
    shutil.copy(wheel, project / wheel.name)
    (project / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    (root / "simple" / "index.html").write_text('<a href="toycc/">toycc</a>\n')
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()


def _campaign(cli: Cli, tmp_path: Path, base: Mapping[str, object], head: Mapping[str, object]) -> CliResult:
    """A campaign of toycc between the two sides, through the CLI, as a maintainer runs it."""
    config = tmp_path / "fuzzbot.yml"
    data = {
        "backend": BACKEND,
        "compiler": {"packages": PACKAGES, "base": base, "head": head},
        "cache_dir": str(tmp_path / "cache"),
        "probe": False,
        "budget": "90s",
        "max_tests": 200,
        "reduce": {"enabled": False},
        "generator": {"nodes": 6, "ops": TOY_OPS, "dtypes": ["float32"]},
    }
    config.write_text(yaml.safe_dump(data))
    return cli("fuzz", "--config", str(config), "--out", str(tmp_path / "out"))


def _regression_found(r: CliResult, tmp_path: Path) -> dict[str, Any]:
    """The sides of a `_campaign` that found toycc's fused kernel's regression, as summary.json
    tells them (it must have: exit 2 and a `new_regression`)."""
    assert r.code == 2, r.err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["counts"].get("new_regression", 0) >= 1, summary["counts"]
    sides: dict[str, Any] = summary["sides"]
    return sides


def test_a_campaign_between_an_index_build_and_a_ci_wheel_finds_the_regression(
    cli: Cli, wheels: dict[str, Path], tmp_path: Path
) -> None:
    """Base from a nightly-style index, head from the glob a CI's dist/ folder matches: the
    head's fused kernel is wrong, and the campaign says so as a new regression."""
    with _index(wheels["fusion"], tmp_path / "index") as url:
        base = {"pip": ["toycc==0.1.0"], "index": url}
        r = _campaign(cli, tmp_path, base, {"wheel": str(wheels["docs"].parent / "*.whl")})
    sides = _regression_found(r, tmp_path)
    assert sides["base"]["label"] == f"base toycc==0.1.0 from {url}"
    assert sides["head"]["label"] == f"head {wheels['docs'].name}"
    assert Path(sides["base"]["python"]).parent.parent.parent.name.startswith("pip-")
    assert Path(sides["head"]["python"]).parent.parent.parent.name.startswith("wheel-")


def _workspace(tmp_path: Path, head: str) -> Workspace:
    cfg = CompilerConfig(packages=PACKAGES, base={"wheel": head}, head={"wheel": head})
    return Workspace(cfg, tmp_path / "cache")


def _installed(python: Path) -> str:
    """The source of toycc's fused kernel as the side's venv installed it."""
    code = "import inspect, toycc.kernels as k; print(inspect.getsource(k))"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout


def test_a_wheel_rebuilt_at_the_same_path_gets_a_new_venv(wheels: dict[str, Path], tmp_path: Path) -> None:
    """A CI writes dist/toycc-0.1.0-py3-none-any.whl on every PR: the same path, other bytes."""
    dist = tmp_path / "dist"
    dist.mkdir()
    shutil.copy(wheels["fusion"], dist)
    workspace = _workspace(tmp_path, str(dist))
    first = workspace.prepare_side(SideName.head)
    again = workspace.prepare_side(SideName.head)
    assert again.cached and again.python == first.python
    shutil.copy(wheels["docs"], dist)  # same name: the head commit's build
    rebuilt = workspace.prepare_side(SideName.head)
    assert not rebuilt.cached and rebuilt.python != first.python
    assert "c - a * b" in _installed(rebuilt.python) and "c - a * b" not in _installed(first.python)


def test_a_folder_of_wheels_for_many_pythons_installs_the_one_this_python_takes(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    shutil.copy(wheels["docs"], dist)
    (dist / "toycc-0.1.0-cp27-cp27m-win32.whl").write_bytes(b"not for this machine")
    assert wheel_files(str(dist), SideName.head) == [(dist / wheels["docs"].name).resolve()]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: None, "error: cannot compare: base: wheel {given}: no .whl file there"),
        (
            lambda d: (d / "toycc-0.1.0-cp27-cp27m-win32.whl").write_bytes(b"x"),
            "error: cannot compare: base: wheel {given}: none of toycc-0.1.0-cp27-cp27m-win32.whl installs on this",
        ),
        (
            lambda d: (d / "toycc.whl").write_bytes(b"x"),
            "error: cannot compare: base: wheel {given}/toycc.whl: not a wheel's file name",
        ),
    ],
    ids=["empty", "other-platform", "bad-name"],
)
def test_a_wheel_side_that_names_nothing_installable_is_one_line(
    cli: Cli, tmp_path: Path, make: Callable[[Path], object], message: str
) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    make(dist)
    config = tmp_path / "fuzzbot.yml"
    compiler = {"packages": PACKAGES, "base": {"wheel": str(dist)}, "head": {"python": sys.executable}}
    data = {"backend": BACKEND, "compiler": compiler, "cache_dir": str(tmp_path / "cache"), "probe": False}
    config.write_text(yaml.safe_dump(data))
    r = cli("fuzz", "--config", str(config), "--out", str(tmp_path / "out"), "--budget", "5s")
    assert r.code == 1, r.err
    lines = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith(message.format(given=dist.resolve())), r.err


def test_a_side_config_names_one_source_and_hides_a_feed_s_token() -> None:
    with pytest.raises(ValueError, match="exactly one of ref, pip, wheel, artifact or python"):
        SideSpec.model_validate({"wheel": "dist/", "pip": ["x"]})
    with pytest.raises(ValueError, match=r"index .* needs pip"):
        SideSpec.model_validate({"wheel": "dist/", "index": "https://feed/simple/"})
    side = SideSpec.model_validate({"pip": ["ort-nightly==1.33.0.dev1"], "index": "https://me:t0ken@feed.test/simple/"})
    assert side.label == "ort-nightly==1.33.0.dev1 from https://feed.test/simple/"


REPO = "org/toycc"


@contextlib.contextmanager
def _github(monkeypatch: pytest.MonkeyPatch, run: int) -> Iterator[FakeGitHub]:
    """A local GitHub holding REPO, and the environment a runner of workflow run `run` sets."""
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        monkeypatch.setenv("GITHUB_TOKEN", fake.token)
        monkeypatch.setenv("GITHUB_API_URL", fake.url)
        monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
        monkeypatch.setenv("GITHUB_RUN_ID", str(run))
        yield fake


def test_a_campaign_between_two_ci_runs_artifacts_finds_the_regression(
    cli: Cli, wheels: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Base's wheels are the artifact of the base commit's run (41), head's the artifact of this
    run (42), nested in dist/ beside a wheel for another platform, as a CI's build matrix
    uploads them. Both come through the API with the job's token, past two 502s; each side's
    venv holds its own build, and a second look at the cache fetches nothing."""
    with _github(monkeypatch, run=42) as fake:
        fake.add_artifact(REPO, 41, "wheels", {wheels["fusion"].name: wheels["fusion"].read_bytes()})
        fake.add_artifact(REPO, 41, "wheels", {"stale.txt": b"an older upload, expired"}, expired=True)
        head_files = {
            f"dist/{wheels['docs'].name}": wheels["docs"].read_bytes(),
            "dist/toycc-0.1.0-cp27-cp27m-win32.whl": b"not for this machine",
        }
        head_id = fake.add_artifact(REPO, 42, "wheels", head_files)
        fake.fail_next(2)
        r = _campaign(cli, tmp_path, {"artifact": {"name": "wheels", "run": 41}}, {"artifact": {"name": "wheels"}})
        zips = [path for method, path in fake.requests if path.endswith("/zip")]
        sides = _regression_found(r, tmp_path)
        assert sides["base"]["label"] == f"base {wheels['fusion'].name}"
        assert sides["head"]["label"] == f"head {wheels['docs'].name}"
        base, head = (Path(sides[s]["python"]) for s in ("base", "head"))
        assert "c - a * b" in _installed(head) and "c - a * b" not in _installed(base)
        assert len(zips) == 2, fake.requests
        (kept,) = (tmp_path / "cache").rglob(f"artifacts/org+toycc-{head_id}")
        assert fetch_artifact(ArtifactSpec(name="wheels"), kept.parent.parent, "head") == kept
        assert [path for method, path in fake.requests if path.endswith("/zip")] == zips


@pytest.mark.parametrize(
    ("artifact", "env", "message"),
    [
        (
            {"name": "wheel", "run": 41},
            {},
            "error: cannot compare: base: artifact wheel (run 41): not among run 41's artifacts in org/toycc"
            " (wheels, wheels (expired))",
        ),
        (
            {"name": "wheels", "run": 7},
            {},
            "error: cannot compare: base: artifact wheels (run 7): GitHub refused the artifacts of run 7: 404",
        ),
        (
            {"name": "wheels"},
            {"GITHUB_RUN_ID": ""},
            "error: cannot compare: base: artifact wheels (this run): no run (set artifact.run or $GITHUB_RUN_ID)",
        ),
        (
            {"name": "wheels"},
            {"GITHUB_RUN_ID": "${{ github.run_id }}"},
            "error: cannot compare: base: artifact wheels (this run): no run (set artifact.run or $GITHUB_RUN_ID)",
        ),
        (
            {"name": "wheels", "run": 41},
            {"GITHUB_TOKEN": ""},
            "error: cannot compare: base: artifact wheels (run 41): no token in $GITHUB_TOKEN",
        ),
    ],
    ids=["no-such-name", "no-such-run", "no-run", "unexpanded-run", "no-token"],
)
def test_an_artifact_side_that_cannot_be_had_is_one_line_with_what_there_is(
    cli: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    artifact: dict[str, object],
    env: dict[str, str],
    message: str,
) -> None:
    with _github(monkeypatch, run=42) as fake:
        fake.add_artifact(REPO, 41, "wheels", {"toycc-0.1.0-py3-none-any.whl": b"x"})
        fake.add_artifact(REPO, 41, "wheels", {"old.whl": b"x"}, expired=True)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        config = tmp_path / "fuzzbot.yml"
        compiler = {"packages": PACKAGES, "base": {"artifact": artifact}, "head": {"python": sys.executable}}
        data = {"backend": BACKEND, "compiler": compiler, "cache_dir": str(tmp_path / "cache"), "probe": False}
        config.write_text(yaml.safe_dump(data))
        r = cli("fuzz", "--config", str(config), "--out", str(tmp_path / "out"), "--budget", "5s")
    assert r.code == 1, r.err
    lines = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith(message), r.err
    assert "test-token" not in r.err
