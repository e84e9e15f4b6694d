"""A real git history of the toy compiler (tests/toycompiler) with a known culprit.

Main branch, oldest first:

    initial   kernels only, O1 runs no passes
    fusion    the Mul+Add/Sub fusion pass (correct)
    readme    unrelated: docs
    div       unrelated: a Div kernel
    broken    packaging typo: the build fails (bisect must skip it)
    fixbuild  packaging fixed
    bug       the culprit: the fused kernel computes c - a*b for Mul feeding Sub
    docs      unrelated: docs

Branch `wip` forks at `fixbuild`: `wip_bug` introduces the same bug together with a
broken build, `wip_fix` repairs the build, so the range fixbuild..wip_fix cannot be
decided. Branch `unwritten` forks at `readme` (no Div kernel yet): its fused kernel raises
for Mul feeding Sub, another bug than `bug`'s on the same trigger.
Every named commit is also tagged with its name. Author and committer dates
are fixed, so the SHAs are the same on every run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper

from bot.files import file_lock
from bot.sides.config import CompilerConfig

SOURCE = Path(__file__).resolve().parent / "toycompiler"

BROKEN_PYPROJECT = ('dependencies = ["numpy", "onnx"]', 'dependencies = ["numpy", "onnx"')
BUG = ("a * b + c if sign > 0 else a * b - c", "a * b + c if sign > 0 else c - a * b")
DIV = ('    "Div": np.divide,\n', "")
UNWRITTEN = (
    "    return np.asarray(a * b + c if sign > 0 else a * b - c)",
    "    if sign < 0:\n"
    '        raise RuntimeError("fused multiply-subtract: no kernel yet")\n'
    "    return np.asarray(a * b + c)",
)
NO_PASS_IMPORT = ("from .passes import Pass, fuse_mul_add", "from .passes import Pass")
NO_PASS_LEVEL = ('"O1": (fuse_mul_add,),', '"O1": (),')

Edit = tuple[str, str]

BACKEND = "toycc.fuzzbot:ToyAdapter:O1"
TOY_OPS = ["Add", "Sub", "Mul", "Neg", "Relu", "Sigmoid", "Tanh"]
"""The ops toycc runs: what a campaign on it generates."""


@dataclass(frozen=True)
class ToyRepo:
    path: Path
    commits: dict[str, str]
    """name -> full SHA, for the names in this module's docstring."""

    def sha(self, name: str) -> str:
        return self.commits[name]


