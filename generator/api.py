"""The generator's entry point: seed and config in, a runnable test case out."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import numpy as np
import onnx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from generator.avoid import Avoid
from generator.binning import BinChooser, bin_of
from generator.constant_twins import twin_draw, with_constant_twin
from generator.coverage import INPUT, Coverage, Feedback, pair_key
from generator.dtypes import WIDE, DType, classic
from generator.edges import FIRST_OP, UNDEFINED, UNIT_DIM_SHARE, aim, edge_kind
from generator.emit import (
    IR_VERSION,
    NEWEST_OPSET,
    draw_values,
    emit_model,
    is_runtime_constant,
    symbolic_draw,
    symbolic_names,
    with_symbolic_dims,
)
from generator.focus import CaseFeatures, Focus, FocusDraws
from generator.graph import Graph
from generator.grow import Allowed, Grower, Template, step_name
from generator.mutate import Genome
from generator.ops import registry
from generator.ops.base import OpSpec, bfloat16_crosses
from generator.patterns import all_variants
from generator.patterns.base import Pattern
from generator.patterns.choose import PatternChooser
from generator.specials import graph_outputs, schema_allowed, special_draw, with_special_values
from generator.start import start_types
from generator.symbolic import AbsTensor, SymCtx, TType
from generator.tape import TapeRandom
from generator.values import Method, NoValidValues, ValueOutcome, apply_values, find_values
from generator.values.find import one_thread
from generator.witness import Witness, WitnessStats
from generator.z3_contexts import ContextSupply

DEFAULT_OPSET = 17
"""Accepted by onnxruntime 1.15-1.31 and the TVM 0.25-0.27 Relax frontend alike: what a model
is written at unless a campaign draws its opset (GenConfig.opset_min, opset_max)."""


class NoOpAllowed(ValueError):
    """The op list, the opset and the support matrix leave no op to grow a model from: a
    config's mistake when given by a user, a seed to drop in a campaign whose build declines
    every op at that opset."""


OLDEST_GENERATED = min(IR_VERSION)


ALL_DTYPES = classic(list(DType))
"""The default element types; the WIDE ones come through `wide_types`."""


class GenConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    nodes: int = Field(10, ge=1, le=200, description="operators per model")
    opset: int | None = Field(
        None,
        ge=OLDEST_GENERATED,
        le=NEWEST_OPSET,
        description="the default-domain opset every model imports (a pin); null: a campaign draws each case's"
        " between opset_min and opset_max, and a single model is written at opset_min",
    )
    opset_min: int = Field(
        DEFAULT_OPSET, ge=OLDEST_GENERATED, le=NEWEST_OPSET, description="the lowest opset a campaign draws"
    )
    opset_max: int | None = Field(
        None,
        ge=OLDEST_GENERATED,
        le=NEWEST_OPSET,
        description=f"the highest opset a campaign draws; unset: the highest every side loads (its probe), at most"
        f" {NEWEST_OPSET}; a side that loads less lowers it",
    )
    max_elements: int = Field(4096, ge=16, description="cap on elements in any tensor or weight")
    weight_prob: float = Field(0.3, ge=0.0, le=1.0, description="chance a placeholder becomes an initializer")
    bins: int = Field(7, ge=1, le=16, description="k of the exponential attribute bins")
    ops: list[str] | None = Field(None, description="restrict to these op types")
    dtypes: list[DType] = Field(default_factory=lambda: list(ALL_DTYPES), min_length=1, description="element types")
    feedback: bool = Field(True, description="steer toward uncovered op pairs, inputs and attribute bins")
    values: Literal["gradient", "sampling", "none"] = Field(
        "gradient",
        description="how values that keep every op finite are repaired while a model grows (generator.witness);"
        " none: no values are checked",
    )
    value_steps: int = Field(
        48, ge=0, description="search steps per model, over all its repairs while it grows; the cap keeps it seeded"
    )
    runtime_shapes: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="share of shape-like operands (Reshape shapes, Slice bounds, Tile repeats, Expand shapes, axes,"
        " pads) fed as graph inputs instead of initializers",
    )
    edges: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="share of cases aimed at edge inputs: unit dims, or (never compared, crashes judged) a zero"
        " integer divisor, an overflowing integer sum, a float cast out of its integer range (generator.edges)",
    )
    patterns: float = Field(
        0.4,
        ge=0.0,
        le=1.0,
        description="share of insertions that place a rewrite template or one of its near misses"
        " (generator.patterns); 0: op-by-op growth alone",
    )
    special_values: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="share of cases given +-Inf, NaN and -0.0 on an input whose every reader defines the result"
        " (IsInf, comparisons, Max, ArgMax, ...): a grown input that qualifies, else a probe's own"
        " (generator.specials)",
    )
    wide_types: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="share of cases that start from the element types no op draws on its own (int16, uint16,"
        " uint32, uint64, bfloat16), where a backend's probe says it runs them (generator.dtypes.WIDE)",
    )
    constant_twins: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="share of cases given a constant twin: a copy of one node (or a short chain) whose every input"
        " is an initializer, which a compiler folds at import with code of its own (generator.constant_twins)",
    )
    symbolic_dims: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="share of cases whose graph inputs declare their leading dims as dim_param, as exported models"
        " do: `batch` (axis 0), and in half of them `sequence` (axis 1); the inputs keep their sizes. 0: static dims",
    )

    @model_validator(mode="after")
    def _ordered(self) -> GenConfig:
        if self.opset_max is not None and self.opset_max < self.opset_min:
            raise ValueError(f"opset_max {self.opset_max} is below opset_min {self.opset_min}")
        return self

    @property
    def written_opset(self) -> int:
        """The opset one model is written at: the pin, else the lowest a campaign draws (a
        campaign writes each case at its own, bot.cases.opsets)."""
        return self.opset if self.opset is not None else self.opset_min


Support = dict[str, set[DType]]
"""op type -> the key dtypes a backend runs it with (from support probing)."""


@dataclass
class GeneratedCase:
    """What the generator made of a seed: the model, its NaN/Inf-free inputs and how they
    were found. The bot makes it runnable (bot.cases.making.Prepared: bytes, reference);
    the reducer's candidates are reducers.candidate.Candidate."""

    seed: int
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    values: ValueOutcome | None = None
    """How the value search went; None when it was off."""
    edge: str | None = None
    """The edge input the case aims at (generator.edges), if any."""
    features: CaseFeatures | None = None
    """What the model holds, in coverage's vocabulary (a divergent case teaches the focus these)."""
    genome: Genome | None = None
    """How it grew, to grow mutants of it (generator.mutate)."""
    solver_backstops: int = 0
    """z3 checks the wall-clock backstop stopped while it grew (generator.solver)."""
    symbolic: bool = False
    """Whether some graph input declares a dim_param (GenConfig.symbolic_dims)."""


