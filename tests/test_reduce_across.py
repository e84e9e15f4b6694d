"""`fuzzbot reduce MODEL --config CFG` on a real regression between two onnxruntime
releases: the model is judged on both builds, then reduced with base kept right and head
kept wrong at every step, and its repro tells the two releases apart."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from bot.findings.bundle import load_bundle
from tests import release_cases as rc
from tests.conftest import CliResult

Cli = Callable[..., CliResult]


def _with_decoy(case: rc.Case) -> rc.Case:
    """The case with a second output that has nothing to do with the bug: Abs(Neg(x))."""
    model, inputs = case
    graph = model.graph
    graph.node.extend([helper.make_node("Neg", ["x"], ["nx"]), helper.make_node("Abs", ["nx"], ["decoy"])])
    graph.output.append(helper.make_tensor_value_info("decoy", TensorProto.FLOAT, [3, 4]))
    onnx.checker.check_model(model)
    return model, inputs


def test_a_real_regression_is_reduced_across_both_releases(cli: Cli, tmp_path: Path) -> None:
    right, wrong = rc.REGRESSION
    model, inputs = _with_decoy(rc.rms_norm_vector_epsilon())
    onnx.save(model, str(tmp_path / "case.onnx"))
    np.savez(tmp_path / "case.npz", **inputs)  # type: ignore[arg-type]
    config = rc.pair_config(tmp_path, right, wrong)
    r = cli("reduce", str(tmp_path / "case.onnx"), "--config", str(config), "--budget", "3m")
    assert r.code == 0, r.err
    [bundle] = [p for p in (tmp_path / "case.reduced" / "findings").glob("*/reduced") if (p / "finding.json").is_file()]
    done = load_bundle(bundle)
    assert done.finding is not None
    assert done.finding.across == "new_regression", done.finding.across
    assert done.finding.kept == {"head": "wrong_result", "base": "pass"}, done.finding.kept
    ops = [n.op_type for n in done.model.graph.node]
    assert "Neg" not in ops and "Abs" not in ops and len(ops) < len(model.graph.node), ops
    assert f"every step keeping head wrong_result, base pass: {bundle / 'repro.py'}" in r.err
    repro = str(bundle / "repro.py")
    assert subprocess.run([str(rc.ort_python(wrong)), repro], capture_output=True, timeout=120).returncode == 1
    assert subprocess.run([str(rc.ort_python(right)), repro], capture_output=True, timeout=120).returncode == 0


def test_a_model_both_releases_get_right_is_refused_in_one_line(cli: Cli, tmp_path: Path) -> None:
    right, wrong = rc.REGRESSION
    model, inputs = rc._rms_norm(rc._floats("eps", [1], [1.0]))  # a (1,) epsilon is read right by both
    onnx.save(model, str(tmp_path / "case.onnx"))
    np.savez(tmp_path / "case.npz", **inputs)  # type: ignore[arg-type]
    r = cli("reduce", str(tmp_path / "case.onnx"), "--config", str(rc.pair_config(tmp_path, right, wrong)))
    assert r.code == 1
    assert r.err_lines[-1].startswith("error: ") and "pass across the sides, so there is nothing to reduce" in r.err
    assert "Traceback" not in r.err
