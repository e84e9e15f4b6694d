"""Float16 sums a backend rounds at every step are within bounds; a wrong sum is not.

TVM computes a float16 CumSum and ReduceSum with every partial sum rounded to float16;
torch sums in float32 and rounds once. On values whose partial sums grow large and then
cancel, the two differ far beyond float16's tolerance of the (small) result, and a TVM
0.26 campaign reported such a CumSum as wrong. Run on the real TVM and onnxruntime.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from backends.client import BackendUnavailable, WorkerClient
from backends.spec import parse_backend
from oracles.accumulation import float16_accumulations, stepwise_reading
from oracles.case import CaseEvidence
from oracles.verdict import Verdict

pytestmark = [pytest.mark.worker]

F16 = TensorProto.FLOAT16


def _cancelling() -> np.ndarray:
    """256 values in [0.1, 1], then nearly their negatives: partial sums reach ~140, where a
    float16 ulp is 0.125, and end near 0."""
    rng = np.random.default_rng(0)
    a = rng.uniform(0.1, 1.0, 256)
    return np.concatenate([a, -rng.permutation(a) * 1.001]).astype(np.float16)


def _model(op: str) -> onnx.ModelProto:
    if op == "CumSum":
        nodes, out_shape = [helper.make_node("CumSum", ["x", "axis"], ["y"])], [512]
    else:
        nodes, out_shape = [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)], []
    axis = helper.make_tensor("axis", TensorProto.INT64, [], [0])
    graph = helper.make_graph(
        nodes,
        "sum",
        [helper.make_tensor_value_info("x", F16, [512])],
        [helper.make_tensor_value_info("y", F16, out_shape)],
        [axis],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="module")
def tvm() -> Iterator[WorkerClient]:
    client = WorkerClient(parse_backend("tvm:O0"), sys.executable, 120)
    try:
        client.start()
    except BackendUnavailable as e:
        pytest.skip(f"tvm: {e}")
    yield client
    client.close()


@pytest.mark.parametrize("op", ["CumSum", "ReduceSum"])
def test_a_float16_sum_rounded_at_every_step_is_within_bounds(tvm: WorkerClient, op: str) -> None:
    model, x = _model(op), {"x": _cancelling()}
    result = tvm.run(model.SerializeToString(), x)
    ev = CaseEvidence.compute(model, x)
    assert ev.reference is not None
    step = stepwise_reading(model, x)
    assert step is not None
    # TVM's sum is the step-by-step one, and far from torch's at the tolerance of the result.
    np.testing.assert_array_equal(result.outputs["y"], step["y"])
    assert np.abs(result.outputs["y"].astype(np.float64) - ev.reference["y"]).max() > 0.05
    assert ev.judge(result).verdict is Verdict.pass_


def test_a_wrong_float16_sum_is_still_wrong() -> None:
    """The real bug of the family: a sum off beyond both readings (a perturbed first element,
    where torch's sum and the step-by-step one agree) is a wrong result."""
    model, x = _model("CumSum"), {"x": _cancelling()}
    with WorkerClient(parse_backend("onnxruntime:all"), sys.executable, 60, fault={"kind": "perturb"}) as ort:
        result = ort.run(model.SerializeToString(), x)
    judged = CaseEvidence.compute(model, x).judge(result)
    assert judged.verdict is Verdict.wrong_result
    assert judged.comparison is not None and judged.comparison.outputs[0].first_bad_index == [0]


def test_only_float16_accumulations_are_read_step_by_step() -> None:
    assert list(float16_accumulations(_model("CumSum"))) == [0]
    wide = _model("ReduceSum")
    wide.graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT
    wide.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    assert float16_accumulations(wide) == {}
