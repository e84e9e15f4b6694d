"""The GitHub Action's entrypoint: Action inputs -> a fuzzbot.yml -> `fuzzbot fuzz` -> `fuzzbot report`.

GitHub passes each input `name` as the environment variable `INPUT_NAME`, upper-cased
with spaces turned into underscores and hyphens kept (`INPUT_BASE-REF`); a shell cannot
set such a name, so `INPUT_BASE_REF` is read too (local runs, tests).

Why a separate program rather than flags on `fuzzbot`: the Action has to turn
free-form strings (a newline-separated build recipe, an optional config file) into
one validated config, keep the GitHub token away from the build of untrusted PR code,
and speak the runner's protocol ($GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY, `::error::`).
The campaign itself is the ordinary CLI, so the Action and a local run behave alike.

Exit codes are the CLI's: 0 clean, 2 new regressions (findings, for one build), 1 error.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import yaml

from bot.credentials import looks_secret
from bot.errors import EXIT_SIGNALLED

if TYPE_CHECKING:
    from bot.findings.summary import Summary

EXIT_OK, EXIT_ERROR, EXIT_FINDINGS = 0, 1, 2
MODES = ("pr", "schedule", "fuzz-only")
REPORTING_MODES = ("pr", "schedule")
FINDING_OUTPUTS = {
    "new-regressions": "new_regression",
    "new-in-head": "new_in_head",
    "fixed": "fixed",
    "persistent": "persistent",
}
"""Outputs that count findings (distinct bugs, summary.json's `distinct`), as the PR comment
and summary.md do; `tests` and `flaky` count tests (a flaky case has no fingerprint)."""


class InputError(Exception):
    """An Action input that cannot work: one line, exit 1, before anything runs."""


@dataclass(frozen=True)
class Inputs:
    """The Action's inputs, parsed; empty strings mean "not given"."""

    mode: str
    compiler_repo: str
    base_ref: str
    head_ref: str
    build: list[str]
    backend: str
    budget: str
    config: Path | None
    token: str
    dry_run: str
    out: Path
    shard: str
    merge: list[str]
    pr_number: str
    close_after: str = ""
    corpus: str = ""
    base_wheel: str = ""
    """Wheels the compiler's CI built for base (a file, a folder or a glob in the workspace)."""
    head_wheel: str = ""
    regressions: str = ""


def read_input(env: Mapping[str, str], name: str, default: str = "") -> str:
    """The value of input `name` from either spelling of its variable, stripped."""
    for key in (f"INPUT_{name.upper()}", f"INPUT_{name.upper().replace('-', '_')}"):
        value = env.get(key)
        if value is not None and value.strip():
            return value.strip()
    return default


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def workspace(env: Mapping[str, str]) -> Path:
    """Where relative paths point: the checked-out repo on GitHub, else the current folder."""
    return Path(env.get("GITHUB_WORKSPACE") or os.getcwd())


def parse_inputs(env: Mapping[str, str]) -> Inputs:
    """Validate every input up front, so a typo costs seconds and not a build."""
    root = workspace(env)
    mode = read_input(env, "mode", "pr")
    if mode not in MODES:
        raise InputError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    budget = read_input(env, "budget")
    if budget:
        check_duration(budget)
    config_text = read_input(env, "config")
    config = root / config_text if config_text else None
    if config is not None and not config.is_file():
        raise InputError(f"config: {config_text} is not a file")
    inputs = Inputs(
        mode=mode,
        compiler_repo=read_input(env, "compiler-repo"),
        base_ref=read_input(env, "base-ref"),
        head_ref=read_input(env, "head-ref"),
        build=_lines(read_input(env, "build")),
        backend=read_input(env, "backend"),
        budget=budget,
        config=config,
        token=read_input(env, "github-token"),
        dry_run=read_input(env, "dry-run"),
        out=root / read_input(env, "out", "fuzzbot-out"),
        shard=read_input(env, "shard"),
        merge=_lines(read_input(env, "merge")),
        pr_number=read_input(env, "pr-number"),
        close_after=read_input(env, "close-after"),
        corpus=read_input(env, "corpus"),
        regressions=read_input(env, "regressions"),
        base_wheel=read_input(env, "base-wheel"),
        head_wheel=read_input(env, "head-wheel"),
    )
    for name, ref, wheel in (
        ("base", inputs.base_ref, inputs.base_wheel),
        ("head", inputs.head_ref, inputs.head_wheel),
    ):
        if ref and wheel:
            raise InputError(f"{name}-ref and {name}-wheel: give one of them, not both")
    if inputs.pr_number and not inputs.pr_number.isdigit():
        raise InputError(f"pr-number: {inputs.pr_number!r} is not a pull request number")
    if inputs.close_after and not (inputs.close_after.isdigit() and int(inputs.close_after) >= 1):
        raise InputError(f"close-after: {inputs.close_after!r} is not a number of runs (1 or more)")
    given_base = inputs.base_ref or inputs.base_wheel or _file_gives_base(config)
    if mode == "pr" and not inputs.merge and not given_base:
        raise InputError(
            "base-ref: required in pr mode (e.g. ${{ github.event.pull_request.base.sha }}), or base-wheel"
        )
    return inputs


def check_duration(text: str) -> None:
    """The CLI's own duration parser; imported here because bot.config is slow to import
    (it loads the generator), and most bad inputs are caught before it is needed."""
    from bot.config import parse_duration

    try:
        parse_duration(text)
    except ValueError as e:
        raise InputError(f"budget: {e}") from e


def load_user_config(path: Path | None) -> dict[str, Any]:
    """The user's fuzzbot.yml as a mapping; the CLI validates its keys later."""
    if path is None:
        return {}
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"config: {path.name}: cannot read: {str(e).splitlines()[0]}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"config: {path.name}: the top level must be a mapping of keys")
    return data


def _file_gives_base(path: Path | None) -> bool:
    compiler = load_user_config(path).get("compiler") if path else None
    return isinstance(compiler, dict) and bool(compiler.get("base"))


def build_config(inputs: Inputs, user: dict[str, Any], root: Path) -> dict[str, Any]:
    """The user's config with the inputs laid over it; inputs win, given keys only."""
    data = dict(user)
    if inputs.backend:
        data["backend"] = inputs.backend
    if inputs.budget:
        data["budget"] = inputs.budget
    for key, folder in (("corpus", inputs.corpus), ("regressions", inputs.regressions)):
        if folder:  # relative to the workspace, where actions/cache restores it
            data[key] = str(root / folder)
    compiler = dict(data.get("compiler") or {})
    if inputs.base_ref or inputs.base_wheel or compiler:  # two builds only when a base exists somewhere
        if inputs.compiler_repo or not compiler.get("repo"):
            compiler["repo"] = str(root / inputs.compiler_repo) if inputs.compiler_repo else str(root)
        if inputs.base_ref:
            compiler["base"] = {"ref": inputs.base_ref}
        if inputs.base_wheel:  # relative to the workspace, where actions/download-artifact put it
            compiler["base"] = {"wheel": str(root / inputs.base_wheel)}
        if inputs.head_wheel:
            compiler["head"] = {"wheel": str(root / inputs.head_wheel)}
        elif inputs.head_ref or not compiler.get("head"):
            compiler["head"] = {"ref": inputs.head_ref or "HEAD"}
        if inputs.build:
            compiler["build"] = inputs.build
        data["compiler"] = compiler
    return data


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """The environment less the inputs and anything named like a credential: GitHub also
    hands a Docker action ACTIONS_RUNTIME_TOKEN and, with id-token, ACTIONS_ID_TOKEN_REQUEST_TOKEN."""
    return {k: v for k, v in env.items() if not k.startswith("INPUT_") and not looks_secret(k)}


def cli_env(env: Mapping[str, str], repo: str | None) -> dict[str, str]:
    """The environment of `fuzzbot fuzz`: no token (the build runs the PR's code), and git
    trusting the mounted workspace, which belongs to the runner's user, not the container's."""
    clean = without_secrets(env)
    if repo:
        n = int(clean.get("GIT_CONFIG_COUNT", "0") or 0)
        clean.update({"GIT_CONFIG_COUNT": str(n + 1), f"GIT_CONFIG_KEY_{n}": "safe.directory"})
        clean[f"GIT_CONFIG_VALUE_{n}"] = repo
    return clean


def local_repo(compiler: object, root: Path) -> str | None:
    """compiler.repo as an absolute path when it is a folder here (not a URL)."""
    repo = compiler.get("repo") if isinstance(compiler, dict) else None
    if not isinstance(repo, str) or not (root / repo).is_dir():
        return None
    return str((root / repo).resolve())


def pin_head(side: Any, repo: str, env: Mapping[str, str]) -> Any:
    """`HEAD` as the SHA checked out in the workspace. fuzzbot works on a mirror clone,
    whose HEAD is a branch, while a PR's checkout is a detached merge commit."""
    if side != {"ref": "HEAD"}:
        return side
    done = subprocess.run(
        ["git", "-C", repo, "rev-parse", "--verify", "HEAD^{commit}"],
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )
    return {"ref": done.stdout.strip()} if done.returncode == 0 and done.stdout.strip() else side


def fuzzbot(args: Sequence[str], env: Mapping[str, str]) -> int:
    """Run the CLI with this interpreter (the image's, or the test's venv), passing it the
    SIGTERM and SIGINT this process gets. A cancelled job's runner sends its SIGTERM to the
    container's first process, this one, which as PID 1 would otherwise ignore it (the
    kernel drops a signal PID 1 has no handler for) until the SIGKILL that follows: the CLI
    never heard of it, and wrote no summary of what it had found."""
    child = subprocess.Popen([sys.executable, "-P", "-m", "bot.cli", *args], env=dict(env))

    def forward(signum: int, _frame: FrameType | None) -> None:
        child.send_signal(signum)

    main_thread = threading.current_thread() is threading.main_thread()
    kept = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)} if main_thread else {}
    try:
        return child.wait()
    finally:
        for s, handler in kept.items():
            signal.signal(s, handler)


