"""Two-commit regression campaigns on a real git history (tests/toy_repo.py), through
the config and the CLI only: a new regression found, reduced to the fusion pass's
trigger and bisected to its commit; a side that fails to build; a flaky side."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import pytest
import yaml

from tests.conftest import CliResult
from tests.toy_repo import BACKEND, TOY_OPS, ToyRepo, build_cache, toy_compiler_config, toy_repo

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

__all__ = ["build_cache", "toy_repo"]  # session fixtures: each toy commit is built once per run

Cli = Callable[..., CliResult]


def _config(tmp: Path, repo: ToyRepo, cache: Path, base: str = "fusion", head: str = "docs", **extra: Any) -> Path:
    compiler = toy_compiler_config(repo, base, head).model_dump(exclude_none=True)
    data = {
        "backend": BACKEND,
        "compiler": compiler,
        "cache_dir": str(cache.parent / "fuzzbot-cache"),
        "probe": False,
        "budget": "90s",
        "max_tests": 200,
        "generator": {"nodes": 6, "ops": TOY_OPS, "dtypes": ["float32"]},
        **extra,
    }
    path = tmp / "fuzzbot.yml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def campaign(toy_repo: ToyRepo, build_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CliResult]:
    """One campaign from the good commit (`fusion`) to the buggy head (`docs`), bisecting on request."""
    from bot.cli import main

    tmp = tmp_path_factory.mktemp("campaign")
    config = _config(tmp, toy_repo, build_cache, bisect=True)
    out = tmp / "out"
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["fuzz", "--config", str(config), "--out", str(out)])
    return out, CliResult(code, "", err.getvalue())


def test_a_campaign_from_the_good_commit_to_the_bad_head_finds_a_new_regression(
    campaign: tuple[Path, CliResult],
) -> None:
    out, r = campaign
    assert r.code == 2, r.err  # a PR check fails on new regressions
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"].get("new_regression", 0) >= 1, summary["counts"]
    assert "fixed" not in summary["counts"] and "persistent" not in summary["counts"]
    assert summary["sides"]["base"]["commit"] != summary["sides"]["head"]["commit"]
    finding = summary["findings"][0]
    assert finding["across"] == "new_regression" and finding["verdict"] == "wrong_result"
    assert finding["depends_on_optimization"] is True  # right at O0: the fusion pass is to blame
    base, head = summary["base"], summary["backend"]
    assert f"on {head['name']} {base['version']} → {head['version']}" in r.err  # the last line names both builds


def test_the_regression_is_reduced_to_the_fusion_trigger(campaign: tuple[Path, CliResult]) -> None:
    out, _ = campaign
    summary = json.loads((out / "summary.json").read_text())
    for ref in summary["findings"]:
        model = onnx.load(str(out / ref["reduced_path"] / "model.onnx"))
        ops = [n.op_type for n in model.graph.node]
        # The trigger: a Mul whose only use is the first operand of a Sub.
        assert ops == ["Mul", "Sub"], ops
        mul, sub = model.graph.node
        assert sub.input[0] == mul.output[0]
        # Found at float32 only; re-typed, it fails at every type the toy runs: the type is not part of its name
        assert ref["signature"] == "values in Sub[T](Mul[T](in[T],in[T]),in[T]) (T: any)"
    # Every seed that hit the bug reduced to the same graph: one finding, many occurrences.
    assert len(summary["findings"]) == 1
    assert summary["occurrences"][summary["findings"][0]["fingerprint"]] == summary["counts"]["new_regression"]


def test_the_campaign_bisected_the_regression_to_its_commit(
    campaign: tuple[Path, CliResult], toy_repo: ToyRepo
) -> None:
    out, _ = campaign
    ref = json.loads((out / "summary.json").read_text())["findings"][0]
    assert ref["first_bad"].split()[0] == toy_repo.sha("bug")
    steps = json.loads((out / ref["path"] / "bisect.json").read_text())["steps"]
    assert any(s["outcome"] == "skip" for s in steps)  # the broken build was stepped over


def test_summary_md_and_the_pr_comment_name_both_builds_and_the_culprit(
    campaign: tuple[Path, CliResult], toy_repo: ToyRepo
) -> None:
    from bot.github.findings import load_report
    from bot.github.render import pr_comment

    out, _ = campaign
    base, head, culprit = (toy_repo.sha(name)[:12] for name in ("fusion", "docs", "bug"))
    md = (out / "summary.md").read_text()
    assert re.search(rf"base toycc \S+ \(O1\) @ `{base}` → head toycc \S+ \(O1\) @ `{head}`", md), md[:400]
    row = next(line for line in md.splitlines() if "(new_regression)" in line)
    assert f"`{culprit}` kernels: simplify the fused" in row, row
    text = pr_comment(load_report(out))
    assert f"@ `{base}` → head " in text and f"@ `{head}`; " in text
    assert f"| first bad commit | `{culprit}` " in text


def test_fuzzbot_bisect_names_the_culprit_of_the_campaigns_finding(
    campaign: tuple[Path, CliResult], toy_repo: ToyRepo, build_cache: Path, cli: Cli, tmp_path: Path
) -> None:
    out, _ = campaign
    ref = json.loads((out / "summary.json").read_text())["findings"][0]
    config = _config(tmp_path, toy_repo, build_cache)
    r = cli("bisect", str(out / ref["path"]), "--good", "fusion", "--bad", "docs", "--config", str(config))
    assert r.code == 0, r.err
    assert toy_repo.sha("bug") in r.out and "first bad commit" in r.out.lower()


def test_a_side_that_fails_to_build_cannot_be_compared(
    toy_repo: ToyRepo, build_cache: Path, cli: Cli, tmp_path: Path
) -> None:
    config = _config(tmp_path, toy_repo, build_cache, head="broken")
    out = tmp_path / "out"
    r = cli("fuzz", "--config", str(config), "--out", str(out))
    errors = [line for line in r.err_lines if line.startswith("error:")]
    assert r.code == 1 and len(errors) == 1 and "Traceback" not in r.err
    assert errors[0].startswith("error: cannot compare: head") and "build.log" in errors[0]
    assert r.err_lines[0].startswith("base ")  # base was built (or reused) before head failed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cannot_compare"] and summary["tests"] == 0 and summary["findings"] == []
    assert not (out / "findings").exists()


def test_a_flaky_head_is_never_a_regression(toy_repo: ToyRepo, build_cache: Path, cli: Cli, tmp_path: Path) -> None:
    """Base and head are the same good commit, and head's worker perturbs every other run."""
    config = _config(tmp_path, toy_repo, build_cache, base="fusion", head="fixbuild", max_tests=6)
    out = tmp_path / "out"
    r = cli("fuzz", "--config", str(config), "--out", str(out), "--test-fault", "flaky")
    assert r.code == 0, r.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"].get("flaky", 0) >= 1 and "new_regression" not in summary["counts"]
    assert summary["findings"] == []


