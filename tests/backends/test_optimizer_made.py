"""A refusal of a node the build's optimizer made is the optimizer's bug, not a declared
limit, whatever the build calls the node; a refusal of the model's own node is a limit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from backends.adapters.rewrites import node_names
from backends.client import WorkerClient
from backends.results import Status
from backends.spec import parse_backend
from bot.findings.repro import render_repro
from tests import release_cases as rc

pytestmark = [pytest.mark.worker, pytest.mark.release]

OLD = "1.17.3"
"""Calls its float64 QuickGelu fusion `QuickGelu`, where 1.20 and later say `<node>/QuickGeluFusion/`."""


def _repro_exit(model: onnx.ModelProto, inputs: dict[str, np.ndarray], tmp: Path) -> int:
    """The crash repro of the case, run by the release's own interpreter (no fuzzbot there)."""
    path = tmp / "repro.py"
    path.write_text(render_repro(model, inputs, {}, parse_backend("onnxruntime:all"), "case"))
    return subprocess.run([str(rc.ort_python(OLD)), str(path)], capture_output=True, timeout=120).returncode


def _status(model: onnx.ModelProto, inputs: dict[str, np.ndarray], level: str) -> tuple[Status, str]:
    with WorkerClient(parse_backend(f"onnxruntime:{level}"), str(rc.ort_python(OLD)), 30.0) as client:
        result = client.run(model.SerializeToString(), inputs)
    return result.status, result.message


def test_a_kernel_missing_for_a_fused_node_is_an_error_at_any_name(tmp_path: Path) -> None:
    """And its repro says BUG (1), as the campaign judged it; it said it could not tell."""
    model, inputs = rc.quick_gelu_float64()
    status, message = _status(model, inputs, "all")
    assert "node:'QuickGelu'" in message and "QuickGeluFusion" not in message, message
    assert status is Status.error, message
    assert _status(model, inputs, "disable")[0] is Status.ok
    assert _repro_exit(model, inputs, tmp_path) == 1


def test_a_kernel_missing_for_the_models_own_node_is_declined(tmp_path: Path) -> None:
    """Softsign has no float64 kernel in 1.17.3; the message names the model's node."""
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2])
    graph = helper.make_graph([helper.make_node("Softsign", ["x"], ["y"], name="n0")], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    assert node_names(model.SerializeToString()) == {"n0"}
    status, message = _status(model, {"x": np.array([0.5, -2.0])}, "all")
    assert "node with name 'n0'" in message and status is Status.unsupported, message
    assert _repro_exit(model, {"x": np.array([0.5, -2.0])}, tmp_path) == 3


def test_a_models_own_node_the_optimizer_renamed_is_still_declined(tmp_path: Path) -> None:
    """1.17.3 folds an If on a constant condition and calls its branch's Cos
    `_if_else_branch_Cos`, a name the model does not have; Cos has no float64 kernel there.
    The op is the model's own: a declared limit, as a campaign's finding showed when node
    names alone were asked."""
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2])
    branch = {
        name: helper.make_graph(
            [helper.make_node(op, ["x"], [name[0]], name=f"{name}_n0")],
            name,
            [],
            [helper.make_tensor_value_info(name[0], TensorProto.DOUBLE, [2])],
        )
        for name, op in (("then", "Neg"), ("else", "Cos"))
    }
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch["then"], else_branch=branch["else"], name="n0")
    cond = helper.make_tensor("c", TensorProto.BOOL, [], [False])
    graph = helper.make_graph([node], "g", [x], [y], [cond])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    inputs = {"x": np.array([0.5, 1.0])}
    status, message = _status(model, inputs, "all")
    assert "'_if_else_branch_Cos'" in message and status is Status.unsupported, message
    assert _repro_exit(model, inputs, tmp_path) == 3
