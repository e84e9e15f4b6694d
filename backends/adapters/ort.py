"""onnxruntime, driven the way its users drive it: an InferenceSession per model at
a chosen graph optimization level on a chosen execution provider."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from backends.adapters.base import Adapter, Unavailable


class OrtAdapter(Adapter):
    name = "onnxruntime"
    system_modules = ("onnxruntime",)
    level_names = {
        "disable": "ORT_DISABLE_ALL",
        "basic": "ORT_ENABLE_BASIC",
        "extended": "ORT_ENABLE_EXTENDED",
        "all": "ORT_ENABLE_ALL",
    }
    """fuzzbot level -> GraphOptimizationLevel member, shared by sessions and repro scripts."""
    levels = tuple(level_names)
    default_level = "all"
    level_help = "SessionOptions.graph_optimization_level: ORT_DISABLE_ALL, ORT_ENABLE_BASIC, _EXTENDED, _ALL"
    opsets = (7, 24)
    unsupported = (
        r"NOT_IMPLEMENTED",
        r"Could not find an implementation for",
        r"is not (?:currently )?supported",
    )
    repro_requires = ("onnxruntime=={version}",)
    options = {
        "provider": "execution provider(s), '+'-separated in priority order [CPUExecutionProvider]",
        "threads": "intra-op threads [1]",
    }

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        import onnxruntime

        self.ort = onnxruntime
        self.providers = str(options.get("provider", "CPUExecutionProvider")).split("+")
        self.threads = int(options.get("threads", 1))
        have = onnxruntime.get_available_providers()
        missing = [p for p in self.providers if p not in have]
        if missing:
            build = f"onnxruntime {onnxruntime.__version__}"
            raise Unavailable(f"{build} has no {', '.join(missing)}; it has {', '.join(have)}")

    def info(self) -> dict[str, Any]:
        build = getattr(self.ort, "get_build_info", lambda: "")()
        m = re.search(r"git-commit-id=([0-9a-f]+)", build)
        return {"name": self.name, "version": self.ort.__version__, "commit": m.group(1) if m else None}

    def compile(self, model: Any, level: str) -> Any:
        so = self.ort.SessionOptions()
        so.graph_optimization_level = getattr(self.ort.GraphOptimizationLevel, self.level_names[level])
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        return self.ort.InferenceSession(model, so, providers=self.providers)

    def run(self, compiled: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in compiled.get_outputs()]
        values = compiled.run(names, inputs)
        return {n: np.asarray(v) for n, v in zip(names, values, strict=False)}

    @classmethod
    def repro_snippet(cls, level: str) -> str:
        const = cls.level_names[level]
        return f"""def run(model_bytes, inputs):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.{const}
    session = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))
"""
