"""A reduced bundle is only ever replaced by a smaller one.

A reduction cut short (`--max-tests 2`, a short budget) can end larger than the one a
campaign already kept beside the finding; written over it, the report would link a worse
repro and nothing would say so. So a new reduction is written beside the kept one first
and swapped in only when it has fewer nodes; otherwise it is dropped and the kept one
stays, which the caller says in one line.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import onnx

from bot.errors import UserError


@dataclass(frozen=True)
class Outcome:
    dest: Path
    new_nodes: int | None
    kept_nodes: int | None
    """The nodes of the reduced model that was already there; None when there was none."""
    replaced: bool


def node_count(bundle: Path) -> int | None:
    """Nodes of the bundle's model; None when there is no readable one."""
    try:
        return len(onnx.load(str(bundle / "model.onnx"), load_external_data=False).graph.node)
    except Exception:  # noqa: BLE001 - an unreadable model counts as none
        return None


def check_dest(dest: Path, flag: str = "--out") -> None:
    """A folder that can take a reduced bundle: new, empty, or a reduced bundle already."""
    if dest.exists() and not dest.is_dir():
        raise UserError(f"{flag} {dest} is a file, not a folder; give a folder")
    if dest.is_dir() and any(dest.iterdir()) and not (dest / "model.onnx").is_file():
        raise UserError(f"{flag} {dest} holds other files and no reduced bundle; give a new or empty folder")


def reduce_keeping_smaller(dest: Path, reduce_into: Callable[[Path], Path]) -> Outcome:
    """Run `reduce_into(folder)` (which writes a reduced bundle to `folder`) so that it
    replaces the bundle at `dest` only when it has fewer nodes."""
    kept = node_count(dest) if (dest / "model.onnx").is_file() else None
    if kept is None:
        written = reduce_into(dest)
        return Outcome(written, node_count(written), None, True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{dest.name}.new-", dir=dest.parent))
    try:
        written = reduce_into(scratch)
        new = node_count(written)
        if new is None or new >= kept:
            return Outcome(dest, new, kept, False)
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
        old.rmdir()
        dest.rename(old)
        written.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
        return Outcome(dest, new, kept, True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
