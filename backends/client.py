"""The bot's side of a worker: start it under a given interpreter, send requests,
and turn every way a worker can fail into a RunResult.

A request may be submitted and collected later, so the bot can generate the next
case while the worker computes this one. A worker that crashed, hung, ran out of
memory or desynchronized is killed, and the next request starts a fresh one.
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
import weakref
from pathlib import Path
from typing import Any

import numpy as np

import backends
from backends.death import last_words
from backends.faults import FaultSpec
from backends.protocol import HEADER, PROTOCOL_VERSION, ProtocolError, decode_body, encode, header_length
from backends.results import BackendInfo, RunResult, Stage, Status
from backends.spec import BackendSpec, BackendSpecError, canonical_level

STDERR_TAIL = 2000
REPO_ROOT = Path(backends.__file__).resolve().parent.parent


class BackendUnavailable(RuntimeError):
    """The worker could not start or could not import the system under test."""


def signal_name(returncode: int) -> str | None:
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


COMPILE_TIMEOUT_S = 120.0
"""Default limit on the import and compile stages: a JIT (TVM's float16 kernels take tens
of seconds) is slow, not hung, so it gets its own bound apart from the run's."""


class WorkerClient:
    def __init__(
        self,
        spec: BackendSpec,
        python: str = sys.executable,
        timeout_s: float = 10.0,
        options: dict[str, Any] | None = None,
        fault: FaultSpec | None = None,
        startup_timeout_s: float = 120.0,
        memory_mb: int | None = None,
        compile_timeout_s: float | None = None,
        coverage: bool | list[str] = False,
    ) -> None:
        """`timeout_s` bounds the run stage; `compile_timeout_s` the import and compile
        stages (default: the larger of COMPILE_TIMEOUT_S and `timeout_s`). `coverage`: measure
        the system's own Python code on the runs submitted with `measure` (True: the packages
        the adapter names; a list: those packages); backends.code_coverage."""
        self.spec = spec
        # A worker starts in its scratch folder, where a relative path would name nothing:
        # a path is taken from the caller's working folder (symlinks kept, so a venv's
        # interpreter stays that venv's); a bare name is still looked up on PATH.
        self.python = os.path.abspath(os.path.expanduser(python)) if os.sep in python else python
        self.timeout_s = timeout_s
        self.compile_timeout_s = max(COMPILE_TIMEOUT_S, timeout_s) if compile_timeout_s is None else compile_timeout_s
        self.options = {**spec.option_dict, **(options or {})}
        self.fault = fault
        self.startup_timeout_s = startup_timeout_s
        self.memory_mb = memory_mb
        self.coverage = coverage
        self.info: BackendInfo | None = None
        self.level = spec.level
        self.handshake: dict[str, Any] = {}
        self.restarts = 0
        self.forks = 0
        """Fresh runs in a child of the worker's zygote (run_fresh)."""
        self._proc: subprocess.Popen[bytes] | None = None
        self._answered = 0
        """Requests the current process was sent before the one in flight: a failure after
        earlier cases may be state they left behind (RunResult.earlier_requests)."""
        self._dir = Path(tempfile.mkdtemp(prefix="fuzzbot-worker-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self._dir), True)
        self._log = self._dir / "stderr-0.log"
        self._spawned = 0
        self._spare: tuple[subprocess.Popen[bytes], Path] | None = None
        self._pending: tuple[float, int, int, int] | None = None
        self._held: RunResult | None = None
        """The answer to a request sent ahead, collected early because `run` needed the worker."""
        self._next_id = 0
        # Only our own packages are put on the worker's path (backends, and what the
        # adapter declares), plus a plugin file's copy, so the side's numpy and system
        # under test are never shadowed by the bot's environment or its working folder.
        (self._dir / "path").mkdir()
        for package in ("backends", *spec.packages):
            (self._dir / "path" / package).symlink_to(REPO_ROOT / package)
        if spec.plugin_file:
            shutil.copyfile(spec.plugin_file, self._dir / "path" / f"{self.plugin_module}.py")

    def __enter__(self) -> WorkerClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def plugin_module(self) -> str:
        """The module name a plugin file is imported under ("" for other specs)."""
        return self.spec.adapter.partition(":")[0] if self.spec.plugin_file else ""

    @property
    def modules(self) -> dict[str, str]:
        """Top-level module -> the file the worker imported it from (from the handshake)."""
        return dict(self.handshake.get("modules") or {})

    def _env(self) -> dict[str, str]:
        """The worker's import path is its interpreter's own plus our scratch folder:
        no inherited PYTHONPATH, no working folder (PYTHONSAFEPATH, and the worker runs in
        the scratch folder), so one side can never import another side's source."""
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self._dir / "path")
        env["PYTHONSAFEPATH"] = "1"
        env["PYTHONFAULTHANDLER"] = "1"
        return env

    def start(self) -> BackendInfo:
        """Start the worker, or promote the spare: once a worker has died, a second one is
        kept importing the system in the background, so the next restart (a crash's re-run,
        the case after it) does not wait the import (about 0.1 s for onnxruntime, seconds
        for TVM). A campaign whose worker never dies never starts a spare."""
        if self._proc is not None and self._proc.poll() is None:
            assert self.info is not None
            return self.info
        spare, self._spare = self._spare, None
        if spare is not None and spare[0].poll() is not None:  # it died importing: start afresh
            _end(spare[0])
            spare = None
        self._proc, self._log = spare or self._spawn()
        self._answered = 0
        try:
            reply, _ = self._receive(time.monotonic() + self.startup_timeout_s)
        except (EOFError, TimeoutError, OSError, ProtocolError) as e:
            tail = (self._tail(0).splitlines() or [""])[-1]
            self._kill()
            why = str(e) or type(e).__name__
            raise BackendUnavailable(
                f"{self.spec.name} worker under {self.python} failed to start: {why} {tail}".strip()
            ) from e
        self.info = self._accept(reply)
        if self.restarts:
            self._spare = self._spawn()
        return self.info

    def _spawn(self) -> tuple[subprocess.Popen[bytes], Path]:
        """A worker process with the handshake's hello already sent, and its own stderr log."""
        self._spawned += 1
        log_path = self._dir / f"stderr-{self._spawned}.log"
        with open(log_path, "ab") as log:
            try:
                proc = subprocess.Popen(
                    [self.python, "-m", "backends.worker"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=self._env(),
                    cwd=self._dir,
                    start_new_session=True,
                )
            except OSError as e:
                raise BackendUnavailable(f"cannot start {self.python}: {e.strerror or e}") from e
        hello = {
            "protocol": PROTOCOL_VERSION,
            "adapter": self.spec.adapter,
            "plugin_module": self.plugin_module,
            "options": self.options,
            "fault": self.fault,
            "memory_mb": self.memory_mb,
            "coverage": self.coverage,
            "fresh": True,
        }
        assert proc.stdin is not None
        with contextlib.suppress(OSError):  # a worker that died at once: the handshake read says so
            proc.stdin.write(encode(hello))
            proc.stdin.flush()
        return proc, log_path

    def _accept(self, reply: dict[str, Any]) -> BackendInfo:
        """Check the handshake and record which build answers; refusals are one line."""
        name = self.spec.name
        if reply.get("protocol") != PROTOCOL_VERSION:
            self._kill()
            theirs = reply.get("protocol")
            raise BackendUnavailable(
                f"{name} worker under {self.python} speaks protocol {theirs}, this bot {PROTOCOL_VERSION}"
            )
        if not reply.get("ok"):
            self._kill()
            message = str(reply.get("message", "")).strip().splitlines() or ["no reason given"]
            if reply.get("unavailable"):
                raise BackendUnavailable(message[-1])
            raise BackendUnavailable(f"{name} is not importable under {self.python}: {message[-1]}")
        try:
            self.level = canonical_level(self.spec.level or reply["default_level"], reply["levels"], name)
        except BackendSpecError:
            self._kill()
            raise
        self.handshake = reply
        info = reply["info"]
        return BackendInfo(
            name=info["name"],
            level=self.level,
            version=str(info["version"]),
            commit=info.get("commit"),
            python=reply.get("python", ""),
            executable=reply.get("executable", ""),
            protocol=reply["protocol"],
        )

    @property
    def lowest_level(self) -> str | None:
        """The build's least optimizing level, from the handshake (None before start)."""
        level = self.handshake.get("lowest_level")
        return str(level) if level else None

    @property
    def measures(self) -> bool:
        """Whether the worker measures the system's code when asked (it has `coverage`)."""
        return str(self.handshake.get("coverage", "off")).startswith("on")

    def submit(self, model: bytes, inputs: dict[str, np.ndarray], measure: bool | str = False) -> None:
        """Send a case; `measure`: with the system's code coverage, where the worker measures
        it: the arcs no earlier run of the process executed, or with "all" every arc it ran."""
        if self._held is not None:
            raise RuntimeError("the answer to the case sent ahead is not collected yet")
        header: dict[str, Any] = {"op": "run", "level": self.level}
        if measure:
            header["measure"] = measure
        self._submit(header, inputs, {"model": model})

    def echo(self, arrays: dict[str, np.ndarray]) -> RunResult:
        """Send arrays and get them back without touching the system: the protocol's own cost."""
        self._submit({"op": "echo"}, arrays, {})
        return self._collect()

    def _submit(self, header: dict[str, Any], arrays: dict[str, np.ndarray], blobs: dict[str, bytes]) -> None:
        if self._pending is not None:
            raise RuntimeError("a request is already in flight")
        if self._proc is None or self._proc.poll() is not None:
            self.restarts += self._proc is not None
            self.start()
        self._next_id += 1
        offset = self._log.stat().st_size if self._log.exists() else 0
        self._pending = (time.monotonic(), self._next_id, offset, self._answered)
        self._answered += 1
        frame = encode({**header, "id": self._next_id}, arrays, blobs)
        with contextlib.suppress(OSError):  # the worker died; collect() reports how
            self._send(frame)

    def collect(self) -> RunResult:
        if self._held is not None:
            held, self._held = self._held, None
            return held
        return self._collect()

    def _collect(self) -> RunResult:
        if self._pending is None:
            raise RuntimeError("nothing was submitted")
        started, rid, offset, earlier = self._pending
        self._pending = None
        result = self._await(started, rid, offset)
        result.earlier_requests = earlier
        return result

    def _await(self, started: float, rid: int, offset: int) -> RunResult:
        stage: Stage | None = None
        deadline = started + self.compile_timeout_s
        try:
            while True:
                header, arrays = self._receive(deadline)
                if header.get("id") != rid:
                    raise ProtocolError(f"reply for request {header.get('id')} while waiting for {rid}")
                if header.get("event") == "stage":
                    stage = Stage(header["stage"])
                    if stage is Stage.run:
                        deadline = time.monotonic() + self.timeout_s
                    continue
                if header.get("died") is not None:  # a fresh child died; its worker lives
                    return self._child_died(int(header["died"]), stage, offset, started)
                if header.get("fresh_unavailable"):  # its zygote is gone: fresh runs restart it
                    self.handshake["fresh"] = False
                result = self._result(header, arrays, time.monotonic() - started)
                if header.get("exiting"):  # it answered, then exits: reap it before the next request
                    result.stderr_tail = self._tail(offset)
                    self._reap()
                    self._kill()
                return result
        except TimeoutError:
            limit = self.timeout_s if stage is Stage.run else self.compile_timeout_s
            message = f"no answer within {limit:g}s" + (f" ({stage.value} stage)" if stage else "")
            return self._failure(Status.timeout, stage, message, None, offset, started)
        except ProtocolError as e:
            return self._failure(Status.crash, stage, f"worker protocol error: {e}", None, offset, started)
        except (EOFError, OSError) as e:
            code = self._reap()
            message, sig = self._death(code, offset, str(e))
            return self._failure(Status.crash, stage, message, sig, offset, started)

    def run(self, model: bytes, inputs: dict[str, np.ndarray]) -> RunResult:
        """Run now, also while a case sent ahead is in flight (a campaign lane sends the next
        case before it judges this one, whose re-runs come here): that answer is kept for
        the `collect` that asks for it."""
        if self._pending is not None:
            self._held = self._collect()
        self._submit({"op": "run", "level": self.level}, inputs, {"model": model})
        return self._collect()

    def run_fresh(self, model: bytes, inputs: dict[str, np.ndarray]) -> RunResult:
        """Run in a process no earlier case ran in, the used worker kept: a child of the
        zygote the worker forked before its first case (backends.fresh), or, where the worker
        has none, a restart. The answer to a case sent ahead is collected first and kept."""
        if self.handshake.get("fresh") and self._proc is not None and self._proc.poll() is None:
            if self._pending is not None:
                self._held = self._collect()
            self._submit({"op": "fresh", "level": self.level}, inputs, {"model": model})
            self._answered -= 1  # the worker only relayed it: its own process ran nothing more
            result = self._collect()
            if self.handshake.get("fresh"):  # else its zygote was gone (`_await`)
                self.forks += 1
                result.earlier_requests = 0
                return result
        self.restart()
        return self.run(model, inputs)

    def restart(self) -> None:
        """A fresh process, for a failure that must be seen in a worker no earlier case ran
        in (a TVM case once left its worker failing "Check not null: ptr" on every case
        after it). The answer to a case sent ahead is collected first and kept."""
        if self._pending is not None:
            self._held = self._collect()
        self._kill()
        self.restarts += 1
        self.start()

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                self._send(encode({"op": "exit"}))
                self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()
        if self._spare is not None:
            _end(self._spare[0])
            self._spare = None
        self._cleanup()

    def _result(self, header: dict[str, Any], arrays: dict[str, np.ndarray], wall: float) -> RunResult:
        return RunResult(
            status=Status(header["status"]),
            stage=Stage(header["stage"]) if header.get("stage") else None,
            message=header.get("message", ""),
            import_s=header.get("import_s"),
            compile_s=header.get("compile_s"),
            run_s=header.get("run_s"),
            wall_s=wall,
            outputs=arrays,
            backend=self.info,
            rewrites={str(k): int(v) for k, v in (header.get("rewrites") or {}).items()},
            kernels={str(k): str(v) for k, v in (header.get("kernels") or {}).items()},
            arcs={str(f): [(int(a), int(b)) for a, b in arcs] for f, arcs in (header.get("arcs") or {}).items()},
        )

    def _failure(
        self,
        status: Status,
        stage: Stage | None,
        message: str,
        sig: str | None,
        offset: int,
        started: float,
        kill: bool = True,
    ) -> RunResult:
        """A run that got no answer; the worker is killed unless it is alive and well (a
        fresh child of it died)."""
        if kill:
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

    def _death(self, code: int, offset: int, why: str) -> tuple[str, str | None]:
        """How a worker process died, in words, with the signal's name if one killed it."""
        sig = signal_name(code)
        message = f"worker killed by {sig}" if sig else f"worker exited with code {code} ({why})"
        if sig and (words := last_words(self._tail(offset))):
            message += f": {words}"
        if self.memory_mb and sig in ("SIGKILL", "SIGSEGV", "SIGABRT"):
            message += f" (memory limit {self.memory_mb} MiB)"
        return message, sig

    def _child_died(self, code: int, stage: Stage | None, offset: int, started: float) -> RunResult:
        """A fresh child's death, worded as a worker's own, so the failure it shows is named
        as the used worker's was; the worker itself lives on."""
        message, sig = self._death(code, offset, "worker closed its channel")
        return self._failure(Status.crash, stage, message, sig, offset, started, kill=False)

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
            # An answer already waiting counts even past the deadline: the lane may collect
            # a case it sent ahead only after judging the one before.
            remaining = max(deadline - time.monotonic(), 0.0)
            if not select.select([fd], [], [], remaining)[0]:
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
        if self._proc is not None:
            _end(self._proc)

    def log(self, limit: int = 1 << 20) -> str:
        """What the current process wrote to stderr, up to its last `limit` bytes: a build's
        own log of what it did (onnxruntime's transformers, bot.reduce.rewrite_blame), which a
        run's result keeps only the tail of, and only on failure."""
        return self._tail(0, limit)

    def _tail(self, offset: int, limit: int = STDERR_TAIL) -> str:
        try:
            with open(self._log, "rb") as f:
                f.seek(max(offset, f.seek(0, os.SEEK_END) - limit))
                return f.read().decode(errors="replace").strip()
        except OSError:
            return ""


def _end(proc: subprocess.Popen[bytes]) -> None:
    """Kill a worker's process group (it may have children) and close its channel."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()
