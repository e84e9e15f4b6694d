"""Auto-close through the documented nightly workflow, with a real fixed onnxruntime bug.

onnxruntime 1.15.1 fuses an RMSNorm pattern normalized over a non-last axis wrongly at
ORT_ENABLE_ALL; 1.16.3 computes it right (tests/release_cases.rms_norm_axis_not_last).
Night 1: `fuzzbot check` of that model on the release's build files one issue.
Night 2: the steps of examples/workflows/fuzzbot-nightly.yml, run here as GitHub would run
them: two fuzz-only shards (last release against a head that has the fix) on one runner,
their outputs "downloaded" into a fresh workspace, and the report job there (merge, then
report with close-after 1). That runner has none of the shards' venvs, so the report must
build head itself from summary.json's pinned config, into a venv that holds no fuzzbot,
re-run the issue's repro there, see it pass, and close the issue.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml

from bot.campaign.sides import pinned
from bot.findings.summary import SideRecord, Summary
from bot.github.head_build import head_python
from bot.github.text import CLOSE_MARKER
from bot.sides.config import SideSpec
from tests.github_server import FakeGitHub
from tests.release_cases import FIX, rms_norm_axis_not_last
from tests.toy_repo import BUG, ToyRepo, build_cache, toy_compiler_config, toy_repo

pytestmark = [pytest.mark.worker, pytest.mark.release]

__all__ = ["build_cache", "toy_repo"]  # session fixtures: each toy commit is built once per run

REPO = "acme/onnxruntime"
TOKEN = "nightly-token"
PACKAGES = ["numpy<2", "ml_dtypes==0.5.4"]


@dataclass
class Nightly:
    github: FakeGitHub
    issue: dict[str, object]
    """The bot's issue after night 2's report job."""
    comments: list[str]
    filed: str
    """The issue's body as night 1 filed it."""
    report_rc: int
    report_err: str
    report_ws: Path


