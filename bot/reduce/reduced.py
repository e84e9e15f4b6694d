"""A reduced finding while reduction's passes name it: read once, named in memory, written once.

The passes after a reduction each learn one thing about the reduced trigger: whether it
fails in a fresh worker, whether it still needs the optimizer (relocalization), where in
the optimizer its worker died, the first tensor computed wrong, the rewrite to blame, the
label across builds, the dtypes it fails at, and its name. Some need what an earlier one
learned: the rewrite is asked only of a trigger that needs the optimizer, and the blame of
a death skips one the optimizer's pass already names. They used to hand that on through
finding.json, which one reduction read up to 12 times and rewrote up to 6. Each pass now
returns what it learned; the campaign applies it here and writes the record once, before
the store or the generator hears of the bug.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.files import write_whole
from bot.findings.bundle import Bundle, BundleError, Finding, load_bundle
from reducers.candidate import Candidate


@dataclass
class Reduced:
    """The reduced bundle as the reducer wrote it, and its finding as the passes named it so far."""

    bundle: Bundle

    @classmethod
    def load(cls, path: Path) -> Reduced:
        bundle = load_bundle(path)
        if bundle.finding is None:
            raise BundleError(f"{path}: a reduced bundle without finding.json")
        return cls(bundle)

    @property
    def path(self) -> Path:
        return self.bundle.path

    @property
    def finding(self) -> Finding:
        assert self.bundle.finding is not None  # load() refuses a bundle without one
        return self.bundle.finding

    def case(self) -> Candidate:
        return Candidate(self.bundle.model, self.bundle.inputs)

    def learn(self, **fields: object) -> None:
        """What a pass found, for the passes after it and for the record."""
        self.bundle.finding = self.finding.model_copy(update=fields)

    def moved_to(self, path: Path) -> None:
        """The folder was renamed (a label the reduction earned): the record goes there."""
        self.bundle.path = path

    def save(self) -> None:
        """Write the named record, whole or not at all: a campaign interrupted while writing
        must leave the reducer's record, never half of this one."""
        write_whole(self.path / "finding.json", self.finding.model_dump_json(indent=2) + "\n")
