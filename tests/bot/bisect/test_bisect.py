"""`fuzzbot bisect` for real: the toy compiler's git history, a build per tested commit,
the finding's model run in each build's worker, and the culprit named by bug identity."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from backends.client import WorkerClient
from backends.spec import parse_backend
from bot.bisect.search import BugIdentity, CommitTester, Outcome, Step, as_bisected, classify, search
from bot.findings.bundle import Finding, write_bundle
from bot.sides.workspace import Commit, Workspace
from oracles.sides import SideRuns
from oracles.signature import op_signature
from oracles.tolerances import ToleranceConfig
from oracles.verdict import Judgement, Verdict, judge
from tests.conftest import CliResult
from tests.toy_repo import BACKEND, ToyRepo, build_cache, toy_compiler_config, toy_repo, trigger_case

pytestmark = [pytest.mark.worker, pytest.mark.release]

__all__ = ["build_cache", "toy_repo"]  # session fixtures shared with test_workspace: each commit is built once

Cli = Callable[..., CliResult]


@pytest.fixture(scope="module")
def bundle(toy_repo: ToyRepo, build_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The finding as a campaign would have saved it: the trigger model judged on the `docs` build."""
    case = trigger_case()
    side = Workspace(toy_compiler_config(toy_repo), build_cache).prepare_commit(toy_repo.sha("docs"))
    with WorkerClient(parse_backend(BACKEND), str(side.python)) as client:
        result = client.run(case.model.SerializeToString(), case.inputs)
    assert result.backend is not None
    bounds = ToleranceConfig().for_outputs(case.model, result.backend.name)
    judgement = judge(result, case.expected, op_signature(case.model), per_output=bounds)
    assert judgement.verdict is Verdict.wrong_result
    finding = Finding(**judgement.model_dump(), backend=result.backend)
    return write_bundle(tmp_path_factory.mktemp("finding") / "bundle", case.model, case.inputs, case.expected, finding)


@pytest.fixture(scope="module")
def config(toy_repo: ToyRepo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "fuzzbot.yml"
    compiler = toy_compiler_config(toy_repo).model_dump(exclude_none=True)
    path.write_text(yaml.safe_dump({"backend": BACKEND, "compiler": compiler}))
    return path


def _bisect(cli: Cli, bundle: Path, config: Path, cache: Path, good: str, bad: str, *more: str) -> CliResult:
    args = ["--good", good, "--bad", bad, "--config", str(config), "--cache-dir", str(cache), *more]
    return cli("bisect", str(bundle), *args)


def test_bisect_names_the_culprit_and_skips_the_broken_build(
    cli: Cli, bundle: Path, config: Path, build_cache: Path, toy_repo: ToyRepo
) -> None:
    r = _bisect(cli, bundle, config, build_cache, "fusion", "main")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == f"first bad commit: {toy_repo.sha('bug')} kernels: simplify the fused multiply-add"
    assert lines[1] == "  author: Toy Dev <dev@toycc.test>" and lines[2].startswith("  date:   2026-01-")
    steps = {line.split()[0]: line.split()[1] for line in lines[4:]}
    assert steps[toy_repo.sha("broken")[:12]] == "skip" and re.search(r"build failed( earlier)? \(log: ", r.out)
    assert steps[toy_repo.sha("bug")[:12]] == "bad" and steps[toy_repo.sha("fusion")[:12]] == "good"
    assert steps[toy_repo.sha("docs")[:12]] == "bad"
    assert len(steps) == 5  # both ends, the broken build, fixbuild, bug


def test_a_range_with_a_skip_beside_the_culprit_is_undecidable(
    cli: Cli, bundle: Path, config: Path, build_cache: Path, toy_repo: ToyRepo
) -> None:
    r = _bisect(cli, bundle, config, build_cache, "fixbuild", "wip", "--reruns", "2")
    assert r.code == 3, r.err
    assert r.out.startswith("undecidable: skipped commits border the boundary; the first bad commit is one of 2:")
    assert f"  {toy_repo.sha('wip_bug')[:12]} kernels: rework the fused multiply-add (WIP) (skip: build failed" in r.out
    assert f"  {toy_repo.sha('wip_fix')[:12]} packaging: fix the dependency list again (bad: wrong_result x2)" in r.out


def test_a_good_ref_that_shows_the_bug_is_an_error(
    cli: Cli, bundle: Path, config: Path, build_cache: Path, toy_repo: ToyRepo
) -> None:
    r = _bisect(cli, bundle, config, build_cache, "bug", "docs")
    assert r.code == 1 and r.out == "", r.err  # stderr: the progress lines for the end commits, then the error
    assert r.err_lines[-1].endswith(f"--good bug ({toy_repo.sha('bug')[:12]}) is not good: wrong_result x3")
    assert "error: " in r.err_lines[-1] and "Traceback" not in r.err


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"bundle": "missing"}, "no such file or folder"),
        ({"good": "no-such-tag"}, "unknown ref 'no-such-tag'"),
        ({"config": "missing.yml"}, "cannot read"),
    ],
)
def test_bad_input_is_one_error_line(
    cli: Cli, bundle: Path, config: Path, build_cache: Path, tmp_path: Path, change: dict[str, str], message: str
) -> None:
    args = {"bundle": str(bundle), "good": "fusion", "config": str(config), **change}
    args = {k: str(tmp_path / v) if k in ("bundle", "config") and k in change else v for k, v in args.items()}
    r = _bisect(cli, Path(args["bundle"]), Path(args["config"]), build_cache, args["good"], "main")
    assert r.code == 1 and r.out == ""
    assert "error: " in r.err_lines[-1] and message in r.err_lines[-1] and "Traceback" not in r.err


