"""Output folders hold one run's results each, and a wrong one is said before any work.

A second campaign written into a folder that holds a first one's results would rewrite
summary.json (now counting only itself) and leave the first one's bundles and store rows
beside it, so a report would read one run's summary over another's findings. So `fuzz`,
`check --out`, `reduce --config` and `gen` refuse such a folder in one line that names the
way out; with `--force` they clear those results first, and only those: every name this
module lists is one fuzzbot writes, and anything else in the folder stays. The check runs
before any build, probe or worker starts, so a mistake costs nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from bot.errors import UserError
from bot.findings.known_bugs import KNOWN_FILE
from bot.findings.store import STORE_NAME
from bot.findings.summary_md import SUMMARY_MD
from oracles.count_keys import SET_ASIDE_FOLDERS

RESULT_NAMES = (
    "summary.json",
    SUMMARY_MD,
    STORE_NAME,
    f"{STORE_NAME}-journal",
    KNOWN_FILE,
    "findings",
    "duplicates",
    *SET_ASIDE_FOLDERS,
    "support",
    "dry-run",
)
"""What a campaign (or a report's dry run into it) writes at the top of its output folder."""
GEN_BUNDLE = re.compile(r"seed-\d+")
"""`fuzzbot gen`'s bundle folders."""


class OutFolderError(UserError):
    """An output folder that cannot take this run's results; one line."""


def earlier_results(out: Path) -> list[str]:
    """The names in `out` that another run wrote, sorted; none for a new or foreign folder,
    or for one that only records a campaign that never started (`cannot compare`: a side
    failed to build), which the next try is meant to replace."""
    if not out.is_dir():
        return []
    names = sorted(p.name for p in out.iterdir() if p.name in RESULT_NAMES or GEN_BUNDLE.fullmatch(p.name))
    return [] if names == ["summary.json"] and _never_started(out / "summary.json") else names


def _never_started(summary: Path) -> bool:
    try:
        raw = json.loads(summary.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(raw, dict) and bool(raw.get("cannot_compare")) and not raw.get("tests")


def claim_out(out: Path, force: bool = False, flag: str = "--out") -> None:
    """Make sure `out` can take one run's results, before any expensive work: a folder (or a
    path where one can be made) holding no other run's results, unless `force` clears them."""
    if out.exists() and not out.is_dir():
        raise OutFolderError(f"{flag} {out} is a file, not a folder; give a folder")
    _check_writable(out, flag)
    earlier = earlier_results(out)
    if not earlier:
        return
    if not force:
        shown = ", ".join(earlier[:4]) + (f" and {len(earlier) - 4} more" if len(earlier) > 4 else "")
        raise OutFolderError(
            f"{flag} {out} already holds another run's results ({shown}); "
            f"give a new {flag}, or add --force to clear them first"
        )
    for name in earlier:
        _remove(out / name, flag)


def _check_writable(out: Path, flag: str) -> None:
    """The nearest folder that exists must be one this process can write in; nothing is made yet."""
    nearest = next(p for p in (out.absolute(), *out.absolute().parents) if p.exists())
    if not nearest.is_dir():
        raise OutFolderError(f"{flag} {out}: {nearest} is a file, so no folder can be made there")
    if not os.access(nearest, os.W_OK | os.X_OK):
        raise OutFolderError(f"{flag} {out}: cannot write in {nearest}")


def _remove(path: Path, flag: str) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except OSError as e:
        raise OutFolderError(f"{flag}: cannot clear {path}: {e.strerror or e}") from e
