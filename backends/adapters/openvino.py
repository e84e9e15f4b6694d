"""OpenVINO on CPU, as its users drive it: `Core.read_model` on the ONNX bytes (the ONNX
frontend), then `compile_model` with an execution-mode hint.

The CPU plugin's optimization choice is `EXECUTION_MODE_HINT`: `performance` (its
default) lets it pick faster kernels and fusions, `accuracy` keeps the reference
numerics. Inference precision is pinned to f32 unless the `precision` option says
otherwise, so that a machine with bf16 units does not turn rounding into findings.

Rewrites are read off the graph the CPU plugin executes (`get_runtime_model()`, a fraction
of a millisecond): each of its nodes names the model's layers it was made from
(`originalLayersNames`), and one made from two or more is a fusion, counted as
`+openvino::<plugin layer type>` (`+openvino::Subgraph` for a snippets kernel,
`+openvino::FullyConnected` for a MatMul with its bias and activation). The plugin's node
types are its own vocabulary (`Eltwise`, `Reorder`, not the opset's `Add`), so a type-count
difference against the model would report a rewrite for every op; eliminations are not
reported, since transformations rename the layers they keep.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from backends.adapters.base import Adapter


class OpenVinoAdapter(Adapter):
    name = "openvino"
    system_modules = ("openvino",)
    coverage_modules: ClassVar[tuple[str, ...] | None] = ()
    """Its frontend and passes are C++."""
    level_modes = {"performance": "PERFORMANCE", "accuracy": "ACCURACY"}
    levels = tuple(level_modes)
    default_level = "performance"
    lowest_level = "accuracy"
    level_help = "CPU EXECUTION_MODE_HINT: PERFORMANCE (default) or ACCURACY"
    opsets = (7, 22)
    lossy_dtypes = {
        "float64": "the CPU plugin computes float64 in float32",
        "int64": "the CPU plugin computes int64 in int32",
    }
    unsupported = (
        r"No conversion rule found for operations",
        r"[Uu]nsupported operation",
        r"is not supported",
        r"unconverted_ops_report",
    )
    repro_requires = ("openvino=={version}",)
    worker_requires = ("onnx",)
    options = {"precision": "INFERENCE_PRECISION_HINT [f32]", "threads": "INFERENCE_NUM_THREADS [1]"}
    count_options = ("threads",)

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        import openvino

        self.ov = openvino
        self.core = openvino.Core()
        self.precision = str(options.get("precision", "f32"))
        self.threads = int(options.get("threads", 1))

    def info(self) -> dict[str, Any]:
        # e.g. "2026.4.1-22982-e213a147257-releases/2026/4": release, build number, commit
        full = str(self.ov.get_version())
        m = re.match(r"(\d+(?:\.\d+)+)(?:-\d+-([0-9a-f]{7,}))?", full)
        version = m.group(1) if m else full
        return {"name": self.name, "version": version, "commit": m.group(2) if m else None}

    def convert(self, model: bytes) -> Any:
        import onnx

        names = [o.name for o in onnx.load_from_string(model).graph.output]
        return self.core.read_model(model=model, weights=b""), names

    def compile(self, model: Any, level: str) -> Any:
        model, names = model
        config = {
            "EXECUTION_MODE_HINT": self.level_modes[level],
            "INFERENCE_PRECISION_HINT": self.precision,
            "INFERENCE_NUM_THREADS": self.threads,
        }
        compiled = self.core.compile_model(model, "CPU", config)
        return compiled, compiled.create_infer_request(), names

    def rewrites(self, compiled: Any) -> dict[str, int]:
        """`+openvino::<layer type>` -> executable nodes made from two or more of the model's layers."""
        keys: Counter[str] = Counter()
        for op in compiled[0].get_runtime_model().get_ops():
            info = op.get_rt_info()
            if "originalLayersNames" not in info or "layerType" not in info:
                continue
            merged = [n for n in _text(info["originalLayersNames"]).split(",") if n]
            if len(merged) >= 2:
                keys[f"+openvino::{_text(info['layerType'])}"] += 1
        return dict(sorted(keys.items()))

    def run(self, compiled: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        model, request, names = compiled
        result = request.infer(inputs)
        # An output port may carry several tensor names (an identity op folded away), so
        # each graph output is found by membership. Copies: the request reuses its buffers.
        by_name = {n: out for out in model.outputs for n in out.get_names()}
        return {n: np.array(result[by_name[n]], copy=True) for n in names if n in by_name}

    @classmethod
    def repro_snippet(cls, level: str, options: Mapping[str, str] | None = None) -> str:
        mode = cls.level_modes[level]
        return f"""def run(model_bytes, inputs):
    import numpy as np
    import onnx
    import openvino as ov

    core = ov.Core()
    model = core.read_model(model=model_bytes, weights=b"")
    config = {{"EXECUTION_MODE_HINT": "{mode}", "INFERENCE_PRECISION_HINT": "f32"}}
    compiled = core.compile_model(model, "CPU", config)
    result = compiled.create_infer_request().infer(inputs)
    # A port may carry several names (a Transpose folded into its reader): the graph's outputs among them.
    wanted = {{o.name for o in onnx.load_from_string(model_bytes).graph.output}}
    return {{n: np.array(result[out]) for out in compiled.outputs for n in out.get_names() if n in wanted}}
"""


def _text(value: Any) -> str:
    """An rt_info entry as text (an OVAny holding a string)."""
    return str(value.astype(str)) if hasattr(value, "astype") else str(value)