def campaign(inputs: Inputs, env: Mapping[str, str], root: Path, tmp: Path) -> int:
    """Fuzz (or merge shard outputs) into inputs.out; the CLI's exit code."""
    data = build_config(inputs, load_user_config(inputs.config), root)
    compiler = data.get("compiler")
    repo = local_repo(compiler, root)
    run_env = cli_env(env, repo)
    if repo and isinstance(compiler, dict):
        compiler["head"] = pin_head(compiler["head"], repo, run_env)
    if inputs.merge:
        feed = ["--regressions", str(root / inputs.regressions)] if inputs.regressions else []
        code = fuzzbot(["merge", *(str(root / d) for d in inputs.merge), "--out", str(inputs.out), *feed], run_env)
        return EXIT_ERROR if code == EXIT_ERROR else merged_code(inputs.out)
    if isinstance(compiler, dict):
        fetch_artifacts(compiler, inputs, env, root)
    known = known_from_issues(inputs, env, tmp)
    if known is not None:
        section = data.setdefault("known_bugs", {}) or {}
        section["files"] = [*(section.get("files") or []), str(known)]
        data["known_bugs"] = section
    config = tmp / "fuzzbot.yml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    args = ["fuzz", "--config", str(config), "--out", str(inputs.out)]
    return fuzzbot([*args, *(["--shard", inputs.shard] if inputs.shard else [])], run_env)


