"""Mutants of a grown model: the same insertions, one of them changed, grown again.

Fresh generation cannot search near a case: the next seed is anywhere. A bug found once,
a rewrite only head performs, an output that came close to its tolerance are each a place
worth searching around, because bugs cluster. A model's genome is how it grew: its first
tensor and its insertions (generator.grow.Step), each with the draws it made. A mutation
edits the genome, and the mutant is grown from it as any model is: every step placed
again against its op spec, solved and checked, its values repaired by the witness; a
step the edit made impossible is left out, and the model grows fresh ops to its node
budget. So a mutant is valid by construction, and a function of its seed.

The mutations:
- attribute: one step's draws are dropped, so its attributes fall in new bins;
- dtype: the first tensor takes another dtype, which flows through every step that allows it;
- shape: the first tensor takes other dims (broadcasting stays valid: every step re-solves);
- sibling: one op is replaced by another of its family (the module its spec lives in);
- insert: a fresh op is inserted after a step; remove: a step is dropped (readers of what it
  made read another tensor);
- pattern: a rewrite template's variant is swapped for another (a near miss for the exact
  form, or back).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from generator.dtypes import DType
from generator.grow import FREE, Step
from generator.ops.base import OpSpec
from generator.patterns.base import Pattern
from generator.symbolic import TType


class MutationKind(StrEnum):
    attribute = "attribute"
    dtype = "dtype"
    shape = "shape"
    sibling = "sibling"
    insert = "insert"
    remove = "remove"
    pattern = "pattern"


@dataclass(frozen=True)
class Genome:
    """How a model grew: enough to grow mutants of it (generator.api.grow_case)."""

    first: TType
    shape: tuple[int, ...]
    steps: tuple[Step, ...]
    unit_dims: bool = False
    """Grown as a unit-dims edge case (generator.edges): its mutants are too."""
    opset: int | None = None
    """The opset it grew at: its mutants grow at it too, where its steps' forms exist (a
    mutant drawn at another opset would lose the forms that made its parent worth keeping)."""


@dataclass(frozen=True)
class Mutant:
    genome: Genome
    kind: MutationKind
    what: str
    """What changed, for people: `sibling Add -> Max at step 3`."""


Resolve = Callable[[str], "type[OpSpec] | None"]


def family(spec: type[OpSpec]) -> str:
    """A spec's family: its template for a rewrite template, else the module that defines it."""
    return f"pattern:{spec.template}" if issubclass(spec, Pattern) else spec.__module__


def mutate(
    genome: Genome,
    rng: random.Random,
    resolve: Resolve,
    names: list[str],
    dtypes: list[DType],
    kinds: list[MutationKind] | None = None,
) -> Mutant | None:
    """One mutation of `genome`, drawn from `rng`: a kind that applies, then where. `names`
    are the ops and template variants the mutant may use, `dtypes` the first tensor's."""
    order = list(kinds or MutationKind)
    rng.shuffle(order)
    for kind in order:
        mutant = _MUTATORS[kind](genome, rng, resolve, names, dtypes)
        if mutant is not None:
            return mutant
    return None


def _pick(rng: random.Random, genome: Genome, fits: Callable[[Step], bool]) -> int | None:
    at = [i for i, s in enumerate(genome.steps) if fits(s)]
    return rng.choice(at) if at else None


def _with_step(genome: Genome, at: int, step: Step | None) -> Genome:
    steps = list(genome.steps)
    if step is None:
        del steps[at]
    else:
        steps[at] = step
    return replace(genome, steps=tuple(steps))


def _attribute(
    genome: Genome, rng: random.Random, resolve: Resolve, names: list[str], dtypes: list[DType]
) -> Mutant | None:
    at = _pick(rng, genome, lambda s: s.way != FREE and bool(s.tape))
    if at is None:
        return None
    step = genome.steps[at]
    return Mutant(
        _with_step(genome, at, replace(step, tape=())), MutationKind.attribute, f"{step.op} at step {at} redrawn"
    )


def _dtype(
    genome: Genome, rng: random.Random, resolve: Resolve, names: list[str], dtypes: list[DType]
) -> Mutant | None:
    others = [d for d in dtypes if d != genome.first.dtype]
    if not others:
        return None
    dtype = rng.choice(others)
    edited = replace(genome, first=TType(dtype, genome.first.rank))
    return Mutant(edited, MutationKind.dtype, f"first tensor {genome.first.dtype.value} -> {dtype.value}")


def _shape(
    genome: Genome, rng: random.Random, resolve: Resolve, names: list[str], dtypes: list[DType]
) -> Mutant | None:
    if not genome.shape:
        return None
    dims = list(genome.shape)
    i = rng.randrange(len(dims))
    options = sorted({1, 2, 3, max(1, dims[i] // 2), dims[i] + 1, 2 * dims[i]} - {dims[i]})
    dims[i] = rng.choice(options)
    edited = replace(genome, shape=tuple(dims))
    return Mutant(edited, MutationKind.shape, f"first tensor {list(genome.shape)} -> {dims}")


def _swap(genome: Genome, rng: random.Random, resolve: Resolve, names: list[str], templates: bool) -> Mutant | None:
    """One step's op for another of its family: an op of the same module, or a template's
    other variant (a near miss for the exact form, or back)."""
    specs = {n: s for n in names if (s := resolve(n)) is not None and issubclass(s, Pattern) == templates}
    at = _pick(rng, genome, lambda s: s.op in specs and len(_siblings(specs, s.op)) > 0)
    if at is None:
        return None
    step = genome.steps[at]
    other = rng.choice(_siblings(specs, step.op))
    kind = MutationKind.pattern if templates else MutationKind.sibling
    return Mutant(_with_step(genome, at, replace(step, op=other)), kind, f"{step.op} -> {other} at step {at}")


def _sibling(
    genome: Genome, rng: random.Random, resolve: Resolve, names: list[str], dtypes: list[DType]
) -> Mutant | None:
    return _swap(genome, rng, resolve, names, templates=False)


def _siblings(specs: Mapping[str, type[OpSpec]], name: str) -> list[str]:
    mine = specs[name]
    return sorted(n for n, s in specs.items() if n != name and family(s) == family(mine))


def _insert(
    genome: Genome, rng: random.Random, resolve: Resolve, names: list[str], dtypes: list[DType]
) -> Mutant | None:
    at = rng.randrange(len(genome.steps) + 1)
    steps = list(genome.steps)
    steps.insert(at, Step(FREE, "", (), (), ()))
    return Mutant(replace(genome, steps=tuple(steps)), MutationKind.insert, f"a fresh op at step {at}")


def _remove(
    genome: Genome, rng: random.Random, resolve: Resolve, names: list[str], dtypes: list[DType]
) -> Mutant | None:
    if len(genome.steps) < 2:
        return None
    at = rng.randrange(len(genome.steps))
    return Mutant(_with_step(genome, at, None), MutationKind.remove, f"{genome.steps[at].op} at step {at} removed")


def _pattern(
    genome: Genome, rng: random.Random, resolve: Resolve, names: list[str], dtypes: list[DType]
) -> Mutant | None:
    return _swap(genome, rng, resolve, names, templates=True)


_MUTATORS = {
    MutationKind.attribute: _attribute,
    MutationKind.dtype: _dtype,
    MutationKind.shape: _shape,
    MutationKind.sibling: _sibling,
    MutationKind.insert: _insert,
    MutationKind.remove: _remove,
    MutationKind.pattern: _pattern,
}
