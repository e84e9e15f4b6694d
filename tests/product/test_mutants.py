"""A handful of mutants of a small compiler, made by the mutation library bench/mutants.py
uses (cosmic-ray) and judged as it judges them: a PR campaign, base against base plus one
mutation, from the compiler's own git history; a mutant is killed when a new_regression's
reduced model makes head execute the mutated function (measured by the worker's code
coverage). The compiler is toycc (tests/toycompiler): numpy kernels and a fusion pass."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.mutants import Mutant, enclosing, equivalence, mutate_source, named_test_files, population, reaches
from bot.findings.summary import in_output
from tests.conftest import CliResult
from tests.toy_repo import BACKEND, SOURCE, Builder

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

PASS = "toycc/passes.py"
KERNELS = "toycc/kernels.py"


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Builder:
    """toycc with its fusion pass and every kernel, as one commit `base`."""
    path = tmp_path_factory.mktemp("toycc")
    shutil.copytree(SOURCE, path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    repo = Builder(path)
    repo.git("init", "-q")
    repo.commit("base")
    repo.git("tag", "base")
    return repo


def _mutant(repo: Builder, file: str, operator: str, line_text: str) -> Mutant:
    """The first mutation of `operator` on the line holding `line_text`, committed on its own
    branch from base (bench.mutants makes every onnx2torch mutant the same way)."""
    places = [p for p in population([repo.path / file], repo.path) if p[1] == operator]
    source = (repo.path / file).read_text()
    lines = source.splitlines()
    file_, op, occurrence, line = next(p for p in places if line_text in lines[p[3] - 1])
    mutated = mutate_source(source, op, occurrence)
    assert mutated is not None
    function, span = enclosing(mutated, line)
    name = f"{op.split('/')[-1]}-{line}"
    repo.git("checkout", "-q", "-B", name, "base")
    (repo.path / file).write_text(mutated)
    repo.commit(f"mutant {name}")
    repo.git("checkout", "-q", "base")
    return Mutant(name, file_, op, occurrence, line, function, span, "tune")


Cli = Callable[..., CliResult]


def _campaign(cli: Cli, repo: Builder, head: str, tmp: Path, tests: int) -> tuple[Path, dict[str, Any]]:
    config = {
        "backend": BACKEND,
        "cache_dir": str(tmp.parent / "cache"),
        "compiler": {
            "repo": str(repo.path),
            "packages": ["numpy==2.4.6", "onnx==1.23.2", "setuptools", "wheel"],
            "build": ["pip install --no-build-isolation --no-deps ."],
            "base": {"ref": "base"},
            "head": {"ref": head},
        },
        "generator": {"ops": ["Add", "Sub", "Mul", "Sigmoid", "Relu", "Tanh", "Neg"], "dtypes": ["float32"]},
    }
    (tmp / "fuzzbot.yml").write_text(yaml.safe_dump(config))
    out = tmp / "out"
    r = cli(
        "fuzz", "--config", str(tmp / "fuzzbot.yml"), "--out", str(out), "--max-tests", str(tests), "--budget", "10m"
    )
    assert r.code in (0, 2), r.err
    return out, json.loads((out / "summary.json").read_text())


def _killed(out: Path, summary: dict[str, Any], mutant: Mutant) -> bool:
    head = Path(summary["sides"]["head"]["python"])
    for ref in summary["findings"]:
        if ref["across"] != "new_regression":
            continue
        model = in_output(out, ref["reduced_path"] or ref["path"]) / "model.onnx"
        if reaches(head, BACKEND, "toycc", model, mutant):
            return True
    return False


@pytest.mark.parametrize(
    ("file", "operator", "line"),
    [
        (KERNELS, "core/NumberReplacer", "return np.asarray(1.0 / (1.0 + np.exp(-x))"),
        (KERNELS, "core/ReplaceComparisonOperator_Gt_Lt", "a * b + c if sign > 0"),
        (PASS, "core/ReplaceComparisonOperator_NotEq_Eq", "if len(users) != 1"),
    ],
)
def test_a_mutant_that_changes_what_a_model_computes_is_killed(
    cli: Cli, toy: Builder, tmp_path: Path, file: str, operator: str, line: str
) -> None:
    mutant = _mutant(toy, file, operator, line)
    out, summary = _campaign(cli, toy, mutant.id, tmp_path, 150)
    assert _killed(out, summary, mutant), (mutant, summary["counts"])


def test_an_equivalent_mutant_is_reported_as_nothing(cli: Cli, toy: Builder, tmp_path: Path) -> None:
    """`sign >= 0` for `sign > 0`: sign is 1 or -1, so no model tells them apart, and no
    regression may be reported."""
    mutant = _mutant(toy, KERNELS, "core/ReplaceComparisonOperator_Gt_GtE", "a * b + c if sign > 0")
    out, summary = _campaign(cli, toy, mutant.id, tmp_path, 150)
    assert not _killed(out, summary, mutant)
    assert summary["counts"].get("new_regression", 0) == 0, summary["counts"]


def test_a_survivor_is_equivalent_only_once_both_searches_ran_and_neither_told_it_apart() -> None:
    """A survivor whose own-tests run killed nothing and whose long campaign was skipped is
    undecided: counting it as equivalent would lift the kill rate on a search never run."""
    assert equivalence(tests_kill=True, long_campaign=None) == "not_equivalent"
    assert equivalence(tests_kill=False, long_campaign="killed") == "not_equivalent"
    assert equivalence(tests_kill=False, long_campaign="survived") == "equivalent"
    assert equivalence(tests_kill=False, long_campaign=None) == "undecided"


def test_the_own_named_test_files_a_mutant_are_its_module_s_file_and_a_helper_has_none(tmp_path: Path) -> None:
    """`equiv --own-tests named` runs the converter's test file for the mutated module on
    base and on the mutant; a shared helper has no such file, and no test is claimed."""
    folder = tmp_path / "tests" / "node_converters"
    folder.mkdir(parents=True)
    for name in ("mean_test.py", "mean_variance_test.py", "reduce_test.py"):
        (folder / name).write_text("")

    def mutant(file_: str) -> Mutant:
        return Mutant("m", file_, "core/NumberReplacer", 0, 1, "<module>", (1, 1), "report")

    assert named_test_files(tmp_path, mutant("onnx2torch/node_converters/mean.py")) == [
        "tests/node_converters/mean_test.py"
    ]
    assert named_test_files(tmp_path, mutant("onnx2torch/utils/dtype.py")) == []
