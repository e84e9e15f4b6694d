"""Values kept through growth (generator.witness): repairs, refusals, undo, and the models
that come out, checked with the oracles' margin check on the emitted ONNX."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from generator.api import GenConfig, generate, grow_case
from generator.binning import BinChooser
from generator.dtypes import DType
from generator.emit import emit_model, tname
from generator.grow import Grower
from generator.ops import registry
from generator.symbolic import SymCtx, TType
from generator.values import MARGIN, UNSAFE, margin_hits
from generator.values.find import Method
from generator.witness import Witness

DELTA = MARGIN[torch.float32]
"""The float32 margin: how far from its domain's edge an unsafe op's operand must stay."""


def _grower(seed: int, method: Method | None = "gradient", model_steps: int = 48) -> tuple[Grower, Witness]:
    sc = SymCtx(random.Random(seed))
    witness = Witness(17, seed, method, model_steps)
    allow_all = lambda spec, sig: True  # noqa: E731
    grower = Grower(sc, [TType(DType.float32, 2)], allow_all, BinChooser(7, sc.rng), witness=witness)
    return grower, witness


def _forward(grower: Grower, op: str, tensor: int) -> bool:
    return grower.forward(registry()[op], len(grower.sc.binnable), first=tensor)


def _backward(grower: Grower, op: str, target: int) -> bool:
    return grower.backward(registry()[op], len(grower.sc.binnable), target=target)


def _output(grower: Grower) -> int:
    return grower.graph.nodes[-1].outputs[0]


def _valid(grower: Grower, witness: Witness) -> bool:
    """The emitted model, with the witness's values, passes the oracles' margin check."""
    model, inputs = emit_model(grower.graph, 17, witness.em.values, set(), leaves=witness.leaves)
    return margin_hits(model, inputs) == []


def test_an_unsafe_insertion_is_repaired_from_the_values_in_hand() -> None:
    grower, witness = _grower(0)
    assert (witness.leaves["t0"] < 0).any(), "the drawn values must break Log for this test to mean anything"
    assert _forward(grower, "Log", 0)
    assert witness.stats.repaired == 1 and witness.stats.refused == 0
    assert (witness.leaves["t0"] >= DELTA).all()
    assert _valid(grower, witness)


def test_an_insertion_no_values_can_make_safe_is_refused_and_undone() -> None:
    grower, witness = _grower(1)
    assert _forward(grower, "Sigmoid", 0)
    sig = _output(grower)
    before = (len(grower.graph.tensors), len(grower.graph.nodes), list(grower.graph.placeholders))
    assert not _forward(grower, "Acosh", sig)  # Sigmoid < 1 <= what Acosh needs
    assert (len(grower.graph.tensors), len(grower.graph.nodes), grower.graph.placeholders) == before
    assert witness.stats.refused == 1
    assert tname(before[0]) not in witness.env, "the refused node's output is forgotten"
    assert sig not in grower.graph.consumer_ops
    # The next insertion reuses the refused output's id and is checked afresh.
    assert _forward(grower, "Relu", sig)
    assert _output(grower) == before[0]
    assert _valid(grower, witness)


def test_a_backward_insertion_keeps_the_consumers_of_its_placeholder_safe() -> None:
    grower, witness = _grower(2)
    assert _forward(grower, "Sqrt", 0)
    assert _backward(grower, "Neg", 0)  # Sqrt(Neg(x)): x must become negative
    [new] = grower.graph.nodes[-1].inputs
    assert grower.graph.placeholders == [new] and "t0" not in witness.leaves
    assert (witness.leaves[tname(new)] <= -(DELTA)).all()
    assert _valid(grower, witness)


def test_a_backward_insertion_that_no_values_can_fix_is_refused_and_the_old_values_kept() -> None:
    grower, witness = _grower(3)
    assert _forward(grower, "Acosh", 0)
    kept = witness.leaves["t0"].copy()
    assert not _backward(grower, "Sigmoid", 0)  # Acosh(Sigmoid(x)) has no valid x
    assert grower.graph.placeholders == [0] and len(grower.graph.nodes) == 1
    assert np.array_equal(witness.leaves["t0"], kept)
    assert not any(k != "t0" and k.startswith("t") for k in witness.leaves)
    assert _valid(grower, witness)


def test_a_backward_insertion_makes_its_placeholder_computed_for_the_jump_checks() -> None:
    """Floor of a graph input is exact (no jump margin); once the input is a Sigmoid's
    output, every backend rounds it its own way and Floor's jump margin applies."""
    grower, witness = _grower(4)
    assert _forward(grower, "Floor", 0)
    assert "t0" not in witness.bits
    assert _backward(grower, "Sigmoid", 0)
    assert witness.bits["t0"] is False
    assert _valid(grower, witness)


