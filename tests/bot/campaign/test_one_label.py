"""One bug, one report: every output of a campaign (and of a merge) gives a finding the same
label, and every place that gives a number says the same number for the same word.

The outputs come from real campaigns on the real onnxruntime. One of them sees one bug under
two labels: its base worker perturbs the outputs of every other model (chosen by a hash of
the model, like a real bug that only some inputs reach) and its head worker perturbs them
all, so with one op and one node (no constant twin) every seed is the same fingerprint, a new regression where
base got the model right and a persistent bug where base got it wrong the same way."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.campaign.run import Campaign
from bot.campaign.sides import prepare_sides
from bot.campaign.state import CampaignState
from bot.cases.shard import Shard
from bot.config import load_config
from bot.findings.bundle import Finding
from bot.findings.store import FindingStore
from bot.findings.summary import Summary
from bot.github.entrypoint import outputs
from bot.github.findings import load_report
from bot.github.render import by_label, pr_comment
from bot.merge.outputs import merge_outputs
from tests.bot.github.test_report import _campaign, one_build

pytestmark = [pytest.mark.campaign]

__all__ = ["one_build"]  # the one-build campaign fixture of tests/bot/github/test_report.py

PYTHON = sys.executable
TWO_LABELS = """compiler:
  base: {{python: {python}}}
  head: {{python: {python}}}
generator: {{ops: [Relu], nodes: 1, dtypes: [float32], wide_types: 0, constant_twins: 0}}
reduce: {{enabled: false}}
probe: false
max_tests: {tests}
budget: 120s
seed: {seed}
test_fault: {{kind: perturb}}
"""


class BaseAlsoPerturbs(Campaign):
    """The campaign as `fuzzbot fuzz` runs it, except that base's worker perturbs too, every
    other model (the CLI gives a test fault to head only)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        for lane in self.lanes:
            lane[0].client.fault = {"kind": "perturb", "every": 2}


