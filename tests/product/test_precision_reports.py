"""Precision-scale findings have their own class in every report: real onnxruntime computes
a float64 Shrink in float32 (off by about 5e-8, past float64's 1e-8 bound), and drops
MeanVarianceNormalization's epsilon (NaN over a constant group). Both are wrong results a
maintainer should see; only the first reads as precision."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from bot.github.findings import load_report
from bot.github.render import issue_body, issue_title, pr_comment
from tests.conftest import CliResult

pytestmark = [pytest.mark.worker]


def _model(node: onnx.NodeProto, dtype: int, shape: list[int]) -> onnx.ModelProto:
    x, y = (helper.make_tensor_value_info(n, dtype, shape) for n in ("x", "y"))
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_float64_op_computed_in_float32_is_listed_as_precision_and_a_wrong_result_is_not(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    shrink = _model(helper.make_node("Shrink", ["x"], ["y"], bias=0.1, lambd=0.3), TensorProto.DOUBLE, [64])
    onnx.save(shrink, str(tmp_path / "shrink64.onnx"))
    mvn = tmp_path / "mvn"
    mvn.mkdir()
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[0, 2, 3])
    onnx.save(_model(node, TensorProto.FLOAT, [1, 2, 3, 3]), str(mvn / "model.onnx"))
    np.savez(mvn / "inputs.npz", x=np.full((1, 2, 3, 3), 0.5, np.float32))
    (tmp_path / "fuzzbot.yml").write_text("backend: onnxruntime:all\n")
    out = tmp_path / "out"
    config = str(tmp_path / "fuzzbot.yml")
    r = cli("check", "--config", config, "--out", str(out), str(tmp_path / "shrink64.onnx"), str(mvn / "model.onnx"))
    assert r.code in (0, 2), r.err
    report = load_report(out)
    by_op = {("Shrink" if "Shrink" in i.ref.signature else "MVN"): i for i in report.items}
    assert by_op["Shrink"].ref.precision == "float32" and by_op["MVN"].ref.precision is None
    comparison = by_op["Shrink"].finding.comparison if by_op["Shrink"].finding else None
    assert comparison is not None
    (wrong,) = [o for o in comparison.outputs if o.mismatch]
    assert wrong.ulps is not None and wrong.bound_ulps is not None and wrong.ulps > wrong.bound_ulps
    comment = pr_comment(report)
    listed, _, apart = comment.partition("**Precision-scale: 1 finding(s)**")
    assert "MeanVarianceNormalization" in listed and "Shrink" not in listed
    assert "Shrink" in apart and "MeanVarianceNormalization" not in apart
    assert "1 precision-scale, listed below" in listed
    assert issue_title(by_op["Shrink"]).startswith("[fuzzbot] onnxruntime: wrong_result (precision: float32)")
    assert "precision" not in issue_title(by_op["MVN"])
    body = issue_body(by_op["Shrink"], report)
    assert "| precision | wrong beyond the bound, but within 16 roundings of float32" in body
    assert f"ULPs of float64 at the output's scale where the bound allows {wrong.bound_ulps:.3g}" in body
    rows = [line for line in (out / "summary.md").read_text().splitlines() if "Shrink" in line]
    assert any("precision: float32" in row for row in rows)
