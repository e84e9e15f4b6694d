"""A regression's or a fix's label asked again when its finding does not reproduce.

Real builds: onnxruntime 1.28.0, whose "wrap" Pad writes zeros where a pad longer than the
axis repeats the input, and 1.31.1, which runs it right. A 1.27.0 to 1.28.0 campaign
labelled such a case `fixed` because head passed it three times in a used worker; its
repro failed on head. The campaign's evidence is taken as it was (head ran it right, in
the campaign's runs); the reduction then asks a head that fails it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

from bot.campaign.run import Campaign
from bot.campaign.sides import open_campaign
from bot.cases.user_cases import load_user_case
from bot.config import load_config
from bot.findings.bundle import Finding
from tests import release_cases as rc

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

FIXED_IN = "1.31.1"


def _judged_fixed(tmp_path: Path) -> Campaign:
    """A 1.28.0 -> 1.31.1 campaign over the Pad case, judged and not yet reduced: `fixed`."""
    model, inputs = rc.pad_wrap_longer_than_the_axis()
    onnx.save(model, str(tmp_path / "pad.onnx"))
    np.savez(tmp_path / "pad.npz", **inputs)  # type: ignore[arg-type]
    config = rc.pair_config(tmp_path, rc.PAD_WRAP, FIXED_IN, reduce={"generalize": False, "budget": 60})
    cfg = load_config(config, {"out": str(tmp_path / "out"), "probe": False})
    campaign = open_campaign(cfg)
    case = load_user_case(str(tmp_path / "pad.onnx"), tmp_path / "pad.onnx")
    [(cross, _)] = campaign.run_cases([case], reduce=False)
    assert cross.verdict.value == "fixed", cross
    return campaign


def _summary(tmp_path: Path) -> dict[str, object]:
    campaign_summary: dict[str, object] = json.loads((tmp_path / "out" / "summary.json").read_text())
    return campaign_summary


def test_a_fix_the_fixed_build_fails_when_asked_again_is_flaky_not_fixed(tmp_path: Path) -> None:
    campaign = _judged_fixed(tmp_path)
    runs = campaign.reduction.pools.runs
    runs["head"] = replace(runs["head"], python=str(rc.ort_python(rc.PAD_WRAP)))  # head now fails it
    campaign.reduction.after()
    campaign.write_results()
    summary = _summary(tmp_path)
    assert summary["findings"] == [], "a label the builds do not back is no finding"
    assert summary["counts"] == {"flaky": 1}, summary["counts"]
    [bundle] = (tmp_path / "out" / "flaky").iterdir()
    finding = Finding.model_validate_json((bundle / "finding.json").read_text())
    assert finding.across == "flaky"
    assert "head passed on every campaign run, then wrong_result (values)" in finding.note
    assert not (tmp_path / "out" / "findings").exists() or not any((tmp_path / "out" / "findings").iterdir())


def test_a_real_fix_is_still_reduced_and_labelled_fixed(tmp_path: Path) -> None:
    """The bug the rule must not hide: the same case, head a release that fixed it."""
    campaign = _judged_fixed(tmp_path)
    campaign.reduction.after()
    campaign.write_results()
    summary = _summary(tmp_path)
    findings = summary["findings"]
    assert isinstance(findings, list) and len(findings) == 1, findings
    ref = findings[0]
    assert ref["across"] == "fixed" and ref["reduced_path"], ref
    assert summary["counts"] == {"fixed": 1}, summary["counts"]
    assert not (tmp_path / "out" / "flaky").exists() or not any((tmp_path / "out" / "flaky").iterdir())
