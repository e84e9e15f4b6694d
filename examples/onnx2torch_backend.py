"""fuzzbot's plugin for onnx2torch, a pure-Python ONNX-to-PyTorch converter: a real
third-party compiler as a maintainer would wire it up.

Use it from inside an onnx2torch checkout (the Action's layout) with
`backend: examples/onnx2torch_backend.py:Onnx2TorchAdapter` and a `compiler:` section
whose build is `pip install --no-deps .` (examples/onnx2torch.yml); each side's worker
imports the onnx2torch of its own build.

onnx2torch imports torchvision for two converters (RoiAlign and NonMaxSuppression).
Where torchvision cannot be imported (a wheel built against another torch fails with
"operator torchvision::nms does not exist"), a stand-in module lets the rest of the
converter load; those two converters then say they are unavailable, a declared limit.
"""

from __future__ import annotations

import sys
import types
from typing import Any, ClassVar

import numpy as np


def _torchvision_or_stand_in() -> None:
    """Import torchvision if it works; else put a module in its place whose two functions
    onnx2torch reads refuse to run, so only the converters that need them are lost."""
    try:
        import torchvision  # noqa: F401
    except Exception:  # noqa: BLE001 - any failure to import it is the same: not usable here
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]

        def missing(*args: object, **kwargs: object) -> None:
            raise NotImplementedError("torchvision is not usable in this environment")

        ops = types.ModuleType("torchvision.ops")
        ops.roi_align = missing  # type: ignore[attr-defined]
        ops.nms = missing  # type: ignore[attr-defined]
        package = types.ModuleType("torchvision")
        package.ops = ops  # type: ignore[attr-defined]
        sys.modules["torchvision"], sys.modules["torchvision.ops"] = package, ops


class Onnx2TorchAdapter:
    name = "onnx2torch"
    levels: ClassVar[tuple[str, ...]] = ("default",)
    default_level = "default"
    level_help = "default: onnx2torch.convert, then the GraphModule run eagerly"
    opsets: ClassVar[tuple[int, int]] = (9, 21)
    unsupported: ClassVar[tuple[str, ...]] = (
        r"NotImplementedError",
        r"Converter is not implemented",
        r"is not implemented",
        r"ValueError: dtype=\S+ is not supported",
    )
    """onnx2torch refuses what it does not convert with NotImplementedError (an op, a
    version, an attribute value), in the Python convention, and an element type torch lacks
    with its own ValueError (`dtype=12 is not supported`): declared limits. A bare "not
    supported" is not one: torch says "non-positive stride is not supported" when a
    converter hands it a stride of 0 for a Conv that declared none, which is the
    converter's bug, and a campaign had read it as head declining Conv."""
    options: ClassVar[dict[str, str]] = {}
    system_modules: ClassVar[tuple[str, ...]] = ("onnx2torch",)
    worker_requires: ClassVar[tuple[str, ...]] = ("onnx",)

    def __init__(self, options: dict[str, str]) -> None:
        self.opts = dict(options)
        _torchvision_or_stand_in()
        import onnx
        import onnx2torch
        import torch

        self.onnx, self.onnx2torch, self.torch = onnx, onnx2torch, torch

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "version": getattr(self.onnx2torch, "__version__", "0"), "commit": None}

    def convert(self, model: bytes) -> Any:
        proto = self.onnx.load_from_string(model)
        weights = {t.name for t in proto.graph.initializer}
        ins = [i.name for i in proto.graph.input if i.name not in weights]
        return self.onnx2torch.convert(proto), ins, [o.name for o in proto.graph.output]

    def compile(self, model: Any, level: str) -> Any:
        return model

    def run(self, compiled: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        module, ins, outs = compiled
        args = [self.torch.from_numpy(np.ascontiguousarray(inputs[n])) for n in ins]
        with self.torch.no_grad():
            result = module(*args)
        values = result if isinstance(result, (tuple, list)) else [result]
        return {n: np.asarray(v.numpy() if hasattr(v, "numpy") else v) for n, v in zip(outs, values, strict=True)}
