"""The fixpoint driver: run the passes in order until a whole round changes nothing.

One `Tester` serves every pass, so the cache, the test bound and the time bound
cover the whole reduction, and the result records each accepted step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field

from reducers.candidate import Candidate, TensorValues
from reducers.passes import POLISH_PASSES, STRUCTURAL_PASSES, Context, Pass
from reducers.tester import BudgetExhausted, ReduceConfig, Tester, TesterStats


class NotInteresting(ValueError):
    """The starting case does not pass the predicate: there is nothing to reduce."""


class Step(BaseModel):
    pass_name: str
    nodes_before: int
    nodes_after: int
    bytes_before: int
    bytes_after: int
    tests: int
    """Tests run so far, when this step was accepted."""


class PassCounts(BaseModel):
    """What one pass did over a reduction: how often it ran, how many tests it spent, how
    often it found a smaller case, and the nodes it removed."""

    runs: int = 0
    tests: int = 0
    successes: int = 0
    nodes_removed: int = 0


class ReductionResult(BaseModel):
    config: ReduceConfig
    nodes_before: int
    nodes_after: int
    bytes_before: int
    bytes_after: int
    rounds: int = 0
    steps: list[Step] = Field(default_factory=list)
    passes: dict[str, PassCounts] = Field(default_factory=dict)
    """Per pass, by name, in the order they first ran: where the tests went."""
    stats: TesterStats = Field(default_factory=TesterStats)


class Progress(BaseModel):
    """What a progress bar shows after each batch of tests."""

    tests: int
    nodes: int
    pass_name: str


MAX_ROUNDS = 20
"""A safety net: every pass only shrinks, so a fixpoint comes long before this."""


def _nbytes(case: Candidate) -> int:
    return int(case.model.ByteSize()) + sum(int(a.nbytes) for a in case.inputs.values())


def reduce_case(
    case: Candidate,
    predicate: Callable[[Candidate], bool],
    config: ReduceConfig | None = None,
    values: TensorValues | None = None,
    phases: Sequence[Sequence[Pass]] = (STRUCTURAL_PASSES, POLISH_PASSES),
    on_progress: Callable[[Progress], None] | None = None,
) -> tuple[Candidate, ReductionResult]:
    """The smallest case found that still passes `predicate`, and how it was found.

    Raises NotInteresting when `case` itself does not pass.
    """
    cfg = config or ReduceConfig()
    tester: Tester[Candidate] = Tester(predicate, Candidate.shape_key, cfg)
    result = ReductionResult(
        config=cfg, nodes_before=case.size, nodes_after=case.size, bytes_before=_nbytes(case), bytes_after=_nbytes(case)
    )
    where = Progress(tests=0, nodes=case.size, pass_name="check")

    def report(stats: TesterStats) -> None:
        where.tests = stats.tests
        if on_progress is not None:
            on_progress(where.model_copy())

    tester.on_test = report
    started = time.monotonic()
    current = case
    try:
        if tester.first_success([case]) != 0:
            raise NotInteresting("the starting model does not pass the check")
        current = _fixpoint(case, Context(tester, values), phases, result, where)
    except BudgetExhausted:
        pass  # only the first check can get here; every pass keeps its own progress
    finally:
        tester.close()
    result.stats = tester.stats
    result.stats.elapsed_s = time.monotonic() - started
    result.nodes_after, result.bytes_after = current.size, _nbytes(current)
    return current, result


def _fixpoint(
    case: Candidate,
    ctx: Context,
    phases: Sequence[Sequence[Pass]],
    result: ReductionResult,
    where: Progress,
) -> Candidate:
    """Each phase to its own fixpoint, in order: node removal first, so the polish passes
    never spend tests on nodes that will go anyway. One sweep: the polish passes keep the
    node set (and every tensor's type), so the node set stays 1-minimal after them; a
    second sweep cost two or three tests per model and never removed a node in the
    reducer benchmark's corpus."""
    result.rounds += 1
    for phase in phases:
        case, _ = _run_phase(case, ctx, phase, result, where)
        if ctx.tester.stats.stopped:
            return case
    return case


def _run_phase(
    case: Candidate, ctx: Context, passes: Sequence[Pass], result: ReductionResult, where: Progress
) -> tuple[Candidate, bool]:
    any_change = False
    for _ in range(MAX_ROUNDS):
        changed = False
        for run in passes:
            name = run.__name__
            where.pass_name, where.nodes = name, case.size
            counts = result.passes.setdefault(name, PassCounts())
            tests_before = ctx.tester.stats.tests
            smaller = run(case, ctx)
            counts.runs += 1
            counts.tests += ctx.tester.stats.tests - tests_before
            if smaller is not None:
                counts.successes += 1
                counts.nodes_removed += case.size - smaller.size
                result.steps.append(
                    Step(
                        pass_name=name,
                        nodes_before=case.size,
                        nodes_after=smaller.size,
                        bytes_before=_nbytes(case),
                        bytes_after=_nbytes(smaller),
                        tests=ctx.tester.stats.tests,
                    )
                )
                case, changed = smaller, True
            if ctx.tester.stats.stopped:
                return case, True
        any_change = any_change or changed
        if not changed:
            break
    return case, any_change
