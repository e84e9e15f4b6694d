"""Proof, at worker start, that each side runs its own build and nothing else's.

A worker reports the file every module its adapter pulled in was imported from
(backends.worker.module_origins). For a side fuzzbot built (a commit or a pip spec), those
files must lie in that side's own build folder (its venv and worktree) or, for the
dependencies every side shares, in the shared packages venv; the system under test itself
(the adapter's `system_modules`, a `module:Class` plugin's package) only in its own. A module
from anywhere else (the checkout fuzzbot runs in, another side's build, a stray
PYTHONPATH entry) means the side would test someone else's code, and every regression
would come out `persistent`: the campaign refuses to start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bot.errors import UserError


class IsolationError(UserError):
    """A side imports code that is not its build's; the message names the module and file."""


@dataclass(frozen=True)
class BuildRoots:
    """Where one side's modules may come from."""

    own: Path
    """The side's build folder: its venv and, for a commit, its worktree."""
    shared: Path | None = None
    """The packages venv every side layers its own over."""

    def owns(self, file: Path) -> bool:
        return file.is_relative_to(self.own.resolve())

    def shares(self, file: Path) -> bool:
        return self.shared is not None and file.is_relative_to(self.shared.resolve())


def check_isolation(side: str, modules: Mapping[str, str], roots: BuildRoots, system: tuple[str, ...]) -> None:
    """Raise IsolationError for the first module from outside the side's build (the system
    under test must come from the side's own folder, its dependencies may be shared)."""
    for name, where in sorted(modules.items(), key=lambda kv: (kv[0] not in system, kv[0])):
        file = Path(where)
        if roots.owns(file) or (name not in system and roots.shares(file)):
            continue
        whose = "its build" if name in system else "its build or the shared packages"
        raise IsolationError(f"side {side} imports {name} from {file}, not from {whose} ({roots.own})")