class Builder:
    """Commits with fixed authors and dates into `path`, restoring files from `source`."""

    def __init__(self, path: Path, source: Path = SOURCE) -> None:
        self.path = path
        self.source = source
        self.tick = 0

    def git(self, *args: str) -> str:
        self.tick += 1
        date = f"2026-01-{1 + self.tick // 24:02d}T{self.tick % 24:02d}:00:00+00:00"
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "Toy Dev",
            "GIT_AUTHOR_EMAIL": "dev@toycc.test",
            "GIT_COMMITTER_NAME": "Toy Dev",
            "GIT_COMMITTER_EMAIL": "dev@toycc.test",
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_DATE": date,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        done = subprocess.run(["git", *args], cwd=self.path, env=env, check=True, capture_output=True, text=True)
        return done.stdout.strip()

    def edit(self, file: str, *edits: Edit) -> None:
        target = self.path / file
        text = target.read_text()
        for old, new in edits:
            assert old in text, f"fixture edit of {file}: {old!r} not found"
            text = text.replace(old, new, 1)
        target.write_text(text)

    def restore(self, file: str) -> None:
        shutil.copy(self.source / file, self.path / file)

    def commit(self, subject: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", subject)
        return self.git("rev-parse", "HEAD")


def _main_branch(b: Builder) -> dict[str, str]:
    shas: dict[str, str] = {}
    steps: list[tuple[str, str, Callable[[], None]]] = [
        ("initial", "Initial toycc: numpy kernels, levels O0 and O1", lambda: _initial(b)),
        ("fusion", "passes: fuse Mul feeding Add or Sub into FusedMulAdd", lambda: _fusion(b)),
        ("readme", "README: describe the levels", lambda: _append(b, "README.md", "Levels: O0, O1.\n")),
        ("div", "kernels: add Div", lambda: b.restore("toycc/kernels.py")),
        ("broken", "packaging: tidy the dependency list", lambda: b.edit("pyproject.toml", BROKEN_PYPROJECT)),
        ("fixbuild", "packaging: fix the dependency list", lambda: b.restore("pyproject.toml")),
        ("bug", "kernels: simplify the fused multiply-add", lambda: b.edit("toycc/kernels.py", BUG)),
        ("docs", "README: mention the test suite", lambda: _append(b, "README.md", "Tested by fuzzbot.\n")),
    ]
    for name, subject, change in steps:
        change()
        shas[name] = b.commit(subject)
    return shas


def _initial(b: Builder) -> None:
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    shutil.copytree(SOURCE, b.path, dirs_exist_ok=True, ignore=skip)
    b.edit("toycc/kernels.py", DIV)
    b.edit("toycc/compiler.py", NO_PASS_IMPORT, NO_PASS_LEVEL)
    passes = (b.path / "toycc/passes.py").read_text()
    (b.path / "toycc/passes.py").write_text(passes[: passes.index("\n\ndef fuse_mul_add")] + "\n")


def _fusion(b: Builder) -> None:
    b.restore("toycc/compiler.py")
    b.restore("toycc/passes.py")


def _append(b: Builder, file: str, text: str) -> None:
    with open(b.path / file, "a") as f:
        f.write("\n" + text)


def build_toy_repo(path: Path) -> ToyRepo:
    """Create the history in `path` (an empty or missing folder)."""
    path.mkdir(parents=True, exist_ok=True)
    b = Builder(path)
    b.git("init", "-q", "-b", "main")
    shas = _main_branch(b)
    b.git("checkout", "-q", "-b", "wip", shas["fixbuild"])
    b.edit("pyproject.toml", BROKEN_PYPROJECT)
    b.edit("toycc/kernels.py", BUG)
    shas["wip_bug"] = b.commit("kernels: rework the fused multiply-add (WIP)")
    b.restore("pyproject.toml")
    shas["wip_fix"] = b.commit("packaging: fix the dependency list again")
    b.git("checkout", "-q", "-b", "unwritten", shas["readme"])
    b.edit("toycc/kernels.py", UNWRITTEN)
    shas["unwritten"] = b.commit("kernels: the fused multiply-subtract raises until it is written")
    b.git("checkout", "-q", "main")
    for name, sha in shas.items():
        b.git("tag", name, sha)
    return ToyRepo(path, shas)


def session_dir(factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder every test process of the session shares: with pytest-xdist each worker has
    its own base temp, and a history or a build made once under the file locks serves them
    all (bot.sides.workspace locks each build; `shared_repo` locks each history)."""
    base = factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name


def shared_repo(root: Path, build: Callable[[Path], ToyRepo]) -> ToyRepo:
    """The history `build` makes, in `root`, built by the first caller; later callers read
    its SHAs back."""
    shas = root / "shas.json"
    with file_lock(root.with_name(root.name + ".lock")):
        if not shas.exists():
            shutil.rmtree(root, ignore_errors=True)
            repo = build(root / "repo")
            shas.write_text(json.dumps(repo.commits))
    return ToyRepo(root / "repo", json.loads(shas.read_text()))


def shared_toy_repo(root: Path) -> ToyRepo:
    return shared_repo(root, build_toy_repo)


# Each test module that imports these fixtures gets its own instance of them, so both
# live in the session's base temp folder: every module sees one repo and one build cache.


@pytest.fixture(scope="session")
def toy_repo(tmp_path_factory: pytest.TempPathFactory) -> ToyRepo:
    return shared_toy_repo(session_dir(tmp_path_factory, "toycc-history"))


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache for the session, so each toy commit is built once."""
    path = session_dir(tmp_path_factory, "toycc-builds")
    path.mkdir(exist_ok=True)
    return path


def toy_compiler_config(repo: ToyRepo, base: str = "fusion", head: str = "docs") -> CompilerConfig:
    """The recipe the tests build with: numpy, onnx and setuptools installed once, and each
    commit installed without build isolation, so a commit builds in about a second."""
    return CompilerConfig(
        repo=str(repo.path),
        packages=["numpy", "onnx", "setuptools", "wheel"],
        build=["pip install --no-build-isolation ."],
        base={"ref": repo.sha(base)},
        head={"ref": repo.sha(head)},
    )


@dataclass(frozen=True)
class ToyCase:
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]


def _model(nodes: list[onnx.NodeProto], name: str) -> onnx.ModelProto:
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 4]) for n in ("x", "y", "z", "out")]
    graph = helper.make_graph(nodes, name, io[:3], io[3:])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {n: rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32) for n in ("x", "y", "z")}


def trigger_case() -> ToyCase:
    """Mul feeding the first operand of Sub: fused at O1, wrong from the `bug` commit on."""
    nodes = [helper.make_node("Mul", ["x", "y"], ["t"]), helper.make_node("Sub", ["t", "z"], ["out"])]
    i = _inputs()
    return ToyCase(_model(nodes, "mul_sub"), i, {"out": i["x"] * i["y"] - i["z"]})


def plain_case() -> ToyCase:
    """Mul feeding Add, then Relu: fused at O1 too, but right at every commit."""
    nodes = [
        helper.make_node("Mul", ["x", "y"], ["t"]),
        helper.make_node("Add", ["t", "z"], ["u"]),
        helper.make_node("Relu", ["u"], ["out"]),
    ]
    i = _inputs()
    return ToyCase(_model(nodes, "mul_add_relu"), i, {"out": np.maximum(i["x"] * i["y"] + i["z"], 0)})


def toy_wheel(repo: ToyRepo, commit: str, dest: Path) -> Path:
    """toycc's wheel as a CI would build it at `commit`, in `dest`."""
    source = dest.with_name(dest.name + "-src")
    source.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", repo.sha(commit)], cwd=repo.path, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dest)]
    subprocess.run([*build, str(source)], check=True, capture_output=True)
    (wheel,) = dest.glob("toycc-*.whl")
    return wheel


def action_user_config(workspace: Path, repo: ToyRepo, cache: Path) -> str:
    """What the toy compiler's repo would commit as its fuzzbot.yml for the Action (the
    knobs its inputs do not cover), written into `workspace`; its name there."""
    data = {
        "compiler": {"packages": toy_compiler_config(repo).packages},
        "cache_dir": str(cache.parent / "fuzzbot-cache"),
        "probe": False,
        "max_tests": 200,
        "reduce": {"enabled": False},
        "generator": {"nodes": 6, "ops": TOY_OPS, "dtypes": ["float32"]},
    }
    (workspace / "fuzzbot.yml").write_text(yaml.safe_dump(data))
    return "fuzzbot.yml"
