"""narrowcc's real git history (tests/narrow_repo.py) fuzzed as a maintainer runs fuzzbot: two
`ref` sides built by fuzzbot, `fuzzbot fuzz` and `fuzzbot check` from the command line.

The history holds the most common PR of all (one that adds ops) and two pass regressions.
Campaigns here stop at a test count, with reduction off, so the same seeds give the same
cases on any machine: what they assert is a function of the code alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import yaml

from bot.cases.making import alone_side
from bot.github.findings import load_report
from bot.github.pr import exit_code
from bot.github.render import pr_comment
from tests.conftest import CliResult
from tests.narrow_repo import BACKEND, leaky_case, narrow_compiler_config, shared_narrow_repo, softmax_case
from tests.toy_repo import ToyRepo

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

Cli = Callable[..., CliResult]


@pytest.fixture(scope="module")
def narrow(tmp_path_factory: pytest.TempPathFactory) -> ToyRepo:
    return shared_narrow_repo(tmp_path_factory.getbasetemp() / "narrow-history")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache for the module: each commit is built once."""
    return tmp_path_factory.getbasetemp() / "narrow-builds"


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


@pytest.mark.timeout(600)  # a 450-test campaign, counted in tests, not seconds: slow under load, never flaky
def test_guidance_finds_both_pass_regressions_within_450_tests(
    cli: Cli, narrow: ToyRepo, cache: Path, tmp_path: Path
) -> None:
    """head -> leaky adds two miscompiling passes. With divergence, mutation, the diff's
    hint and head's code coverage, both are new regressions within 450 tests (seeds 294 and
    381 find them). The passes are Python: head's worker measures them, and cases reach the
    lines the change added. Plain generation meets neither pair (LeakyRelu feeding a
    boundless Clip, Transpose feeding Softmax) in 600 tests: that comparison, guidance off
    against on in one run, is bench/regressions_found.py's (the narrowcc flips), not a test."""
    config = _config(tmp_path, narrow, cache, "head", "leaky")
    r, summary = _fuzz(cli, config, tmp_path / "out", 450)
    found = {f["signature"] for f in summary["findings"] if f["across"] == "new_regression"}
    assert r.code == 2 and summary["mutation"]["mutants"] > 0
    code = summary["code_coverage"]
    assert code["measured"] == 450 and code["files"] > 0 and code["changed_lines"] > 0
    assert 0 < code["changed_lines_reached"] <= code["changed_lines"] and code["cases_reaching_change"] > 0
    assert any("Softmax" in s and "Transpose" in s for s in found)
    assert any("LeakyRelu" in s and "Clip" in s for s in found)
