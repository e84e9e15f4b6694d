"""The bot's side of a worker: start it under a given interpreter, send requests,
and turn every way a worker can fail into a RunResult.

A request may be submitted and collected later, so the bot can generate the next
case while the worker computes this one.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import backends
from backends.protocol import HEADER, ProtocolError, decode_body, encode, header_length
from backends.results import BackendInfo, RunResult, Stage, Status
from backends.spec import BackendSpec

STDERR_TAIL = 2000


class BackendUnavailable(RuntimeError):
    """The worker could not start or could not import the system under test."""


def signal_name(returncode: int) -> str | None:
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class WorkerClient:
    def __init__(
        self,
        spec: BackendSpec,
        python: str = sys.executable,
        timeout_s: float = 10.0,
        options: dict[str, Any] | None = None,
        fault: dict[str, Any] | None = None,
        startup_timeout_s: float = 120.0,
    ) -> None:
        self.spec = spec
        self.python = python
        self.timeout_s = timeout_s
        self.options = options or {}
        self.fault = fault
        self.startup_timeout_s = startup_timeout_s
        self.info: BackendInfo | None = None
        self.restarts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="fuzzbot-worker-"))
        self._log = self._dir / "stderr.log"
        self._pending: tuple[float, int, int] | None = None
        self._next_id = 0
        # Only the backends package is put on the worker's path, so the side's own
        # numpy and system under test are never shadowed by the bot's environment.
        (self._dir / "path").mkdir()
        (self._dir / "path" / "backends").symlink_to(Path(backends.__file__).parent)

    def __enter__(self) -> WorkerClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> BackendInfo:
        if self._proc is not None and self._proc.poll() is None:
            assert self.info is not None
            return self.info
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self._dir / "path"), env.get("PYTHONPATH")]))
        env["PYTHONFAULTHANDLER"] = "1"
        with open(self._log, "ab") as log:
            try:
                self._proc = subprocess.Popen(
                    [self.python, "-m", "backends.worker"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=env,
                    cwd=self._dir,
                    start_new_session=True,
                )
            except OSError as e:
                raise BackendUnavailable(f"cannot start {self.python}: {e.strerror or e}") from e
        hello = {"adapter": self.spec.adapter, "options": self.options, "fault": self.fault}
        try:
            self._send(encode(hello))
            reply, _ = self._receive(time.monotonic() + self.startup_timeout_s)
        except (EOFError, TimeoutError, OSError, ProtocolError) as e:
            tail = self._tail(0)
            self._kill()
            raise BackendUnavailable(
                f"{self.spec.name} worker under {self.python} failed to start: {e} {tail}".strip()
            ) from e
        if not reply.get("ok"):
            self._kill()
            raise BackendUnavailable(f"{self.spec.name} is not importable under {self.python}: {reply.get('message')}")
        info = reply["info"]
        self.info = BackendInfo(
            name=info["name"],
            level=self.spec.level,
            version=str(info["version"]),
            commit=info.get("commit"),
            python=reply.get("python", ""),
        )
        return self.info

    def submit(self, model: bytes, inputs: dict[str, np.ndarray]) -> None:
        if self._pending is not None:
            raise RuntimeError("a request is already in flight")
        if self._proc is None or self._proc.poll() is not None:
            self.restarts += self._proc is not None
            self.start()
        self._next_id += 1
        offset = self._log.stat().st_size if self._log.exists() else 0
        self._pending = (time.monotonic(), self._next_id, offset)
        frame = encode({"op": "run", "id": self._next_id, "level": self.spec.level}, inputs, {"model": model})
        with contextlib.suppress(OSError):  # the worker died; collect() reports how
            self._send(frame)

    def collect(self) -> RunResult:
        if self._pending is None:
            raise RuntimeError("nothing was submitted")
        started, _, offset = self._pending
        self._pending = None
        stage: Stage | None = None
        deadline = started + self.timeout_s
        try:
            while True:
                header, arrays = self._receive(deadline)
                if header.get("event") == "stage":
                    stage = Stage(header["stage"])
                    continue
                return self._result(header, arrays, time.monotonic() - started)
        except TimeoutError:
            self._kill()
            message = f"no answer within {self.timeout_s:g}s"
            return self._failure(Status.timeout, stage, message, None, offset, started)
        except (EOFError, OSError, ProtocolError) as e:
            code = self._reap()
            sig = signal_name(code)
            message = f"worker killed by {sig}" if sig else f"worker exited with code {code} ({e})"
            return self._failure(Status.crash, stage, message, sig, offset, started)

    def run(self, model: bytes, inputs: dict[str, np.ndarray]) -> RunResult:
        self.submit(model, inputs)
        return self.collect()

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                self._send(encode({"op": "exit"}))
                self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _result(self, header: dict[str, Any], arrays: dict[str, np.ndarray], wall: float) -> RunResult:
        return RunResult(
            status=Status(header["status"]),
            stage=Stage(header["stage"]) if header.get("stage") else None,
            message=header.get("message", ""),
            compile_s=header.get("compile_s"),
            run_s=header.get("run_s"),
            wall_s=wall,
            outputs=arrays,
            backend=self.info,
        )

    def _failure(
        self, status: Status, stage: Stage | None, message: str, sig: str | None, offset: int, started: float
    ) -> RunResult:
        self._kill()
        return RunResult(
            status=status,
            stage=stage,
            message=message,
            signal=sig,
            stderr_tail=self._tail(offset),
            wall_s=time.monotonic() - started,
            backend=self.info,
        )

    def _send(self, frame: bytes) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(frame)
        self._proc.stdin.flush()

    def _receive(self, deadline: float) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        head = self._read(header_length(self._read(HEADER.size, deadline)), deadline)
        header, arrays, _ = decode_body(head, lambda n: self._read(n, deadline))
        return header, arrays

    def _read(self, n: int, deadline: float) -> bytes:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        buf = bytearray()
        while len(buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError
            chunk = os.read(fd, min(n - len(buf), 1 << 20))
            if not chunk:
                raise EOFError("worker closed its channel")
            buf += chunk
        return bytes(buf)

    def _reap(self) -> int:
        assert self._proc is not None
        try:
            return self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
            return self._proc.wait()

    def _kill(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()

    def _tail(self, offset: int) -> str:
        try:
            with open(self._log, "rb") as f:
                f.seek(max(offset, f.seek(0, os.SEEK_END) - STDERR_TAIL))
                return f.read().decode(errors="replace").strip()
        except OSError:
            return ""