def _config(path: Path, cache: Path, base: str, head: str) -> Path:
    """A compiler repository's .github/fuzzbot.yml for two onnxruntime releases from PyPI."""
    data = {
        "backend": "onnxruntime:all",
        "cache_dir": str(cache),
        "probe": False,
        "reduce": {"enabled": False},
        "generator": {"nodes": 4},
        "compiler": {
            "packages": PACKAGES,
            "base": {"pip": [f"onnxruntime=={base}"]},
            "head": {"pip": [f"onnxruntime=={head}"]},
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


def _env(github: FakeGitHub, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_"))}
    env.update(GITHUB_API_URL=github.url, GITHUB_REPOSITORY=REPO, GITHUB_RUN_ID="4242")
    env.update(extra)
    return env


def _fuzzbot(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], cwd=cwd, env=env, capture_output=True, text=True)


def _action(workspace: Path, env: dict[str, str], **inputs: str) -> subprocess.CompletedProcess[str]:
    """The Action's entrypoint as GitHub runs it: inputs as INPUT_*, cwd the workspace."""
    env = dict(env, GITHUB_WORKSPACE=str(workspace))
    env.update({f"INPUT_{k.upper().replace('_', '-')}": v for k, v in inputs.items()})
    return subprocess.run(
        [sys.executable, "-P", "-m", "bot.github.entrypoint"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
    )


def _night_one(github: FakeGitHub, tmp: Path) -> None:
    """The bug on both builds of the last release: one issue filed."""
    wrong, _ = FIX
    model, inputs = rms_norm_axis_not_last()
    ws = tmp / "night1"
    ws.mkdir()
    onnx.save(model, ws / "rms_norm.onnx")
    np.savez(ws / "rms_norm.npz", **inputs)  # type: ignore[arg-type]
    config = _config(ws / "fuzzbot.yml", tmp / "night1-cache", wrong, wrong)
    check = _fuzzbot(["check", "rms_norm.onnx", "--config", str(config), "--out", "out"], ws, _env(github))
    assert (check.returncode, check.stdout.strip()) == (0, "rms_norm.onnx: persistent"), check.stderr
    filed = _fuzzbot(["report", "out", "--mode", "schedule"], ws, _env(github, GITHUB_TOKEN=TOKEN))
    assert filed.returncode == 0, filed.stderr


def _night_two(github: FakeGitHub, tmp: Path) -> Path:
    """Two fuzz-only shards on one runner, then the report job on a fresh one."""
    wrong, right = FIX
    fuzz_ws = tmp / "fuzz-runner"
    _config(fuzz_ws / ".github" / "fuzzbot.yml", fuzz_ws / ".fuzzbot-cache", wrong, right)
    report_ws = tmp / "report-runner"
    (report_ws / "shards").mkdir(parents=True)
    for shard in (0, 1):
        done = _action(
            fuzz_ws,
            _env(github),
            mode="fuzz-only",
            shard=f"{shard}/2",
            budget="8s",
            config=".github/fuzzbot.yml",
        )
        assert done.returncode in (0, 2), done.stderr
        shutil.copytree(fuzz_ws / "fuzzbot-out", report_ws / "shards" / f"fuzzbot-shard-{shard}")
        shutil.rmtree(fuzz_ws / "fuzzbot-out")
    shutil.rmtree(fuzz_ws)  # the fuzz runner is gone, and its venvs with it
    return report_ws


@pytest.fixture(scope="module")
def nightly(tmp_path_factory: pytest.TempPathFactory) -> Nightly:
    tmp = tmp_path_factory.mktemp("nightly")
    with FakeGitHub(token=TOKEN, bot_login="github-actions[bot]", token_kind="app").start() as github:
        github.add_repo(REPO)
        _night_one(github, tmp)
        open_issues = [i for i in github.issues(REPO) if i["state"] == "open"]
        assert len(open_issues) == 1, [i["title"] for i in open_issues]
        number, filed = open_issues[0]["number"], str(open_issues[0]["body"])
        report_ws = _night_two(github, tmp)
        done = _action(
            report_ws,
            _env(github),
            mode="schedule",
            merge="shards/fuzzbot-shard-0\nshards/fuzzbot-shard-1\n",
            github_token=TOKEN,
            close_after="1",
        )
        issue = next(i for i in github.issues(REPO) if i["number"] == number)
        return Nightly(github, issue, _comments(github, number), filed, done.returncode, done.stderr, report_ws)


def _comments(github: FakeGitHub, number: int) -> list[str]:
    url = f"{github.url}/repos/{REPO}/issues/{number}/comments"
    request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request) as answer:
        return [c["body"] for c in json.load(answer)]


def test_the_report_job_closes_the_fixed_issue(nightly: Nightly) -> None:
    assert nightly.report_rc in (0, 2), nightly.report_err
    assert nightly.issue["state"] == "closed", nightly.report_err
    closing = [c for c in nightly.comments if c.startswith(CLOSE_MARKER)]
    assert len(closing) == 1 and f"onnxruntime {FIX[1]}" in closing[0], nightly.comments


def test_head_was_rebuilt_on_the_report_runner_without_fuzzbot(nightly: Nightly) -> None:
    """The repro ran on head's own build, made here from the pinned config: a venv with
    onnxruntime 1.16.3 that cannot import fuzzbot (nor onnx: the repro does without)."""
    pythons = sorted((nightly.report_ws / ".fuzzbot-cache" / "sides" / "builds").glob("pip-*/venv/bin/python"))
    assert pythons, "the report job built no head"
    probe = (
        "import importlib.util as u, onnxruntime\n"
        "print(onnxruntime.__version__, *(u.find_spec(m) is None for m in ('bot', 'backends', 'onnx')))"
    )
    versions = [
        subprocess.run([str(p), "-c", probe], cwd=nightly.report_ws, capture_output=True, text=True).stdout.split()
        for p in pythons
    ]
    assert [FIX[1], "True", "True", "True"] in versions, versions


def test_a_ref_head_is_rebuilt_from_the_commit_the_campaign_pinned(
    toy_repo: ToyRepo, build_cache: Path, tmp_path: Path
) -> None:
    """The campaign ran head `main`; by the report job `main` has moved on (a fix landed).
    The summary says which build tonight's verdicts belong to, so the report rebuilds
    exactly the commit the campaign resolved, not whatever `main` names now."""
    clone = tmp_path / "compiler"
    subprocess.run(["git", "clone", "-q", "--branch", "main", str(toy_repo.path), str(clone)], check=True)
    compiler = toy_compiler_config(toy_repo).model_copy(update={"repo": str(clone), "head": SideSpec(ref="main")})
    tonight = toy_repo.sha("docs")
    records = {"head": SideRecord(label="head main", commit=tonight, python=str(tmp_path / "gone" / "python"))}
    summary = Summary(sides=records, compiler=pinned(compiler, records))
    assert summary.compiler is not None and summary.compiler.head.ref == tonight
    kernels = clone / "toycc" / "kernels.py"
    kernels.write_text(kernels.read_text().replace(BUG[1], BUG[0]))
    subprocess.run(["git", "-C", str(clone), "commit", "-qam", "kernels: fix the fused Mul+Sub"], check=True)

    python = head_python(Summary.model_validate_json(summary.model_dump_json()), build_cache)
    assert tonight[:12] in python
    source = "import inspect, toycc.kernels as k; print(inspect.getsource(k))"
    built = subprocess.run([python, "-c", source], capture_output=True, text=True, check=True).stdout
    assert BUG[1] in built


def test_the_filed_issue_says_what_differs_on_which_builds_and_how_to_rerun_it(nightly: Nightly) -> None:
    """Night 1's issue, as a maintainer reads it: the differing elements with their indices,
    the error sizes, both builds, the run that found it, and the install and run lines."""
    body = nightly.filed
    assert "### What differs" in body and "| output | index | expected | actual |" in body
    rows = [line for line in body.splitlines() if line.startswith("| `") and line.count("|") == 5]
    assert rows and all(row.split("|")[2].strip() for row in rows), rows  # every row has its index
    assert "max abs error" in body and "max rel error" in body
    assert f"| head | onnxruntime {FIX[0]}" in body and f"| base | onnxruntime {FIX[0]}" in body
    assert "https://github.com/acme/onnxruntime/actions/runs/4242" in body
    steps = body[body.index("### Reproduce") :]
    assert steps.index(f"pip install numpy onnxruntime=={FIX[0]}\npython repro.py") < steps.index("<details>")
