"""fuzzbot's plugin adapter for toycc: `--backend toycc.fuzzbot:ToyAdapter:O1`.

It provides the adapter attributes without subclassing fuzzbot's `Adapter`, so toycc
stays installable and importable without fuzzbot.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from . import __version__
from .compiler import Program, compile_graph
from .graph import Graph, load_graph


class ToyAdapter:
    name = "toycc"
    levels: ClassVar[tuple[str, ...]] = ("O0", "O1")
    default_level = "O1"
    lowest_level = "O0"
    level_help = "O0: no passes; O1: Mul feeding Add/Sub fused into FusedMulAdd"
    opsets: ClassVar[tuple[int, int]] = (7, 21)
    unsupported: ClassVar[tuple[str, ...]] = (r"toycc: (op|dtype) \S+ .*not supported",)
    options: ClassVar[dict[str, str]] = {}

    def __init__(self, options: dict[str, str]) -> None:
        self.opts = dict(options)

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "version": __version__, "commit": None}

    def convert(self, model: bytes) -> Graph:
        return load_graph(model)

    def compile(self, model: Graph, level: str) -> Program:
        return compile_graph(model, level)

    def run(self, compiled: Program, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return compiled.run(inputs)
