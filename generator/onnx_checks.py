"""onnx's checker and shape inference, asked in a process of their own.

The bot asks onnx's C++ about models nobody wrote by hand: each model generation emits,
every candidate the reducer makes, each case the oracles read types from. That C++ can
crash: a 5-minute campaign (onnxruntime 1.27.0 against 1.28.0) died of SIGSEGV inside
`onnx_cpp2py_export` after 1,829 tests, a null dereference in the control-flow inference
functions by its address, with no summary written; one in eleven such campaigns did. A
crash there cannot be caught in the process it happens in, so the calls go to a helper
process, started once and kept: a crash or a hang costs the one call, which raises the
error its callers already take for an invalid model (`OnnxCrashed` is both an
InferenceError and a ValidationError), and the next call starts a fresh helper. The
helper's memory is capped, so shape inference that asks for gigabytes fails there too.

Cost: a call is the model serialized across a pipe and back. Answers are cached by the
model's bytes, since the oracles ask about one case's model many times. (Measured in
docs/measurements.md.)

The helper is per process and holds nothing a campaign could see: like the onnx library it
stands in for, it is module state by necessity (this module's one global), behind a lock,
so lanes and the reducer's threads share it.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import os
import pickle
import resource
import signal
import subprocess
import sys
import threading
from collections import OrderedDict
from pathlib import Path
from typing import IO, Any

import onnx
from onnx.checker import ValidationError
from onnx.shape_inference import InferenceError

from generator.framing import receive, send

CALL_TIMEOUT_S = 60.0
"""A call that has not answered by then is a hang: the helper is killed, the call fails."""
HELPER_MEMORY = 2 << 30
"""The helper's data segment past what it holds at rest (RLIMIT_DATA)."""
CACHED = 512
"""Answers kept, by the model's bytes and the call."""
CRASH_ON = "FUZZBOT_TEST_ONNX_CRASH_ON"
"""Test-only: the helper dies of a real SIGSEGV on a model holding a node of this op type,
as onnx's C++ does on the models that crash it (none is known in the onnx this project pins)."""


class OnnxCrashed(InferenceError, ValidationError):
    """onnx's C++ died, hung or ran out of memory on this model: to every caller, an invalid
    model (it is both errors they catch)."""


def infer_shapes(model: onnx.ModelProto, **options: bool) -> onnx.ModelProto:
    """`onnx.shape_inference.infer_shapes(model, **options)`, asked in the helper."""
    answer = _HELPER.ask("infer", model, options)
    assert isinstance(answer, bytes)
    inferred = onnx.ModelProto()
    inferred.ParseFromString(answer)
    return inferred


def check_model(model: onnx.ModelProto, full_check: bool = False) -> None:
    """`onnx.checker.check_model(model, full_check)`, asked in the helper."""
    _HELPER.ask("check", model, {"full_check": full_check})


def crashes() -> int:
    """Calls onnx's C++ crashed, hung or ran out of memory on, in this process so far."""
    return _HELPER.crashes


class _Helper:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self.cache: OrderedDict[bytes, tuple[str, Any]] = OrderedDict()
        self.crashes = 0

    def ask(self, call: str, model: onnx.ModelProto, options: dict[str, bool]) -> bytes | None:
        data = model.SerializeToString()
        key = hashlib.blake2b(data + pickle.dumps((call, sorted(options.items()))), digest_size=16).digest()
        with self.lock:
            answer = self.cache.get(key)
            if answer is None:
                answer = self._ask(call, data, options)
                self.cache[key] = answer
                if len(self.cache) > CACHED:
                    self.cache.popitem(last=False)
            else:
                self.cache.move_to_end(key)
        status, value = answer
        if status == "ok":
            return value  # type: ignore[no-any-return]
        raise _error(*value)

    def _ask(self, call: str, data: bytes, options: dict[str, bool]) -> tuple[str, Any]:
        if self.process is None or self.process.poll() is not None:
            self.process = _spawn()
        try:
            send(_stdin(self.process), (call, options, data))
            return receive(_stdout(self.process), CALL_TIMEOUT_S)  # type: ignore[no-any-return]
        except (EOFError, OSError, TimeoutError, pickle.UnpicklingError) as e:
            self._end()
            self.crashes += 1
            return "error", ("OnnxCrashed", f"onnx's {call} crashed on this model ({type(e).__name__}: {e})")

    def _end(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout):
                with contextlib.suppress(OSError):
                    if stream is not None:
                        stream.close()


def _error(kind: str, message: str) -> Exception:
    """The helper's exception, raised here as the type its callers catch."""
    known: dict[str, type[Exception]] = {
        "InferenceError": InferenceError,
        "ValidationError": ValidationError,
        "OnnxCrashed": OnnxCrashed,
    }
    cls = known.get(kind) or getattr(builtins, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = RuntimeError
    if issubclass(cls, MemoryError):
        return OnnxCrashed(f"onnx ran out of memory on this model: {message}")
    return cls(message)


def _spawn() -> subprocess.Popen[bytes]:
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    return subprocess.Popen(
        [sys.executable, "-m", "generator.onnx_checks"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )


def _stdin(process: subprocess.Popen[bytes]) -> IO[bytes]:
    assert process.stdin is not None
    return process.stdin


def _stdout(process: subprocess.Popen[bytes]) -> IO[bytes]:
    assert process.stdout is not None
    return process.stdout


def _answer(call: str, options: dict[str, bool], data: bytes, crash_on: str | None = None) -> tuple[str, Any]:
    try:
        model = onnx.ModelProto.FromString(data)
        if crash_on is not None and any(n.op_type == crash_on for n in model.graph.node):
            os.kill(os.getpid(), signal.SIGSEGV)
        if call == "infer":
            return "ok", onnx.shape_inference.infer_shapes(model, **options).SerializeToString()
        onnx.checker.check_model(model, **options)
        return "ok", None
    except Exception as e:  # noqa: BLE001 - every failure is the caller's to see, by its type's name
        return "error", (type(e).__name__, str(e))


def serve(inbox: IO[bytes], outbox: IO[bytes]) -> None:
    """The helper: one answer per request until its channel closes."""
    with open("/proc/self/statm") as f:
        at_rest = int(f.read().split()[5]) * os.sysconf("SC_PAGE_SIZE")
    with contextlib.suppress(ValueError, OSError, AttributeError):
        hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
        resource.setrlimit(resource.RLIMIT_DATA, (at_rest + HELPER_MEMORY, hard))
    crash_on = os.environ.get(CRASH_ON) or None
    while True:
        try:
            call, options, data = receive(inbox)
        except EOFError:
            return
        send(outbox, _answer(call, options, data, crash_on))


_HELPER = _Helper()


if __name__ == "__main__":
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything onnx prints goes to stderr, never into the channel
    serve(sys.stdin.buffer, out)
