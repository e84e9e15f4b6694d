"""One seed made into a runnable case: the generated model, its NaN/Inf-free inputs and the
reference's outputs, with what it cost. The same function serves the campaign's own
process and the generation processes (bot.cases.generation_pool), so a case is the same
whichever made it, given the same coverage and known triggers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import onnx

from backends.memory import OVER_BOUND, out_of_memory
from bot.cases.mutation import MutationPlan
from generator.api import GenConfig, NoOpAllowed, Support, generate
from generator.avoid import Avoid
from generator.coverage import Coverage
from generator.focus import CaseFeatures, Focus
from generator.mutate import Genome
from generator.values import NoValidValues
from generator.z3_contexts import ContextSupply
from oracles.references import Source, read_reference
from oracles.sides import SideName

ONE_SIDE_EVERY = 8
"""One seed in this many may draw op x dtype pairs only head runs (a change that adds an op
is worth fuzzing; base declining such a case makes it `new_in_head`, never a regression),
and another one in this many what only base runs (head declining what base ran right is
`dropped_support`)."""
ALONE_EVERY = 2
"""Of one side's share of the seeds, one in this many draws from the pairs that side alone
runs and nothing else (bot.cases.opsets.OpsetPlan.alone). Drawn among everything a side runs,
a pair a change took away is one op of some 150 at one opset of ten: with five nodes a case,
about one seed in 5,000 holds it, which a 300-test TVM campaign never meets. Alone, one seed
in 16 holds nothing else, at an opset where the pair is one side's alone. A change that moves
a converter's registration (onnx2torch mutants moved Or's to version 8 and took ArgMin's off
version 12) is this kind."""


def one_side(seed: int) -> SideName | None:
    """Which side's own support `seed` draws from, or None (what both run)."""
    if seed % ONE_SIDE_EVERY == ONE_SIDE_EVERY - 1:
        return SideName.head
    if seed % ONE_SIDE_EVERY == ONE_SIDE_EVERY // 2 - 1:
        return SideName.base
    return None


def alone_side(seed: int) -> SideName | None:
    """The side whose pairs alone `seed` draws (ALONE_EVERY), or None."""
    side = one_side(seed)
    return side if side is not None and (seed // ONE_SIDE_EVERY) % ALONE_EVERY == 0 else None


def seed_support(
    seed: int, support: Support | None, head_support: Support | None, base_support: Support | None = None
) -> Support | None:
    """A seed's support matrix: a function of the seed, so the same seed gives the same case."""
    side = one_side(seed)
    if head_support is not None and side is SideName.head:
        return head_support
    if base_support is not None and side is SideName.base:
        return base_support
    return support


@dataclass
class Prepared:
    seed: int
    model: onnx.ModelProto
    model_bytes: bytes
    inputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray] | None
    source: Source = Source.torch
    """Which computation `reference` came from (none: nothing could compute it)."""
    gap: str = ""
    """Why the torch reference could not compute the case."""
    gap_op: str = ""
    """The op type the torch reference stopped at (kept with the case in a corpus)."""
    regression_of: str | None = None
    """A regression-corpus bundle's fingerprint (bot.cases.regression_corpus): the case is that
    finding's reduced model, replayed."""
    features: CaseFeatures | None = None
    """What the generated model holds (generator.focus); None for a case read back from disk."""
    genome: Genome | None = None
    """How the generated model grew, to grow mutants of it (generator.mutate)."""
    parent: int | None = None
    """A mutant's parent seed (bot.cases.mutation); None for a fresh case."""
    mutation: str = ""
    """A mutant's mutation: `kind: what changed`."""
    new_coverage: bool = False
    """Making it added an op pair (producer > consumer) no model had before."""


@dataclass
class Made:
    """A seed's case (None when it was dropped, and why), and the time it took."""

    seed: int
    case: Prepared | None
    dropped: str = ""
    generation_s: float = 0.0
    values_s: float = 0.0
    """The part of `generation_s` spent keeping values safe (generator.witness)."""
    reference_s: float = 0.0
    reference_warnings: int = 0
    """Warnings onnx.reference raised computing the reference (counted, never printed)."""
    value_work: dict[str, int] = field(default_factory=dict)
    """Insertions whose values were repaired, and refused, while the model grew."""
    solver_backstops: int = 0
    """z3 checks the wall-clock backstop stopped (generator.solver.BACKSTOP_MS)."""


def make_case(
    seed: int,
    cfg: GenConfig,
    support: Support | None,
    coverage: Coverage,
    avoid: Avoid | None,
    contexts: ContextSupply | None = None,
    focus: Focus | None = None,
    genome: Genome | None = None,
) -> Made:
    """Generate, search values, compute the reference; a seed whose values could not be made
    safe, or where no op fits, is dropped (never run) and says which. With a `genome`, the
    case is a mutant grown from it (generator.mutate)."""
    t0 = time.perf_counter()
    before = _covered(coverage)
    try:
        case = generate(
            seed, cfg, support=support, coverage=coverage, avoid=avoid, contexts=contexts, focus=focus, genome=genome
        )
        t1 = time.perf_counter()
        reading = read_reference(case.model, case.inputs)
    except NoValidValues:  # its value work ran past its step budget (generator.witness)
        return Made(seed, None, "no_valid_values", time.perf_counter() - t0)
    except NoOpAllowed:  # the builds share no op at this seed's opset: a head that declines them all
        return Made(seed, None, "no_op_allowed", time.perf_counter() - t0)
    except (RuntimeError, MemoryError) as e:
        # A case that asks more than the bot's memory bound is a generation defect, counted
        # (backends.memory): the bot never dies of one.
        return Made(seed, None, OVER_BOUND if out_of_memory(e) else "generation_failed", time.perf_counter() - t0)
    made = Made(seed, None, generation_s=t1 - t0, solver_backstops=case.solver_backstops)
    if case.values is not None:
        made.values_s = case.values.time_ms / 1000
        made.value_work = {
            "repaired_insertions": case.values.grown_repairs,
            "refused_insertions": case.values.grown_refusals,
        }
    made.reference_s = time.perf_counter() - t1
    made.reference_warnings = reading.warnings
    made.case = Prepared(
        seed,
        case.model,
        case.model.SerializeToString(),
        case.inputs,
        reading.outputs,
        reading.source,
        reading.gap,
        reading.gap_op,
        features=case.features,
        genome=case.genome,
        new_coverage=_covered(coverage) > before,
    )
    return made


def mark_mutant(made: Made, plan: MutationPlan | None) -> Made:
    """A mutant's case says whose mutant it is and what changed."""
    if plan is not None and made.case is not None:
        made.case.parent = plan.parent.seed
        made.case.mutation = f"{plan.mutant.kind.value}: {plan.mutant.what}"
    return made


def _covered(coverage: Coverage) -> int:
    """Distinct op pairs covered so far: op inputs and attribute bins keep growing for as long
    as shapes and values do, so they would call almost every case a gain."""
    return len(coverage.pairs)
