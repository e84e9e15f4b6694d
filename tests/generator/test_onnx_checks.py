"""onnx's checker and shape inference in their helper process (generator.onnx_checks): the
same answers and errors as onnx in-process, and a crash of onnx's C++ that costs one call,
read as an invalid model, where it once took a whole campaign down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from generator import onnx_checks
from generator.onnx_checks import CRASH_ON, OnnxCrashed
from tests.paths import ROOT


def relu_then_add() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, "n"])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def mismatched_add() -> onnx.ModelProto:
    """Add of [2, 3] and [4]: no broadcast, which strict inference refuses."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])],
        "g",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_the_helper_answers_as_onnx_does_in_process() -> None:
    model = relu_then_add()
    for options in ({}, {"strict_mode": True, "data_prop": True}):
        assert onnx_checks.infer_shapes(model, **options) == onnx.shape_inference.infer_shapes(model, **options)
    onnx_checks.check_model(onnx_checks.infer_shapes(model), full_check=True)  # no error, as in-process
    with pytest.raises(onnx.shape_inference.InferenceError, match=r"broadcast|Incompatible"):
        onnx_checks.infer_shapes(mismatched_add(), strict_mode=True)
    broken = relu_then_add()
    broken.graph.node[1].input[0] = "nowhere"
    with pytest.raises(onnx.checker.ValidationError, match="nowhere") as there:
        onnx_checks.check_model(broken)
    with pytest.raises(onnx.checker.ValidationError) as here:
        onnx.checker.check_model(broken)
    assert str(there.value) == str(here.value)


def test_an_answer_is_a_copy_the_caller_may_change() -> None:
    first = onnx_checks.infer_shapes(relu_then_add())
    first.graph.node[0].op_type = "Changed"
    assert onnx_checks.infer_shapes(relu_then_add()).graph.node[0].op_type == "Relu"


def test_a_crash_in_onnx_costs_one_call_that_reads_as_an_invalid_model() -> None:
    """A real SIGSEGV in the helper (the test-only trigger): the call raises what the
    callers catch for an invalid model, the crash is counted, and the next call gets a
    fresh helper. In-process, the same crash would have ended the interpreter."""
    script = textwrap.dedent(
        """
        import json, onnx
        from generator import onnx_checks
        from tests.generator.test_onnx_checks import relu_then_add, mismatched_add
        caught = []
        for catch in (onnx.shape_inference.InferenceError, onnx.checker.ValidationError):
            try:
                onnx_checks.infer_shapes(relu_then_add(), strict_mode=True)
            except catch as e:
                caught.append(type(e).__name__ + ": " + str(e))
        model = mismatched_add()
        model.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 3
        inferred = onnx_checks.infer_shapes(model, strict_mode=True)
        print(json.dumps({"caught": caught, "crashes": onnx_checks.crashes(),
                          "after": [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim]}))
        """
    )
    env = {**os.environ, CRASH_ON: "Relu", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(answer["caught"]) == 2 and all(c.startswith("OnnxCrashed: ") for c in answer["caught"])
    assert "crashed" in answer["caught"][0]
    assert answer["crashes"] == 1, "the second ask of the same model is answered from the cache"
    assert answer["after"] == [2, 3]
    assert issubclass(OnnxCrashed, onnx.shape_inference.InferenceError)
    assert issubclass(OnnxCrashed, onnx.checker.ValidationError)


@pytest.mark.worker
@pytest.mark.campaign
def test_a_campaign_whose_onnx_crashes_on_an_op_finishes_and_counts_the_crashes(tmp_path: Path) -> None:
    """onnx's C++ dies on every model with a Relu in it: generation's checks of such models
    fail as invalid ones do, the campaign finishes with its summary, and counts them."""
    config = tmp_path / "fuzzbot.yml"
    config.write_text(
        "backend: onnxruntime\ngeneration_processes: 0\ngenerator:\n  nodes: 4\n  ops: [Relu, Add, Mul, Sigmoid]\n"
    )
    out = tmp_path / "out"
    env = {**os.environ, CRASH_ON: "Relu", "PYTHONPATH": str(ROOT)}
    args = ["fuzz", "--config", str(config), "--max-tests", "15", "--budget", "90s", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", *args, "--cache-dir", str(ROOT / ".fuzzbot-cache")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=240,
    )
    assert done.returncode in (0, 2), done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["onnx_crashes"] >= 1, summary.get("dropped")
    assert summary["tests"] >= 15
    assert f"| onnx's checker crashed (models read as invalid) | {summary['onnx_crashes']} |" in (
        (out / "summary.md").read_text()
    )
