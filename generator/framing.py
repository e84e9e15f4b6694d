"""Length-prefixed pickle frames between fuzzbot and child processes of its own (the
generation processes, onnx's checks): each end is fuzzbot's code on a pipe it made, so
pickle carries whatever the two ends share, and a frame cut short says the other end died."""

from __future__ import annotations

import pickle
import select
import struct
from typing import IO, Any


def send(stream: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def receive(stream: IO[bytes], timeout_s: float | None = None) -> Any:
    """The next frame; EOFError when the other end closed, TimeoutError past `timeout_s`
    (one frame is in flight at a time, so nothing waits in the stream's buffer)."""
    if timeout_s is not None and not select.select([stream], [], [], timeout_s)[0]:
        raise TimeoutError(f"no answer in {timeout_s:.0f} s")
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("the other end closed")
    (size,) = struct.unpack("<Q", head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other end closed mid-message")
    return pickle.loads(data)  # our own child process, over its own pipe
