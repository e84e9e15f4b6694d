"""One reduction, one record: the passes that name a reduced finding hand what they learn
on in memory, and the campaign writes finding.json once, named, before the store hears
of it. They used to talk through the file, read up to 12 times and rewritten up to 6."""

from __future__ import annotations

import os
import pathlib
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from bot.campaign.sides import open_campaign
from bot.cases.user_cases import load_user_case
from bot.config import FuzzConfig
from bot.findings.bundle import Finding
from bot.reduce.campaign import CampaignReduction
from oracles.bug_identity import kernel_fingerprint
from tests.cases import unary_chain

pytestmark = [pytest.mark.worker, pytest.mark.campaign]


def _chain(path: Path) -> Path:
    """Relu -> Neg -> Abs -> Sqrt, saved with its input beside it."""
    model, inputs = unary_chain(["Relu", "Neg", "Abs", "Sqrt"])
    onnx.save(model, str(path))
    np.savez(path.with_suffix(".npz"), **inputs)  # type: ignore[arg-type]
    return path


def _in_reduced(path: object) -> bool:
    p = Path(str(path))
    return p.name == "finding.json" and (p.parent.name == "reduced" or p.parent.name.startswith(".reduced"))


def test_a_reduction_writes_its_named_record_once_and_reads_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reducer writes the bundle, the passes read it once, and one more write holds
    every name they found: the kernel blamed, the label, the final fingerprint. (Folding
    the unreduced findings afterwards reads each reduced bug's record: another phase.)"""
    model = _chain(tmp_path / "chain.onnx")
    cfg = FuzzConfig(
        out=tmp_path / "out",
        probe=False,
        backend="onnxruntime:disable",
        test_fault={"kind": "perturb"},
        reduce={"generalize": False, "budget": 60},
    )
    campaign = open_campaign(cfg)
    ops: Counter[str] = Counter()
    read_text, write_text, replace = pathlib.Path.read_text, pathlib.Path.write_text, os.replace
    reduce = CampaignReduction.reduce
    inside = False

    def counted_reduce(self: CampaignReduction, *a: Any, **k: Any) -> None:
        nonlocal inside
        inside = True
        try:
            reduce(self, *a, **k)
        finally:
            inside = False

    def counted_read(self: Path, *a: Any, **k: Any) -> str:
        ops["read"] += inside and _in_reduced(self)
        return read_text(self, *a, **k)

    def counted_write(self: Path, *a: Any, **k: Any) -> int:
        ops["write"] += inside and _in_reduced(self)
        return write_text(self, *a, **k)

    def counted_replace(src: Any, dst: Any, *a: Any, **k: Any) -> None:
        ops["write"] += inside and _in_reduced(dst)
        replace(src, dst, *a, **k)

    monkeypatch.setattr(pathlib.Path, "read_text", counted_read)
    monkeypatch.setattr(pathlib.Path, "write_text", counted_write)
    monkeypatch.setattr(os, "replace", counted_replace)
    monkeypatch.setattr(CampaignReduction, "reduce", counted_reduce)
    campaign.run_cases([load_user_case(str(model), model)], reduce=True)
    monkeypatch.undo()

    [ref] = campaign.summary.findings
    assert ref.reduced_path is not None and ref.reduced_nodes is not None and ref.reduced_nodes < 4
    assert ops == {"write": 2, "read": 1}, ops  # the reducer's bundle, then the named record
    finding = Finding.model_validate_json((tmp_path / "out" / ref.reduced_path / "finding.json").read_text())
    assert finding.blamed, "the first wrong tensor, found in memory, reached the record"
    assert finding.fingerprint == ref.fingerprint == kernel_fingerprint(finding, ref.across or "")
