"""Generated cases for tests of the plumbing around backends (workers, adapters, venvs).

They are drawn from float32 ops that every backend here implements, so a failure in
those tests is a failure of fuzzbot's plumbing, not a finding about a backend, and
they stay stable while the generator grows new ops and dtypes.
"""

from __future__ import annotations

import contextlib

import numpy as np
import onnx
from onnx import TensorProto, helper

from generator.api import GenConfig, GeneratedCase, generate
from generator.dtypes import DType
from generator.values import NoValidValues

STABLE_OPS = ["Add", "Mul", "Sub", "Relu", "Sigmoid", "Tanh", "MatMul", "Conv", "Transpose", "Reshape", "Concat"]


def stable_cases(count: int, start: int = 0, nodes: int = 5) -> list[GeneratedCase]:
    """`count` cases from consecutive seeds from `start`, skipping seeds without valid values.
    Shapes stay constants and no edge is aimed at: every backend must run these as they are
    (TVM's Relax frontend declines most runtime shapes)."""
    cfg = GenConfig(
        nodes=nodes, ops=STABLE_OPS, dtypes=[DType.float32], feedback=False, runtime_shapes=0, edges=0, wide_types=0
    )
    cases: list[GeneratedCase] = []
    seed = start
    while len(cases) < count:
        with contextlib.suppress(NoValidValues):
            cases.append(generate(seed, cfg))
        seed += 1
    return cases


def unary_chain(ops: list[str]) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """`ops` one after another over a 2x3 float32 input of positive values (so Sqrt and Log
    are defined on each): every output wrong under the `perturb` fault, which gives a
    reduction nodes to remove and a kernel to blame."""
    names = ["x", *(f"t{i}" for i in range(len(ops) - 1)), "y"]
    nodes = [helper.make_node(op, [names[i]], [names[i + 1]]) for i, op in enumerate(ops)]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": np.linspace(0.5, 3.0, 6, dtype=np.float32).reshape(2, 3)}
