"""onnxruntime, driven the way its users drive it: an InferenceSession per model at
a chosen graph optimization level on a chosen execution provider."""

from __future__ import annotations

from typing import Any

import numpy as np


class OrtAdapter:
    name = "onnxruntime"
    level_names = {
        "disable": "ORT_DISABLE_ALL",
        "basic": "ORT_ENABLE_BASIC",
        "extended": "ORT_ENABLE_EXTENDED",
        "all": "ORT_ENABLE_ALL",
    }
    """fuzzbot level -> GraphOptimizationLevel member, shared by sessions and repro scripts."""
    levels = tuple(level_names)
    default_level = "all"

    def __init__(self, options: dict[str, Any]) -> None:
        import onnxruntime

        self.ort = onnxruntime
        self.providers = list(options.get("providers", ["CPUExecutionProvider"]))
        self.threads = int(options.get("threads", 1))

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.ort.__version__, "commit": None}

    def compile(self, model: bytes, level: str) -> Any:
        so = self.ort.SessionOptions()
        so.graph_optimization_level = getattr(self.ort.GraphOptimizationLevel, self.level_names[level])
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        return self.ort.InferenceSession(model, so, providers=self.providers)

    def run(self, session: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in session.get_outputs()]
        values = session.run(names, inputs)
        return {n: np.asarray(v) for n, v in zip(names, values, strict=False)}

    @classmethod
    def repro_snippet(cls, level: str) -> str:
        """Source of a `run(model_bytes, inputs)` function for standalone repro scripts."""
        const = cls.level_names[level]
        return f"""def run(model_bytes, inputs):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.{const}
    session = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))
"""
