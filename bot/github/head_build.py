"""Head's build for re-running repros where the campaign did not run.

Auto-close asks head whether a repro still fails. In the documented nightly workflow the
report job runs on a fresh runner: the shards' venvs are gone. The campaign's summary.json
records the `compiler:` section with each ref pinned to its commit, so this job builds the
same head by the same recipe (or finds it in a restored cache), instead of asking whatever
interpreter happens to be here, which would close issues that are not fixed.
"""

from __future__ import annotations

from pathlib import Path

from bot.findings.summary import Summary
from bot.sides.workspace import Workspace, WorkspaceError
from oracles.sides import SideName


class HeadUnavailable(Exception):
    """No build of head can be had here; the message is one line and says why."""


def recorded_python(summary: Summary) -> str | None:
    """The head interpreter the campaign used, when it is on this machine."""
    head = summary.sides.get(SideName.head)
    candidates = [head.python if head is not None else None]
    candidates.append(summary.backend.executable if summary.backend is not None else None)
    return next((p for p in candidates if p and Path(p).is_file()), None)


def head_python(summary: Summary, cache_dir: Path) -> str:
    """An interpreter with head's build: the campaign's own when it is here, else head built
    (or found built) under `cache_dir` from the recorded, pinned config."""
    here = recorded_python(summary)
    if here is not None:
        return here
    if summary.compiler is None:
        raise HeadUnavailable(
            "head's interpreter is not on this machine, and the campaign built no side to rebuild it from"
            " (give --python)"
        )
    try:
        side = Workspace(summary.compiler, cache_dir / "sides").prepare_side(SideName.head)
    except WorkspaceError as e:
        raise HeadUnavailable(f"cannot build head to re-run repros: {e}") from e
    return str(side.python)
