"""fuzzbot's plugin adapter for narrowcc: `--backend narrowcc.fuzzbot:NarrowAdapter:O1`.
It needs nothing of fuzzbot, so narrowcc installs and imports without it."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from . import __version__


class NarrowAdapter:
    name = "narrowcc"
    levels: ClassVar[tuple[str, ...]] = ("O0", "O1")
    default_level = "O1"
    lowest_level = "O0"
    level_help = "O0: no passes; O1: narrowcc.passes"
    opsets: ClassVar[tuple[int, int]] = (13, 21)
    unsupported: ClassVar[tuple[str, ...]] = (r"narrowcc: op \S+ not supported",)
    options: ClassVar[dict[str, str]] = {}
    system_modules: ClassVar[tuple[str, ...]] = ("narrowcc",)

    def __init__(self, options: dict[str, str]) -> None:
        from .compiler import compile_model

        self.opts = dict(options)
        self._compile = compile_model

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "version": __version__, "commit": None}

    def compile(self, model: bytes, level: str) -> Any:
        return self._compile(model, level)

    def run(self, compiled: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return compiled.run(inputs)  # type: ignore[no-any-return]

    def rewrites(self, compiled: Any) -> dict[str, int]:
        return dict(compiled.rewrites)