def op_specs(only: list[str] | None = None, opset: int | None = None) -> list[type[OpSpec]]:
    """The specs to draw from: all registered ops that exist at `opset` (None: the default
    opset, what GenConfig writes unless told otherwise), or exactly `only`."""
    opset = DEFAULT_OPSET if opset is None else opset
    specs = registry()
    if only is not None:
        unknown = sorted(set(only) - set(specs))
        if unknown:
            raise ValueError(f"unknown op types {unknown}; known: {sorted(specs)}")
        names = sorted(set(only))
    else:
        names = sorted(specs)
    return [specs[n] for n in names if specs[n].exists_at(opset)]


def _allowed(cfg: GenConfig, support: Support | None) -> Allowed:
    dtypes = set(cfg.dtypes) | (set(WIDE) if cfg.wide_types > 0 else set())
    crosses = bfloat16_crosses(cfg.written_opset)

    def allowed(spec: type[OpSpec], sig: Sequence[TType]) -> bool:
        key = spec.key_dtype(sig)
        if key not in dtypes or not spec.schema_allows(cfg.written_opset, sig):
            return False
        if not crosses and any(t.dtype is DType.bfloat16 for t in sig):
            return False  # before Cast-13, no bfloat16 tensor can enter or leave the graph
        return support is None or all(dt in support.get(op, ()) for op, dt in spec.support_keys(key))

    return allowed


def pattern_variants(cfg: GenConfig, support: Support | None) -> list[type[Pattern]]:
    """The template variants a model may get: none when templates are off; with an op list,
    those written with its ops alone; with a support matrix, those whose ops it has."""
    if cfg.patterns <= 0:
        return []
    only = set(cfg.ops) if cfg.ops is not None else None
    return [
        v
        for v in all_variants()
        if v.exists_at(cfg.written_opset)
        and (only is None or only.issuperset(v.support_ops()))
        and (support is None or all(support.get(op) for op in v.support_ops()))
    ]


def step_specs(cfg: GenConfig, support: Support | None) -> dict[str, type[OpSpec]]:
    """The ops and template variants a model may hold, by the name its steps carry
    (generator.grow.Step.op): what a mutant's edits may draw from."""
    specs = [s for s in op_specs(cfg.ops, cfg.written_opset) if support is None or support.get(s.op_type)]
    return {step_name(s): s for s in [*specs, *pattern_variants(cfg, support)]}


