"""Throwaway virtual environments for tests that need another release of a system.

Each one holds only what a worker needs (numpy and the system under test), without
the system site-packages, so a test proves that the worker runs in a foreign env.
They are cached under `.cache/venvs/` by their exact package list: the first run
on a clean clone builds them (about half a minute each), later runs reuse them. A
lock keeps two test processes from building the same one, and a marker written
last means an interrupted build is redone, never trusted.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "venvs"


def cached_venv(name: str, packages: list[str], timeout_s: float = 600) -> Path:
    """The interpreter of a venv holding exactly `packages`, built on first use."""
    digest = hashlib.sha256("\n".join([sys.version, *packages]).encode()).hexdigest()[:10]
    root = CACHE / f"{name}-{digest}"
    python = root / "bin" / "python"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / ".complete").exists():
            return python
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=timeout_s)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *packages]
        subprocess.run(pip, check=True, timeout=timeout_s, capture_output=True)
        (root / ".complete").write_text("\n".join(packages) + "\n")
    return python
