"""The regression corpus through `fuzzbot fuzz --regressions`, between two real onnxruntime
releases: a reduced finding of an earlier run that fails again on head is a regression of
a known bug, named by the fingerprint it was filed under; one head runs right is counted
as passing; a corrupt bundle is skipped with its reason; and the run's own reduced
findings are added to the folder."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from bot.cases.regression_corpus import RegressionCorpus
from bot.findings.bundle import write_bundle
from bot.findings.summary import FindingRef
from oracles.verdict import Verdict
from tests import release_cases as rc
from tests.conftest import CliResult

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]

Cli = Callable[..., CliResult]


def test_a_known_bug_that_comes_back_is_a_regression_of_it_and_new_findings_join_the_corpus(
    cli: Cli, tmp_path: Path
) -> None:
    right, wrong = rc.REGRESSION_PAD_FUSION
    folder = tmp_path / "regressions"
    back = rc.maxpool_after_zero_pad()
    write_bundle(folder / "0badc0de00000001", back[0], back[1], None)
    write_bundle(folder / "0badc0de00000002", _relu(), {"x": np.linspace(-1, 1, 6, dtype=np.float32)}, None)
    (folder / "0badc0de00000003").mkdir()
    (folder / "0badc0de00000003" / "model.onnx").write_bytes(b"not a model")
    out = tmp_path / "out"
    r = cli(
        "fuzz",
        "--config",
        # one opset: the probe of two fresh releases at every opset took most of this test's time
        str(rc.pair_config(tmp_path, right, wrong, reduce={"budget": "20s"}, generator={"opset": 17})),
        "--regressions",
        str(folder),
        "--budget",
        "8s",
        "--seed",
        "0",
        "--out",
        str(out),
    )
    assert r.code == 2, r.err
    summary = json.loads((out / "summary.json").read_text())
    replay = summary["regressions"]
    assert replay["replayed"] == 2 and replay["regressed"] == ["0badc0de00000001"], replay
    assert replay["passing"] == 1 and list(replay["skipped"]) == ["0badc0de00000003"]
    (known,) = [f for f in summary["findings"] if f["regression_of"] == "0badc0de00000001"]
    assert known["across"] == "new_regression" and known["reduced_path"] == known["path"]
    reduced = [f for f in summary["findings"] if f["reduced_path"] and not f["regression_of"]]
    assert sorted(replay["added"]) == sorted(f["fingerprint"] for f in reduced)
    for fingerprint in replay["added"]:
        assert (folder / fingerprint / "model.onnx").is_file() and (folder / fingerprint / "finding.json").is_file()
    assert not [p for p in folder.iterdir() if p.name.startswith(".")], "no staging folder is left behind"


def _relu() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_missing_folder_is_created_with_each_reduced_finding_once_and_never_a_replayed_one(tmp_path: Path) -> None:
    corpus = RegressionCorpus.open(tmp_path / "none-yet")
    assert corpus.next() is None and corpus.skipped == {}
    out = tmp_path / "out"
    write_bundle(out / "findings" / "a" / "reduced", _relu(), {"x": np.zeros(6, np.float32)}, None)

    def ref(fingerprint: str, reduced: str | None, regression_of: str | None = None) -> FindingRef:
        common = {"path": "findings/a", "verdict": Verdict.crash, "seed": 1, "signature": "s"}
        return FindingRef(fingerprint=fingerprint, reduced_path=reduced, regression_of=regression_of, **common)

    gone = ref("f4", "findings/gone/reduced")
    found = [ref("f1", "findings/a/reduced"), ref("f2", None), ref("f3", "findings/a/reduced", "old"), gone]
    assert corpus.add(out, found) == ["f1"]
    assert list(corpus.unsaved) == ["f4"], "a bundle that cannot be copied is noted, never fatal"
    assert corpus.add(out, found) == [], "a fingerprint already kept is not copied again"
    again = RegressionCorpus.open(tmp_path / "none-yet")
    replayed = again.next()
    assert replayed is not None and replayed.fingerprint == "f1" and replayed.nodes == 1
