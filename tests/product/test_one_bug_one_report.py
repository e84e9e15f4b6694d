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
from bot.github.text import trigger_marker
from tests.github_server import FakeGitHub
from tests.toy_repo import BACKEND, ToyRepo, build_cache, toy_compiler_config, toy_repo

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

__all__ = ["build_cache", "toy_repo"]  # session fixtures: each toy commit is built once per run

ONE_BUG_OPS = ["Add", "Sub", "Mul", "Neg", "Relu", "Sigmoid", "Tanh", "MatMul"]
REPO = "acme/toycc"
Campaign = tuple[Path, dict[str, Any]]
TOKEN = "ghp_" + "0ne8ug" * 6


def _campaign(
    tmp: Path, repo: ToyRepo, cache: Path, ops: list[str], expect: int = 2, **settings: Any
) -> dict[str, Any]:
    """`fuzzbot fuzz` from `fusion` to `docs`, stopped at a test count; `settings` lie over
    the config (known_bugs, max_tests, seed). New regressions (exit 2) fail a PR check."""
    compiler = toy_compiler_config(repo, "fusion", "docs").model_dump(exclude_none=True)
    data = {
        "backend": BACKEND,
        "compiler": compiler,
        "cache_dir": str(cache.parent / "fuzzbot-cache"),
        "budget": "10m",
        "max_tests": 3000,
        "generator": {"nodes": 6, "ops": ops},
        **settings,
    }
    config = tmp / "fuzzbot.yml"
    config.write_text(yaml.safe_dump(data))
    code = main(["fuzz", "--config", str(config), "--out", str(tmp / "out")])
    summary: dict[str, Any] = json.loads((tmp / "out" / "summary.json").read_text())
    assert code == expect, summary["counts"]
    return summary


@pytest.fixture(scope="module")
def one_bug(toy_repo: ToyRepo, build_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    """Without steering, so every sighting of the bug is met and must be folded."""
    tmp = tmp_path_factory.mktemp("one-bug")
    return tmp / "out", _campaign(tmp, toy_repo, build_cache, ONE_BUG_OPS, known_bugs={"avoid": 0})


@pytest.fixture(scope="module")
def one_bug_steered(toy_repo: ToyRepo, build_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    """The defaults: the bug is reduced when first met, and its trigger steered away from."""
    tmp = tmp_path_factory.mktemp("one-bug-steered")
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


def test_a_bug_once_reduced_is_steered_away_from(one_bug: Campaign, one_bug_steered: Campaign) -> None:
    (_, unsteered), (out, steered) = one_bug, one_bug_steered
    [ref] = steered["findings"]
    assert ref["signature"] == unsteered["findings"][0]["signature"]
    assert steered["time_s"]["reduction_during"] > 0, "the first sighting is reduced while fuzzing"
    assert steered["steered"].get(ref["fingerprint"], 0) > 0, steered["steered"]
    assert steered["occurrences"] == {ref["fingerprint"]: steered["counts"]["new_regression"]}
    hits, before = steered["counts"]["new_regression"], unsteered["counts"]["new_regression"]
    assert hits * 2 <= before, (hits, before)
    [known] = json.loads((out / "known-bugs.json").read_text())
    assert known["fingerprint"] == ref["fingerprint"]
    assert [n["op_type"] for n in known["nodes"]] == ["Mul", "Sub"] and known["edges"] == [[0, 1]]
    assert known["nodes"][0]["dtypes"] is None, "a bug at every type is avoided at every type"


def test_a_later_run_steers_away_from_the_start(
    one_bug_steered: Campaign, toy_repo: ToyRepo, build_cache: Path, tmp_path: Path
) -> None:
    out, first = one_bug_steered
    known = {"files": [str(out)], "avoid": 1.0}
    later = _campaign(tmp_path, toy_repo, build_cache, ONE_BUG_OPS, 0, known_bugs=known, max_tests=600, seed=10_000)
    assert not later["findings"], later["counts"]
    assert later["steered"][first["findings"][0]["fingerprint"]] > 0


def test_open_issues_hand_their_triggers_to_the_next_run(one_bug_steered: Campaign, tmp_path: Path) -> None:
    """A filed issue carries its trigger; `fuzzbot known-bugs` reads it back from the bot's
    open issues only: not from a person's issue, not once the bug's issue is closed."""
    from github import Auth, Github

    out, summary = one_bug_steered
    fingerprint = summary["findings"][0]["fingerprint"]
    other = "ghp_" + "m4ll0ry" * 6
    forged = {"fingerprint": "f" * 16, "nodes": [{"op_type": "Relu", "dtypes": None}], "edges": []}
    with FakeGitHub(token=TOKEN).start() as github:
        github.add_repo(REPO)
        assert _report(out, github, "--mode", "schedule", "--python", sys.executable).returncode == 0
        [issue] = github.issues(REPO)
        assert "<!-- fuzzbot:trigger=" in str(issue["body"])
        github.add_token(other, "mallory")
        body = f"<!-- fuzzbot:fingerprint={'f' * 16} -->\n" + trigger_marker(json.dumps(forged))
        Github(auth=Auth.Token(other), base_url=github.url).get_repo(REPO).create_issue("mine", body)
        rows = _known_from_issues(github, tmp_path / "known.json")
        assert [r["fingerprint"] for r in rows] == [fingerprint]
        assert rows[0]["nodes"] == json.loads((out / "known-bugs.json").read_text())[0]["nodes"]
        github.human_close(REPO, int(issue["number"]))
        assert _known_from_issues(github, tmp_path / "after-close.json") == []


def _known_from_issues(github: FakeGitHub, path: Path) -> list[dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(GITHUB_TOKEN=TOKEN, GITHUB_API_URL=github.url)
    command = [sys.executable, "-m", "bot.cli", "known-bugs", str(path), "--repo", REPO]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(path.read_text())
    return rows
