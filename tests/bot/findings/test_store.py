"""The findings store on real files: real bundles, real SQLite, reopened from disk."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from backends.results import BackendInfo
from bot.findings.bundle import Finding, load_bundle, write_bundle
from bot.findings.store import FindingStore, StoredFinding, StoreError, measure, row_for
from oracles.verdict import Verdict

BACKEND = BackendInfo(name="onnxruntime", level="all", version="1.31.1")


def _chain(nodes: int) -> onnx.ModelProto:
    """A valid model of `nodes` Relu nodes in a row."""
    names = ["x", *(f"t{i}" for i in range(nodes))]
    graph = helper.make_graph(
        [helper.make_node("Relu", [a], [b]) for a, b in pairwise(names)],
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _finding(seed: int, fingerprint: str = "fp1", across: str = "persistent") -> Finding:
    return Finding(
        verdict=Verdict.wrong_result,
        signature="values in Relu",
        fingerprint=fingerprint,
        backend=BACKEND,
        seed=seed,
        across=across,
    )


def _bundle(out: Path, seed: int, nodes: int, reduced_nodes: int | None = None, fingerprint: str = "fp1") -> Path:
    x = {"x": np.ones(2, np.float32)}
    dest = write_bundle(
        out / "findings" / f"wrong_result-{fingerprint}-seed{seed}", _chain(nodes), x, x, _finding(seed, fingerprint)
    )
    if reduced_nodes is not None:
        write_bundle(dest / "reduced", _chain(reduced_nodes), x, x, _finding(seed, fingerprint))
    return dest


def test_record_counts_occurrences_and_widens_first_and_last_seen(tmp_path: Path) -> None:
    store = FindingStore.in_dir(tmp_path)
    b = _bundle(tmp_path, 5, nodes=4)
    store.record(_finding(5), b, "2026-01-02T10:00:00+00:00", shard="0/2")
    store.record(_finding(9), None, "2026-01-03T10:00:00+00:00", shard="1/2")
    row = store.record(_finding(1), None, "2026-01-01T12:00:00+02:00", shard="1/2")  # earlier, other zone
    assert row.count == 3
    assert (row.first_seen, row.first_seed, row.first_shard) == ("2026-01-01T10:00:00+00:00", 1, "1/2")
    assert (row.last_seen, row.last_seed) == ("2026-01-03T10:00:00+00:00", 9)
    assert row.bundle == "findings/wrong_result-fp1-seed5" and row.nodes == 4 and not row.reduced
    assert store.resolve(row) == tmp_path / row.bundle


def test_a_smaller_bundle_replaces_a_bigger_one_and_a_reduced_twin_counts(tmp_path: Path) -> None:
    store = FindingStore.in_dir(tmp_path)
    store.record(_finding(1), _bundle(tmp_path, 1, nodes=6), "2026-01-01T00:00:00+00:00")
    row = store.record(_finding(2), _bundle(tmp_path, 2, nodes=3), "2026-01-01T00:00:01+00:00")
    assert (row.bundle, row.nodes) == ("findings/wrong_result-fp1-seed2", 3)
    row = store.record(_finding(3), _bundle(tmp_path, 3, nodes=9, reduced_nodes=1), "2026-01-01T00:00:02+00:00")
    assert (row.bundle, row.nodes, row.reduced) == ("findings/wrong_result-fp1-seed3", 1, True)
    assert row.smallest == "findings/wrong_result-fp1-seed3/reduced"
    row = store.record(_finding(4), _bundle(tmp_path, 4, nodes=2), "2026-01-01T00:00:03+00:00")
    assert row.nodes == 1 and row.count == 4, "a bigger (or unreduced) bundle never replaces a smaller one"


def test_offer_takes_a_reduction_written_after_the_finding(tmp_path: Path) -> None:
    store = FindingStore.in_dir(tmp_path)
    b = _bundle(tmp_path, 1, nodes=5)
    store.record(_finding(1), b, None)
    x = {"x": np.ones(2, np.float32)}
    write_bundle(b / "reduced", _chain(2), x, x, _finding(1))
    row = store.offer("fp1", b)
    assert row is not None and (row.nodes, row.reduced) == (2, True)
    assert store.offer("unknown", b) is None


def test_rows_persist_across_reopening(tmp_path: Path) -> None:
    FindingStore.in_dir(tmp_path).record(_finding(1), _bundle(tmp_path, 1, nodes=3), None)
    FindingStore.in_dir(tmp_path).record(_finding(2, "fp2"), _bundle(tmp_path, 2, nodes=2, fingerprint="fp2"), None)
    FindingStore.in_dir(tmp_path).record(_finding(3), None, None)
    reopened = FindingStore(tmp_path / "findings.sqlite")
    assert [(r.fingerprint, r.count) for r in reopened.all()] == [("fp1", 2), ("fp2", 1)]
    got = reopened.get("fp2")
    assert isinstance(got, StoredFinding) and got.nodes == 2
    assert reopened.get("nope") is None


def test_an_interrupted_write_leaves_the_previous_rows(tmp_path: Path) -> None:
    store = FindingStore.in_dir(tmp_path)
    store.record(_finding(1), None, "2026-01-01T00:00:00+00:00")

    def rows() -> Iterator[StoredFinding]:
        yield row_for(_finding(2), None, "2026-01-02T00:00:00+00:00", tmp_path)
        yield row_for(_finding(3, "fp2"), None, "2026-01-02T00:00:00+00:00", tmp_path)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.add_all(rows())
    assert [(r.fingerprint, r.count) for r in store.all()] == [("fp1", 1)]


def test_reading_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    store = FindingStore.in_dir(tmp_path / "out")
    assert store.all() == [] and store.get("fp1") is None
    assert not (tmp_path / "out").exists()


def test_a_corrupt_or_foreign_store_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "findings.sqlite").write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError) as e:
        FindingStore.in_dir(tmp_path).all()
    assert "not a usable findings store" in str(e.value) and "\n" not in str(e.value)
    other = tmp_path / "other"
    FindingStore.in_dir(other).record(_finding(1), None, None)
    with sqlite3.connect(other / "findings.sqlite") as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    conn.close()
    with pytest.raises(StoreError, match="schema version"):
        FindingStore.in_dir(other).record(_finding(2), None, None)


def test_measure_ignores_an_unfinished_reduction(tmp_path: Path) -> None:
    b = _bundle(tmp_path, 1, nodes=4)
    (b / "reduced").mkdir()
    (b / "reduced" / "model.onnx").write_bytes(b"half written")
    assert measure(b) == (False, 4)


def _labelled(out: Path, seed: int, nodes: int, across: str) -> tuple[Finding, Path]:
    x = {"x": np.ones(2, np.float32)}
    finding = _finding(seed, across=across)
    return finding, write_bundle(out / "findings" / f"{across}-fp1-seed{seed}", _chain(nodes), x, x, finding)


@pytest.mark.parametrize("order", ["persistent first", "new_regression first"])
def test_one_fingerprint_under_two_labels_keeps_the_stronger_and_a_bundle_that_shows_it(
    tmp_path: Path, order: str
) -> None:
    """Base got one model right and another wrong the same way: the finding is a new regression
    whichever came first, and its bundle is the regression's even though it is the bigger one."""
    sightings = [_labelled(tmp_path, 1, 2, "persistent"), _labelled(tmp_path, 2, 5, "new_regression")]
    if order != "persistent first":
        sightings.reverse()
    store = FindingStore.in_dir(tmp_path)
    for i, (finding, bundle) in enumerate(sightings):
        store.record(finding, bundle, f"2026-01-01T00:00:0{i}+00:00")
    store.record(_finding(3, across="fixed"), None, "2026-01-01T00:00:09+00:00")  # the latest, and the weakest
    row = store.get("fp1")
    assert row is not None and row.count == 3
    assert (row.across, row.bundle, row.nodes) == ("new_regression", "findings/new_regression-fp1-seed2", 5)


