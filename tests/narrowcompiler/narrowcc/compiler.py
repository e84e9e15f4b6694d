"""compile_model: check every node against the support list, run the passes, bind the kernels."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort

from .passes import PASSES
from .support import SUPPORTED

LEVELS = ("O0", "O1")


class Unsupported(NotImplementedError):
    """A model narrowcc has no kernel for: a limitation, never a bug."""


@dataclass
class Program:
    session: ort.InferenceSession
    rewrites: dict[str, int] = field(default_factory=dict)

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in self.session.get_outputs()]
        return {n: np.asarray(v) for n, v in zip(names, self.session.run(None, inputs), strict=True)}


def _dtypes(model: onnx.ModelProto) -> dict[str, str]:
    typed = onnx.shape_inference.infer_shapes(model)
    g = typed.graph
    found = {}
    for v in [*g.input, *g.value_info, *g.output]:
        found[v.name] = onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type).name
    for t in g.initializer:
        found[t.name] = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).name
    return found


def check_support(model: onnx.ModelProto) -> None:
    dtypes = _dtypes(model)
    for node in model.graph.node:
        allowed = SUPPORTED.get(node.op_type)
        if allowed is None:
            raise Unsupported(f"narrowcc: op {node.op_type} not supported")
        dtype = dtypes.get(node.input[0], "?") if node.input else "?"
        if dtype not in allowed:
            raise Unsupported(f"narrowcc: op {node.op_type} not supported at {dtype}")


def compile_model(data: bytes, level: str) -> Program:
    model = onnx.load_from_string(data)
    check_support(model)
    rewrites: dict[str, int] = {}
    if level == "O1":
        for rewrite in PASSES:
            if done := rewrite(model.graph):
                rewrites[f"narrowcc::{rewrite.__name__}"] = done
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return Program(session, rewrites)
