"""The one owner of what happens to a kept finding after it was kept: a new name, a fold
into an earlier bug, a new label.

A finding lives in three records at once: the campaign's kept list (`KeptFindings`, which
summary.json is copied from), the store (`findings.sqlite`, one row per bug) and its
bundle folder (whose name starts with its label, and whose finding.json holds it). A
reduction renames findings, folds one bug's sightings into another and relabels what its
second look learned. Each of those once updated the three records by hand, at each place
it happened, and two places that folded a finding did not do the same things. Each is done
here, once, in the order that keeps the bundle on disk before any record names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.errors import interrupts_deferred
from bot.findings.bundle import Finding, move_bundle
from bot.findings.kept import KeptFindings
from bot.findings.store import FindingStore, relative_to_root
from bot.findings.summary import FindingRef, seen_union
from oracles.count_keys import FLAKY_FOLDER
from oracles.sides import CrossVerdict

DUPLICATES = "duplicates"
"""Where the bundle of a sighting folded into an earlier bug goes (beside findings/)."""


@dataclass
class FindingRecords:
    """The kept findings, the store and the output folder, changed together."""

    kept: KeptFindings
    store: FindingStore
    out: Path

    def rename(self, ref: FindingRef, fingerprint: str, signature: str) -> None:
        """`ref`'s bug is named `fingerprint` from now on: its store row and its sightings
        follow (a row already under that name absorbs them). The same name changes nothing."""
        old = ref.fingerprint
        if fingerprint == old:
            return
        self.store.rename(old, fingerprint, signature)
        self.kept.occurrences[fingerprint] = self.kept.occurrences.get(fingerprint, 0) + self.kept.occurrences.pop(
            old, 0
        )
        ref.fingerprint, ref.signature = fingerprint, signature

    def fold(self, ref: FindingRef, into: FindingRef, bundle: Path) -> None:
        """`ref` (its bundle at `bundle`) is another sighting of `into`'s bug: counted and
        named there, its inputs and triggers listed there, its bundle kept as a duplicate."""
        self.rename(ref, into.fingerprint, into.signature)
        into.seen = seen_union(into.seen, ref.seen)
        into.triggers = seen_union(into.triggers, ref.triggers)
        with interrupts_deferred():
            self.kept.findings.remove(ref)
            move_bundle(bundle, self.out / DUPLICATES / bundle.name)

    def set_aside_as_flaky(self, ref: FindingRef, bundle: Path, note: str) -> Path:
        """A finding whose label the builds do not back: its bundle moves to flaky/ with
        `note`, it leaves the findings, and its row says flaky. Returns the bundle's folder."""
        moved = move_bundle(bundle, self.out / FLAKY_FOLDER / bundle.name)
        update_finding(moved, {"across": CrossVerdict.flaky, "note": note})
        self.kept.findings.remove(ref)
        self.store.relabel({ref.fingerprint: CrossVerdict.flaky.value})
        return moved

    def relabel(self, ref: FindingRef, bundle: Path, was: CrossVerdict) -> Path:
        """`ref` now carries the label its reduction earned (`ref.across`, set by the caller):
        its bundle folder, whose name starts with the label people read, is renamed to match,
        and its finding.json says the label. Returns the bundle's folder (as it was, when the
        label did not change or the folder's name does not carry it)."""
        prefix = f"{was.value}-"
        if ref.across == was or not bundle.name.startswith(prefix):
            return bundle
        with interrupts_deferred():
            moved = move_bundle(bundle, bundle.with_name(f"{ref.across}-{bundle.name.removeprefix(prefix)}"))
            ref.path = relative_to_root(moved, self.out)
        update_finding(moved, {"across": ref.across})
        return moved


def update_finding(bundle: Path, fields: dict[str, object]) -> None:
    """Change fields of the bundle's finding.json (the original's record, not its reduced twin's)."""
    path = bundle / "finding.json"
    finding = Finding.model_validate_json(path.read_text())
    path.write_text(finding.model_copy(update=fields).model_dump_json(indent=2) + "\n")


__all__ = ["DUPLICATES", "FindingRecords", "update_finding"]
