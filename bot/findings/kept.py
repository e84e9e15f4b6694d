"""The findings a campaign has kept so far, and how often each bug was seen: the one list
that keeping a sighting, reducing a finding and naming it all change while the campaign
runs. summary.json's `findings` and `occurrences` are copied from it when the campaign
finishes (bot.campaign.state); a Summary is never changed in its place."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.findings.summary import FindingRef, bug_count, distinct_keys
from oracles.sides import finding_label


@dataclass
class KeptFindings:
    """Listed findings (one bundle each, in the order kept) and sightings by fingerprint."""

    findings: list[FindingRef] = field(default_factory=list)
    occurrences: dict[str, int] = field(default_factory=dict)
    """Every sighting of a fingerprint, kept as a bundle or only counted."""

    def seen(self, fingerprint: str) -> None:
        """Count one more sighting of `fingerprint`."""
        self.occurrences[fingerprint] = self.occurrences.get(fingerprint, 0) + 1

    def superseded_by(self, fingerprint: str, label: str, quota: int) -> list[FindingRef] | None:
        """Whether a sighting of `fingerprint` under `label` earns a bundle: None when it does
        not (its label is weaker than the finding's, or `quota` bundles of its label are listed
        already); else the listed refs it replaces, those of weaker labels (often none). So a
        finding's bundles are always sightings of its label, and its repro shows what the
        label says (a new regression's passes on base)."""
        listed = [r for r in self.findings if r.fingerprint == fingerprint]
        if finding_label([label, *(r.across for r in listed)]) != label:
            return None
        if sum(1 for r in listed if r.across == label) >= quota:
            return None
        return [r for r in listed if r.across != label]

    def finding_count(self, two_builds: bool) -> int:
        """Distinct findings that are bugs, counted as summary.json will count them: what a
        watcher is shown while the campaign runs (bot.campaign.display)."""
        return bug_count(distinct_keys(self.findings, two_builds))
