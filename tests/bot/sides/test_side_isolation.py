"""Each side runs its own build, in the Action's own layout.

The README's PR setup runs fuzzbot inside the compiler's checkout (`repo: .`), which is
head. A worker that found modules in the working folder would make base import head's
source, every regression would come out `persistent`, and the PR check would pass. Here
the toy compiler's real git history (tests/toy_repo.py, a planted head-only wrong result
in its fusion pass) is fuzzed and checked from inside its checkout and from outside it,
and both must find the regression as `new_regression`; a side whose compiler comes from
anywhere but its own build is refused before any test.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import yaml

from backends.client import BackendUnavailable, WorkerClient
from backends.results import BackendInfo
from backends.spec import parse_backend
from bot.sides.isolation import BuildRoots, IsolationError, check_isolation
from bot.sides.probe import cache_path
from tests.conftest import CliResult
from tests.toy_repo import (
    BACKEND,
    TOY_OPS,
    ToyRepo,
    build_cache,
    plain_case,
    toy_compiler_config,
    toy_repo,
    trigger_case,
)

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

__all__ = ["build_cache", "toy_repo"]  # session fixtures: each toy commit is built once per run

Cli = Callable[..., CliResult]


def _config(tmp: Path, repo: str, toy: ToyRepo, cache: Path, **extra: Any) -> Path:
    compiler = toy_compiler_config(toy).model_dump(exclude_none=True)
    compiler["repo"] = repo
    compiler.update(extra.pop("compiler", {}))
    data = {
        "backend": BACKEND,
        "compiler": compiler,
        "cache_dir": str(cache.parent / "fuzzbot-cache"),
        "probe": False,
        "budget": "90s",
        "max_tests": 150,
        "generator": {"nodes": 6, "ops": TOY_OPS, "dtypes": ["float32"]},
        **extra,
    }
    path = tmp / "fuzzbot.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def _save(tmp: Path, name: str, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> Path:
    path = tmp / f"{name}.onnx"
    onnx.save(model, str(path))
    np.savez(tmp / f"{name}.npz", **inputs)  # type: ignore[arg-type]
    return path


@pytest.fixture
def in_checkout(toy_repo: ToyRepo, monkeypatch: pytest.MonkeyPatch) -> ToyRepo:
    """The Action's layout: the working folder is the compiler's checkout, at head."""
    monkeypatch.chdir(toy_repo.path)
    return toy_repo


def test_a_campaign_inside_the_compiler_checkout_finds_the_new_regression(
    in_checkout: ToyRepo, build_cache: Path, cli: Cli, tmp_path: Path
) -> None:
    config = _config(tmp_path, ".", in_checkout, build_cache)
    out = tmp_path / "out"
    r = cli("fuzz", "--config", str(config), "--out", str(out))
    assert r.code == 2, r.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"].get("new_regression", 0) >= 1, summary["counts"]
    assert "persistent" not in summary["counts"], summary["counts"]
    # Each side imported the compiler from its own build, not from the checkout it ran in.
    for side in ("base", "head"):
        where = Path(summary["imports"][side]["toycc"])
        assert summary["sides"][side]["commit"][:12] in str(where), where
        assert not where.is_relative_to(in_checkout.path)


@pytest.mark.parametrize("inside", [True, False], ids=["inside-checkout", "outside"])
def test_check_names_the_planted_bug_a_new_regression_from_anywhere(
    toy_repo: ToyRepo, build_cache: Path, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inside: bool
) -> None:
    trigger, plain = trigger_case(), plain_case()
    bug = _save(tmp_path, "trigger", trigger.model, trigger.inputs)
    fine = _save(tmp_path, "plain", plain.model, plain.inputs)
    config = _config(tmp_path, "." if inside else str(toy_repo.path), toy_repo, build_cache)
    monkeypatch.chdir(toy_repo.path if inside else tmp_path)
    r = cli("check", "--config", str(config), "--json", str(bug), str(fine))
    assert r.code == 2, r.err
    report = json.loads(r.out)
    verdicts = {Path(c["model"]).name: c["verdict"] for c in report["cases"]}
    assert verdicts == {"trigger.onnx": "new_regression", "plain.onnx": "pass"}, report
    case = report["cases"][0]
    assert case["inputs"] == "trigger.npz" and case["reference"] == "torch"
    assert case["sides"]["base"]["verdict"] == "pass" and case["sides"]["head"]["verdict"] == "wrong_result"
    assert report["counts"] == {"new_regression": 1, "pass": 1}
    only_fine = cli("check", "--config", str(config), str(fine))
    assert only_fine.code == 0 and "plain.onnx: pass" in only_fine.out


def _divided(tmp_path: Path) -> Path:
    """The trigger behind a Div: Mul(x / y, y), then the Sub."""
    trigger = trigger_case()
    model = onnx.ModelProto()
    model.CopyFrom(trigger.model)
    div = onnx.helper.make_node("Div", ["x", "y"], ["q"])
    model.graph.node.insert(0, div)
    model.graph.node[1].input[0] = "q"
    onnx.checker.check_model(model)
    return _save(tmp_path, "divided", model, trigger.inputs)


def test_a_model_base_declines_and_head_runs_wrong_is_new_in_head_not_a_regression(
    toy_repo: ToyRepo, build_cache: Path, cli: Cli, tmp_path: Path
) -> None:
    """Base (`readme`) has no Div kernel yet; head (`docs`) added it and has the fused
    Mul-Sub bug: a Div in front of the trigger makes base decline the model."""
    path = _divided(tmp_path)
    config = _config(tmp_path, str(toy_repo.path), toy_repo, build_cache, compiler={"base": {"ref": "readme"}})
    r = cli("check", "--config", str(config), "--json", str(path))
    assert r.code == 2, r.err
    (found,) = json.loads(r.out)["cases"]
    assert found["verdict"] == "new_in_head" and "base declines the model" in found["note"], found
    assert found["sides"]["base"]["verdict"] == "unsupported" and found["sides"]["head"]["verdict"] == "wrong_result"


def test_new_in_head_whose_reduced_trigger_base_raises_on_stays_new_in_head(
    toy_repo: ToyRepo, build_cache: Path, cli: Cli, tmp_path: Path
) -> None:
    """Base (`unwritten`) declines the Div, so the model is `new_in_head` at first; reduced to
    head's Mul-Sub trigger, base raises on it (its own bug) where head computes wrong values.
    Base gave no answer to share head's wrong one, and the repro could only say on base that
    it cannot tell: head's bug stays new in head (onnxruntime 1.17.3 refuses a complex STFT
    that 1.18.0 computes wrong; labelled `persistent`, its repro exited 3 on base)."""
    path = _divided(tmp_path)
    config = _config(tmp_path, str(toy_repo.path), toy_repo, build_cache, compiler={"base": {"ref": "unwritten"}})
    r = cli("reduce", str(path), "--config", str(config), "--budget", "2m")
    assert r.code == 0, r.err
    summary = json.loads((tmp_path / "divided.reduced" / "summary.json").read_text())
    [found] = summary["findings"]
    assert found["across"] == "new_in_head", (found["across"], r.err[-1500:])
    assert found["reduced_path"], found
    reduced = json.loads((tmp_path / "divided.reduced" / found["reduced_path"] / "finding.json").read_text())
    assert reduced["verdict"] == "wrong_result" and reduced["side"] == "head"
    ops = [
        n.op_type
        for n in onnx.load(str(tmp_path / "divided.reduced" / found["reduced_path"] / "model.onnx")).graph.node
    ]
    assert "Div" not in ops, ops


def test_a_build_that_links_in_the_checkout_is_refused_before_any_test(
    toy_repo: ToyRepo, build_cache: Path, cli: Cli, tmp_path: Path
) -> None:
    """A recipe that puts the user's own checkout on each side's path (as a develop install
    of the wrong tree would) instead of building the side's commit: both sides would import
    one copy, so every regression would look persistent."""
    link = f"import site; open(site.getsitepackages()[0] + '/toycc-checkout.pth', 'w').write({str(toy_repo.path)!r})"
    recipe = {"build": [f'python -c "{link}"']}
    config = _config(tmp_path, str(toy_repo.path), toy_repo, build_cache, compiler=recipe)
    out = tmp_path / "out"
    r = cli("fuzz", "--config", str(config), "--out", str(out))
    errors = [line for line in r.err_lines if line.startswith("error:")]
    assert r.code == 1 and len(errors) == 1 and "Traceback" not in r.err, r.err
    assert errors[0].startswith(f"error: cannot compare: side base imports toycc from {toy_repo.path}")
    assert "not from its build" in errors[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cannot_compare"] and summary["tests"] == 0


def test_a_worker_never_imports_from_its_working_folder_or_pythonpath(
    toy_repo: ToyRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From inside the checkout, with the checkout on PYTHONPATH too, an interpreter that
    has no build of the compiler cannot import it: the worker sees its own env only."""
    monkeypatch.chdir(toy_repo.path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(toy_repo.path), "", "."]))
    with pytest.raises(BackendUnavailable, match="toycc"):
        WorkerClient(parse_backend(BACKEND)).start()