def fetch_artifacts(compiler: dict[str, Any], inputs: Inputs, env: Mapping[str, str], root: Path) -> None:
    """Each `artifact:` side fetched here, with the token, into the cache, and handed to the
    campaign (which never sees the token) as the wheels it holds (bot.sides.artifact)."""
    from bot.sides.artifact import ArtifactError, fetch_artifact, wheel_glob
    from bot.sides.config import ArtifactSpec

    for which in ("base", "head"):
        side = compiler.get(which)
        if not (isinstance(side, dict) and isinstance(side.get("artifact"), dict)):
            continue
        try:
            spec = ArtifactSpec.model_validate(side["artifact"])
        except ValueError as e:
            raise InputError(f"compiler.{which}.artifact: {str(e).splitlines()[-1].strip()}") from e
        fetching = {**without_secrets(env), "GITHUB_TOKEN": inputs.token}
        try:
            folder = fetch_artifact(spec, cache_dir(inputs, root) / "sides", which, fetching)
        except ArtifactError as e:
            raise InputError(str(e)) from e
        compiler[which] = {"wheel": wheel_glob(folder)}


def known_from_issues(inputs: Inputs, env: Mapping[str, str], tmp: Path) -> Path | None:
    """The bot's open issues' triggers as a known-bugs.json, read with the token before the
    campaign (which never sees it); None without a token or when GitHub cannot be read, and
    the campaign then fuzzes without steering away from them."""
    if not inputs.token or not env.get("GITHUB_REPOSITORY"):
        return None
    clean = without_secrets(env)
    clean["GITHUB_TOKEN"] = inputs.token
    path = tmp / "known-from-issues.json"
    if fuzzbot(["known-bugs", str(path), "--repo", env["GITHUB_REPOSITORY"]], clean) != EXIT_OK:
        print("::warning::fuzzbot could not read the open issues' triggers; fuzzing without them", flush=True)
        return None
    return path


def merged_code(out: Path) -> int:
    """A merge fails the job exactly as a campaign on the same findings does
    (bot.findings.outcome): two builds on new regressions and models new in head run wrong,
    one build on any bug."""
    from bot.findings.outcome import findings_exit  # slow to import, as read_summary says

    summary = read_summary(out)
    return findings_exit(summary) if summary is not None else EXIT_OK


def report(inputs: Inputs, env: Mapping[str, str], root: Path) -> int:
    """Post (or, with dry-run, write) the PR comment or the issues; the report's exit code."""
    clean = without_secrets(env)
    args = ["report", str(inputs.out), "--mode", inputs.mode]
    if env.get("GITHUB_REPOSITORY"):
        args += ["--repo", env["GITHUB_REPOSITORY"]]
    if inputs.pr_number:  # a workflow_run job has no PR event of its own to read it from
        args += ["--pr", inputs.pr_number]
    if inputs.mode == "schedule":
        args += ["--cache-dir", str(cache_dir(inputs, root))]
        args += ["--close-after", inputs.close_after] if inputs.close_after else []
    dry_run = dry_run_dir(inputs.dry_run, inputs.out, root)
    if dry_run is not None:
        args += ["--dry-run", str(dry_run)]
    if inputs.token:
        clean["GITHUB_TOKEN"] = inputs.token
    return fuzzbot(args, clean)


