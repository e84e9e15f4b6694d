"""narrowcc's real git history (tests/narrow_repo.py) fuzzed as a maintainer runs fuzzbot: two
`ref` sides built by fuzzbot, `fuzzbot fuzz` and `fuzzbot check` from the command line.

The history holds the most common PR of all (one that adds ops) and two pass regressions.
Campaigns here stop at a test count, and every budget inside them (judging, reduction)
counts runs, so the same seeds give the same cases on any machine and in any process: what
they assert is a function of the code alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import yaml

from bench.same_result import untimed
from bot.cases.making import alone_side
from bot.github.findings import load_report
from bot.github.pr import exit_code
from bot.github.render import pr_comment
from tests.conftest import CliResult
from tests.narrow_repo import BACKEND, leaky_case, narrow_compiler_config, shared_narrow_repo, softmax_case
from tests.toy_repo import ToyRepo, session_dir

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

Cli = Callable[..., CliResult]


@pytest.fixture(scope="module")
def narrow(tmp_path_factory: pytest.TempPathFactory) -> ToyRepo:
    return shared_narrow_repo(session_dir(tmp_path_factory, "narrow-history"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache for the module: each commit is built once."""
    return session_dir(tmp_path_factory, "narrow-builds")


def _config(tmp: Path, repo: ToyRepo, cache: Path, base: str, head: str, **more: Any) -> Path:
    compiler = narrow_compiler_config(repo, base, head).model_dump(exclude_none=True)
    config = {"backend": BACKEND, "cache_dir": str(cache), "compiler": compiler, "reduce": {"enabled": False}, **more}
    path = tmp / "fuzzbot.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _fuzz(cli: Cli, config: Path, out: Path, tests: int) -> tuple[CliResult, dict[str, Any]]:
    r = cli("fuzz", "--config", str(config), "--out", str(out), "--max-tests", str(tests), "--budget", "10m")
    assert r.code in (0, 2), r.err
    return r, json.loads((out / "summary.json").read_text())


def test_each_pass_regression_flips_at_its_commit(cli: Cli, narrow: ToyRepo, cache: Path, tmp_path: Path) -> None:
    """The repros, checked on both sides of the flip: right on `head`, wrong on `leaky`."""
    for name, case in (("softmax", softmax_case), ("leaky", leaky_case)):
        model, inputs = case()
        onnx.save(model, str(tmp_path / f"{name}.onnx"))
        np.savez(tmp_path / f"{name}.npz", **inputs)  # type: ignore[arg-type]
    config = _config(tmp_path, narrow, cache, "head", "leaky")
    r = cli("check", "--config", str(config), "--json", str(tmp_path / "softmax.onnx"), str(tmp_path / "leaky.onnx"))
    assert r.code == 2, r.err
    verdicts = {Path(c["model"]).stem: c["verdict"] for c in json.loads(r.out)["cases"]}
    assert verdicts == {"softmax": "new_regression", "leaky": "new_regression"}
    config = _config(tmp_path, narrow, cache, "base", "head")
    r = cli("check", "--config", str(config), "--json", str(tmp_path / "softmax.onnx"), str(tmp_path / "leaky.onnx"))
    assert r.code == 0 and {c["verdict"] for c in json.loads(r.out)["cases"]} == {"pass"}, r.out