def test_a_regression_only_at_a_drawn_level_is_found_reduced_and_localized_there(
    toy_repo: ToyRepo, build_cache: Path, cli: Cli, tmp_path: Path
) -> None:
    """The campaign runs at O0, where the fusion bug cannot show, and draws each case's level
    from O0 and O1: the regression is found at O1 only, its finding names O1, its reduction
    runs at O1 (at O0 it would not reproduce and stay unreduced), and its localization asks
    the campaign's own O0 workers, which get it right."""
    backend = BACKEND.rsplit(":", 1)[0] + ":O0"
    generator = {"nodes": 4, "ops": ["Mul", "Sub", "Add"], "dtypes": ["float32"]}  # the trigger, often
    config = _config(
        tmp_path, toy_repo, build_cache, backend=backend, levels=["O0", "o1"], max_tests=150, generator=generator
    )
    out = tmp_path / "out"
    r = cli("fuzz", "--config", str(config), "--out", str(out))
    assert r.code == 2, r.err
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["levels"]) == {"O0", "O1"} and sum(summary["levels"].values()) == summary["tests"]
    assert min(summary["levels"].values()) >= summary["tests"] // 4  # both drawn, by seed
    findings = summary["findings"]
    assert findings and all(f["across"] == "new_regression" for f in findings)
    for ref in findings:
        finding = json.loads((out / ref["path"] / "finding.json").read_text())
        assert finding["spec"].endswith(":O1") and finding["backend"]["level"] == "O1"
        assert finding["localization"]["level"] == "O0" and finding["localization"]["depends_on_optimization"]
        assert ref["reduced_path"], ref  # reduced where it was found
        model = onnx.load(str(out / ref["reduced_path"] / "model.onnx"))
        assert [n.op_type for n in model.graph.node] == ["Mul", "Sub"]
        assert "level O1" in (out / ref["path"] / "repro.py").read_text()


def test_a_level_the_build_lacks_stops_the_campaign_in_one_line(
    toy_repo: ToyRepo, build_cache: Path, cli: Cli, tmp_path: Path
) -> None:
    config = _config(tmp_path, toy_repo, build_cache, levels=["O1", "O9"], max_tests=4)
    r = cli("fuzz", "--config", str(config), "--out", str(tmp_path / "out"))
    errors = [line for line in r.err_lines if line.startswith("error:")]
    assert r.code == 1 and len(errors) == 1 and "Traceback" not in r.err, r.err
    assert "levels: unknown level 'O9'" in errors[0] and "O0, O1" in errors[0]