def generate(
    seed: int,
    cfg: GenConfig | None = None,
    *,
    support: Support | None = None,
    coverage: Coverage | None = None,
    avoid: Avoid | None = None,
    contexts: ContextSupply | None = None,
    focus: Focus | None = None,
    genome: Genome | None = None,
) -> GeneratedCase:
    """One model and its inputs, a pure function of (seed, cfg, support, coverage so far,
    known triggers, focus).

    `coverage`, when given, steers the choices (if `cfg.feedback`) and is updated
    with what the model covers; `avoid` keeps known bugs' triggers out (generator.avoid);
    `contexts` hands out z3 contexts made ahead (a caller generating many models keeps one);
    `focus` draws a share of the choices toward where two builds diverged (generator.focus);
    `genome` (generator.mutate) makes the model a mutant grown from those steps.
    Budgets count steps, never seconds: the same arguments give the same case on any
    machine at any load.
    """
    return grow_case(seed, cfg or GenConfig(), support, coverage, avoid, contexts, focus, genome)[0]


def grow_case(
    seed: int,
    cfg: GenConfig,
    support: Support | None = None,
    coverage: Coverage | None = None,
    avoid: Avoid | None = None,
    contexts: ContextSupply | None = None,
    focus: Focus | None = None,
    genome: Genome | None = None,
) -> tuple[GeneratedCase, Witness]:
    """`generate`, with the witness that kept the values (what they cost, fresh draws);
    with a `genome` (generator.mutate), the mutant it grows into."""
    rng = TapeRandom(seed)
    sc = SymCtx(rng, max_elements=cfg.max_elements, opset=cfg.written_opset, contexts=contexts)
    specs = op_specs(cfg.ops, cfg.written_opset)
    if support is not None:
        specs = [s for s in specs if support.get(s.op_type)]
    if not specs:
        raise NoOpAllowed("no operator is allowed by the op list, opset and support matrix")
    draws = _focus_draws(focus, coverage, cfg, specs, rng)
    feedback = Feedback(coverage, specs, rng, draws) if coverage is not None and cfg.feedback else None
    allowed = _allowed(cfg, support)
    seeds = start_types(seed, cfg.dtypes, cfg.wide_types, specs, allowed)
    with one_thread():
        cov = coverage if cfg.feedback else None
        patterns = PatternChooser(pattern_variants(cfg, support), cfg.patterns, rng, cov, draws)
        if genome is not None:  # a mutant: no undefined edge, its first tensor given
            edge, target = ("unit_dims" if genome.unit_dims else None), None
        else:
            edge = edge_kind(seed, cfg.edges)
            seeds, target = _edge_start(edge, seeds, specs)
            seeds = seeds if target is not None else patterns.first_types(seeds)
            if draws is not None and target is None:
                seeds = draws.first_types(seeds)
        unit = UNIT_DIM_SHARE if edge == "unit_dims" else 0.0
        graph, witness, grown = _grow(
            seed, sc, cfg, seeds, allowed, specs, feedback, avoid, patterns, unit, target, genome
        )
    placeholders = sorted(graph.placeholders)
    keep_input = rng.choice(placeholders)
    as_weight = {p for p in placeholders if p != keep_input and rng.random() < cfg.weight_prob}
    on_node = None
    if coverage is not None:
        coverage.models += 1
        coverage.opsets[str(cfg.written_opset)] += 1
        on_node = partial(coverage.record_node, graph)
    proto, inputs = emit_model(graph, cfg.written_opset, witness.em.values, as_weight, on_node, leaves=witness.leaves)
    hinted = tuple(focus.hinted.ops) if focus is not None else ()
    proto = _twinned(proto, witness, seed, cfg.constant_twins, coverage, hinted)
    if edge in UNDEFINED:
        aimed = aim(edge, proto, inputs, seed)
        edge, inputs = aimed if aimed is not None else (None, inputs)
    if edge is None and special_draw(seed, cfg.special_values):
        placed = _with_specials(proto, inputs, seed, cfg, support)
        edge, (proto, inputs) = ("special_values", placed) if placed is not None else (None, (proto, inputs))
    if coverage is not None and edge is not None:
        coverage.edges[edge] += 1
    proto, symbolic = _symbolic(proto, inputs, seed, cfg.symbolic_dims)
    if coverage is not None and symbolic:
        coverage.symbolic += 1
    outcome = None if cfg.values == "none" else grown_outcome(witness.stats, cfg.values)
    made = GeneratedCase(seed, proto, inputs, outcome, edge, features(graph), grown, sc.solver_backstops, symbolic)
    return made, witness