@pytest.mark.timeout(600)  # a 150-test campaign, counted in tests: 305 s beside a CI run, never flaky
def test_a_pr_that_adds_ops_is_fuzzed_where_it_acts_and_the_comment_says_so(
    cli: Cli, narrow: ToyRepo, cache: Path, tmp_path: Path
) -> None:
    """base -> head adds Max and Min: the cases that draw them are divergent (only base
    declines them), head gained support, and the hint reads Max and Min off the diff."""
    r, summary = _fuzz(cli, _config(tmp_path, narrow, cache, "base", "head"), tmp_path / "out", 150)
    assert r.code == 0 and summary["tests"] == 150
    assert set(summary["support"]["head_only"]) == {"Max", "Min"}
    assert set(summary["hint"]["ops"]) == {"Max", "Min"} and summary["hint"]["source"].startswith("git diff")
    divergence = summary["divergence"]
    assert divergence["kinds"]["support"] > 0
    assert {k["key"] for k in divergence["top"]} & {"only base declines Max", "only base declines Min"}
    assert sum(summary["support_changes"]["gained"].values()) == summary["counts"]["gained_support"] > 0
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "## Where the builds differed" in md and "Gained support" in md
    comment = pr_comment(load_report(tmp_path / "out"))
    assert "**0 new regression(s)**" in comment and "### Where the builds differed" in comment
    assert "only base declines M" in comment and "Gained support: head runs right" in comment


@pytest.mark.timeout(900)  # two 200-test campaigns and two builds, counted in tests: slow under load, never flaky
def test_support_a_change_drops_is_kept_and_fails_the_check_when_asked(
    cli: Cli, narrow: ToyRepo, cache: Path, tmp_path: Path
) -> None:
    """head -> base takes Max and Min away: models base ran right, head now declines. The
    first seed that draws base's pairs alone (bot.cases.making.ALONE_EVERY) holds them."""
    (tmp_path / "report").mkdir()
    config = _config(tmp_path / "report", narrow, cache, "head", "base")
    r, summary = _fuzz(cli, config, tmp_path / "report" / "out", 200)
    assert r.code == 0 and summary["counts"]["dropped_support"] > 0
    first_alone = next(s for s in range(200) if alone_side(s) == "base")
    assert min(d["seed"] for d in summary["support_changes"]["dropped"]) <= first_alone
    assert exit_code(load_report(tmp_path / "report" / "out"), fail_on_regression=True) == 0
    dropped = summary["support_changes"]["dropped"]
    assert dropped and all((tmp_path / "report" / "out" / d["path"] / "support.json").is_file() for d in dropped)
    assert {d["key"] for d in dropped} <= {"only head declines Max", "only head declines Min"}
    (tmp_path / "fail").mkdir()
    strict = _config(tmp_path / "fail", narrow, cache, "head", "base", oracles={"fail_on_dropped_support": True})
    r, summary = _fuzz(cli, strict, tmp_path / "fail" / "out", 200)
    assert r.code == 2 and summary["support_changes"]["fails_check"]
    assert "Dropped support" in (tmp_path / "fail" / "out" / "summary.md").read_text()
    report = load_report(tmp_path / "fail" / "out")
    assert exit_code(report, fail_on_regression=True) == 2 and "**Dropped support: head declines" in pr_comment(report)


def _fuzz_hashed(config: Path, out: Path, tests: int, hash_seed: str) -> dict[str, Any]:
    """`fuzzbot fuzz` in a process of its own, whose str hashes are salted with `hash_seed`."""
    code = "import sys; from bot.cli import main; sys.exit(main(sys.argv[1:]))"
    args = ["fuzz", "--config", str(config), "--out", str(out), "--max-tests", str(tests), "--budget", "10m"]
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 2), done.stderr[-2000:]
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


@pytest.mark.timeout(600)  # two 120-test campaigns, counted in tests
def test_the_same_seeds_make_the_same_campaign_whatever_the_string_hashing(
    narrow: ToyRepo, cache: Path, tmp_path: Path
) -> None:
    """Python salts the hashes of strings afresh in each process, and so the order a set of
    them is walked in. The kinds of mutation parents were once ordered by weight alone, and
    two kinds of one weight came in a set's order: the same seeds grew other mutants from
    seed 21 on, and a campaign found its regressions at other seeds in each process. Two
    campaigns under two salts must make the same cases, so the same findings and coverage."""
    config = _config(tmp_path, narrow, cache, "head", "leaky", reduce={"enabled": True})
    first, second = (_fuzz_hashed(config, tmp_path / f"out-{salt}", 120, salt) for salt in ("0", "1"))
    assert first["mutation"]["mutants"] > 0
    for key in ("counts", "coverage", "mutation", "code_coverage"):
        assert first[key] == second[key], key
    # compile-time divergences are the machine's (reported, never fed to generation), and
    # so are the counts of divergent tests and of distinct keys they are part of (one CI run
    # under load had a compile-time key more under one salt: keys 3 against 2)
    fed = [{k: v for k, v in untimed(s["divergence"]).items() if k not in ("tests", "keys")} for s in (first, second)]
    assert fed[0] == fed[1] and fed[0]["kinds"]
    assert first["findings"] and all(f["reduced_nodes"] for f in first["findings"])
    kept = ("seed", "fingerprint", "signature", "reduced_nodes")
    assert [[f[k] for k in kept] for f in first["findings"]] == [[f[k] for k in kept] for f in second["findings"]]