def test_bisect_from_inside_the_compiler_checkout_tests_each_build(
    cli: Cli, bundle: Path, config: Path, build_cache: Path, toy_repo: ToyRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Action's layout: run from the compiler's checkout (at head, with the bug), each
    commit's worker still imports that commit's build, so the culprit is found."""
    monkeypatch.chdir(toy_repo.path)
    r = _bisect(cli, bundle, config, build_cache, "fusion", "main")
    assert r.code == 0, r.err
    assert f"first bad commit: {toy_repo.sha('bug')}" in r.out


def test_the_backend_comes_from_the_flag_when_the_config_has_none(
    cli: Cli, bundle: Path, config: Path, build_cache: Path, toy_repo: ToyRepo, tmp_path: Path
) -> None:
    bare = tmp_path / "fuzzbot.yml"
    bare.write_text(yaml.safe_dump({"compiler": yaml.safe_load(config.read_text())["compiler"]}))
    r = _bisect(cli, bundle, bare, build_cache, "fusion", "main")
    # finding.json names the build (toycc:O1), not the plugin that loads it: the worker cannot start
    assert r.code == 1 and "--bad main" in r.err_lines[-1] and "is not bad: worker unavailable" in r.err_lines[-1]
    r = _bisect(cli, bundle, bare, build_cache, "fusion", "main", "--backend", BACKEND, "--reruns", "1")
    assert r.code == 0 and r.out.startswith(f"first bad commit: {toy_repo.sha('bug')} "), r.err


def test_no_config_is_one_error_line(cli: Cli, bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = cli("bisect", str(bundle), "--good", "a", "--bad", "b")
    assert r.code == 1 and len(r.err_lines) == 1 and "no config: pass --config FILE" in r.err


def _commits(n: int) -> list[Commit]:
    return [Commit(f"{i:040x}", f"c{i}", "a", "d") for i in range(n)]


@pytest.mark.parametrize(
    ("outcomes", "first_bad"),
    [
        ("ggggbbbb", [4]),
        ("sgsgbb", [4]),  # skips away from the boundary cost a step, not the answer
        ("ggsbb", [2, 3]),  # a skip just before the first bad commit: undecidable
        ("sssb", [0, 1, 2, 3]),
        ("b", [0]),
    ],
)
def test_search_over_known_outcomes(outcomes: str, first_bad: list[int]) -> None:
    commits = _commits(len(outcomes))
    kinds = {"g": Outcome.good, "b": Outcome.bad, "s": Outcome.skip}
    tested: list[int] = []

    def test(c: Commit) -> Step:
        tested.append(commits.index(c))
        return Step(c, kinds[outcomes[commits.index(c)]], "")

    candidates, steps = search(commits, test)
    assert candidates == [commits[i] for i in first_bad]
    assert len(steps) == len(tested) == len(set(tested)) and len(commits) - 1 not in tested


def _judged(verdict: Verdict, signature: str = "") -> Judgement:
    return Judgement(verdict=verdict, signature=signature)


def test_a_commit_is_bad_only_when_every_run_shows_the_same_bug() -> None:
    bug = BugIdentity(_judged(Verdict.wrong_result, "values in Mul,Sub"))
    wrong = _judged(Verdict.wrong_result, "values in Mul,Sub")
    assert classify(bug, [wrong] * 3) == (Outcome.bad, "wrong_result x3")
    assert classify(bug, [_judged(Verdict.pass_)] * 2) == (Outcome.good, "pass x2")
    assert classify(bug, [wrong, _judged(Verdict.pass_), wrong]) == (
        Outcome.skip,
        "runs disagree: wrong_result, pass, wrong_result",
    )
    other = _judged(Verdict.crash, "ValueError: shapes <n> and <n>")
    assert classify(bug, [other] * 3) == (Outcome.skip, "fails differently: crash: ValueError: shapes <n> and <n>")
    nan = _judged(Verdict.wrong_result, "nan in Mul,Sub")
    assert classify(bug, [nan] * 3)[0] is Outcome.skip  # same class, another signature: another bug


def test_a_reduced_death_is_shown_by_a_death_of_its_kind() -> None:
    """A reduced crash without a message is named by its ops ("memory fault in Gather..."),
    which a commit's run never says; the run shows it by dying the same way. Memory
    corruption counts whatever the signal (onnxruntime 1.25.1's stack smash dies by SIGABRT
    or SIGSEGV), and a plain abort or an orderly error is another failure."""
    reduced = Judgement(
        verdict=Verdict.crash,
        symptom="signal SIGSEGV",
        signature="memory fault in Gather[int64](Shape[int64](Cast[bool](in[uint8])),in[int64]) (T: any)",
        message="worker killed by SIGSEGV",
    )
    bug = CommitTester.identity_of(reduced, "new_regression")
    smash = Judgement(
        verdict=Verdict.crash,
        symptom="signal SIGABRT",
        signature="signal SIGABRT",
        message="worker killed by SIGABRT: *** stack smashing detected ***: terminated",
    )
    assert classify(bug, [smash] * 3)[0] is Outcome.bad
    abort = smash.model_copy(update={"message": "worker killed by SIGABRT"})
    assert classify(bug, [abort] * 3)[0] is Outcome.skip
    raised = Judgement(verdict=Verdict.crash, symptom="exception", signature="signal SIGSEGV", message="x")
    assert classify(bug, [raised] * 3)[0] is Outcome.skip


def test_a_commit_whose_failure_the_judging_sets_aside_is_good_for_the_bug() -> None:
    """Bisection judges as the campaign does: a failure a false-positive rule explains (or a
    wrong result no second reading confirms) is not the bug, so such a commit is good; the
    same failure unexplained is bad."""
    identity = BugIdentity(Judgement(verdict=Verdict.crash, signature="std::bad_alloc in Gemm", symptom="exception"))
    shown = Judgement(verdict=Verdict.crash, signature="std::bad_alloc in Gemm", symptom="exception", message="oom")
    explained = [as_bisected(SideRuns(side="head", runs=[shown], rule="resource-exhaustion")) for _ in range(3)]
    assert classify(identity, explained)[0] is Outcome.good
    assert "resource-exhaustion" in explained[0].message
    assert classify(identity, [as_bisected(SideRuns(side="head", runs=[shown])) for _ in range(3)])[0] is Outcome.bad