def test_a_repair_moves_only_the_leaves_behind_the_unsafe_node() -> None:
    grower, witness = _grower(5)
    assert _backward(grower, "Mul", 0)  # t0 = a * b, two new leaves
    a, b = grower.graph.nodes[-1].inputs
    if (witness.leaves[tname(a)] >= 0).all():
        a, b = b, a
    before_b = witness.leaves[tname(b)].copy()
    assert (witness.leaves[tname(a)] < 0).any()
    assert _forward(grower, "Sqrt", a)
    assert witness.stats.repaired == 1
    assert (witness.leaves[tname(a)] >= 0).all()
    assert np.array_equal(witness.leaves[tname(b)], before_b), "b does not feed Sqrt: it keeps its values"
    assert _valid(grower, witness)


def test_without_steps_left_an_insertion_that_needs_a_repair_is_refused() -> None:
    grower, witness = _grower(0, model_steps=0)
    assert not _forward(grower, "Log", 0)
    assert witness.stats.refused == 1 and witness.stats.steps == 0


def test_without_a_method_nothing_is_run_and_nothing_refused() -> None:
    grower, witness = _grower(0, method=None)
    assert _forward(grower, "Log", 0)
    assert witness.stats.checked == 0 and not witness.env.keys() - witness.leaves.keys() - witness.constants.keys()


@pytest.mark.parametrize("method", ["gradient", "sampling"])
def test_generated_models_carry_safe_values_for_every_dtype(method: Method) -> None:
    repaired = refused = unsafe = 0
    for seed in range(60):  # templates (generator.patterns) need fewer repairs than op-by-op growth
        case = generate(seed, GenConfig(nodes=12, values=method))
        assert case.values is not None and case.values.found
        hits = margin_hits(case.model, case.inputs)
        if case.edge == "special_values":  # +-Inf on purpose, where every reader defines the result
            hits = [h for h in hits if not h.node.startswith("n_special")]  # (tests/oracles/test_special_values.py)
        assert hits == [], seed
        repaired += case.values.grown_repairs
        refused += case.values.grown_refusals
        unsafe += any(n.op_type in UNSAFE for n in case.model.graph.node)
    assert unsafe >= 45 and repaired >= 12, "the property must be exercised by repairs"
    assert refused >= 1


def test_fresh_draws_follow_the_generators_distributions() -> None:
    for seed in range(20):
        _, witness = grow_case(seed, GenConfig(nodes=10))
        fresh = witness.fresh(seed + 1000)
        assert fresh.keys() == witness.leaves.keys()
        for name, a in fresh.items():
            assert a.shape == witness.leaves[name].shape and a.dtype == witness.leaves[name].dtype
            if a.dtype.kind == "f" and a.size:
                bound = 1.0 / np.sqrt(witness.em.fan_in.get(name, 1))
                assert np.abs(a.astype(np.float64)).max() <= bound * (1 + DELTA)
        floats = [n for n, a in fresh.items() if a.dtype.kind == "f" and a.size > 4]
        assert all(not np.array_equal(fresh[n], witness.leaves[n]) for n in floats)


def test_checkpoint_and_rollback_restore_the_graph() -> None:
    grower, _ = _grower(6, method=None)
    assert _forward(grower, "Relu", 0)
    graph = grower.graph
    mark = graph.checkpoint()
    producers, consumers = dict(graph.producer_op), {k: list(v) for k, v in graph.consumer_ops.items()}
    assert _backward(grower, "Add", 0)
    assert _forward(grower, "Tanh", 1)
    graph.rollback(mark)
    assert graph.checkpoint() == mark
    assert graph.producer_op == producers and graph.consumer_ops == consumers


def test_a_new_nodes_weights_are_leaves_a_repair_may_move() -> None:
    grower, witness = _grower(7)
    assert _forward(grower, "Relu", 0)
    assert _forward(grower, "Gemm", _output(grower))
    node = grower.graph.nodes[-1]
    weights = [k for k in node.fragment.arrays if k.startswith("w")] if node.fragment else []
    assert weights, "the op must own a weight for this test to mean anything"
    program = witness._current()
    assert set(weights) <= program.ancestors[tname(node.outputs[0])]
