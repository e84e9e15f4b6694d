"""Renaming, folding and relabelling a kept finding (bot.findings.records): each changes
the kept list, the store and the bundle folder together, on real bundles and real SQLite."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from backends.results import BackendInfo
from bot.findings.bundle import Finding, write_bundle
from bot.findings.kept import KeptFindings
from bot.findings.records import DUPLICATES, FindingRecords
from bot.findings.store import FindingStore
from bot.findings.summary import FindingRef
from oracles.sides import CrossVerdict
from oracles.verdict import Verdict

BACKEND = BackendInfo(name="onnxruntime", level="all", version="1.31.1")


def _model() -> onnx.ModelProto:
    names = ["x", "t0", "t1"]
    graph = helper.make_graph(
        [helper.make_node("Relu", [a], [b]) for a, b in pairwise(names)],
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _kept(out: Path, records: FindingRecords, fingerprint: str, seed: int, label: CrossVerdict) -> FindingRef:
    """One finding kept as a campaign keeps it: its bundle, its store row, its ref, a sighting."""
    finding = Finding(
        verdict=Verdict.wrong_result,
        signature=f"values in Relu {fingerprint}",
        fingerprint=fingerprint,
        backend=BACKEND,
        seed=seed,
        across=label,
    )
    x = {"x": np.ones(2, np.float32)}
    bundle = write_bundle(out / "findings" / f"{label.value}-{fingerprint}-seed{seed}", _model(), x, x, finding)
    records.store.record(finding, bundle, "2026-01-01T00:00:00+00:00")
    ref = FindingRef(
        path=str(bundle.relative_to(out)),
        verdict=Verdict.wrong_result,
        across=label,
        fingerprint=fingerprint,
        seed=seed,
        signature=finding.signature,
        seen=[f"float32[{seed}]"],
        triggers=[f"trigger {seed}"],
    )
    records.kept.findings.append(ref)
    records.kept.seen(fingerprint)
    return ref


def _records(out: Path) -> FindingRecords:
    return FindingRecords(KeptFindings(), FindingStore.in_dir(out), out)


def test_a_fold_moves_the_sighting_into_the_earlier_bug_in_every_record(tmp_path: Path) -> None:
    records = _records(tmp_path)
    first = _kept(tmp_path, records, "named", 1, CrossVerdict.persistent)
    later = _kept(tmp_path, records, "other", 2, CrossVerdict.persistent)
    records.fold(later, first, tmp_path / later.path)
    assert records.kept.findings == [first]
    assert records.kept.occurrences == {"named": 2}
    assert first.seen == ["float32[1]", "float32[2]"] and first.triggers == ["trigger 1", "trigger 2"]
    assert not (tmp_path / later.path).exists()
    assert (tmp_path / DUPLICATES / "persistent-other-seed2" / "finding.json").is_file()
    rows = {r.fingerprint: r for r in records.store.all()}
    assert set(rows) == {"named"} and rows["named"].count == 2


def test_a_rename_to_the_same_name_changes_nothing(tmp_path: Path) -> None:
    records = _records(tmp_path)
    ref = _kept(tmp_path, records, "fp", 1, CrossVerdict.persistent)
    records.rename(ref, "fp", "another signature")
    assert ref.signature == "values in Relu fp" and records.kept.occurrences == {"fp": 1}
    records.rename(ref, "kernel-name", "the kernel's name")
    assert (ref.fingerprint, ref.signature) == ("kernel-name", "the kernel's name")
    assert records.kept.occurrences == {"kernel-name": 1}
    assert [r.fingerprint for r in records.store.all()] == ["kernel-name"]


def test_a_label_the_reduction_earned_renames_the_folder_and_says_so_in_the_record(tmp_path: Path) -> None:
    records = _records(tmp_path)
    ref = _kept(tmp_path, records, "fp", 1, CrossVerdict.new_in_head)
    bundle = tmp_path / ref.path
    ref.across = CrossVerdict.new_regression
    moved = records.relabel(ref, bundle, CrossVerdict.new_in_head)
    assert moved.name == "new_regression-fp-seed1" and not bundle.exists()
    assert ref.path == "findings/new_regression-fp-seed1"
    assert json.loads((moved / "finding.json").read_text())["across"] == "new_regression"
    assert records.relabel(ref, moved, CrossVerdict.new_regression) == moved  # the label it has: nothing moves


def test_a_label_the_builds_do_not_back_sets_the_finding_aside_as_flaky(tmp_path: Path) -> None:
    records = _records(tmp_path)
    ref = _kept(tmp_path, records, "fp", 1, CrossVerdict.new_regression)
    moved = records.set_aside_as_flaky(ref, tmp_path / ref.path, "base failed when asked again")
    assert moved == tmp_path / "flaky" / "new_regression-fp-seed1"
    record = json.loads((moved / "finding.json").read_text())
    assert (record["across"], record["note"]) == ("flaky", "base failed when asked again")
    assert records.kept.findings == []
    assert [r.across for r in records.store.all()] == ["flaky"]