def test_a_worker_reports_where_the_system_under_test_came_from() -> None:
    with WorkerClient(parse_backend("onnxruntime")) as client:
        origin = Path(client.modules["onnxruntime"])
    import onnxruntime

    assert origin == Path(onnxruntime.__file__).resolve()
    assert "backends" not in client.modules and "numpy" not in client.modules


def test_the_isolation_check_names_the_side_the_module_and_the_file(tmp_path: Path) -> None:
    own, shared, stray = tmp_path / "build-a", tmp_path / "packages", tmp_path / "checkout"
    roots = BuildRoots(own, shared)
    fine = {"toycc": str(own / "venv" / "toycc" / "__init__.py"), "numpy": str(shared / "numpy" / "__init__.py")}
    check_isolation("base", fine, roots, ("toycc",))
    with pytest.raises(IsolationError, match=r"side base imports toycc from .*checkout.*, not from its build"):
        check_isolation("base", {"toycc": str(stray / "toycc" / "__init__.py")}, roots, ("toycc",))
    with pytest.raises(IsolationError, match=r"imports toycc from .*packages"):
        check_isolation("base", {"toycc": str(shared / "toycc" / "__init__.py")}, roots, ("toycc",))
    with pytest.raises(IsolationError, match=r"imports helper from .*checkout.*not from its build or the shared"):
        check_isolation("head", {"helper": str(stray / "helper.py")}, roots, ("toycc",))


def test_two_builds_of_one_release_never_share_a_support_probe(tmp_path: Path) -> None:
    info = BackendInfo(name="toycc", level="O1", version="0.1.0", commit=None, executable="/x/python")
    base, head = (cache_path(tmp_path, info, 17, f"{sha}-recipe") for sha in ("aaaaaaaaaaaa", "bbbbbbbbbbbb"))
    assert base != head
    other = BackendInfo(name="toycc", level="O1", version="0.1.0", commit=None, executable="/y/python")
    assert cache_path(tmp_path, info, 17) != cache_path(tmp_path, other, 17)
