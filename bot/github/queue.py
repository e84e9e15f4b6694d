"""OUT/.report-queue/: every write is saved here before it is sent and removed once GitHub has
it, so a crash or an outage halfway leaves exactly the unsent writes, replayed first next time.

Replaying is safe because every action is an idempotent ensure step (bot/github/actions.py).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from pydantic import ValidationError

from bot.files import write_whole
from bot.github.actions import Action

QUEUE_DIR = ".report-queue"


class ReportQueue:
    def __init__(self, out: Path) -> None:
        self.path = out / QUEUE_DIR

    def _file(self, seq: int, action: Action) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", action.key)[:80]
        return self.path / f"{seq:06d}-{safe}.json"

    def put(self, action: Action) -> Path:
        """Saved (through a temporary file, so a reader never sees half of one) in sending order."""
        self.path.mkdir(parents=True, exist_ok=True)
        seq = max((int(p.name[:6]) for p in self._files()), default=0) + 1
        return write_whole(self._file(seq, action), action.model_dump_json(indent=2) + "\n")

    def done(self, entry: Path) -> None:
        entry.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # an empty queue leaves no trace in the output folder
            self.path.rmdir()

    def _files(self) -> list[Path]:
        if not self.path.is_dir():
            return []
        return sorted(p for p in self.path.glob("*.json") if p.name[:6].isdigit())

    def pending(self) -> list[tuple[Path, Action]]:
        """Unsent actions, oldest first; an unreadable entry is dropped (it is rebuilt from the
        output folder by the next report anyway)."""
        found = []
        for p in self._files():
            try:
                found.append((p, Action.model_validate_json(p.read_text())))
            except (OSError, ValidationError, ValueError):
                p.unlink(missing_ok=True)
        return found
