"""A finding parent's lineage (bot.cases.mutation): the failures its mutants are named by."""

from __future__ import annotations

import numpy as np
from onnx import helper

from bot.cases.mutation import Mutation
from generator.dtypes import DType
from generator.mutate import Genome
from generator.symbolic import TType
from oracles.compare import compare
from oracles.verdict import Judgement, Verdict


def test_a_finding_parents_failures_outlive_the_parent_without_their_arrays() -> None:
    """A parent showing a bug that becomes known is forgotten, and mutants grown from it are
    still in flight: they are named by its failures all the same. What is kept of a failure
    is its name, not the outputs it was judged on."""
    compared = compare({"y": np.zeros(4, np.float32)}, {"y": np.ones(4, np.float32)})
    shown = Judgement(verdict=Verdict.wrong_result, symptom="values", kernel="ai.onnx::Tanh", comparison=compared)
    shown.fingerprint = "tanh's"
    model = helper.make_model(helper.make_graph([], "g", [], []))
    genome = Genome(first=TType(DType.float32, 1), shape=(4,), steps=())
    mutation = Mutation()
    mutation.add_parent(7, genome, "finding", model, shown=[shown])
    mutation.add_parent(8, genome, "finding", model)
    assert mutation.forget(lambda m: True) == 2 and not mutation.parents
    assert [(j.fingerprint, j.kernel, j.comparison) for j in mutation.lineage[7]] == [("tanh's", "ai.onnx::Tanh", None)]
    assert 8 not in mutation.lineage, "a parent kept for anything but its failures has no lineage"
    assert shown.comparison is compared, "the campaign's own judgement is left as it was"
