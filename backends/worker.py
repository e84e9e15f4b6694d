"""The worker process: one system under test, loaded once, serving run requests.

Started by the bot as `python -m backends.worker` under the side's own interpreter.
File descriptor 1 is kept for protocol frames and the process's stdout is pointed
at stderr, so native libraries that print cannot corrupt the channel.

The first frame each way is the handshake: the bot names the adapter, its options
and the protocol version it speaks; the worker answers with the build it loaded
(name, version, commit), the adapter's levels and "unsupported" patterns, its own
protocol version, and where every module the adapter pulled in was imported from, so
the bot can refuse a side that imports another side's code. Every later reply, stage
events included, carries the id of the request it answers; a run's reply may carry
`rewrites` and `kernels` (optional keys: a bot that does not read them loses nothing, so
the protocol version stays).
"""

from __future__ import annotations

import importlib
import os
import resource
import sys
import time
import traceback
from typing import Any, BinaryIO

import numpy as np

from backends import faults, memory
from backends.adapters.base import Unavailable, is_unsupported
from backends.adapters.rewrites import WireError, optimizer_made
from backends.code_coverage import CodeCoverage, start_coverage
from backends.fresh import Zygote, forward
from backends.protocol import PROTOCOL_VERSION, read_message, write_message

MAX_MESSAGE = 4000
OOM_MARKERS = ("MemoryError", "bad_alloc", "Cannot allocate memory", "out of memory")


def describe(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + " ...[truncated]"


def load_adapter(path: str, options: dict[str, Any]) -> Any:
    module, _, cls = path.partition(":")
    return getattr(importlib.import_module(module), cls)(options)


OWN_PACKAGES = frozenset({"backends", "generator", "__main__"})
"""fuzzbot's own code on the worker's path: never the system under test."""


def module_origins(before: set[str], declared: tuple[str, ...], plugin_module: str) -> dict[str, str]:
    """Where each top-level module the adapter brought in (and each it declares as the
    system under test) was imported from: the evidence for the bot's isolation check.
    The standard library and fuzzbot's own packages are left out, and so is a plugin
    file's own module, which the bot copied into the scratch folder itself."""
    stdlib: frozenset[str] = getattr(sys, "stdlib_module_names", frozenset())
    for name in declared:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
    tops = {m.partition(".")[0] for m in set(sys.modules) - before} | set(declared)
    origins: dict[str, str] = {}
    for top in sorted(tops - OWN_PACKAGES - set(stdlib) - {plugin_module}):
        module = sys.modules.get(top)
        where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or []), None)
        if where and not top.startswith("_"):
            origins[top] = os.path.realpath(where)
    return origins


def limit_memory(extra_mb: int) -> int:
    """Cap the address space at what the loaded system already maps plus `extra_mb`,
    so the limit means the same headroom whatever the backend's footprint at rest.
    Returns the cap in MiB."""
    try:
        with open("/proc/self/statm") as f:
            base = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        base = 0
    cap = base + (extra_mb << 20)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    return cap >> 20


class Served:
    """The adapter with what the run loop needs to judge its failures."""

    def __init__(self, adapter: Any, memory_cap_mb: int | None, coverage: CodeCoverage | None = None) -> None:
        self.adapter = adapter
        self.patterns = tuple(getattr(adapter, "unsupported", ()))
        self.memory_cap_mb = memory_cap_mb
        self.coverage = coverage
        """Measures the system's own Python code where the bot asked for it (backends.code_coverage)."""
        self.not_implemented = bool(getattr(adapter, "not_implemented_is_limit", True))

    def failure(self, stage: str, e: BaseException, model: bytes = b"") -> dict[str, Any]:
        traceback.print_exc(file=sys.stderr)
        message = describe(e)
        if isinstance(e, MemoryError) or any(m in message for m in OOM_MARKERS):
            cap = f" (address space capped at {self.memory_cap_mb} MiB)" if self.memory_cap_mb else ""
            # The heap may be half-built now: answer, then exit so the bot starts a fresh worker.
            return {"status": "error", "stage": stage, "message": f"out of memory{cap}: {message}", "exiting": True}
        limit = is_unsupported(self.patterns, message) or (self.not_implemented and declines(e))
        if limit and model and self.optimizer_made(message, model):
            limit = False
        return {"status": "unsupported" if limit else "error", "stage": stage, "message": message}

    def optimizer_made(self, message: str, model: bytes) -> bool:
        """Whether the refusal names a node the build's optimizer made (Adapter.refused_node)."""
        pattern = getattr(self.adapter, "refused_node", None)
        try:
            return isinstance(pattern, str) and optimizer_made(pattern, message, model)
        except WireError:
            return False