def cache_dir(inputs: Inputs, root: Path) -> Path:
    """Where the report finds or builds head to re-run repros: the config's cache_dir, as the
    campaign used it, so a restored cache (actions/cache) is found; else the default."""
    configured = load_user_config(inputs.config).get("cache_dir")
    return root / (configured if isinstance(configured, str) and configured else ".fuzzbot-cache")


def dry_run_dir(value: str, out: Path, root: Path) -> Path | None:
    """Where a dry run writes: none when off, OUT/dry-run for `true`, else the folder given."""
    flag = value.lower()
    if flag in ("", "false", "0", "no"):
        return None
    return out / "dry-run" if flag in ("true", "1", "yes") else root / value


def read_summary(out: Path) -> Summary | None:
    """out/summary.json, or None when the campaign wrote none (or a broken one)."""
    from bot.findings.summary import Summary  # slow to import: only once the campaign ran

    try:
        return Summary.model_validate_json((out / "summary.json").read_text())
    except (OSError, ValueError):
        return None


def outputs(out: Path, root: Path) -> dict[str, str]:
    """The Action's outputs: findings by label and in all (every bug, whatever its label),
    the tests run and the flaky ones among them, the folder. Findings are summary.json's
    `distinct`, so a workflow that gates on them agrees with the comment it posts."""
    from bot.findings.summary import Summary
    from oracles.count_keys import CountKey
    from oracles.sides import CrossVerdict

    summary = read_summary(out) or Summary()
    distinct = summary.distinct
    values = {name: str(distinct.get(key, 0)) for name, key in FINDING_OUTPUTS.items()}
    values["findings"] = str(sum(n for k, n in distinct.items() if CountKey(k).is_bug))
    values["tests"] = str(summary.tests)
    values["flaky"] = str(summary.counts.get(CrossVerdict.flaky, 0))
    values["report-path"] = str(out.relative_to(root)) if out.is_relative_to(root) else str(out)
    return values


def write_outputs(path: str | None, values: Mapping[str, str]) -> None:
    """Append `name=value` lines, or a heredoc block for a value with newlines."""
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        for name, value in values.items():
            if "\n" in value:
                delimiter = f"ghadelimiter_{uuid.uuid4().hex}"
                f.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
            else:
                f.write(f"{name}={value}\n")


def write_summary(path: str | None, out: Path, values: Mapping[str, str]) -> None:
    """The job page shows the campaign's summary.md, or the counts when it has none."""
    if not path:
        return
    md = out / "summary.md"
    text = md.read_text() if md.is_file() else ""
    if not text:
        rows = "".join(f"| {k} | {v} |\n" for k, v in values.items())
        text = f"## fuzzbot\n\n| output | value |\n| --- | --- |\n{rows}"
    with open(path, "a", encoding="utf-8") as f:
        f.write(text.rstrip("\n") + "\n")


def fail(message: str) -> int:
    """One line for people (stderr) and one annotation for the workflow page."""
    print(f"::error::{message}", flush=True)
    print(f"error: {message}", file=sys.stderr, flush=True)
    return EXIT_ERROR


def main(env: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    root = workspace(env)
    try:
        inputs = parse_inputs(env)
        with tempfile.TemporaryDirectory(prefix="fuzzbot-action-") as tmp:
            code = campaign(inputs, env, root, Path(tmp))
    except InputError as e:
        return fail(str(e))
    if code < 0:  # killed by a signal it could not catch: no summary of its own
        died = f"fuzzbot died of {signal.Signals(-code).name}"
        return fail(f"{died}; its Python stack is above, and the findings it wrote are in {inputs.out}")
    values = outputs(inputs.out, root)
    write_outputs(env.get("GITHUB_OUTPUT"), values)
    write_summary(env.get("GITHUB_STEP_SUMMARY"), inputs.out, values)
    if code in EXIT_SIGNALLED.values():  # a cancelled job: its results are written, nothing posted
        return code
    if code == EXIT_ERROR:  # the CLI printed its one-line error; the annotation points to it
        print("::error::fuzzbot failed: see the `error:` line in the log", flush=True)
        return EXIT_ERROR
    reports = inputs.mode in REPORTING_MODES and (inputs.out / "summary.json").is_file()
    if reports and report(inputs, env, root) == EXIT_ERROR:
        return EXIT_ERROR
    return code


if __name__ == "__main__":
    sys.exit(main())
