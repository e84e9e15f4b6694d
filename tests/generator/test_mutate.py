"""Mutants (generator.mutate) and the focus (generator.focus): valid by construction, functions
of their seed, near their parent; and a campaign that knows nothing grows what it grew before."""

from __future__ import annotations

import hashlib
import itertools
import random
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import z3

from backends.adapters.base import is_unsupported
from backends.adapters.ort import OrtAdapter
from bot.campaign.sides import open_campaign
from bot.config import FuzzConfig, ReduceSettings
from bot.findings.summary import Summary
from bot.sides.config import CompilerConfig
from generator.api import GenConfig, generate, step_specs
from generator.coverage import Coverage
from generator.focus import CaseFeatures, Focus
from generator.mutate import Genome, MutationKind, mutate
from generator.solver import CHECK_RLIMIT, MODEL_RLIMIT, MeteredSolver
from generator.tape import TapeRandom
from tests.paths import TESTS

pytestmark = [pytest.mark.worker, pytest.mark.campaign]

CFG = GenConfig()
SPECS = step_specs(CFG, None)


def _parents(count: int) -> list[tuple[int, Genome, Counter[str]]]:
    """Cases grown as a campaign grows them (one coverage): seed, genome, op types."""
    coverage = Coverage()
    found = []
    for seed in range(count):
        case = generate(seed, CFG, coverage=coverage)
        assert case.genome is not None
        found.append((seed, case.genome, Counter(n.op_type for n in case.model.graph.node)))
    return found


def _runs_unoptimized(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> str | None:
    """Why a model is not valid ONNX, or None: the checker, strict shape inference, and a run
    with no optimizer (a kernel onnxruntime lacks is its limit, not invalidity)."""
    try:
        onnx.checker.check_model(model, full_check=True)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, inputs)
    except Exception as e:  # noqa: BLE001 - every failure is a verdict here
        text = str(e)
        return None if is_unsupported(OrtAdapter.unsupported, text) or "by zero" in text else text[:200]
    return None


def test_the_tape_replays_the_draws_it_recorded_and_drops_a_feed_that_no_longer_fits() -> None:
    rng = TapeRandom(5)
    first = [rng.randint(0, 100), rng.random(), rng.choice("abcdef")]
    plain = random.Random(5)
    assert [plain.randint(0, 100), plain.random(), plain.choice("abcdef")] == first  # Random's own stream
    again = TapeRandom(99)
    again.feed(rng.since(0))
    assert [again.randint(0, 100), again.random(), again.choice("abcdef")] == first
    off = TapeRandom(99)
    off.feed(rng.since(0))
    # A float asked where bits were recorded: the replay took another path, and the stream's
    # own draws take over from there on.
    assert [off.random(), off.randint(0, 100)] == [TapeRandom(99).random(), _second_randint(99)]


def _second_randint(seed: int) -> int:
    rng = TapeRandom(seed)
    rng.random()
    return rng.randint(0, 100)


def test_a_genome_grown_again_unchanged_holds_the_same_ops() -> None:
    """Replayed as a campaign grows mutants (with its coverage), each step makes its op again;
    only a step whose recorded bins no longer fit may be placed otherwise."""
    same = 0
    for seed, genome, ops in _parents(20):
        again = generate(seed, CFG, coverage=Coverage(), genome=genome)
        same += Counter(n.op_type for n in again.model.graph.node) == ops
    assert same >= 16


@pytest.mark.parametrize("kind", list(MutationKind))
def test_every_kind_of_mutant_is_valid_near_its_parent_and_a_function_of_its_seed(kind: MutationKind) -> None:
    made = 0
    overlap = []
    for seed, genome, parent in _parents(40):
        mutant = mutate(genome, random.Random(seed), SPECS.get, sorted(SPECS), list(CFG.dtypes), [kind])
        if mutant is None:
            continue
        assert mutant.kind is kind
        case = generate(10_000 + seed, CFG, genome=mutant.genome)
        again = generate(10_000 + seed, CFG, genome=mutant.genome)
        assert case.model.SerializeToString() == again.model.SerializeToString()
        assert _runs_unoptimized(case.model, case.inputs) is None, (seed, mutant.what)
        ops = Counter(n.op_type for n in case.model.graph.node)
        overlap.append(sum((parent & ops).values()) / sum(parent.values()))
        made += 1
    assert made >= 10
    assert np.mean(overlap) >= 0.5  # a mutant stays near its parent (measured: 0.65 to 0.99 by kind)


def test_a_sibling_of_another_arity_takes_as_many_inputs_as_it_may() -> None:
    """Max (variadic, drawn with up to 3 inputs) swapped for Mul (2 inputs): never an invalid node."""
    for seed in range(400):
        case = generate(seed, GenConfig(ops=["Max", "Relu", "Mul"]))
        assert case.genome is not None
        steps = [s for s in case.genome.steps if s.op == "Max" and len(s.tensors) == 3]
        if not steps:
            continue
        at = case.genome.steps.index(steps[0])
        edited = list(case.genome.steps)
        edited[at] = replace(steps[0], op="Mul")
        mutant = generate(seed, GenConfig(ops=["Max", "Relu", "Mul"]), genome=replace(case.genome, steps=tuple(edited)))
        assert all(len(n.input) == 2 for n in mutant.model.graph.node if n.op_type == "Mul")
        assert _runs_unoptimized(mutant.model, mutant.inputs) is None
        return
    pytest.fail("no seed drew a three-input Max")


