"""One build as a campaign runs it, before any worker starts."""

from __future__ import annotations

from dataclasses import dataclass

from backends.spec import BackendSpec
from bot.sides.isolation import BuildRoots


@dataclass(frozen=True)
class SideSetup:
    """One build a campaign runs: the backend spec and the interpreter that has the build."""

    name: str
    spec: BackendSpec
    python: str
    build_id: str = ""
    """What identifies the build for caches (workspace.PreparedSide.build_id); empty: the
    interpreter's path, version and commit identify it."""
    roots: BuildRoots | None = None
    """Where the side's modules must come from; None: a build fuzzbot did not make."""
