"""The adapter protocol: what the worker needs from a system under test.

An adapter runs inside the worker, under the side's own interpreter, so this module
uses the standard library only. A plugin may subclass `Adapter` (the `backends`
package is on every worker's path) or just provide the same attributes: the worker
reads the optional ones with defaults. A plugin's repro script carries this module's
code (bot.findings.repro, docstrings dropped) in place of fuzzbot, so it must stay self-contained.

Required: `name`, `levels`, `default_level`, `__init__(options)`, `info()`,
`compile(model, level)` and `run(compiled, inputs)`.

Optional: `convert(model_bytes)` (when present, failures in it are tagged with the
`import` stage and `compile` receives its result instead of the bytes), `warmup(compiled,
inputs)` (runs inside the compile stage, for systems that compile on the first call),
`unsupported` (regular expressions over an error message that mark it a declared
limitation rather than a bug; a NotImplementedError with a message is one by default,
`not_implemented_is_limit`), `fresh_by_fork` (False where a forked child cannot use what the
import started, such as CUDA), `opsets`, `level_help`, `lowest_level`,
`system_modules`, `coverage_modules`, `code_coverage() -> dict[str, list[int]]` (the native
source lines the run just measured executed, read off the counters of a build compiled for
gcov or llvm-cov; backends.code_coverage measures Python itself) and
`rewrites(compiled) -> dict[str, int]` (called after a good compile:
which rewrites the system's optimizer performed on this model, read off the graph it made,
keyed as generator.coverage.Coverage.rewrites documents; a failure in it is ignored, never
the run's).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np


class Unavailable(RuntimeError):
    """Raised by an adapter's constructor when the system cannot run here at all (no
    device, missing package); its message is the one-line reason shown to the user."""


class Adapter:
    name: ClassVar[str]
    levels: ClassVar[tuple[str, ...]]
    default_level: ClassVar[str]
    level_help: ClassVar[str] = ""
    lowest_level: ClassVar[str | None] = None
    """The least optimizing level, where the oracles re-run a bad case to learn whether the
    bug needs the optimizer; None means the first of `levels` (list them lowest first)."""
    """How a level maps onto the system's own optimization knobs, for `--help` and the README."""
    opsets: ClassVar[tuple[int, int]] = (7, 21)
    """The lowest and highest default-domain opset the system accepts. The highest bounds what
    a campaign asks the build about (bot.sides.opset_probe); below it, the probe model decides."""
    unsupported: ClassVar[tuple[str, ...]] = ()
    refused_node: ClassVar[str | None] = None
    """A pattern whose groups `op` and `node` are the op type and the node a refusal names. A
    refusal of a node the model does not have, of an op it does not have (one the build's
    optimizer made), is no declared limit but the optimizer's bug, whatever the node is
    called: onnxruntime 1.17.3 calls its float64 QuickGelu fusion `QuickGelu`, 1.18.0
    `n1/QuickGeluFusion/` (backends.adapters.rewrites.optimizer_made)."""
    not_implemented_is_limit: ClassVar[bool] = True
    """A NotImplementedError that says what it lacks is a declared limit, Python's convention
    for "not supported" (set False where the system raises it for bugs too)."""
    fresh_by_fork: ClassVar[bool] = True
    """Whether a fresh run may be a child forked from a process that imported the system and
    ran nothing (backends.fresh); False where the import leaves what a fork cannot carry
    (CUDA: a process forked after CUDA was initialized cannot use it), and a fresh run then
    restarts the worker."""
    options: ClassVar[dict[str, str]] = {}
    """Option name -> what it does; set in a spec as `NAME:LEVEL,key=value`."""
    count_options: ClassVar[tuple[str, ...]] = ()
    """Options whose value is a whole number (threads, a device index): the spec refuses any
    other value in the bot, before a worker starts and fails on it for an unclear reason."""
    system_modules: ClassVar[tuple[str, ...]] = ()
    """Top-level modules that are the system under test: the worker reports the file each was
    imported from, and the bot refuses a side whose copy is not its own build's."""
    coverage_modules: ClassVar[tuple[str, ...] | None] = None
    """The packages of the system's own Python code (a converter, passes) whose coverage steers
    generation (backends.code_coverage); None: `system_modules`; (): none, for a build whose
    deciding code is native."""
    worker_packages: ClassVar[tuple[str, ...]] = ()
    """Packages of this repository, besides `backends`, that the worker needs on its path."""
    worker_requires: ClassVar[tuple[str, ...]] = ()
    """pip requirements the worker imports besides the system itself (a frontend's `onnx`):
    a side fuzzbot builds gets them unless `compiler.packages` already names them."""
    lossy_dtypes: ClassVar[dict[str, str]] = {}
    """Element types the system computes in a narrower type by design, with why: probing
    leaves them out, since every difference they cause is documented behaviour."""
    repro_requires: ClassVar[tuple[str, ...]] = ()
    """pip requirements of a repro script besides numpy, `{version}` standing for the
    finding's build: the install line a maintainer copies from an issue."""
    repro_note: ClassVar[str] = ""
    """What else a repro needs that pip alone does not give (a GPU, a checkout)."""
    probe: ClassVar[bool] = True
    """Whether support probing is worth it: False where the system runs every registry op
    by construction (torch.compile compiles the registry's own torch code), or where one
    compile per op x dtype would take hours."""

    def __init__(self, options: dict[str, str]) -> None:
        self.opts = dict(options)

    def info(self) -> dict[str, Any]:
        """name, version and (where the package exposes one) commit of the loaded build."""
        raise NotImplementedError

    def compile(self, model: Any, level: str) -> Any:
        raise NotImplementedError

    def run(self, compiled: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    @classmethod
    def repro_snippet(cls, level: str, options: Mapping[str, str] | None = None) -> str:
        """Source of `run(model_bytes, inputs)` for standalone repro scripts. This default
        drives the adapter class itself; built-in adapters override it with plain calls
        to the system, so their repro needs nothing of fuzzbot. `options` are the spec's
        (`threads=4`): a repro sets up what the campaign ran, options included."""
        return adapter_snippet(cls.__module__, cls.__qualname__, level)


def adapter_snippet(module: str, qualname: str, level: str, folder: str | None = None) -> str:
    """`run(model_bytes, inputs)` through an adapter class by name, for an adapter with no
    snippet of its own (torch.compile's repro needs fuzzbot's generator anyway; plugin repros
    are rendered by bot.findings.repro, which inlines the plugin). `folder`: put on the path first."""
    find = f"    import sys\n\n    sys.path.insert(0, {folder!r})\n" if folder else ""
    return f"""def run(model_bytes, inputs):
{find}    from {module} import {qualname} as Adapter

    adapter = Adapter({{}})
    model = adapter.convert(model_bytes) if hasattr(adapter, "convert") else model_bytes
    compiled = adapter.compile(model, {level!r} or Adapter.default_level)
    return adapter.run(compiled, inputs)
"""


def is_unsupported(patterns: tuple[str, ...] | list[str], message: str) -> bool:
    return any(re.search(p, message) for p in patterns)
