"""Files that several processes share: written whole, and folders built under a lock.

Writing a file whole: a reader never sees half of one, and writers never share a name.

Every file the bot writes that something else reads while it runs (summary.json and
summary.md, a reduced finding's record, the report queue, the probe's caches) goes through a
temporary file of the writing process and thread alone, then a rename. A temporary name
the writers shared was once renamed by one campaign under another, which then died of a
FileNotFoundError (two campaigns of a benchmark on one cache).
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write_whole(path: Path, text: str) -> Path:
    """Write `text` to `path` through a temporary file of this process and thread."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock across processes, held for the duration of the block: two campaigns
    on one cache never build, fetch or probe into one folder at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