def declines(e: BaseException) -> bool:
    """Python's own way to say "not supported": a NotImplementedError that says what (a bare
    one is an adapter method nobody wrote, a plugin's bug). onnx2torch raises it for every op
    and version it has no converter for; unlisted, 7 of 35 reports on it were such refusals."""
    return isinstance(e, NotImplementedError) and bool(str(e).strip())


def read_rewrites(adapter: Any, compiled: Any) -> dict[str, int]:
    """The adapter's optional `rewrites(compiled)`: what its optimizer did to this model.
    Coverage is a by-product of a run, so a failure here is noted on stderr and read as
    "nothing known", never as the system's error."""
    read = getattr(adapter, "rewrites", None)
    if read is None:
        return {}
    try:
        return {str(k): int(v) for k, v in dict(read(compiled)).items() if int(v)}
    except Exception:  # noqa: BLE001 - a coverage reading never fails a run
        print("fuzzbot: reading the rewrites failed (the run goes on):", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return {}


def read_kernels(adapter: Any, compiled: Any) -> dict[str, str]:
    """The adapter's optional `kernels(compiled)`: which of its nodes computes each graph
    output. A failure reads as "nothing known", as for the rewrites."""
    read = getattr(adapter, "kernels", None)
    if read is None:
        return {}
    try:
        return {str(k): str(v) for k, v in dict(read(compiled)).items()}
    except Exception:  # noqa: BLE001 - a naming aid never fails a run
        print("fuzzbot: reading the kernels failed (the run goes on):", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return {}


def handle_run(
    served: Served, header: dict[str, Any], inputs: dict[str, np.ndarray], model: bytes, fault: Any, out: BinaryIO
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The run, measured when the bot asked for the system's code coverage: the arcs it
    reached first go with the reply, a failed run's too (a converter's error path is code)."""
    native = getattr(served.adapter, "code_coverage", None)
    if not header.get("measure") or (served.coverage is None and native is None):
        return run_stages(served, header, inputs, model, fault, out)
    if served.coverage is None:
        reply, outputs = run_stages(served, header, inputs, model, fault, out)
        arcs: dict[str, list[tuple[int, int]]] = {}
    else:
        with served.coverage.measuring():
            reply, outputs = run_stages(served, header, inputs, model, fault, out)
        arcs = served.coverage.new_arcs(every=header.get("measure") == "all")
    if native is not None:
        arcs.update(native_lines(native))
    if arcs:
        reply["arcs"] = arcs
    return reply, outputs


def native_lines(read: Any) -> dict[str, list[tuple[int, int]]]:
    """The adapter's optional `code_coverage()`: the native source lines the run executed
    (file -> lines, from the counters a gcov or llvm-cov build keeps), as one-line arcs. A
    failure reads as nothing, as for the rewrites."""
    try:
        return {str(f): [(int(n), int(n)) for n in lines] for f, lines in dict(read()).items() if lines}
    except Exception:  # noqa: BLE001 - coverage is feedback: it never fails a run
        print("fuzzbot: reading the native coverage failed (the run goes on):", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return {}


def run_stages(
    served: Served, header: dict[str, Any], inputs: dict[str, np.ndarray], model: bytes, fault: Any, out: BinaryIO
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Stage events go out before each stage, so a crash or hang inside it is still tagged.
    The rewrites read after a good compile go with the reply even if the run then fails."""
    adapter, rid, raw = served.adapter, header.get("id"), model
    times: dict[str, float] = {}
    seen: dict[str, Any] = {}
    stage = "import"
    try:
        t = time.perf_counter()
        if hasattr(adapter, "convert"):
            write_message(out, {"id": rid, "event": "stage", "stage": stage})
            model = adapter.convert(model)
            times["import_s"] = time.perf_counter() - t
        stage = "compile"
        write_message(out, {"id": rid, "event": "stage", "stage": stage})
        t = time.perf_counter()
        faults.before_compile(fault, raw)
        compiled = adapter.compile(model, header["level"])
        if hasattr(adapter, "warmup"):
            adapter.warmup(compiled, inputs)
        times["compile_s"] = time.perf_counter() - t
        if rewrites := read_rewrites(adapter, compiled):
            seen["rewrites"] = rewrites
        if kernels := read_kernels(adapter, compiled):
            seen["kernels"] = kernels
        stage = "run"
        write_message(out, {"id": rid, "event": "stage", "stage": stage})
        t = time.perf_counter()
        faults.before_run(fault, raw)
        outputs = adapter.run(compiled, inputs)
        times["run_s"] = time.perf_counter() - t
    except Exception as e:  # noqa: BLE001 - whatever the system raises is its answer
        return {**served.failure(stage, e, raw), **seen}, {}
    outputs = {k: np.asarray(v) if isinstance(v, np.generic) else v for k, v in outputs.items()}
    bad = [k for k, v in outputs.items() if not isinstance(v, np.ndarray) or v.dtype.hasobject]
    if bad:
        return {"status": "error", "stage": "run", "message": f"non-tensor outputs {bad}", **seen}, {}
    faults.after_run(fault, raw, outputs)
    return {"status": "ok", **times, **seen}, outputs


def handshake(inp: BinaryIO, out: BinaryIO) -> tuple[Served, Any, Zygote | None] | None:
    hello, _, _ = read_message(inp)
    if hello.get("protocol") != PROTOCOL_VERSION:
        message = f"worker speaks protocol {PROTOCOL_VERSION}, the bot {hello.get('protocol')}"
        write_message(out, {"ok": False, "protocol": PROTOCOL_VERSION, "stage": "import", "message": message})
        return None
    fault = hello.get("fault")
    before = set(sys.modules)
    try:
        faults.check(fault, hello.get("memory_mb"))
        adapter = load_adapter(hello["adapter"], hello.get("options", {}))
        info = adapter.info()
        declared = tuple(getattr(adapter, "system_modules", ()))
        origins = module_origins(before, declared, str(hello.get("plugin_module") or ""))
        measured = coverage_packages(adapter, hello.get("coverage"))
        coverage, coverage_state = start_coverage(measured) if measured else (None, "off")
        if coverage is None and hello.get("coverage") and hasattr(adapter, "code_coverage"):
            coverage_state = "on: the build's native counters"
        cap = limit_memory(int(hello["memory_mb"])) if hello.get("memory_mb") else None
    except BaseException as e:  # noqa: BLE001 - any import failure is reported, not raised
        unavailable = isinstance(e, Unavailable)
        traceback.print_exc(file=sys.stderr)
        reply = {"ok": False, "protocol": PROTOCOL_VERSION, "stage": "import", "unavailable": unavailable}
        write_message(out, {**reply, "message": str(e) if unavailable else describe(e)})
        return None
    served = Served(adapter, cap, coverage)
    zygote = fresh_zygote(served, fault, hello, (inp.fileno(), out.fileno()))
    write_message(
        out,
        {
            "ok": True,
            "protocol": PROTOCOL_VERSION,
            "info": info,
            "levels": list(adapter.levels),
            "default_level": adapter.default_level,
            "lowest_level": getattr(adapter, "lowest_level", None) or adapter.levels[0],
            "opsets": list(getattr(adapter, "opsets", ())),
            "unsupported": list(getattr(adapter, "unsupported", ())),
            "system_modules": list(declared),
            "modules": origins,
            "prefix": os.path.realpath(sys.prefix),
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "executable": sys.executable,
            "memory_cap_mb": cap,
            "coverage": coverage_state,
            "coverage_modules": measured,
            "fresh": zygote is not None,
        },
    )
    return served, fault, zygote


def fresh_zygote(served: Served, fault: Any, hello: dict[str, Any], channels: tuple[int, int]) -> Zygote | None:
    """The zygote fresh runs fork from (backends.fresh), where the bot asked for one and the
    adapter does not decline it: onnxruntime's import starts its thread pools, which a fork
    would not carry, and a new process costs it about 0.1 s anyway."""
    if not hello.get("fresh") or not getattr(served.adapter, "fresh_by_fork", True):
        return None

    def serve_one(inp: BinaryIO, out: BinaryIO) -> None:
        forward(inp, out, lambda header, arrays, model, to: handle_run(served, header, arrays, model, fault, to))

    return Zygote.fork(serve_one, channels)


def coverage_packages(adapter: Any, asked: Any) -> list[str]:
    """What to measure: the packages the bot named, or on `True` the adapter's
    `coverage_modules` (its Python converter and passes), else its `system_modules`."""
    if isinstance(asked, list):
        return [str(p) for p in asked]
    if asked is True:
        own = getattr(adapter, "coverage_modules", None)
        return [str(p) for p in (getattr(adapter, "system_modules", ()) if own is None else own)]
    return []


def serve(inp: BinaryIO, out: BinaryIO) -> int:
    ready = handshake(inp, out)
    if ready is None:
        return 1
    served, fault, zygote = ready
    while True:
        try:
            header, arrays, blobs = read_message(inp)
        except EOFError:
            return 0
        op, rid = header.get("op"), header.get("id")
        if op == "exit":
            return 0
        if op == "echo":  # the protocol alone, for its benchmark and tests
            write_message(out, {"id": rid, "status": "ok"}, arrays)
            continue
        if op == "fresh":  # never run here: this process has run cases
            if zygote is None or not zygote.run(header, arrays, blobs, out):
                zygote = None
                write_message(out, {"id": rid, "status": "error", "fresh_unavailable": True})
            continue
        reply, outputs = handle_run(served, header, arrays, blobs["model"], fault, out)
        write_message(out, {"id": rid, **reply}, outputs)
        if reply.get("exiting"):
            return 3


def main() -> int:
    memory.lift()  # the bot's own bound is not the system's (backends.memory)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    sys.exit(main())
