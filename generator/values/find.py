"""The value search's entry point: a model and its values in, safe values (or a reason) out.

Determinism: every random draw comes from a generator seeded by the case seed, torch on
CPU computes the same bits each run, and the search is bounded by steps and samples, never
by the clock, so the values found depend on the seed alone, on any machine at any load.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from pydantic import BaseModel, ConfigDict

from generator.values.interp import Program, UnsupportedModel
from generator.values.leaves import Leaves
from generator.values.sampling import sampling_search
from generator.values.search import Budget, Tally, evaluate, gradient_search

Method = Literal["gradient", "sampling"]

SEED_SALT = 0x56414C53
"""Mixed into the case seed so these draws never repeat the generator's own stream."""


class ValueOutcome(BaseModel):
    """How the search for a case ended: found by which method and at what cost, or why not."""

    model_config = ConfigDict(extra="forbid")

    found: bool
    method: Literal["initial", "gradient", "sampling"] | None = None
    """`initial`: the generator's own values were already safe."""
    steps: int = 0
    repairs: int = 0
    restarts: int = 0
    samples: int = 0
    grown_repairs: int = 0
    """Insertions whose values were repaired while the graph grew (generator.witness)."""
    grown_refusals: int = 0
    """Insertions refused while the graph grew, because no values kept them safe."""
    time_ms: float = 0.0
    reason: str | None = None
    """Why no values were found (or None)."""
    last_unsafe: str | None = None
    """The last op found unsafe, `node (OpType): predicate`."""


@dataclass
class Found:
    outcome: ValueOutcome
    values: dict[str, np.ndarray]
    """The free tensors' final values (the last ones tried when nothing was found)."""


class NoValidValues(Exception):
    """No inputs and weights keep every op of this model safe: drop it, never test it."""

    def __init__(self, seed: int, outcome: ValueOutcome) -> None:
        super().__init__(f"seed {seed}: no valid values ({outcome.reason}; last unsafe: {outcome.last_unsafe})")
        self.seed = seed
        self.outcome = outcome


def find_values(
    model: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    free: Collection[str],
    seed: int,
    method: Method = "gradient",
    max_steps: int = 48,
    max_samples: int = 16,
) -> Found:
    """Search values for the `free` inputs and initializers (the rest stay as they are).

    `gradient` runs the gradient search, then sampling if it ran out of steps; `sampling`
    only samples. Both start by checking the values they were given.
    """
    with one_thread():
        return _find(model, inputs, free, seed, method, max_steps, max_samples)


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread: the search's tensors have at most a few thousand elements,
    where a second thread only adds hand-offs, and on a busy machine waiting for it made a
    2,000-element Floor take 8 ms instead of 3 µs."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _find(
    model: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    free: Collection[str],
    seed: int,
    method: Method,
    max_steps: int,
    max_samples: int,
) -> Found:
    t0 = time.perf_counter()
    rng = np.random.default_rng([seed, SEED_SALT])
    tally = Tally()
    try:
        program = Program(model, inputs, free)
    except UnsupportedModel as e:
        return Found(ValueOutcome(found=False, reason=str(e)), {})
    leaves = Leaves(program.initial)
    first = evaluate(program, leaves, grad=False)
    budget = Budget(max_steps, max_samples)
    reason: str | None = None
    used: Literal["initial", "gradient", "sampling"] = "initial"
    if first is not None:
        tally.last = first.describe()
        if method == "gradient":
            used = "gradient"
            reason = gradient_search(program, leaves, rng, budget, tally)
        if reason is not None or method == "sampling":
            used = "sampling"
            reason = _fallback(program, leaves, rng, budget, tally, reason)
    outcome = ValueOutcome(
        found=reason is None,
        method=used if reason is None else None,
        steps=tally.steps,
        repairs=tally.repairs,
        restarts=tally.restarts,
        samples=tally.samples,
        time_ms=round(1000 * (time.perf_counter() - t0), 3),
        reason=reason,
        last_unsafe=tally.last,
    )
    return Found(outcome, leaves.export())


def _fallback(
    program: Program, leaves: Leaves, rng: np.random.Generator, budget: Budget, tally: Tally, why: str | None
) -> str | None:
    """Sampling, unless the gradient search already proved that nothing can help."""
    if why is not None and (why.startswith("no free value") or why.startswith("reference error")):
        return why
    sampled = sampling_search(program, leaves, rng, budget, tally)
    if sampled is None or why is None:
        return sampled
    return f"gradient: {why}; sampling: {sampled}"


def apply_values(
    model: onnx.ModelProto, inputs: Mapping[str, np.ndarray], values: Mapping[str, np.ndarray]
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The model with its initializers, and the inputs, replaced where `values` names them."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for i, init in enumerate(out.graph.initializer):
        if init.name in values:
            out.graph.initializer[i].CopyFrom(numpy_helper.from_array(values[init.name], init.name))
    new_inputs = {k: values.get(k, v) for k, v in inputs.items()}
    return out, new_inputs
