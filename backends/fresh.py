"""Fresh runs without a fresh import: a zygote the worker forks before its first case.

Triage believes a failure a used worker showed only once a process no earlier case ran in
shows it too (a TVM case once left its worker failing every case after it). A new process
imports the system again: torch and a converter, about 1.1 s of CPU for onnx2torch, seconds
for TVM. On a converter that fails on a third of its cases, confirming each new failure
that way held the lane for 37% of a campaign's wall time, and the imports took half of a
2-core machine. A child forked from a process that imported the system and never ran a
case is such a process, at the cost of a fork.

The worker forks the zygote right after its handshake. For each fresh run it hands the
zygote two new pipes over a socket; the zygote forks a child that reads the one request
from the first, answers on the second and exits, and the zygote sends back the child's exit
status. Fresh pipes per child: a child that dies mid-answer leaves nothing in the next
one's. The worker relays the answer, or, when the child died first, says how it died
(`died`, the exit code as subprocess gives it: negative for a signal). The zygote and its
children are in the worker's process group, so the bot's kill of a hung worker ends all.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from backends.protocol import encode, read_message, write_message

ServeOne = Callable[[BinaryIO, BinaryIO], None]
"""Read one request from the first stream, answer it on the second."""
Handle = Callable[[dict[str, Any], dict[str, Any], bytes, BinaryIO], tuple[dict[str, Any], dict[str, Any]]]
"""The worker's run: header, inputs, model, the stream its stage events go to -> reply, outputs."""
STATUS = struct.Struct("<i")


@dataclass
class Zygote:
    """The worker's handle on its zygote: the process and the socket to it."""

    pid: int
    channel: socket.socket

    @classmethod
    def fork(cls, serve_one: ServeOne, channels: tuple[int, ...]) -> Zygote | None:
        """Fork the zygote now, before any case; None where the platform cannot fork.
        `channels`: the worker's own to the bot, which the zygote closes: the bot learns
        that its worker died from the end of its channel, and a copy held open would hide it."""
        if not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
            return None
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # the zygote: never returns
            ours.close()
            for fd in channels:
                os.close(fd)
            _zygote(theirs, serve_one)
        theirs.close()
        return cls(pid, ours)

    def run(self, header: dict[str, Any], arrays: dict[str, Any], blobs: dict[str, bytes], out: BinaryIO) -> bool:
        """One request in a fresh child; its stage events and answer relayed to `out`. False
        when the zygote is gone (killed from outside): the request is not answered, and the
        bot restarts the worker for a fresh run instead."""
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        try:
            socket.send_fds(self.channel, [b"f"], [req_r, rep_w])
        except OSError:
            for fd in (req_w, rep_r):
                os.close(fd)
            return False
        finally:
            os.close(req_r)
            os.close(rep_w)
        _send_all(req_w, encode(header, arrays, blobs))
        stage, answered = None, False
        with os.fdopen(rep_r, "rb") as replies:
            while not answered:
                try:
                    reply, outputs, _ = read_message(replies)
                except EOFError:
                    break
                if reply.get("event") == "stage":
                    stage = reply.get("stage")
                else:  # the child exits anyway: nothing for the bot to reap
                    reply.pop("exiting", None)
                    answered = True
                write_message(out, reply, outputs)
        try:
            code = self._status()
        except (OSError, EOFError):
            return answered
        if not answered:
            write_message(out, {"id": header.get("id"), "status": "crash", "stage": stage, "died": code})
        return True

    def _status(self) -> int:
        data = b""
        while len(data) < STATUS.size:
            chunk = self.channel.recv(STATUS.size - len(data))
            if not chunk:
                raise EOFError("the zygote closed its channel")
            data += chunk
        return int(STATUS.unpack(data)[0])


def _send_all(fd: int, data: bytes) -> None:
    """Write the request and close the pipe; a child that died before reading it leaves the
    pipe broken, and its exit status says how it died."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except BrokenPipeError:
        pass
    finally:
        os.close(fd)


def _zygote(channel: socket.socket, serve_one: ServeOne) -> None:
    """Fork a child per request, wait for it, send its exit status; exit with the worker."""
    code = 0
    try:
        while True:
            message, fds, _, _ = socket.recv_fds(channel, 16, 2)
            if not message or len(fds) != 2:
                break
            child = os.fork()
            if child == 0:
                channel.close()
                _child(fds[0], fds[1], serve_one)
            for fd in fds:
                os.close(fd)
            _, status = os.waitpid(child, 0)
            channel.sendall(STATUS.pack(os.waitstatus_to_exitcode(status)))
    except OSError:
        code = 1
    os._exit(code)


def _child(req: int, rep: int, serve_one: ServeOne) -> None:
    code = 0
    try:
        with os.fdopen(req, "rb") as inp, os.fdopen(rep, "wb") as out:
            serve_one(inp, out)
    except BaseException:  # noqa: BLE001 - the zygote reports the exit; the worker says how it died
        code = 1
    os._exit(code)


def forward(inp: BinaryIO, out: BinaryIO, handle: Handle) -> None:
    """A fresh child's one request, answered as the worker answers a run."""
    header, arrays, blobs = read_message(inp)
    reply, outputs = handle(header, arrays, blobs["model"], out)
    write_message(out, {"id": header.get("id"), **reply}, outputs)


__all__ = ["Zygote", "forward"]