def _twinned(
    proto: onnx.ModelProto,
    witness: Witness,
    seed: int,
    share: float,
    coverage: Coverage | None,
    hinted: Sequence[str],
) -> onnx.ModelProto:
    """The model with a constant twin (generator.constant_twins) in the `share` of cases,
    of a node of a hinted op where there is one, half the time."""
    rng = twin_draw(seed, share)
    twinned = with_constant_twin(proto, witness.env, rng, hinted) if rng is not None and witness.env else None
    if twinned is None:
        return proto
    if coverage is not None:
        coverage.twins += 1
    return twinned


def _with_specials(
    proto: onnx.ModelProto, inputs: dict[str, np.ndarray], seed: int, cfg: GenConfig, support: Support | None
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]] | None:
    """The case with special values placed (generator.specials), by ops the config, the
    schema at the case's opset and the builds' support matrix all allow."""
    only = set(cfg.ops) if cfg.ops is not None else None

    def allowed(op: str, opset: int, dtype: str) -> bool:
        if (only is not None and op not in only) or not schema_allowed(op, opset, dtype):
            return False
        return support is None or DType(dtype) in support.get(op, ())

    data = [v.name for v in proto.graph.input if v.name in inputs and not is_runtime_constant(v.name)]
    return with_special_values(proto, inputs, lambda: graph_outputs(proto, inputs), seed, allowed, data)


def _symbolic(
    proto: onnx.ModelProto, inputs: dict[str, np.ndarray], seed: int, share: float
) -> tuple[onnx.ModelProto, bool]:
    """The model with its leading input dims symbolic, for the seed's draw of `share`
    (generator.emit.symbolic_draw), and whether it is; a model whose symbolic form the
    checker or strict shape inference refuses stays static."""
    axes = symbolic_draw(seed, share)
    names = symbolic_names(proto, inputs, axes) if axes else {}
    symbolic = with_symbolic_dims(proto, names) if names else None
    return (symbolic, True) if symbolic is not None else (proto, False)


def _focus_draws(
    focus: Focus | None, coverage: Coverage | None, cfg: GenConfig, specs: list[type[OpSpec]], rng: random.Random
) -> FocusDraws | None:
    """The model's focus draws: none without a focus, with an empty one, or without the
    coverage it is weighed against (then no draw is made, and the model is what it was)."""
    if focus is None or focus.empty or coverage is None or not cfg.feedback:
        return None
    return FocusDraws(focus, specs, rng, lambda name: getattr(coverage, name))


def features(graph: Graph) -> CaseFeatures:
    """What a grown graph holds, keyed as coverage counts it (generator.coverage)."""
    ops, pairs, patterns, bins, dtypes = [], [], [], [], []
    for node in graph.nodes:
        if isinstance(node.op, Pattern):
            patterns.append(node.op.name())
        else:
            ops.append(node.op.op_type)
        for t in node.inputs:
            pairs.append(pair_key(graph.producer_op.get(t, INPUT), node.op.op_type))
            dtypes.append(graph.tensors[t].dtype.value)
        bins += [f"{key}={bin_of(value)}" for key, value in node.binned]
    return CaseFeatures(*(tuple(sorted(set(x))) for x in (ops, pairs, patterns, bins, dtypes)))


GROW_TRIES = 3
"""Fresh starts (new first tensor) before a seed is given up as ungenerable."""


