"""The regression corpus: every reduced finding of past campaigns, replayed first on every run.

OSS-Fuzz replays each crash it ever found before it fuzzes: a bug that was fixed and comes
back is the cheapest regression to catch, and its reduced model already exists. Here the
corpus is one folder with a bundle per finding (`<fingerprint>/`, the reduced bundle as the
campaign wrote it). A campaign with `regressions: DIR` judges every bundle in it before the
first generated case, as `fuzzbot check` would; a bundle that fails on head again and
passes on base is a new regression *of a known bug*, and its finding carries the old
fingerprint (`FindingRef.regression_of`) so the report can say which. After the campaign,
each new reduced finding is added, so the folder grows run by run. It is a cache or
artifact the Action restores, or a folder the maintainers commit.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from backends.memory import out_of_memory
from backends.spec import spec_level
from bot.cases.making import Prepared
from bot.cases.user_cases import load_user_case
from bot.errors import UserError
from bot.findings.bundle import BundleError
from bot.findings.summary import FindingRef, in_output


@dataclass
class Replayed:
    """A stored bundle as a case, with the fingerprint it was filed under."""

    case: Prepared
    fingerprint: str
    nodes: int
    level: str | None = None
    """The level its finding's case ran at (bot.campaign.levels), from the spec it recorded."""


@dataclass
class RegressionCorpus:
    folder: Path
    queue: list[Path] = field(default_factory=list)
    """Bundles not yet issued, in name order."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Bundle -> why it could not be replayed (a corrupt or foreign bundle is never fatal)."""
    unsaved: dict[str, str] = field(default_factory=dict)
    """Fingerprint -> why its reduced bundle could not be copied in (a full disk, a bundle
    gone): the run's own output keeps it, and its summary is written all the same."""

    @classmethod
    def open(cls, folder: Path) -> RegressionCorpus:
        if folder.exists() and not folder.is_dir():
            raise UserError(f"regressions {folder}: not a folder")
        bundles = sorted(p for p in folder.iterdir() if (p / "model.onnx").is_file()) if folder.is_dir() else []
        return cls(folder, bundles)

    def next(self) -> Replayed | None:
        """The next bundle that loads as a case, or None when all were issued."""
        while self.queue:
            path = self.queue.pop(0)
            try:
                case = load_user_case(str(path), path)
            except (BundleError, UserError, OSError, ValueError) as e:
                self.skipped[path.name] = str(e).splitlines()[0][:200]
                continue
            except (MemoryError, RuntimeError) as e:
                if not out_of_memory(e):
                    raise
                self.skipped[path.name] = "its reference asks for more memory than the bot's bound (memory:)"
                continue
            case.seed = _stored_seed(path)
            # Filed under its folder's name: `add` names it after the finding as reported,
            # which its reduced model's own fingerprint may differ from.
            return Replayed(case, path.name, len(case.model.graph.node), _stored_level(path))
        return None

    def add(self, out: Path, findings: list[FindingRef]) -> list[str]:
        """Copy each reduced finding's bundle in as `<fingerprint>/`, unless that fingerprint
        is already kept; written to a temporary folder first, then renamed, so a run that
        stops half way never leaves a half bundle. Returns the fingerprints added."""
        added: list[str] = []
        for ref in findings:
            dest = self.folder / ref.fingerprint
            if ref.reduced_path is None or ref.regression_of is not None or dest.exists():
                continue
            try:
                self._copy(in_output(out, ref.reduced_path), dest)
            except OSError as e:
                self.unsaved[ref.fingerprint] = f"{e.strerror or e}"
                continue
            added.append(ref.fingerprint)
        return added

    def _copy(self, bundle: Path, dest: Path) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=self.folder))
        try:
            shutil.copytree(bundle, staging, dirs_exist_ok=True)
            staging.rename(dest)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            raise


def _finding_json(bundle: Path) -> dict[str, object]:
    try:
        data = json.loads((bundle / "finding.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _stored_seed(bundle: Path) -> int:
    seed = _finding_json(bundle).get("seed")
    return seed if isinstance(seed, int) else -1


def _stored_level(bundle: Path) -> str | None:
    """The level the finding ran at (`tvm:fold`; `tvm` alone ran at `default`), or None; a
    spec of a backend this campaign does not run is the campaign's to refuse
    (bot.campaign.levels.LevelLanes)."""
    spec = _finding_json(bundle).get("spec")
    return spec_level(spec) if isinstance(spec, str) else None
