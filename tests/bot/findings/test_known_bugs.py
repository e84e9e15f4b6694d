"""A reduced bug as a known trigger (bot.findings.known_bugs): the nodes its failure needs,
on a real onnxruntime build."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from backends.client import WorkerClient
from backends.reference import run_reference
from backends.results import BackendInfo
from backends.spec import parse_backend
from bot.campaign.sides import open_campaign
from bot.config import FuzzConfig, ReduceSettings
from bot.findings.bundle import Bundle, Finding
from bot.findings.known_bugs import KnownBug, KnownNode, holds, known_bug, write_known
from bot.findings.summary import Summary
from bot.reduce.blame import blame
from bot.reduce.candidates import ClientPool
from bot.sides.config import CompilerConfig
from oracles.judging import Judging
from oracles.verdict import Verdict, judge
from tests import release_cases as rc

pytestmark = [pytest.mark.worker, pytest.mark.release, pytest.mark.campaign]


def test_a_bug_blamed_on_a_kernel_is_known_by_that_node_not_by_what_reads_it() -> None:
    """The reduction blames the Pad (the first wrong tensor); known as Pad -> Add, the bug
    would still be found through every other reader of a wrap Pad. Known as the Pad, a model
    with the Pad and another reader holds it, and one without a Pad does not."""
    model, inputs = rc.pad_wrap_read_by_an_add()
    spec = parse_backend("onnxruntime:all")
    pool = ClientPool(lambda: WorkerClient(spec, str(rc.ort_python(rc.PAD_WRAP)), 30.0), 1)
    try:
        with pool.lend() as client:
            result = client.run(model.SerializeToString(), inputs)
        j = judge(result, run_reference(model, inputs), "case")
        assert j.verdict is Verdict.wrong_result, j
        finding = Finding(**j.model_dump(), backend=BackendInfo(name="onnxruntime", level="all", version=""))
        found = blame(Bundle(Path("."), model, inputs, None, finding), pool, Judging.shipped())
    finally:
        pool.close()
    assert found is not None and found.name == "values at ai.onnx::Pad", found
    bug = known_bug(model, finding.model_copy(update={"blamed": found.name}))
    assert bug is not None and [n.op_type for n in bug.nodes] == ["Pad"], bug
    other_reader = copy.deepcopy(model)
    other_reader.graph.node[1].op_type = "Mul"
    assert holds(other_reader, [bug.trigger()])
    unblamed = known_bug(model, finding)
    assert unblamed is not None and [n.op_type for n in unblamed.nodes] == ["Pad", "Add"]
    assert not holds(other_reader, [unblamed.trigger()])


def _divergent(tmp: Path, known: list[Path]) -> tuple[int, int, Summary]:
    """A campaign of onnxruntime 1.28.0 against 1.31.1 over float64 Sigmoids and Muls, where
    many a model holds x * Sigmoid(x): 1.28.0's QuickGeluFusion makes a float64 QuickGelu
    it has no kernel for (tests/release_cases), 1.31.1 runs it, a divergence. Its divergent
    parents and fixed cases; known bugs are not steered away from (`avoid: 0`), so
    generation draws the same models either way."""
    compiler = {"base": {"python": str(rc.ort_python(rc.QUICK_GELU_FLOAT64[0]))}, "head": {"python": sys.executable}}
    cfg = FuzzConfig(
        out=tmp / "out",
        max_tests=60,
        seed=0,
        probe=False,
        backend="onnxruntime:all",
        compiler=CompilerConfig.model_validate(compiler),
        reduce=ReduceSettings(enabled=False),
        known_bugs={"files": known, "avoid": 0},
        generator={"ops": ["Sigmoid", "Mul"], "dtypes": ["float64"], "nodes": 4, "symbolic_dims": 0.0},
    )
    summary = open_campaign(cfg).run()
    assert summary.mutation is not None
    return summary.mutation.parents.get("divergent", 0), summary.counts.get("fixed", 0), summary


def test_a_divergence_that_shows_a_known_bug_teaches_generation_nothing(tmp_path: Path) -> None:
    """onnxruntime 1.30.0's wrap Pad, fixed in 1.31.1, diverged in every model that held one,
    and a campaign between them steered toward it until 737 of 8,005 cases were that one
    fixed bug. Here 1.28.0's QuickGelu: unknown, its cases become divergent parents (3 in
    60 tests, 36 of them that bug); known as x * Sigmoid(x) but not steered away from, none
    does, and its features are not taught to the focus either."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    parents, fixed, _ = _divergent(tmp_path / "a", [])
    bug = KnownBug(
        fingerprint="quick-gelu", nodes=[KnownNode(op_type="Sigmoid"), KnownNode(op_type="Mul")], edges=[(0, 1)]
    )
    known = write_known(tmp_path / "known-bugs.json", [bug])
    known_parents, known_fixed, summary = _divergent(tmp_path / "b", [known])
    assert parents >= 1 and fixed >= 10, (parents, fixed)
    # known, its cases are no parents (bot.cases.source), and teach the focus nothing: 26 of
    # the 60 are that bug, where teaching it made 33
    assert known_parents == 0 and known_fixed * 5 <= fixed * 4, (known_parents, known_fixed, fixed)
    share = summary.known_share["quick-gelu"]  # known from the start: every test counts
    assert share.known_at == 0 and share.tests_after == 60 and 0 < share.shown_after <= known_fixed


def _quick_gelu_campaign(out: Path, during: bool) -> Summary:
    compiler = {"base": {"python": str(rc.ort_python(rc.QUICK_GELU_FLOAT64[0]))}, "head": {"python": sys.executable}}
    cfg = FuzzConfig(
        out=out,
        max_tests=100,
        budget=900,
        seed=0,
        probe=False,
        backend="onnxruntime:all",
        compiler=CompilerConfig.model_validate(compiler),
        reduce=ReduceSettings(budget=60.0, share=0.0, during=during),
        generator={"ops": ["Sigmoid", "Mul"], "dtypes": ["float64"], "nodes": 4, "symbolic_dims": 0.0},
    )
    return open_campaign(cfg).run()


def test_a_bug_learned_while_fuzzing_takes_a_smaller_share_of_the_tests_after(tmp_path: Path) -> None:
    """QuickGelu's float64 fusion bug, with the first finding reduced while fuzzing: from then
    on generation steers away from it, its divergence keys stop teaching the focus, and its
    share of the tests (summary.json `known_share`) falls well below the share it keeps in
    the same campaign that never learns it."""
    unlearned = _quick_gelu_campaign(tmp_path / "unlearned", during=False)
    learned = _quick_gelu_campaign(tmp_path / "learned", during=True)
    assert not unlearned.known_share and learned.known_share, learned.counts
    share = next(iter(learned.known_share.values()))
    assert share.known_at + share.tests_after == learned.tests == 100
    never_known = unlearned.counts["fixed"] / unlearned.tests
    assert share.tests_after >= 50 and share.shown_after / share.tests_after < never_known / 2, (
        share,
        unlearned.counts,
    )