def _grow(
    seed: int,
    sc: SymCtx,
    cfg: GenConfig,
    seeds: list[TType],
    allowed: Allowed,
    specs: list[type[OpSpec]],
    feedback: Feedback | None,
    avoid: Avoid | None = None,
    patterns: PatternChooser | None = None,
    unit_dims: float = 0.0,
    target: type[OpSpec] | None = None,
    genome: Genome | None = None,
) -> tuple[Graph, Witness, Genome]:
    """Grow one graph with its values (see generator.witness); a first tensor that no
    allowed op can take is replaced, up to GROW_TRIES times (rare: a rank-5 bool tensor
    under a narrow support matrix). With a `genome` (a mutant's), its steps are made first,
    then the graph grows on to the node budget. Returns the genome the graph grew from."""
    rng = sc.rng
    method: Method | None = None if cfg.values == "none" else cfg.values
    for attempt in range(GROW_TRIES):
        bins = BinChooser(cfg.bins, rng, feedback.bin_weight if feedback else None, unit_dims)
        witness = Witness(cfg.written_opset, seed, method, cfg.value_steps, cfg.runtime_shapes)
        first = AbsTensor(genome.first.dtype, list(genome.shape)) if genome is not None else None
        grower = Grower(sc, seeds, allowed, bins, witness=witness, avoid=avoid, first=first)
        grower.keep_inputs_of = target
        if feedback is not None:
            grower.pick_tensor = partial(_pick_for, feedback, grower)
        choose = feedback.choose_op if feedback is not None else (lambda: rng.choice(specs))
        if genome is not None:
            names = {step_name(s): s for s in [*specs, *(patterns.variants if patterns is not None else [])]}
            on_insert = feedback.inserted if feedback is not None else None
            grower.replay(genome.steps, names.get, on_insert, choose)  # what no longer fits is left out
        try:
            graph = grower.grow(
                cfg.nodes,
                max_attempts=cfg.nodes * 30,
                choose=choose,
                propose=feedback.propose if feedback is not None else None,
                on_insert=feedback.inserted if feedback is not None else None,
                template=_first(target, patterns.draw if patterns is not None and patterns.variants else None),
            )
            start = graph.tensors[0]
            shape = tuple(int(d) for d in start.shape)
            grown = Genome(start.ttype, shape, tuple(grower.steps), unit_dims > 0, cfg.written_opset)
            return graph, witness, grown
        except RuntimeError:
            if attempt == GROW_TRIES - 1:
                raise
    raise AssertionError("unreachable")


def _first(target: type[OpSpec] | None, then: Template | None) -> Template | None:
    """`target` tried on the first insertion, then `then` (the templates) on the rest."""
    if target is None:
        return then
    tried: list[bool] = []

    def draw(left: int, types: set[TType]) -> type[OpSpec] | None:
        if not tried:
            tried.append(True)
            return target
        return then(left, types) if then is not None else None

    return draw


def _edge_start(
    edge: str | None, seeds: list[TType], specs: list[type[OpSpec]]
) -> tuple[list[TType], type[OpSpec] | None]:
    """For an undefined edge, first tensors of the target's types and the target op, so
    the target reads a graph input; otherwise the seeds as they were."""
    if edge not in FIRST_OP:
        return seeds, None
    op, dtypes = FIRST_OP[edge]
    spec = next((s for s in specs if s.op_type == op), None)
    typed = [t for t in seeds if t.dtype.value in dtypes and t.rank <= 3]
    return (typed, spec) if spec is not None and typed else (seeds, None)


def _pick_for(feedback: Feedback, grower: Grower, spec: type[OpSpec], slot: int, cands: list[int]) -> int:
    return feedback.pick_tensor(grower.graph, spec, slot, cands)


def with_safe_values(case: GeneratedCase, cfg: GenConfig) -> GeneratedCase:
    """Searched inputs and weights (t<id>, w<n>) replace the case's; integer constants
    (c<n>: shapes, axes, indices) are never touched. Raises NoValidValues: such a case
    must be dropped, never run. `generate` needs none of this (its graphs grow with their
    values); it is for models that did not: a user's, a reduced one, a benchmark's."""
    init = [i.name for i in case.model.graph.initializer if i.name[:1] in ("t", "w")]
    method: Method = "sampling" if cfg.values == "sampling" else "gradient"
    free = [k for k in case.inputs if not is_runtime_constant(k)]
    found = find_values(case.model, case.inputs, [*free, *init], case.seed, method, cfg.value_steps)
    if not found.outcome.found:
        raise NoValidValues(case.seed, found.outcome)
    model, inputs = apply_values(case.model, case.inputs, found.values)
    return GeneratedCase(case.seed, model, inputs, found.outcome)


def grown_outcome(grown: WitnessStats, method: Method) -> ValueOutcome:
    """How the values of a graph grown with them were found: `initial` when no insertion
    needed a repair."""
    return ValueOutcome(
        found=True,
        method=method if grown.repaired else "initial",
        steps=grown.steps,
        grown_repairs=grown.repaired,
        grown_refusals=grown.refused,
        time_ms=round(1000 * grown.seconds, 3),
    )


def inputs_for_model(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Seeded values for a model's graph inputs, for models fuzzbot did not generate."""
    rng = np.random.default_rng(seed)
    initialized = {i.name for i in model.graph.initializer}
    inputs: dict[str, np.ndarray] = {}
    for v in model.graph.input:
        if v.name in initialized:
            continue
        t = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
        if any(d < 0 for d in dims):
            raise ValueError(f"input {v.name!r} has a dynamic shape; supply a bundle with inputs.npz")
        inputs[v.name] = draw_values(rng, dims, DType.from_onnx(t.elem_type))
    return inputs
