"""`fuzzbot reduce MODEL --config CFG` on a real regression between two onnxruntime
releases: the model is judged on both builds, then reduced with base kept right and head
kept wrong at every step, and its repro tells the two releases apart."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from bot.findings.bundle import Bundle, load_bundle
from tests import release_cases as rc
from tests.conftest import CliResult

pytestmark = [pytest.mark.worker, pytest.mark.release]

Cli = Callable[..., CliResult]


def _with_decoy(case: rc.Case) -> rc.Case:
    """The case with a second output that has nothing to do with the bug: Abs(Neg(x))."""
    model, inputs = case
    graph = model.graph
    graph.node.extend([helper.make_node("Neg", ["x"], ["nx"]), helper.make_node("Abs", ["nx"], ["decoy"])])
    graph.output.append(helper.make_tensor_value_info("decoy", TensorProto.FLOAT, [3, 4]))
    onnx.checker.check_model(model)
    return model, inputs


def _reduce_across(cli: Cli, tmp_path: Path, case: rc.Case, base: str, head: str) -> tuple[Path, Bundle, CliResult]:
    """`fuzzbot reduce case.onnx --config` between two releases: the reduced bundle, loaded."""
    model, inputs = case
    onnx.save(model, str(tmp_path / "case.onnx"))
    np.savez(tmp_path / "case.npz", **inputs)  # type: ignore[arg-type]
    config = rc.pair_config(tmp_path, base, head)
    r = cli("reduce", str(tmp_path / "case.onnx"), "--config", str(config), "--budget", "3m")
    assert r.code == 0, r.err
    [bundle] = [p for p in (tmp_path / "case.reduced" / "findings").glob("*/reduced") if (p / "finding.json").is_file()]
    return bundle, load_bundle(bundle), r


def test_a_real_regression_is_reduced_across_both_releases(cli: Cli, tmp_path: Path) -> None:
    right, wrong = rc.REGRESSION
    model, inputs = _with_decoy(rc.rms_norm_vector_epsilon())
    bundle, done, r = _reduce_across(cli, tmp_path, (model, inputs), right, wrong)
    assert done.finding is not None
    assert done.finding.across == "new_regression", done.finding.across
    # The fusion is at `all`: every step also kept head right at its lowest level.
    assert done.finding.kept == {"head": "wrong_result", "base": "pass", "head at disable": "pass"}, done.finding.kept
    ops = [n.op_type for n in done.model.graph.node]
    assert "Neg" not in ops and "Abs" not in ops and len(ops) < len(model.graph.node), ops
    assert f"every step keeping head wrong_result, base pass, head at disable pass: {bundle / 'repro.py'}" in r.err
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


def _side_by_side(*cases: rc.Case) -> rc.Case:
    """One model holding each case as its own branch, names prefixed b0_, b1_, ..."""
    nodes: list[onnx.NodeProto] = []
    inputs: list[onnx.ValueInfoProto] = []
    outputs: list[onnx.ValueInfoProto] = []
    inits: list[onnx.TensorProto] = []
    values: dict[str, np.ndarray] = {}
    for i, (model, given) in enumerate(cases):
        g = onnx.compose.add_prefix(model, f"b{i}_").graph
        nodes += g.node
        inputs += g.input
        outputs += g.output
        inits += g.initializer
        values |= {f"b{i}_{k}": v for k, v in given.items()}
    graph = helper.make_graph(nodes, "side_by_side", inputs, outputs, initializer=inits)
    merged = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(merged, full_check=True)
    return merged, values


def test_a_regression_beside_a_different_base_failure_is_a_regression_once_reduced(cli: Cli, tmp_path: Path) -> None:
    """1.19.2 gets a float16 Clip wrong (fixed in 1.20.1); 1.20.1 folds a zero Pad into a
    MaxPool (new in 1.20.1). On the model holding both, each build fails, in different
    outputs: once labelled persistent, it is a new regression once head's failure is
    reduced and base runs the reduced model right. The finding says base failed differently."""
    base, head = rc.FIX_CLIP_FP16[0], rc.REGRESSION_PAD_FUSION[1]
    case = _side_by_side(rc.clip_fp16_min_only(), rc.maxpool_after_zero_pad())
    bundle, done, _ = _reduce_across(cli, tmp_path, case, base, head)
    checked = cli("check", "--config", str(tmp_path / "fuzzbot.yml"), "--json", str(tmp_path / "case.onnx"))
    (found,) = json.loads(checked.out)["cases"]
    assert found["verdict"] == "persistent" and found["note"].startswith("base fails differently"), found
    assert done.finding is not None and done.finding.across == "new_regression", done.finding
    assert bundle.parent.name.startswith("new_regression-") and "base fails differently" in done.finding.note
    assert [n.op_type for n in done.model.graph.node] == ["Pad", "MaxPool"]
    repro = str(bundle / "repro.py")
    assert subprocess.run([str(rc.ort_python(head)), repro], capture_output=True, timeout=120).returncode == 1
    assert subprocess.run([str(rc.ort_python(base)), repro], capture_output=True, timeout=120).returncode == 0


def test_a_persistent_bug_is_reduced_with_both_builds_failing_it(cli: Cli, tmp_path: Path) -> None:
    """A persistent finding once reduced onto a trigger only head got wrong: its repro passed
    on base, whose label says it fails. Every step now keeps base failing the same way."""
    base, head = rc.NORM_POW_MISCOMPILE[1], rc.REGRESSION_RAISES[1]
    bundle, done, _ = _reduce_across(cli, tmp_path, _with_decoy(rc.layernorm_pattern_sub_swapped()), base, head)
    assert done.finding is not None and done.finding.across == "persistent", done.finding
    assert done.finding.kept["base"] == "wrong_result" and done.finding.kept["head"] == "wrong_result"
    repro = str(bundle / "repro.py")
    for version in (base, head):
        assert subprocess.run([str(rc.ort_python(version)), repro], capture_output=True, timeout=120).returncode == 1
