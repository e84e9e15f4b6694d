"""Seeds turned into runnable cases: a generated model, NaN/Inf-free inputs, and the
reference's outputs.

Seeds are handed out in order (within a shard: first + i, first + i + N, ...), so a
campaign's seed range says exactly which models it tried. Generation holds a lock:
the coverage feedback is shared by every lane of a campaign. The rewrites the systems
report join that coverage when generation next takes the lock, so a lane that judged a
case never waits for another lane's model to grow.

A reference is never a gate: a case the torch reference cannot compute (integer
division by zero raises in torch) still runs, judged by onnx.reference, by base, or for
crashes and hangs alone, and the gap is counted per op type.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import onnx

from bot.cases.generation_pool import GenerationPool, Plan
from bot.cases.making import Made, Prepared, make_case, mark_mutant
from bot.cases.mutation import Mutation, MutationPlan
from bot.cases.opsets import OpsetPlan
from generator.api import GenConfig, step_specs
from generator.avoid import Avoid
from generator.coverage import INPUT, Coverage, CoverageStats, pair_key
from generator.focus import CaseFeatures, Focus
from generator.ops.base import OpSpec
from generator.z3_contexts import ContextSupply
from oracles.verdict import Judgement

if TYPE_CHECKING:
    from bot.cases.corpus_feed import CorpusFeed
from bot.cases.shard import Shard
from bot.findings.known_bugs import holds
from bot.findings.summary import MutationSummary


@dataclass
class SourceTimes:
    generation: float = 0.0
    values: float = 0.0
    """The part of `generation` spent keeping values safe (generator.witness)."""
    reference: float = 0.0
    corpus: float = 0.0
    """Reading cases from the corpus (bot.cases.corpus_feed) and writing fresh ones back."""


class CaseSource:
    def __init__(
        self,
        cfg: GenConfig,
        first_seed: int,
        shard: Shard | None = None,
        *,
        processes: int = 0,
        corpus: CorpusFeed | None = None,
        avoid: Avoid | None = None,
        mutation: bool = True,
    ) -> None:
        """`processes` generation processes (0: cases are made in this process); `corpus`, a
        case corpus replayed first; `avoid`, known bugs' triggers to steer away from;
        `mutation`, whether interesting cases get mutants (guide.mutation)."""
        self.cfg = cfg
        self.shard = shard or Shard(0, 1)
        self.next_seed = first_seed + self.shard.index
        self.opsets = OpsetPlan.pinned(cfg.written_opset)
        """Each seed's opset and, per opset, what every side runs, what head runs where it runs
        more than base (drawn for one seed in ONE_SIDE_EVERY) and what base runs where it runs
        more than head (for another); no support matrix: no probe, everything."""
        self.coverage = Coverage()
        self.contexts = ContextSupply()
        self.avoid = avoid
        """Known bugs' triggers to steer away from (generator.avoid); the campaign's, shared by every lane."""
        self.dropped: Counter[str] = Counter()
        self.value_work: Counter[str] = Counter()
        """Insertions whose values were repaired, and refused, while models grew."""
        self.references: Counter[str] = Counter()
        self.reference_warnings = 0
        """Cases by the computation that gave their reference (oracles.references.Source)."""
        self.solver_backstops = 0
        """z3 checks stopped by the wall clock (generator.solver.BACKSTOP_MS): seeds whose
        case another machine might grow otherwise."""
        self.reference_gaps: Counter[str] = Counter()
        """Cases the torch reference could not compute, by the op type it stopped at."""
        self.times = SourceTimes()
        self.issued = 0
        self._lock = threading.Lock()
        self._fired: Counter[str] = Counter()
        """Rewrites reported since generation last took the lock (note_rewrites)."""
        self._fired_lock = threading.Lock()
        self.focus = Focus()
        """Where two builds diverged (generator.focus): what the next models draw toward."""
        self._focused: list[tuple[CaseFeatures, float, tuple[str, ...]]] = []
        """(features, weight, rewrite keys) of divergent cases judged since generation last took the lock."""
        self.corpus = corpus
        """Stored cases replayed before any is generated, and where fresh ones are added."""
        self._learned: list[tuple[int, str]] = []
        """(seed, rewrite:<key>) features for the corpus, moved into it under `_lock`."""
        self.mutation = Mutation(enabled=mutation)
        """Parents worth searching around, and how much of the seeds their mutants get."""
        self._specs: dict[tuple[int, int], dict[str, type[OpSpec]]] = {}
        """step_specs by the opset and the id of the support matrix they were made for."""
        self.processes = processes
        """Generation processes (bot.cases.generation_pool); 0: cases are made in this process."""
        self.pool: GenerationPool | None = None
        self._seeds = self._upcoming()

    def note_rewrites(self, keys: Iterable[str], seed: int | None = None) -> None:
        """Count one case's rewrites, each key once, toward the coverage that steers generation;
        with its seed, they also join that case's coverage in the corpus."""
        once = sorted(set(keys))
        with self._fired_lock:
            self._fired.update(once)
            if self.corpus is not None and seed is not None:
                self._learned += [(seed, f"rewrite:{k}") for k in once]

    def note_divergence(self, features: CaseFeatures, weight: float, rewrites: Iterable[str] = ()) -> None:
        """A divergent case's features, and the rewrites only one build performed, for the focus."""
        with self._fired_lock:
            self._focused.append((features, weight, tuple(rewrites)))

    def _take_rewrites(self) -> None:
        """Move the reported rewrites into the coverage, and divergent cases into the focus;
        under `_lock`, so a model never sees either change while it grows."""
        with self._fired_lock:
            fired, self._fired = self._fired, Counter()
            learned, self._learned = self._learned, []
            focused, self._focused = self._focused, []
        self.coverage.rewrites.update(fired)
        if self.pool is not None:
            self.pool.note_rewrites(fired)
        for features, weight, rewrites in focused:
            self.focus.learn(features, weight, rewrites)
        self.focus.tick()
        if self.pool is not None and not self.focus.learned.empty:
            self.pool.note_focus()
        if learned and self.corpus is not None:
            self.corpus.learned += learned

    def coverage_stats(self) -> CoverageStats:
        """The coverage's figures, counting the rewrites not yet moved into it."""
        stats = self.coverage.stats()
        with self._fired_lock:
            waiting = Counter(self._fired)
        if waiting:
            stats.rewrites = dict((Counter(stats.rewrites) + waiting).most_common())
        return stats

    def next(self, may_start: Callable[[], bool]) -> Prepared | None:
        """The next runnable case, or None once `may_start` says the campaign is over."""
        with self._lock:
            while may_start():
                self._take_rewrites()
                case = self._replayed() or self._fresh()
                if case is not None:
                    self.issued += 1
                    return case
        return None

    def _replayed(self) -> Prepared | None:
        """The corpus's next case, counted as the generated ones are; None when there is none left."""
        if self.corpus is None:
            return None
        t0 = time.perf_counter()
        case = self.corpus.replay(self.opsets.any_opset())
        self.times.corpus += time.perf_counter() - t0
        if case is not None:
            self._count_reference(case)
            self._observe(case.model)
        return case

    def _observe(self, model: onnx.ModelProto) -> None:
        """A replayed case's op types and producer>consumer pairs join the coverage, so fresh
        generation after the replay steers toward what the corpus lacks (COMET's feedback),
        not toward what it just ran."""
        producer = {out: node.op_type for node in model.graph.node for out in node.output}
        for node in model.graph.node:
            self.coverage.ops[node.op_type] += 1
            for name in filter(None, node.input):
                self.coverage.pairs[pair_key(producer.get(name, INPUT), node.op_type)] += 1

    def _upcoming(self) -> Iterator[int]:
        """This shard's seeds in order, less those the corpus already holds."""
        while True:
            seed = self.next_seed
            self.next_seed += self.shard.count
            if self.corpus is None or seed not in self.corpus.known:
                yield seed

    def _fresh(self) -> Prepared | None:
        """A newly generated case for the next seed the corpus lacks, added to the corpus."""
        if self.processes:
            if self.pool is None:
                strength = self.avoid.strength if self.avoid else 0.0
                plan = Plan(self.cfg, self.opsets, strength)
                self.pool = GenerationPool(plan, self.processes, self.avoid, self.focus, self.plan_mutant)
            case = self._account(self.pool.take(self._seeds))
        else:
            seed = next(self._seeds)
            mutant = self.plan_mutant(seed)
            genome = mutant.mutant.genome if mutant is not None else None
            cfg, support = self.opsets.case_config(self.cfg, seed, genome)
            made = make_case(seed, cfg, support, self.coverage, self.avoid, self.contexts, self.focus, genome)
            made = mark_mutant(made, mutant)
            case = self._account(made)
        if case is not None and self.corpus is not None:
            t0 = time.perf_counter()
            self.corpus.add(case)
            self.times.corpus += time.perf_counter() - t0
        return case

    def close(self) -> None:
        """Stop the generation processes, taking in their coverage; write what the corpus has
        waiting (fresh cases, learned rewrites); stop the z3 contexts' thread."""
        self.contexts.close()
        with self._lock:
            if self.pool is not None:
                self.pool.close(self._absorb)
                self.pool = None
            if self.corpus is not None:
                self._take_rewrites()
                t0 = time.perf_counter()
                self.corpus.close()
                self.times.corpus += time.perf_counter() - t0

    def _count_reference(self, case: Prepared) -> None:
        self.references[case.source.value] += 1
        if case.gap_op:
            self.reference_gaps[case.gap_op] += 1

    def plan_mutant(self, seed: int) -> MutationPlan | None:
        """Whether `seed` grows a mutant, drawn as its support allows at the seed's own opset
        (bot.cases.mutation); the mutant grows at its parent's, where a step whose op is not
        there is left out."""
        if not self.mutation.parents or self.opsets.alone(seed) is not None:
            return None  # a seed that draws one side's pairs alone draws them, never a mutant
        cfg, support = self.opsets.case_config(self.cfg, seed)
        key = (cfg.written_opset, id(support))
        if key not in self._specs:
            self._specs[key] = step_specs(cfg, support)
        return self.mutation.plan(seed, self._specs[key], list(self.cfg.dtypes))

    def add_parent(self, case: Prepared, why: str) -> None:
        """A judged case worth growing mutants of (under `_lock`: parents are read while
        generating), unless it shows a bug already known: generation steers away from that."""
        with self._lock:
            if not self.shows_known(case.model):
                self.mutation.add_parent(case.seed, case.genome, why, case.model)

    def shows_known(self, model: onnx.ModelProto) -> bool:
        return self.avoid is not None and holds(model, self.avoid.triggers)

    def forget_known(self, ops: Iterable[str] = ()) -> None:
        """A bug became known: the parents that show it go, and the focus on its `ops` quiets
        (generator.focus.Focus.quiet)."""
        with self._lock:
            self.mutation.forget(self.shows_known)
            if ops:
                self.focus.quiet(ops)
                if self.pool is not None:
                    self.pool.note_focus()

    def mutation_summary(self) -> MutationSummary:
        m = self.mutation
        return MutationSummary(
            parents=dict(sorted(Counter(p.why for p in m.parents.values()).items())),
            fresh=m.fresh.cases,
            fresh_gains=round(m.fresh.gains, 1),
            mutants=m.mutants.cases,
            mutant_gains=round(m.mutants.gains, 1),
            kinds=dict(sorted(m.kinds.items())),
            kind_gains=dict(sorted(m.kind_gains.items())),
        )

    def found(self, case: Prepared, shown: Sequence[Judgement] = (), parent: bool = True) -> float:
        """A case kept as a finding. With `parent`, a fresh one becomes a parent (bugs
        cluster), and its mutants that show `shown` (the failures it was kept for) again are
        sightings of it. Its yield is 1 for a fresh case or a parent's first finding, else 0:
        a mutant of a buggy parent that shows another bug is news once."""
        with self._lock:
            if self.shows_known(case.model):
                return 0.0
            if case.parent is None:
                if parent:
                    self.mutation.add_parent(case.seed, case.genome, "finding", case.model, shown)
                return 1.0
            return 1.0 if self.mutation.first_finding(case.parent) else 0.0

    def lineage(self, case: Prepared) -> tuple[Judgement, ...]:
        """The failures of the finding `case` is a mutant of (none for a fresh case)."""
        with self._lock:
            return () if case.parent is None else self.mutation.lineage.get(case.parent, ())

    def credit(self, case: Prepared, gain: float) -> None:
        """What a judged case yielded, to the source that made it."""
        with self._lock:
            kind = case.mutation.partition(":")[0] if case.mutation else None
            self.mutation.credit(case.parent, kind, gain)

    def drop(self, reason: str) -> None:
        """A case made and then given up by the campaign (its judging asked past the memory
        bound, backends.memory): counted with the seeds generation dropped."""
        self.dropped[reason] += 1

    def _account(self, made: Made) -> Prepared | None:
        """Count what making a case cost, and why a seed gave none."""
        self.times.generation += made.generation_s
        self.times.values += made.values_s
        self.times.reference += made.reference_s
        self.value_work.update(made.value_work)
        self.solver_backstops += made.solver_backstops
        self.reference_warnings += made.reference_warnings
        if made.case is None:
            self.dropped[made.dropped] += 1
            return None
        self._count_reference(made.case)
        return made.case

    def _absorb(self, coverage: Coverage, steered: dict[str, int]) -> None:
        """A generation process's coverage, less the rewrites (this process counted those)."""
        mine = self.coverage
        mine.models += coverage.models
        mine.symbolic += coverage.symbolic
        for name in ("ops", "inputs", "attrs", "pairs", "dtypes", "patterns", "edges", "opsets"):
            getattr(mine, name).update(getattr(coverage, name))
        if self.avoid is not None:
            self.avoid.steered.update(steered)
