"""What a report is made of, read from a campaign's (or merge's) output folder.

summary.json lists the findings; each bundle adds finding.json (versions, localization,
message), the reduced model's text, repro.py and, after a bisection, bisect.json. The
reduced bundle is preferred everywhere: it is what a developer wants to read and run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
from onnx import printer
from pydantic import ValidationError

from bot.findings.bundle import Finding
from bot.findings.summary import FindingRef, Summary
from bot.github.errors import ReportError
from oracles.count_keys import FLAKY_FOLDER


class ReportInputError(ReportError):
    """An output folder that cannot be reported (no summary.json, corrupt); one line."""


@dataclass(frozen=True)
class Item:
    """One finding, with the texts a report shows."""

    ref: FindingRef
    finding: Finding | None
    bundle: str
    """The bundle shown (reduced when there is one), relative to the output folder."""
    model_text: str
    repro: str
    bisect: dict[str, Any] | None

    @property
    def across(self) -> str:
        return self.ref.across or self.ref.verdict.value


@dataclass(frozen=True)
class Report:
    out: Path
    summary: Summary
    items: list[Item]
    flaky: list[str]
    """One line per bundle under flaky/: where it is and, when known, its signature."""
    run_id: str
    """A stable name of this output (a hash of summary.json): a re-run of one report counts once."""
    known: dict[str, str] = field(default_factory=dict)
    """Fingerprint -> the bug's trigger as compact JSON (known-bugs.json, bot.findings.known_bugs): an
    issue carries it so later runs can steer away from a bug that is still open."""
    filed: dict[str, int] = field(default_factory=dict)
    """Fingerprint -> the bot's issue for it, for the known bugs of the regression corpus
    that came back (`FindingRef.regression_of`): what the PR comment links."""


def load_report(out: Path) -> Report:
    path = out / "summary.json"
    try:
        raw = path.read_bytes()
        summary = Summary.model_validate_json(raw)
    except OSError as e:
        raise ReportInputError(f"{path}: cannot read ({e.strerror or e})") from e
    except ValidationError as e:
        raise ReportInputError(f"{path}: not a fuzzbot summary: {str(e).splitlines()[0]}") from e
    items = [_item(out, ref) for ref in summary.findings]
    run_id = hashlib.sha256(raw).hexdigest()[:12]
    return Report(out, summary, items, _flaky(out), run_id, _known(out))


def _known(out: Path) -> dict[str, str]:
    """known-bugs.json as fingerprint -> its row; none when the campaign wrote none or it is
    unreadable (the triggers help later runs; the report does not depend on them)."""
    try:
        rows = json.loads((out / "known-bugs.json").read_text())
        return {str(r["fingerprint"]): json.dumps(r, separators=(",", ":")) for r in rows}
    except (OSError, ValueError, TypeError, KeyError):
        return {}


def relative(out: Path, path: str | Path) -> str:
    """`path` (absolute, or relative to the working folder as `out` is) named from inside
    the output folder, as people and artifacts see it."""
    p = Path(path)
    try:
        return p.resolve().relative_to(out.resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def _resolve(out: Path, path: str) -> Path:
    """Where a bundle is now. summary.json holds paths relative to the output folder; an older
    one holds absolute paths, and an output folder is often read after a move or a copy (a
    downloaded CI artifact): then the longest tail of the path that exists under `out` is it."""
    p = Path(path)
    if not p.is_absolute():
        return out / p
    if p.resolve().is_relative_to(out.resolve()):
        return p
    for i in range(1, len(p.parts)):
        candidate = out.joinpath(*p.parts[i:])
        if candidate.exists():
            return candidate
    return p


def _item(out: Path, ref: FindingRef) -> Item:
    original = _resolve(out, ref.path)
    reduced = _resolve(out, ref.reduced_path) if ref.reduced_path else original / "reduced"
    shown = reduced if (reduced / "repro.py").is_file() else original
    finding = _finding(shown / "finding.json") or _finding(original / "finding.json")
    return Item(
        ref=ref,
        finding=finding,
        bundle=relative(out, shown),
        model_text=_model_text(shown),
        repro=_read(shown / "repro.py"),
        bisect=_bisect(original / "bisect.json"),
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _finding(path: Path) -> Finding | None:
    try:
        return Finding.model_validate_json(path.read_text())
    except (OSError, ValidationError, ValueError):
        return None


def _model_text(bundle: Path) -> str:
    """model.txt when the reducer wrote one, else the ONNX text form of model.onnx."""
    text = _read(bundle / "model.txt")
    if text:
        return text
    try:
        return printer.to_text(onnx.load(str(bundle / "model.onnx")))
    except Exception:  # noqa: BLE001 - a model that cannot be printed is shown as missing, not fatal
        return ""


def _bisect(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _flaky(out: Path) -> list[str]:
    folder = out / FLAKY_FOLDER
    lines = []
    for bundle in sorted(folder.iterdir()) if folder.is_dir() else []:
        if not bundle.is_dir() or bundle.name.startswith("."):
            continue
        finding = _finding(bundle / "finding.json")
        what = f"{finding.verdict.value}: {finding.signature}" if finding else "no finding.json"
        lines.append(f"`{relative(out, bundle)}`: {what}")
    return lines
