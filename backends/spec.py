"""Backend spec strings: `NAME[:LEVEL][,KEY=VALUE...]`.

NAME is a built-in backend (`onnxruntime:all`, `tvm:O0`, `openvino`) or a plugin, given
either as `module:Class` (`mycompiler.fuzzbot:Adapter:O2`), resolved from the side's own
venv or worktree like any installed module, or as `FILE.py:Class`
(`examples/plugin_backend.py:OnnxReferenceAdapter`), a file copied alone into each
worker's scratch folder. The class name must be capitalized, so that a misspelt
built-in name is an error now, not an import failure in the worker later. Built-in
adapter classes are imported here to check levels and options (their modules import
the system under test only inside the worker). A plugin is never imported by the bot:
it only has to be importable on the worker's side, which checks its level at the
handshake.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ADAPTERS: dict[str, str] = {
    "onnxruntime": "backends.adapters.ort:OrtAdapter",
    "tvm": "backends.adapters.tvm:TvmAdapter",
    "torch.compile": "backends.adapters.torch_compile:TorchCompileAdapter",
    "openvino": "backends.adapters.openvino:OpenVinoAdapter",
    "tensorrt": "backends.adapters.tensorrt:TensorRtAdapter",
}
"""Built-in backend names and the worker-side adapter class behind each."""


class BackendSpecError(ValueError):
    pass


@dataclass(frozen=True)
class BackendSpec:
    name: str
    level: str
    """Empty for a plugin whose default level the worker reports at the handshake."""
    adapter: str
    options: tuple[tuple[str, str], ...] = ()
    packages: tuple[str, ...] = ()
    """Packages of this repository, besides `backends`, that the worker needs on its path."""
    plugin: bool = field(default=False, compare=False)
    plugin_file: str | None = None
    """For a `FILE.py:Class` plugin: the file's absolute path, copied alone into each worker's
    scratch folder and imported there as the module `adapter` names."""

    def __str__(self) -> str:
        text = f"{self.name}:{self.level}" if self.level else self.name
        return text + "".join(f",{k}={v}" for k, v in self.options)

    @property
    def option_dict(self) -> dict[str, str]:
        return dict(self.options)


def adapter_class(path: str) -> Any:
    """The adapter class, imported without importing the system it wraps."""
    module, _, cls = path.partition(":")
    return getattr(importlib.import_module(module), cls)


def valid_backends() -> str:
    return ", ".join(sorted(ADAPTERS)) + " (or a plugin as module:Class or FILE.py:Class)"


def system_modules(spec: BackendSpec) -> tuple[str, ...]:
    """Top-level modules that are the system under test and must come from the side's own
    build: a built-in adapter names them; a `module:Class` plugin's package is one itself (a
    plugin may name more in its own `system_modules`, which its worker reports)."""
    if spec.plugin:
        return () if spec.plugin_file else (spec.adapter.partition(":")[0].split(".")[0],)
    return tuple(getattr(adapter_class(spec.adapter), "system_modules", ()))


def worker_requirements(spec: BackendSpec) -> tuple[str, ...]:
    """What a built-in adapter's worker imports besides the system (`worker_requires`); a
    plugin's own environment is its author's to describe."""
    return () if spec.plugin else tuple(getattr(adapter_class(spec.adapter), "worker_requires", ()))


def parse_backend(text: str) -> BackendSpec:
    head, *pairs = text.strip().split(",")
    options = _options(pairs, text)
    parts = head.split(":")
    if parts[0] in ADAPTERS:
        if len(parts) > 2:
            raise BackendSpecError(f"backend {text!r}: expected NAME[:LEVEL]")
        return _builtin(parts[0], parts[1] if len(parts) == 2 else "", options)
    if len(parts) in (2, 3) and parts[1].isidentifier() and parts[1][0].isupper():
        level = parts[2] if len(parts) == 3 else ""
        if parts[0].endswith(".py"):
            return _plugin_file(parts[0], parts[1], level, options)
        if _is_module(parts[0]):
            return BackendSpec(f"{parts[0]}:{parts[1]}", level, f"{parts[0]}:{parts[1]}", options, plugin=True)
    raise BackendSpecError(f"unknown backend {parts[0]!r}; valid backends: {valid_backends()}")


def spec_level(text: str | None) -> str | None:
    """The level a recorded spec ran at: the one it names, a built-in backend's default when
    it names none (`tvm` ran at `default`), None for a plugin that left it to its handshake
    or a spec that no longer parses. One reading for every place a stored finding is rerun."""
    if not text:
        return None
    try:
        return parse_backend(text).level or None
    except BackendSpecError:
        return None


def _plugin_file(path: str, cls: str, level: str, options: tuple[tuple[str, str], ...]) -> BackendSpec:
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise BackendSpecError(f"plugin file {path} does not exist")
    if not file.stem.isidentifier():
        raise BackendSpecError(f"plugin file {path}: {file.stem!r} is not a valid module name")
    return BackendSpec(f"{file}:{cls}", level, f"{file.stem}:{cls}", options, plugin=True, plugin_file=str(file))


def canonical_level(level: str, levels: tuple[str, ...] | list[str], name: str) -> str:
    """`level` spelled as the adapter spells it (levels are matched case-insensitively)."""
    by_lower = {lv.lower(): lv for lv in levels}
    if level.lower() not in by_lower:
        raise BackendSpecError(f"unknown level {level!r} for {name}; valid levels: {', '.join(levels)}")
    return by_lower[level.lower()]


def _builtin(name: str, level: str, options: tuple[tuple[str, str], ...]) -> BackendSpec:
    cls = adapter_class(ADAPTERS[name])
    level = canonical_level(level or cls.default_level, cls.levels, name)
    unknown = [k for k, _ in options if k not in cls.options]
    if unknown:
        valid = ", ".join(cls.options) or "none"
        raise BackendSpecError(f"unknown option {unknown[0]!r} for {name}; valid options: {valid}")
    for key, value in options:
        if key in cls.count_options and not value.isdigit():
            raise BackendSpecError(f"option {key}={value!r} for {name} is not a whole number ({cls.options[key]})")
    return BackendSpec(name, level, ADAPTERS[name], options, tuple(cls.worker_packages))


def _is_module(text: str) -> bool:
    return all(p.isidentifier() for p in text.split("."))


def _options(pairs: list[str], text: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise BackendSpecError(f"backend {text!r}: options are KEY=VALUE after a comma")
        out.append((key.strip(), value.strip()))
    return tuple(out)
