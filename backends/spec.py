"""Backend spec strings such as `onnxruntime:all` or `onnxruntime:disable`."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

ADAPTERS: dict[str, str] = {
    "onnxruntime": "backends.adapters.ort:OrtAdapter",
}
"""Built-in backend names and the worker-side adapter class behind each."""


class BackendSpecError(ValueError):
    pass


@dataclass(frozen=True)
class BackendSpec:
    name: str
    level: str
    adapter: str

    def __str__(self) -> str:
        return f"{self.name}:{self.level}"


def adapter_class(path: str) -> Any:
    """The adapter class, imported without importing the system it wraps."""
    module, _, cls = path.partition(":")
    return getattr(importlib.import_module(module), cls)


def parse_backend(text: str) -> BackendSpec:
    name, _, level = text.strip().partition(":")
    if name not in ADAPTERS:
        raise BackendSpecError(f"unknown backend {name!r}; valid backends: {', '.join(sorted(ADAPTERS))}")
    cls = adapter_class(ADAPTERS[name])
    level = (level or cls.default_level).lower()
    if level not in cls.levels:
        raise BackendSpecError(f"unknown level {level!r} for {name}; valid levels: {', '.join(cls.levels)}")
    return BackendSpec(name, level, ADAPTERS[name])
