"""One bug, one report: campaigns on a real git history of the toy compiler, at every dtype
its kernels run, through the CLI and a stateful GitHub server.

- One planted bug (the fused Mul+Sub computes c - a*b; `fusion` -> `docs`, Div left out of
  the generated ops): every one of its findings, at uint8, float16, int64 ..., is reduced,
  tried at the other dtypes, and named once. PR mode shows one new regression; schedule
  mode files one issue, and a rerun files none.
- Two unrelated bugs (the same range with Div drawn too: `div` added an integer Div that
  returns float64, which base cannot run): two reports, one a new regression, one new in
  head, named with the integer types that fail.

Both campaigns stop at a test count, not a time, so they test the same cases at any load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import onnx
import pytest
import yaml

from bot.cli import main
from tests.github_server import FakeGitHub
from tests.toy_repo import BACKEND, ToyRepo, build_cache, toy_compiler_config, toy_repo

__all__ = ["build_cache", "toy_repo"]  # session fixtures: each toy commit is built once per run

ONE_BUG_OPS = ["Add", "Sub", "Mul", "Neg", "Relu", "Sigmoid", "Tanh", "MatMul"]
REPO = "acme/toycc"
Campaign = tuple[Path, dict[str, Any]]
TOKEN = "ghp_" + "0ne8ug" * 6


def _campaign(tmp: Path, repo: ToyRepo, cache: Path, ops: list[str]) -> dict[str, Any]:
    compiler = toy_compiler_config(repo, "fusion", "docs").model_dump(exclude_none=True)
    data = {
        "backend": BACKEND,
        "compiler": compiler,
        "cache_dir": str(cache.parent / "fuzzbot-cache"),
        "budget": "10m",
        "max_tests": 3000,
        "generator": {"nodes": 6, "ops": ops},
    }
    config = tmp / "fuzzbot.yml"
    config.write_text(yaml.safe_dump(data))
    code = main(["fuzz", "--config", str(config), "--out", str(tmp / "out")])
    assert code == 2  # new regressions fail a PR check
    summary: dict[str, Any] = json.loads((tmp / "out" / "summary.json").read_text())
    return summary


@pytest.fixture(scope="module")
def one_bug(toy_repo: ToyRepo, build_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    tmp = tmp_path_factory.mktemp("one-bug")
    return tmp / "out", _campaign(tmp, toy_repo, build_cache, ONE_BUG_OPS)


@pytest.fixture(scope="module")
def two_bugs(toy_repo: ToyRepo, build_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    tmp = tmp_path_factory.mktemp("two-bugs")
    return tmp / "out", _campaign(tmp, toy_repo, build_cache, [*ONE_BUG_OPS, "Div"])


def _report(out: Path, github: FakeGitHub, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(GITHUB_TOKEN=TOKEN, GITHUB_API_URL=github.url)
    command = [sys.executable, "-m", "bot.cli", "report", str(out), "--repo", REPO, *args]
    return subprocess.run(command, env=env, capture_output=True, text=True)


def _issues_filed_twice(out: Path) -> tuple[list[str], list[str], list[str]]:
    """Titles of the issues after one schedule report, then after a second one, and the
    bodies of the first."""
    with FakeGitHub(token=TOKEN).start() as github:
        github.add_repo(REPO)
        first = _report(out, github, "--mode", "schedule", "--python", sys.executable)
        assert first.returncode == 0, first.stderr
        filed = github.issues(REPO)
        again = _report(out, github, "--mode", "schedule", "--python", sys.executable)
        assert again.returncode == 0, again.stderr
        titles = [str(i["title"]) for i in filed]
        return titles, [str(i["title"]) for i in github.issues(REPO)], [str(i["body"]) for i in filed]


def test_one_planted_bug_is_one_finding_at_every_dtype(one_bug: Campaign) -> None:
    out, summary = one_bug
    assert summary["counts"]["new_regression"] >= 5, summary["counts"]
    [ref] = summary["findings"]
    assert ref["across"] == "new_regression" and ref["reduced_nodes"] == 2
    assert len({form.split("[")[0] for form in ref["seen"]}) >= 2, ref["seen"]
    assert ref["signature"] == "values in Sub[T](Mul[T](in[T],in[T]),in[T]) (T: any)"
    folded = list((out / "duplicates").iterdir())
    types = {onnx.load(str(d / "model.onnx")).graph.input[0].type.tensor_type.elem_type for d in folded}
    assert len(types) >= 2, "sightings at other dtypes are folded into the one report"
    reduced = json.loads((out / ref["reduced_path"] / "finding.json").read_text())
    assert not reduced["dtypes"]["passes"] and len(reduced["dtypes"]["fails"]) >= 5


def test_one_planted_bug_is_one_pr_entry_and_one_issue(one_bug: Campaign, tmp_path: Path) -> None:
    out, _ = one_bug
    with FakeGitHub(token=TOKEN).start() as github:
        dry = _report(out, github, "--mode", "pr", "--pr", "1", "--dry-run", str(tmp_path / "pr"))
    assert dry.returncode == 2, dry.stderr
    [comment] = sorted((tmp_path / "pr").glob("*.md"))
    assert comment.read_text().count("### wrong_result") == 1
    first, second, [body] = _issues_filed_twice(out)
    assert len(first) == 1 and first == second, (first, second)
    [dtypes] = [line for line in body.splitlines() if line.startswith("| dtypes |")]
    assert "fails at " in dtypes and "passes at" not in dtypes, dtypes  # the type is not part of this bug
    seen = next(line for line in body.splitlines() if line.startswith("| seen with |"))
    assert len({form.split("[")[0] for form in seen.split("`")[1::2]}) >= 2, seen


def test_two_unrelated_bugs_are_two_reports(two_bugs: Campaign) -> None:
    out, summary = two_bugs
    refs = sorted(summary["findings"], key=lambda r: r["across"])
    assert [r["across"] for r in refs] == ["new_in_head", "new_regression"], [r["signature"] for r in refs]
    div, fused = refs
    assert fused["signature"] == "values in Sub[T](Mul[T](in[T],in[T]),in[T]) (T: any)"
    assert div["signature"].startswith("dtype in Div[T](in[T],in[T]) (T: ")
    failing = set(div["signature"].split("(T: ")[1].rstrip(")").split(","))
    assert failing and all(t.startswith(("int", "uint")) for t in failing), failing
    first, second, bodies = _issues_filed_twice(out)
    assert len(first) == 2 and first == second, (first, second)
    assert sum("passes at float" in body for body in bodies) == 1  # the Div bug needs an integer type
