"""Campaign mechanics on the real onnxruntime worker: lanes, shards, two builds."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from backends.spec import parse_backend
from bot.campaign.run import Campaign
from bot.campaign.side_setup import SideSetup
from bot.config import FuzzConfig
from tests.conftest import CliResult


def _summary(out: Path) -> dict:  # type: ignore[type-arg]
    return dict(json.loads((out / "summary.json").read_text()))


def test_shards_take_disjoint_seeds(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    seeds = []
    for i in (0, 1):
        out = tmp_path / f"shard{i}"
        r = cli("fuzz", "--out", str(out), "--max-tests", "3", "--no-probe", "--shard", f"{i}/2", "--seed", "10")
        # 2: a finding. Seed 13 meets a real onnxruntime bug (PadFusion makes pool pads that
        # its own kernel refuses), which is not what this test is about.
        assert r.code in (0, 2), r.err
        s = _summary(out)
        assert s["shard"] == f"{i}/2" and s["tests"] == 3
        seeds.append((s["seed_first"], s["seed_last"]))
    # Shard 0 runs 10, 12, 14, ...; shard 1 runs 11, 13, ...: the last seeds have both parities.
    assert {seeds[0][1] % 2, seeds[1][1] % 2} == {0, 1}


def test_a_bad_shard_is_one_line(cli: Callable[..., CliResult]) -> None:
    r = cli("fuzz", "--shard", "2/2", "--max-tests", "1")
    assert r.code == 1 and len(r.err_lines) == 1 and "--shard" in r.err


def test_two_lanes_run_every_case_once_and_find_the_same_bugs(tmp_path: Path) -> None:
    cfg = FuzzConfig(out=tmp_path, probe=False, max_tests=6, budget=120, jobs=2, test_fault={"kind": "perturb"})
    campaign = Campaign(cfg)
    summary = campaign.run()
    assert summary.tests == 6 and len(campaign.lanes) == 2
    assert sum(summary.counts.values()) == 6
    # A perturbing worker makes every case it runs wrong; none passes.
    assert all(k in ("wrong_result", "crash", "unsupported") or k.startswith("filtered:") for k in summary.counts)
    seeds = [f.seed for f in summary.findings]
    assert summary.counts.get("wrong_result", 0) >= 1 and len(seeds) == len(set(seeds))


def test_two_builds_of_the_same_release_only_ever_pass(tmp_path: Path) -> None:
    """Base and head the same onnxruntime: no case can be a regression or a fix."""
    spec = parse_backend("onnxruntime:all")
    sides = [SideSetup("base", spec, sys.executable), SideSetup("head", spec, sys.executable)]
    summary = Campaign(FuzzConfig(out=tmp_path, probe=False, max_tests=5), sides).run()
    assert summary.tests == 5 and summary.base is not None and summary.backend is not None
    assert not {"new_regression", "fixed"} & set(summary.counts), summary.counts


def test_a_perturbed_head_against_a_clean_base_is_a_new_regression(tmp_path: Path) -> None:
    spec = parse_backend("onnxruntime:all")
    sides = [SideSetup("base", spec, sys.executable), SideSetup("head", spec, sys.executable)]
    cfg = FuzzConfig(out=tmp_path, probe=False, max_tests=4, test_fault={"kind": "perturb"})
    summary = Campaign(cfg, sides).run()
    assert summary.new_regressions >= 1 and summary.findings
    ref = summary.findings[0]
    assert ref.across == "new_regression" and Path(ref.path).name.startswith("new_regression-")
    assert not Path(ref.path).is_absolute()  # relative to the output folder, which may move
    finding = json.loads((tmp_path / ref.path / "finding.json").read_text())
    assert finding["side"] == "head" and finding["base_backend"]["name"] == "onnxruntime"
