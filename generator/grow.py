"""Graph growth by forward and backward insertion (NNSmith Algorithm 1), solved concolically.

Every tensor already in the graph has concrete dimensions. Inserting an op solves only
that op's own unknowns: its attribute variables and, for backward insertion, the
dimensions of its new input placeholders. The accepted solution is written back as
integers at once, so no later check ever re-solves an earlier op, and an insertion whose
constraints all fold to Python bools (most elementwise ops) needs no solver call at all.
Before z3 sees an insertion, its variables are drawn straight from their bins as plain
ints a few times (NeuRI's concolic idea); only when no draw satisfies the op does the
solver run, and then on that op's unknowns alone. This is what keeps a 20-node model
within about 10 ms, where one incremental solver holding the whole graph grows slower
with every node (and with every nonlinear product of shape variables).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import z3

from generator.binning import BinChooser, Solution, solve_local, var_key
from generator.emit import ExplicitDefaults
from generator.graph import GNode, Graph
from generator.ops.base import MAX_WORK, OpSpec
from generator.ops.optional import OptionalInputs
from generator.solver import MeteredSolver
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType, numel
from generator.tape import Draw, TapeRandom

if TYPE_CHECKING:
    from generator.avoid import Avoid
    from generator.coverage import Proposal
    from generator.witness import Witness

CONCRETE_TRIES = 8
"""Concrete draws tried before an insertion is handed to the solver; the later half draw
from the bins below 8, where the attributes of small tensors usually fit."""
PROPOSALS = 4
"""Feedback proposals tried per attempt before falling back to an op drawn by `choose`."""
NEEDS_SYMBOLS = (TypeError, AttributeError, ValueError, z3.Z3Exception)
"""What an op written for z3 terms raises when handed plain ints: back to the solver."""
Allowed = Callable[[type[OpSpec], Sequence[TType]], bool]
"""Whether an op may be inserted with these input types (dtype filters, support matrix)."""

TensorPicker = Callable[[type[OpSpec], int, list[int]], int]
"""Chooses which candidate tensor feeds an input slot; coverage feedback plugs in here."""

Template = Callable[[int, set[TType]], "type[OpSpec] | None"]
"""May name an op to try before the others (a rewrite template, an edge case's target),
told the node budget left and the tensor types the graph has."""


@dataclass(frozen=True)
class Step:
    """One insertion as growth made it, enough to make it again (generator.mutate)."""

    way: str
    """forward (a consumer of existing tensors) or backward (a producer of a placeholder)."""
    op: str
    """The op type, or a template variant's name (`Pattern.name()`)."""
    tensors: tuple[int, ...]
    """Forward: the tensors it read, by id; backward: the placeholder it replaced."""
    made: tuple[int, ...]
    """The tensors it added: its outputs (forward) or its new placeholders (backward)."""
    tape: tuple[Draw, ...]
    """The draws its placement made (generator.tape): its attributes, types and bins."""


FREE = "free"
"""A step that names no op: the replay inserts one drawn afresh (a mutation's new node)."""


def step_name(spec: type[OpSpec]) -> str:
    name = getattr(spec, "name", None)
    return str(name()) if callable(name) else spec.op_type


class Grower:
    def __init__(
        self,
        sc: SymCtx,
        seed_types: list[TType],
        allowed: Allowed,
        bins: BinChooser,
        pick_tensor: TensorPicker | None = None,
        witness: Witness | None = None,
        avoid: Avoid | None = None,
        first: AbsTensor | None = None,
    ) -> None:
        """`witness`, when given, writes each node as it is inserted and keeps values for
        every tensor (generator.witness); an insertion it refuses is undone, and so is one
        that completes a known bug's trigger (`avoid`, generator.avoid). `first` is the
        first tensor (a mutant's); else one is drawn from `seed_types`."""
        self.sc = sc
        self.rng = sc.rng
        self.allowed = allowed
        self.bins = bins
        self.pick_tensor = pick_tensor or (lambda spec, slot, cands: self.rng.choice(cands))
        self.witness = witness
        self.avoid = avoid
        self.graph = Graph()
        self.kept: set[int] = set()
        """Placeholders no backward insertion may replace: an edge case's target inputs
        (generator.edges), which must stay graph inputs."""
        self.keep_inputs_of: type[OpSpec] | None = None
        """The op whose first insertion's inputs join `kept`."""
        self._solver: z3.Solver | None = None
        self.steps: list[Step] = []
        """The insertions made, in order, with the draws each made (when the rng keeps them)."""
        if first is None:
            t = self.rng.choice(seed_types)
            first = AbsTensor(t.dtype, list(self.bins.free_shape(t.rank, self.sc.max_elements)))
        self.graph.placeholders.append(self.graph.add_tensor(first))
        if witness is not None:
            # The nodes are written as they are inserted: their defaulted attributes are drawn
            # absent or explicit, and their optional inputs absent or present, from the model's
            # stream, steered by the bins' weight.
            witness.em.explicit = ExplicitDefaults(self.rng, bins.weight)
            witness.em.optional = OptionalInputs(self.rng, bins.weight)
            witness.placeholder(self.graph, self.graph.placeholders[0])

    @property
    def solver(self) -> z3.Solver:
        """Made on the first insertion that needs one (see SymCtx.ctx)."""
        if self._solver is None:
            self._solver = MeteredSolver(self.sc.ctx, self._backstopped)
        return self._solver

    def _backstopped(self) -> None:
        self.sc.solver_backstops += 1

    def _mark(self) -> int:
        """Where this insertion's draws start in the rng's record (0 when it keeps none)."""
        draws = getattr(self.rng, "draws", None)
        return len(draws) if draws is not None else 0

    def _record(self, way: str, node: GNode, read: Sequence[int], made: Sequence[int], start: int) -> None:
        tape = self.rng.since(start) if isinstance(self.rng, TapeRandom) else ()
        self.steps.append(Step(way, step_name(type(node.op)), tuple(read), tuple(made), tape))

    def valid(self, shape: Sequence[Dim]) -> list[Cond]:
        """Every dimension at least 1 and a cap on elements, for every tensor in the graph."""
        return [*(d >= 1 for d in shape), numel(shape) <= self.sc.max_elements]

    def grow(
        self,
        nodes: int,
        max_attempts: int,
        choose: Callable[[], type[OpSpec]],
        propose: Callable[[Graph], Proposal | None] | None = None,
        on_insert: Callable[[Graph, GNode], None] | None = None,
        template: Template | None = None,
    ) -> Graph:
        """`propose`, when given, may name an insertion (direction, op, tensor) instead of
        `choose`'s op; coverage feedback uses it to aim at uncovered op pairs. `template`,
        when given, may name a rewrite template to try first, given the budget left."""
        attempts = 0
        while self.graph.size() < nodes and attempts < max_attempts:
            attempts += 1
            mark = len(self.sc.binnable)
            spec = self._template(template, nodes)
            inserted = spec is not None and self._insert(spec, mark)
            if not inserted:
                del self.sc.binnable[mark:]
                inserted = self._proposed(propose, mark) or self._insert(choose(), mark)
            if not inserted:
                del self.sc.binnable[mark:]
                continue
            self._keep(self.graph.nodes[-1])
            if on_insert is not None:
                on_insert(self.graph, self.graph.nodes[-1])
        if not self.graph.nodes:
            raise RuntimeError("no operator could be inserted")
        return self.graph

    def replay(
        self,
        steps: Sequence[Step],
        resolve: Callable[[str], type[OpSpec] | None],
        on_insert: Callable[[Graph, GNode], None] | None = None,
        choose: Callable[[], type[OpSpec]] | None = None,
    ) -> int:
        """Make `steps` (another growth's, edited by a mutation) again, in order, each fed the
        draws it made: wherever a step still fits, it makes the choices it made then. A step
        whose op is gone or whose placeholder another step replaced is left out; a forward
        step whose input is gone reads another tensor that fits; a FREE step inserts an op
        `choose` draws, anywhere it fits. Returns the steps made."""
        made: dict[int, int] = {0: 0}
        done = 0
        for step in steps:
            spec = resolve(step.op) if step.way != FREE else None
            ids = [made.get(t) for t in step.tensors]
            mark = len(self.sc.binnable)
            if isinstance(self.rng, TapeRandom):
                self.rng.feed(step.tape)
            if step.way == FREE:
                inserted = choose is not None and self._insert(choose(), mark)
            elif spec is None:
                inserted = False
            elif step.way == "forward":
                inserted = self._replay_forward(spec, mark, ids)
            else:
                inserted = (
                    ids[0] is not None and ids[0] in self.graph.placeholders and self.backward(spec, mark, ids[0])
                )
            if isinstance(self.rng, TapeRandom):
                self.rng.feed(())
            if not inserted:
                del self.sc.binnable[mark:]
                continue
            node = self.graph.nodes[-1]
            made.update(zip(step.made, node.outputs if step.way == "forward" else node.inputs, strict=False))
            self._keep(node)
            if on_insert is not None:
                on_insert(self.graph, node)
            done += 1
        return done

    def _replay_forward(self, spec: type[OpSpec], mark: int, ids: list[int | None]) -> bool:
        """A forward step on the tensors it read where they are still there, on others that
        fit where they are not (drawn from the stream, after the step's own draws)."""
        tensors = self.graph.tensors
        if not spec.takes(len(ids)):  # a sibling of another arity: as many inputs as it takes
            count = spec.arity if not spec.arities else min(spec.arities, key=lambda n: abs(n - len(ids)))
            ids = (ids + [None] * count)[:count]
        picked: list[int] = []
        for slot, t in enumerate(ids):
            if t is None or t >= len(tensors) or not spec.slot_ok(slot, tensors[t].ttype):
                cands = [i for i, x in enumerate(tensors) if spec.slot_ok(slot, x.ttype)]
                if not cands:
                    return False
                t = cands[-1]  # the newest: nearest to where the mutation changed the graph
            picked.append(t)
        return bool(picked) and self.place_forward(spec, mark, picked)

    def _keep(self, node: GNode) -> None:
        if self.keep_inputs_of is not None and type(node.op) is self.keep_inputs_of:
            self.kept.update(i for i in node.inputs if i in self.graph.placeholders)
            self.keep_inputs_of = None

    def _template(self, template: Template | None, nodes: int) -> type[OpSpec] | None:
        """The template to try first, told the budget left and the tensor types at hand."""
        if template is None:
            return None
        return template(nodes - self.graph.size(), {t.ttype for t in self.graph.tensors})

    def _proposed(self, propose: Callable[[Graph], Proposal | None] | None, mark: int) -> bool:
        """Try up to PROPOSALS insertions named by `propose`."""
        for _ in range(PROPOSALS if propose is not None else 0):
            proposal = propose(self.graph)  # type: ignore[misc]
            if proposal is None:
                return False
            way, spec, tensor = proposal
            if way == "forward":
                inserted = self.forward(spec, mark, first=tensor)
            else:
                inserted = self.backward(spec, mark, target=tensor)
            if inserted:
                return True
            del self.sc.binnable[mark:]
        return False

    def _insert(self, spec: type[OpSpec], mark: int) -> bool:
        """`spec` inserted backward or forward, at random."""
        # Backward insertion of an op that cannot name its inputs from its output
        # needs the solver for fresh input dims; it stays in the mix, less often.
        p_back = 0.5 if spec.concrete_inputs is not OpSpec.concrete_inputs else 0.25
        if self.rng.random() < p_back:
            return self.backward(spec, mark)
        return self.forward(spec, mark)

    def _pick_inputs(self, spec: type[OpSpec], first: int | None) -> list[int] | None:
        tensors = self.graph.tensors
        picked: list[int] = [] if first is None else [first]
        for slot in range(len(picked), spec.draw_arity(self.rng)):
            if picked and self.rng.random() < 0.7:
                same = [
                    i
                    for i, t in enumerate(tensors)
                    if t.ttype == tensors[picked[0]].ttype and spec.slot_ok(slot, t.ttype)
                ]
                if same:
                    picked.append(self.pick_tensor(spec, slot, same))
                    continue
            cands = [i for i, t in enumerate(tensors) if spec.slot_ok(slot, t.ttype)]
            if not cands:
                return None
            picked.append(self.pick_tensor(spec, slot, cands))
        return picked

    def forward(self, spec: type[OpSpec], mark: int, first: int | None = None) -> bool:
        """Insert `spec` as a consumer of existing tensors (`first` feeds its first input)."""
        picked = self._pick_inputs(spec, first)
        if picked is None:
            return False
        return self.place_forward(spec, mark, picked)

    def place_forward(self, spec: type[OpSpec], mark: int, picked: list[int]) -> bool:
        """Insert `spec` as a consumer of the tensors `picked`, in that order."""
        start = self._mark()
        sig = [self.graph.tensors[i].ttype for i in picked]
        if not spec.accepts(sig) or not self.allowed(spec, sig):
            return False
        ins = [self.graph.tensors[i] for i in picked]
        for attempt in range(CONCRETE_TRIES):
            placed = self._place_concretely(spec, sig, ins, small=attempt >= CONCRETE_TRIES // 2)
            if placed is not None:
                op, outs, binned = placed
                return self._add_forward(GNode(op, picked, [], Solution(None), binned), outs, start)
        op = spec(self.sc, sig)
        cons, outs = op.bind(ins)
        for o in outs:
            cons += self.valid(o.shape)
        model = solve_local(lambda: self.solver, cons, self.sc.binnable[mark:], set(), spec.op_type, self.bins)
        if model is None or op.work(model.eval) > MAX_WORK:
            return False
        for o in outs:
            o.shape = _concrete(o.shape, model)
        return self._add_forward(GNode(op, picked, [], model, self._binned(spec, mark, model)), outs, start)

    def _add_forward(self, node: GNode, outs: list[AbsTensor], start: int) -> bool:
        """Add a placed consumer and its outputs, unless the witness refuses its values."""
        mark = self.graph.checkpoint()
        node.outputs = [self.graph.add_tensor(o) for o in outs]
        self.graph.add_node(node)
        early, late = self._known_checks(node)
        if early() or (self.witness is not None and not self.witness.forward(self.graph, node, late)):
            self.graph.rollback(mark)
            return False
        self._record("forward", node, node.inputs, node.outputs, start)
        return True

    def _known_checks(self, node: GNode) -> tuple[Callable[[], bool], Callable[[], bool] | None]:
        """When to ask whether `node` completes a known trigger: before it is written, or,
        for a template (whose trigger may lie among the nodes it writes), and wherever a
        trigger needs attribute values (generator.avoid), once written."""
        written = node.op.node_cost > 1 or (self.avoid is not None and self.avoid.needs_written)
        if self.witness is not None and written:
            return (lambda: False), self._known
        return self._known, None

    def _known(self) -> bool:
        """Whether the node just added completes a known bug's trigger (then it is undone)."""
        return self.avoid is not None and self.avoid.refuses(self.graph, self.rng)

    @contextmanager
    def _drawing(self, spec: type[OpSpec], small: bool) -> Iterator[None]:
        """While inside, `sc.var` hands out ints drawn from the bins instead of z3 terms."""
        self.sc.concrete = self.bins.value(spec.op_type, small)
        self.sc.drawn = []
        try:
            yield
        finally:
            self.sc.concrete = None

    def _drawn(self, spec: type[OpSpec]) -> list[tuple[str, int]]:
        return [(f"{spec.op_type}.{prefix}", value) for prefix, value in self.sc.drawn]

    def _place_concretely(
        self, spec: type[OpSpec], sig: list[TType], ins: list[AbsTensor], small: bool
    ) -> tuple[OpSpec, list[AbsTensor], list[tuple[str, int]]] | None:
        """Try the insertion with every variable drawn from its bin as a plain int
        (NeuRI's concolic style): when all constraints fold to True, no solver is needed.
        Any other outcome, including an op that needs symbols, falls back to z3."""
        with self._drawing(spec, small):
            try:
                op = spec(self.sc, sig)
                cons, outs = op.bind(ins)
                cons += [c for o in outs for c in self.valid(o.shape)]
            except NEEDS_SYMBOLS:
                return None
        if not _all_true(cons) or not all(type(d) is int for o in outs for d in o.shape) or _too_much_work(op):
            return None
        return op, outs, self._drawn(spec)

    def backward(self, spec: type[OpSpec], mark: int, target: int | None = None) -> bool:
        """Replace a placeholder by `spec`, whose inputs become new placeholders."""
        if target is None:
            free = [p for p in self.graph.placeholders if p not in self.kept]
            if not free:
                return False
            target = self.rng.choice(free)
        elif target in self.kept:
            return False
        start = self._mark()
        v = self.graph.tensors[target]
        sig = spec.backward_inputs(v.ttype, self.rng)
        if sig is None or not spec.accepts(sig) or not self.allowed(spec, sig):
            return False
        target_shape = [int(d) for d in v.shape]
        # An op without `concrete_inputs` can never be placed backward without the solver.
        tries = CONCRETE_TRIES if spec.concrete_inputs is not OpSpec.concrete_inputs else 0
        for attempt in range(tries):
            placed = self._place_backward_concretely(spec, sig, v.ttype, target_shape, attempt >= CONCRETE_TRIES // 2)
            if placed is not None:
                op, new, binned = placed
                return self._replace(target, GNode(op, [], [target], Solution(None), binned), new, start)
        op = spec(self.sc, sig, out=v.ttype)
        new = [AbsTensor(t.dtype, self.sc.fresh_shape(t.rank)) for t in sig]
        cons, outs = op.bind(new)
        if len(outs) != 1 or outs[0].ttype != v.ttype:
            return False
        cons += [a == b for a, b in zip(outs[0].shape, v.shape, strict=True)]
        # An output dim that is one of the new input dims is fixed by the target's shape.
        pinned = {a.get_id() for a in outs[0].shape if isinstance(a, z3.ArithRef) and z3.is_const(a)}
        for t in new:
            cons += self.valid(t.shape)
        model = solve_local(lambda: self.solver, cons, self.sc.binnable[mark:], pinned, spec.op_type, self.bins)
        if model is None or op.work(model.eval) > MAX_WORK:
            return False
        for t in new:
            t.shape = _concrete(t.shape, model)
        return self._replace(target, GNode(op, [], [target], model, self._binned(spec, mark, model)), new, start)

    def _replace(self, target: int, node: GNode, new: list[AbsTensor], start: int) -> bool:
        """Make `node` the producer of placeholder `target`, with new placeholders as its
        inputs, unless the witness refuses its values."""
        mark = self.graph.checkpoint()
        node.inputs = [self.graph.add_tensor(t) for t in new]
        self.graph.placeholders.remove(target)
        self.graph.placeholders += node.inputs
        self.graph.add_node(node)
        early, late = self._known_checks(node)
        if early() or (self.witness is not None and not self.witness.backward(self.graph, node, target, late)):
            self.graph.rollback(mark)
            return False
        self._record("backward", node, [target], node.inputs, start)
        return True

    def _place_backward_concretely(
        self, spec: type[OpSpec], sig: list[TType], out: TType, target: list[int], small: bool
    ) -> tuple[OpSpec, list[AbsTensor], list[tuple[str, int]]] | None:
        """Backward insertion with drawn attribute values, for ops that can name their
        input shapes from the target's (`concrete_inputs`); None hands it to the solver."""
        with self._drawing(spec, small):
            try:
                op = spec(self.sc, sig, out=out)
                known = op.concrete_inputs(target)
                if known is None or any(d < 1 for shape in known for d in shape):
                    return None
                new = [AbsTensor(t.dtype, list(shape)) for t, shape in zip(sig, known, strict=True)]
                cons, outs = op.bind(new)
                cons += [c for t in new for c in self.valid(t.shape)]
            except NEEDS_SYMBOLS:
                return None
        if len(outs) != 1 or outs[0].ttype != out or list(outs[0].shape) != target or not _all_true(cons):
            return None
        if _too_much_work(op):
            return None
        return op, new, self._drawn(spec)

    def _binned(self, spec: type[OpSpec], mark: int, sol: Solution) -> list[tuple[str, int]]:
        return [(var_key(spec.op_type, b.var), sol.eval(b.var)) for b in self.sc.binnable[mark:] if b.binned]


def _too_much_work(op: OpSpec) -> bool:
    """A concretely placed op (every term a plain int) over the per-op work cap; the next
    draw, or the solver, may find a smaller window."""
    return op.work(Solution(None).eval) > MAX_WORK


def _all_true(cons: list[Cond]) -> bool:
    """Every constraint folded to the Python bool True (none is left for the solver)."""
    return all(type(c) is bool and c for c in cons)


def _concrete(shape: Sequence[Dim], sol: Solution) -> list[Dim]:
    """Dims as Python ints under the insertion's solution."""
    return [sol.eval(d) for d in shape]