def _two_labels(root: Path, seed: int, tests: int = 8, shard: Shard | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    config = root / "fuzzbot.yml"
    config.write_text(TWO_LABELS.format(python=PYTHON, tests=tests, seed=seed))
    out = root / "out"
    cfg = load_config(config, {"out": out})
    state = CampaignState.of(cfg, shard)
    setups, _ = prepare_sides(cfg, records=state.sides)
    campaign = BaseAlsoPerturbs(cfg, setups, shard, state)
    campaign.run()
    return out


def _summary(out: Path) -> Summary:
    return Summary.model_validate_json((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def persistent_first(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seed 1's model is one base gets wrong: the first sighting is persistent, a later one a
    new regression, which must take over the finding's label and bundle. (Which model a seed
    gets depends on the seeds before it: generation steers toward what is not covered yet.)"""
    return _two_labels(tmp_path_factory.mktemp("persistent-first"), seed=1)


def _assert_one_label(out: Path, label: str) -> str:
    """Every output of `out` names its one finding `label`; returns its fingerprint."""
    s = _summary(out)
    assert s.counts.get("new_regression") and s.counts.get("persistent"), f"two labels must be seen: {s.counts}"
    [fp] = s.occurrences
    assert {r.fingerprint for r in s.findings} == {fp}
    assert {r.across for r in s.findings} == {label}, "summary.json"
    assert s.distinct == {label: 1} and s.occurrences[fp] == s.counts["new_regression"] + s.counts["persistent"]
    row = FindingStore.in_dir(out).get(fp)
    assert row is not None and row.across == label, "findings.sqlite"
    assert row.bundle in {r.path for r in s.findings}, "the store shows a bundle summary.json lists"
    for ref in s.findings:
        assert Path(ref.path).name.startswith(f"{label}-"), "the folder names the label"
        case = Finding.model_validate_json((out / ref.path / "finding.json").read_text())
        assert case.across == label, "the bundle is a sighting of the label: its repro shows it"
    assert not [p for p in (out / "findings").iterdir() if not p.name.startswith(f"{label}-")]
    md = (out / "summary.md").read_text()
    findings_md = md[md.index("## Findings") :]
    assert f"`{fp}` | wrong_result ({label}) |" in findings_md and "persistent)" not in findings_md
    text = pr_comment(load_report(out))
    assert "**1 new regression(s)** introduced by this change" in text
    assert "**Persistent (also on base): 0 finding(s)**" in text, "persistent tests, no persistent finding"
    assert text.count(f"| fingerprint | `{fp}` |") == 1
    values = outputs(out, out.parent)
    assert (values["new-regressions"], values["persistent"], values["findings"]) == ("1", "0", "1")
    return fp


def test_a_new_regression_after_a_persistent_sighting_takes_the_label_and_the_bundle(persistent_first: Path) -> None:
    fp = _assert_one_label(persistent_first, "new_regression")
    moved = sorted(p.name for p in (persistent_first / "duplicates").iterdir())
    assert moved == [f"persistent-{fp}-seed1"], "the persistent bundle gave way"


def test_the_same_campaign_again_into_the_same_folder_replaces_its_bundles(tmp_path: Path) -> None:
    """`make fuzz` twice: the second run meets the first run's bundles under the same names
    (same seeds, same cases), in findings/ and in duplicates/, and must replace them, not
    stop with an internal error."""
    out = _two_labels(tmp_path, seed=1)
    first = sorted(p.name for p in (out / "duplicates").iterdir())
    assert _two_labels(tmp_path, seed=1) == out
    fp = _assert_one_label(out, "new_regression")
    assert sorted(p.name for p in (out / "duplicates").iterdir()) == first == [f"persistent-{fp}-seed1"]


def test_a_persistent_sighting_after_a_new_regression_is_counted_not_kept(tmp_path: Path) -> None:
    out = _two_labels(tmp_path, seed=3)  # seed 3's model is one base gets right
    fp = _assert_one_label(out, "new_regression")
    assert _summary(out).findings[0].path == f"findings/new_regression-{fp}-seed3"
    assert not (out / "duplicates").exists()


def test_shards_that_saw_one_bug_under_two_labels_merge_under_one(tmp_path: Path) -> None:
    """Shard 0/2 sees the bug only as persistent, shard 1/2 only as a new regression, with
    bundles of one size: in either order, the merge names it once, as a new regression,
    with the new regression's bundle."""
    shards = [_two_labels(tmp_path / f"s{i}", seed=9, tests=2, shard=Shard(i, 2)) for i in (0, 1)]
    assert [_summary(s).counts for s in shards] == [{"persistent": 2}, {"new_regression": 2}]
    for name, inputs in (("in-order", shards), ("reversed", shards[::-1])):
        merged, report = merge_outputs(inputs, tmp_path / name)
        assert report.findings == 1 and merged.counts == {"new_regression": 2, "persistent": 2}
        _assert_one_label(tmp_path / name, "new_regression")


# --- the same numbers everywhere ------------------------------------------------------------


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Several distinct new regressions, some seen by more than one test: tests and findings differ."""
    root = tmp_path_factory.mktemp("two")
    config = root / "fuzzbot.yml"
    config.write_text(f"compiler:\n  base: {{python: {PYTHON}}}\n  head: {{python: {PYTHON}}}\n")
    generator = "generator: {ops: [Relu, Neg], nodes: 2, dtypes: [float32], wide_types: 0}\n"
    config.write_text(config.read_text() + generator)
    config.write_text(config.read_text() + "reduce: {enabled: false}\n")
    return _campaign(root / "out", config, tests=10)


def _md_counts(md: str) -> dict[str, tuple[int, str]]:
    """The Verdicts table of summary.md: key -> (tests, findings)."""
    rows = re.findall(r"^\| ([a-z_:-]+) \| (\d+) \|(?: (\d+))? \|$", md, re.MULTILINE)
    return {k: (int(t), f) for k, t, f in rows}


def test_two_builds_give_the_same_numbers_everywhere(two_builds: Path) -> None:
    s = _summary(two_builds)
    tests, findings = s.counts["new_regression"], s.distinct["new_regression"]
    assert tests > findings >= 2, "the fixture must have a bug seen by several tests"
    assert findings == len({r.fingerprint for r in s.findings}) == len(s.occurrences)
    md = (two_builds / "summary.md").read_text()
    assert _md_counts(md)["new_regression"] == (tests, str(findings))
    assert f"{findings} distinct finding(s), seen in {sum(s.occurrences.values())} test(s)" in md
    assert f"## Findings ({findings})" in md
    values = outputs(two_builds, two_builds.parent)
    assert values["new-regressions"] == values["findings"] == str(findings)
    assert values["tests"] == str(s.tests) and values["flaky"] == str(s.counts.get("flaky", 0))
    report = load_report(two_builds)
    text = pr_comment(report)
    assert f"**{findings} new regression(s)** introduced by this change ({tests} tests)." in text
    assert text.count("\n### wrong_result") == findings == len(by_label(report)["new_regression"])
    assert f"{s.tests} tests in" in text and f"**{s.tests} tests**" in md


def test_the_comment_and_summary_md_name_both_builds(two_builds: Path) -> None:
    s = _summary(two_builds)
    assert s.base is not None and s.backend is not None and s.backend.commit
    build = f"{s.backend.name} {s.backend.version} ({s.backend.level}) @ `{s.backend.commit[:12]}`"
    both = f"base {build} → head {build}"
    assert both in pr_comment(load_report(two_builds))
    assert both in (two_builds / "summary.md").read_text()


def test_one_build_counts_bugs_by_verdict_and_says_tests_and_findings(one_build: Path) -> None:
    s = _summary(one_build)
    assert s.base is None and set(s.distinct) <= {"crash", "wrong_result", "timeout"} and s.distinct
    values = outputs(one_build, one_build.parent)
    assert values["findings"] == str(sum(s.distinct.values())) == str(s.finding_count)
    assert values["new-regressions"] == values["persistent"] == "0"
    md = (one_build / "summary.md").read_text()
    text = pr_comment(load_report(one_build))
    for key, n in s.distinct.items():
        assert _md_counts(md)[key] == (s.counts[key], str(n))
        assert f"{key} (no base to compare): {n} finding(s)** ({s.counts[key]} test" in text
    assert "(persistent)" not in md, "one build has nothing to compare: no label across builds"
