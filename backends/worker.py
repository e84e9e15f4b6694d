"""The worker process: one system under test, loaded once, serving run requests.

Started by the bot as `python -m backends.worker` under the side's own interpreter.
File descriptor 1 is kept for protocol frames and the process's stdout is pointed
at stderr, so native libraries that print cannot corrupt the channel.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from typing import Any, BinaryIO

import numpy as np

from backends import faults
from backends.protocol import read_message, write_message

MAX_MESSAGE = 4000


def describe(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + " ...[truncated]"


def load_adapter(path: str, options: dict[str, Any]) -> Any:
    module, _, cls = path.partition(":")
    return getattr(importlib.import_module(module), cls)(options)


def failure(stage: str, e: BaseException) -> dict[str, Any]:
    traceback.print_exc(file=sys.stderr)
    return {"status": "error", "stage": stage, "message": describe(e)}


def handle_run(
    adapter: Any, header: dict[str, Any], inputs: dict[str, np.ndarray], model: bytes, fault: Any, out: BinaryIO
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    # Stage events go out before each stage, so a crash or hang inside it is still tagged.
    write_message(out, {"event": "stage", "stage": "compile"})
    t0 = time.perf_counter()
    try:
        faults.before_compile(fault, model)
        compiled = adapter.compile(model, header["level"])
    except Exception as e:  # noqa: BLE001 - whatever the system raises is its answer
        return failure("compile", e), {}
    t1 = time.perf_counter()
    write_message(out, {"event": "stage", "stage": "run"})
    try:
        outputs = adapter.run(compiled, inputs)
    except Exception as e:  # noqa: BLE001 - whatever the system raises is its answer
        return failure("run", e), {}
    t2 = time.perf_counter()
    bad = [k for k, v in outputs.items() if not isinstance(v, np.ndarray) or v.dtype.hasobject]
    if bad:
        return {"status": "error", "stage": "run", "message": f"non-tensor outputs {bad}"}, {}
    faults.after_run(fault, model, outputs)
    return {"status": "ok", "compile_s": t1 - t0, "run_s": t2 - t1}, outputs


def serve(inp: BinaryIO, out: BinaryIO) -> int:
    hello, _, _ = read_message(inp)
    try:
        adapter = load_adapter(hello["adapter"], hello.get("options", {}))
        info = adapter.info()
    except BaseException as e:  # noqa: BLE001 - any import failure is reported, not raised
        write_message(out, {"ok": False, "stage": "import", "message": describe(e)})
        return 1
    write_message(out, {"ok": True, "info": info, "pid": os.getpid(), "python": sys.version.split()[0]})
    fault = hello.get("fault")
    while True:
        try:
            header, arrays, blobs = read_message(inp)
        except EOFError:
            return 0
        if header.get("op") == "exit":
            return 0
        reply, outputs = handle_run(adapter, header, arrays, blobs["model"], fault, out)
        write_message(out, {"id": header.get("id"), **reply}, outputs)


def main() -> int:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    sys.exit(main())