def test_an_empty_focus_leaves_every_model_as_it_was() -> None:
    def digest(focus: Focus | None) -> str:
        coverage, h = Coverage(), hashlib.sha256()
        for seed in range(40):
            h.update(generate(seed, CFG, coverage=coverage, focus=focus).model.SerializeToString())
        return h.hexdigest()

    assert digest(None) == digest(Focus())


def test_a_focus_draws_models_toward_a_pair_and_fades_model_by_model() -> None:
    def pairs_held(focus: Focus | None) -> int:
        coverage = Coverage()
        held = 0
        for seed in range(150):
            features = generate(seed, CFG, coverage=coverage, focus=focus).features
            assert features is not None
            held += "Transpose>Softmax" in features.pairs
        return held

    focus = Focus()
    focus.learn(CaseFeatures(ops=("Transpose", "Softmax"), pairs=("Transpose>Softmax",)), 5.0)
    assert pairs_held(focus) >= 10 * max(1, pairs_held(None))
    strength = focus.strength()
    for _ in range(400):
        focus.tick()
    assert focus.strength() < strength / 5
    focus.hinted.ops["Softmax"] = 1.0
    assert focus.strength() >= 0.5  # a hint never fades


def test_one_model_s_solver_checks_share_one_resource_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget is a count (rlimit), never seconds: each check of a problem z3 cannot settle
    spends its CHECK_RLIMIT, and once the model's budget is spent a check answers unknown at
    once, which growth takes as a refused insertion. (The time backstop, the one machine-bound
    limit, is the next test's; on a loaded machine one of these 2-second checks met it.)"""
    monkeypatch.setattr("generator.solver.BACKSTOP_MS", 600_000)
    ctx = z3.Context()
    solver = MeteredSolver(ctx)
    holes, pigeons = 9, 10
    seat = [[z3.Bool(f"p{i}_{j}", ctx) for j in range(holes)] for i in range(pigeons)]
    solver.add(*[z3.Or(*row) for row in seat])
    solver.add(
        *[z3.Not(z3.And(seat[a][j], seat[b][j])) for j in range(holes) for a in range(pigeons) for b in range(a)]
    )
    spent = []
    for _ in range(MODEL_RLIMIT // CHECK_RLIMIT):
        assert solver.check() == z3.unknown
        spent.append(solver.spent)
    assert spent[-1] >= MODEL_RLIMIT and all(b - a >= CHECK_RLIMIT // 2 for a, b in itertools.pairwise(spent))
    assert solver.check() == z3.unknown and solver.spent == spent[-1]  # nothing more spent


def test_a_check_z3_does_not_count_is_stopped_by_the_backstop_and_spends_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real check from a campaign (a Pad's element count, a product of three padded dims)
    that z3's rewriter spent 8 s on at 180,000 resource units: the backstop stops it, says
    so, and the model's solver is spent, so no second such check follows."""
    monkeypatch.setattr("generator.solver.BACKSTOP_MS", 500)
    fired: list[int] = []
    solver = MeteredSolver(z3.Context(), lambda: fired.append(1))
    solver.from_file(str(TESTS / "data" / "pad_numel_rewriter_stall.smt2"))
    assert solver.check() == z3.unknown and fired == [1]
    assert solver.spent >= MODEL_RLIMIT and solver.check() == z3.unknown and fired == [1]


def _campaign(tmp: Path, compiler: CompilerConfig | None, cache: str) -> Summary:
    cfg = FuzzConfig(
        budget=600.0,  # the test count stops it, at any load
        max_tests=120,
        out=tmp / "out",
        cache_dir=Path(cache),
        compiler=compiler,
        reduce=ReduceSettings(enabled=False),
        # the models these counts were measured on: no templates, symbolic dims or wide types, whose
        # additions would change every seed's model
        generator={"symbolic_dims": 0.0, "patterns": 0.0, "wide_types": 0.0},
    )
    summary = open_campaign(cfg).run()
    assert summary.tests == 120 and summary.mutation is not None
    return summary


def test_near_misses_and_findings_are_parents_only_where_two_builds_are_compared(
    tmp_path: Path, probe_cache: str
) -> None:
    """The same 120 seeds on onnxruntime: compared against itself as two builds, outputs close
    to the tolerance become parents; fuzzed as one build (a nightly), none does, because there
    their mutants yielded less than half of what fresh cases did. Nor does a finding of one
    build: its mutants show its bug again (bot.cases.source.CaseSource.found)."""
    python = {"python": sys.executable}
    two = CompilerConfig.model_validate({"base": python, "head": python})
    (tmp_path / "two").mkdir()
    (tmp_path / "one").mkdir()
    paired = _campaign(tmp_path / "two", two, probe_cache).mutation
    assert paired is not None and paired.parents.get("near_miss", 0) > 0
    alone = _campaign(tmp_path / "one", None, probe_cache)
    assert alone.findings, "one build's findings, none of which may become a parent"
    assert alone.mutation is not None and alone.mutation.parents == {}