def test_relabel_sets_what_summary_json_says_and_creates_no_store(tmp_path: Path) -> None:
    FindingStore.in_dir(tmp_path / "none").relabel({"fp1": "persistent"})
    assert not (tmp_path / "none").exists()
    store = FindingStore.in_dir(tmp_path)
    store.record(_finding(1, across="new_in_head"), None, None)
    store.relabel({"fp1": "persistent", "unknown": "fixed"})
    assert [(r.fingerprint, r.across) for r in store.all()] == [("fp1", "persistent")]


def test_a_bundle_s_bfloat16_tensors_come_back_as_bfloat16(tmp_path: Path) -> None:
    """np.savez keeps a bfloat16 array as raw bytes and np.load reads it back as void; the
    reference then could not take it, and a TVM campaign's reduction died of a reduced
    trigger whose input was bfloat16. load_bundle views each as its declared type."""
    x = helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 3])
    model = helper.make_model(helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g", [x], [y]))
    values = (np.arange(6, dtype=np.float32).reshape(2, 3) / 4).astype(ml_dtypes.bfloat16)
    loaded = load_bundle(write_bundle(tmp_path / "b", model, {"x": values}, {"y": -values}))
    assert loaded.inputs["x"].dtype == np.dtype(ml_dtypes.bfloat16)
    assert loaded.reference is not None and loaded.reference["y"].dtype == np.dtype(ml_dtypes.bfloat16)
    assert np.array_equal(loaded.inputs["x"].astype(np.float32), values.astype(np.float32))
    assert np.array_equal(loaded.reference["y"].astype(np.float32), -values.astype(np.float32))