def _verdicts(cli: Cli, tmp: Path, repo: ToyRepo, cache: Path, base: str, head: str, models: list[Path]) -> set[str]:
    """What `fuzzbot check` says of `models` between the commits `base` and `head`."""
    tmp.mkdir()
    r = cli("check", "--config", str(_config(tmp, repo, cache, base, head)), "--json", *map(str, models))
    assert r.code in (0, 2), r.err
    return {c["verdict"] for c in json.loads(r.out)["cases"]}


@pytest.mark.timeout(600)  # a 450-test campaign, counted in tests and runs, not seconds: slow under load, never flaky
def test_guidance_finds_both_pass_regressions_within_450_tests(
    cli: Cli, narrow: ToyRepo, cache: Path, tmp_path: Path
) -> None:
    """head -> leaky adds two miscompiling passes. Run as a PR check runs, with reduction
    on, divergence, mutation, the diff's hint and head's code coverage find both within 450
    tests, each reduced to its two nodes and reported once; each reduced model is checked to
    flip at its own pass's commit. The passes are Python: head's worker measures them, and
    cases reach the lines the change added. Reduction is what finds the second: once the
    Softmax regression is reduced and known, its sightings stop feeding the search, which
    turns to the LeakyRelu pass (seed 229). With reduction off the Softmax regression is
    most of what the campaign finds (60 of 450 tests), and the LeakyRelu one is met at test
    1,448. Plain generation meets neither pair (LeakyRelu feeding a boundless Clip,
    Transpose feeding Softmax) in 600 tests: that comparison, guidance off against on in
    one run, is bench/regressions_found.py's (the narrowcc flips), not a test."""
    config = _config(tmp_path, narrow, cache, "head", "leaky", reduce={"enabled": True})
    r, summary = _fuzz(cli, config, tmp_path / "out", 450)
    found = [f for f in summary["findings"] if f["across"] == "new_regression"]
    assert r.code == 2 and summary["mutation"]["mutants"] > 0
    code = summary["code_coverage"]
    assert code["measured"] == 450 and code["files"] > 0 and code["changed_lines"] > 0
    assert 0 < code["changed_lines_reached"] <= code["changed_lines"] and code["cases_reaching_change"] > 0
    assert len(found) == 2 and all(f["reduced_nodes"] == 2 for f in found), found
    softmax = [f for f in found if "Softmax" in f["signature"] and "Transpose" in f["signature"]]
    leaky = [f for f in found if "LeakyRelu" in f["signature"] and "Clip" in f["signature"]]
    assert len(softmax) == len(leaky) == 1
    reduced = {name: tmp_path / "out" / fs[0]["reduced_path"] for name, fs in (("softmax", softmax), ("leaky", leaky))}
    assert _verdicts(cli, tmp_path / "s", narrow, cache, "head", "softmax", [reduced["softmax"]]) == {"new_regression"}
    assert _verdicts(cli, tmp_path / "l", narrow, cache, "head", "softmax", [reduced["leaky"]]) == {"pass"}
    assert _verdicts(cli, tmp_path / "k", narrow, cache, "softmax", "leaky", [reduced["leaky"]]) == {"new_regression"}
