"""A complete fuzzbot backend plugin: onnx's own reference evaluator as "the compiler".

Use it with `fuzzbot run BUNDLE --backend examples/plugin_backend.py:OnnxReferenceAdapter`
(or `...:OnnxReferenceAdapter:checked` for the other level): the file is copied alone into
each worker's scratch folder. Shipped inside your compiler's package instead, it is named
`mypkg.module:Class` and each side imports its own copy. Swap the bodies of
`info`, `convert`, `compile` and `run` for calls into your own compiler.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.adapters.base import Adapter


class OnnxReferenceAdapter(Adapter):
    name = "onnx-reference"
    levels = ("default", "checked")
    default_level = "default"
    level_help = "checked: also verify every output against the model's shape annotations"
    opsets = (1, 23)
    unsupported = (r"No registered schema for operator", r"NotImplementedError")
    """Regular expressions over an error message: a match is a declared limitation, not a bug."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        import onnx  # import the system under test here, never at module level
        from onnx.reference import ReferenceEvaluator

        self.onnx, self.evaluator = onnx, ReferenceEvaluator

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.onnx.__version__, "commit": None}

    def convert(self, model: bytes) -> Any:
        """Optional: the frontend step; failures here are tagged with the `import` stage."""
        return self.onnx.load_from_string(model)

    def compile(self, model: Any, level: str) -> Any:
        return self.evaluator(model, check_shape_annotations=level == "checked"), [o.name for o in model.graph.output]

    def run(self, compiled: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        session, names = compiled
        return {n: np.asarray(v) for n, v in zip(names, session.run(None, inputs), strict=True)}
