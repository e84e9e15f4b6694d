"""Values carried through growth: a witness, at every moment, that the graph has safe values.

A search over a finished model has to satisfy every unsafe op at once, starting from
random values. When two ops leave no values in common (Acosh(Floor(x)) against
Atanh(1 / Floor(x)), a class that must win 83% of a Hardmax's positions), nothing can;
when they leave a narrow window, a search that fixes the first failing op and then the
next can trade the two back and forth for ever. Interval rules that refuse impossible
compositions at insertion are sound but never complete: each op family brings patterns
they do not model, and at 30 nodes a quarter of the models built under them still had
no values.

So the graph keeps concrete values for every tensor while it grows, valid after every
insertion: every tensor finite and every unsafe op's operands off their margins. A
node is run as soon as it is inserted, on the values in hand. When it is unsafe, the
value search (generator.values) runs on the graph so far, starting from values that
already satisfy every other op, so it has one new constraint to meet. An insertion the
search cannot make safe within a few steps is refused, and the grower tries another.
The finished graph comes with its values, so no model is dropped for them, and a
composition no values can make safe is never built, whatever the reason.

Every step is seeded: the emitter's generator draws leaves, constants and weights, and
a second one drives the repairs, so a seed still gives one model. The step limits, never
the clock, decide what is refused, so the same seed gives the same case at any load; the
clock only measures what the values cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from generator.dtypes import DType
from generator.emit import OnnxEmitter, draw_values, tname
from generator.graph import Fragment, GNode, Graph
from generator.values.find import Method
from generator.values.interp import Failure, Node, Program, Step, as_tensor, prepare
from generator.values.leaves import Leaves
from generator.values.sampling import sampling_search
from generator.values.search import Budget, Tally, gradient_search

Refusal = Callable[[], bool]
"""Asked once a node is written: whether to refuse it for a reason other than its values."""

REPAIR_SALT = 0x57495453
"""Mixed into the case seed for the repairs' draws, apart from the emitter's."""

REPAIR_STEPS = 8
"""Search steps one insertion may spend on its values before it is refused: a repair that
starts from values satisfying every other op mostly needs one to four."""

REPAIR_SAMPLES = 4
"""Samples one insertion may spend when the method is sampling."""


@dataclass
class WitnessStats:
    """What keeping the values cost, for `ValueOutcome` and the benchmark."""

    checked: int = 0
    """Insertions run on the values in hand."""
    repaired: int = 0
    """Insertions whose values a search had to change."""
    refused: int = 0
    """Insertions refused: no values within the step limits kept every op safe."""
    steps: int = 0
    """Search steps (or samples) spent on repairs, refused ones included."""
    seconds: float = 0.0


class Witness:
    """The grower's value hook: draws the leaves, writes each node as it is inserted, and
    with a `method`, runs it and refuses what cannot be made safe. `method` None: only
    emission and drawing, no checks (GenConfig.values == "none")."""

    def __init__(
        self,
        opset: int,
        seed: int,
        method: Method | None,
        model_steps: int,
        runtime_shapes: float = 0.0,
    ) -> None:
        self.em = OnnxEmitter(opset, np.random.default_rng(seed), runtime_shapes)
        self.rng = np.random.default_rng([seed, REPAIR_SALT])
        self.method = method
        self.model_steps = model_steps
        self.leaves: dict[str, np.ndarray] = {}
        """Free values by name: placeholders (t<id>) and weights (w<n>)."""
        self.constants: dict[str, torch.Tensor] = {}
        self.steps: list[Step] = []
        """Every node so far, in a topological order."""
        self.env: dict[str, torch.Tensor] = {}
        """Every tensor's current value: leaves, constants and computed."""
        self.bits: dict[str, bool] = {}
        """Per computed tensor: the same bits in every backend (interp.Program.walk)."""
        self._program: Program | None = None
        self.stats = WitnessStats()

    def placeholder(self, graph: Graph, tensor: int) -> None:
        """Draw a new placeholder's values, as emission would."""
        t = graph.tensors[tensor]
        array = draw_values(self.em.values, [int(d) for d in t.shape], t.dtype)
        self._add_leaf(tname(tensor), array)

    def forward(self, graph: Graph, node: GNode, refuse: Refusal | None = None) -> bool:
        """Keep `node`, just appended to `graph` as a consumer, if its values can be safe.
        `refuse`, asked once the node is written, may refuse it for another reason (a
        template that completes a known bug's trigger with the nodes it wrote)."""
        fragment = self._write(node)
        if refuse is not None and refuse():
            self._disown(fragment, counted=False)
            return False
        new = [prepare(n, self.em.opset) for n in fragment.nodes]
        if self.method is None:
            self.steps += new
            return True
        with self._clock():
            program = self._current()
            start = len(program.nodes)
            program.add_leaves({k: self.leaves[k] for k in fragment.arrays if k in self.leaves})
            program.extend(new)
            self.stats.checked += 1
            with torch.no_grad():
                failure = next(program.walk(self.env, False, program.nodes[start:], self.bits), None)
            if failure is None:
                self.steps += new
                return True
            self._forget(fragment)
            if self._repair(program, failure):
                self.steps += new
                return True
            self._program = None  # it holds the refused node
        self._disown(fragment)
        return False

    def backward(self, graph: Graph, node: GNode, target: int, refuse: Refusal | None = None) -> bool:
        """Keep `node`, just made the producer of placeholder `target` from new placeholders
        (its inputs), if values can be found that keep everything downstream safe.
        `refuse` as for `forward`."""
        old = self.leaves.pop(tname(target))
        self.env.pop(tname(target))
        for t in node.inputs:
            self.placeholder(graph, t)
        fragment = self._write(node)
        if refuse is not None and refuse():
            self._unplace(node, target, old, fragment, counted=False)
            return False
        steps = [*(prepare(n, self.em.opset) for n in fragment.nodes), *self.steps]
        if self.method is None:
            self.steps = steps
            return True
        with self._clock():
            program = Program.of_steps(steps, self.leaves, self.constants)
            failure = self._rerun(program, tname(target), len(fragment.nodes))
            if failure is None or self._repair(program, failure):
                self.steps = steps
                return True
        self._unplace(node, target, old, fragment)
        return False

    def _unplace(self, node: GNode, target: int, old: np.ndarray, fragment: Fragment, counted: bool = True) -> None:
        """Undo a backward insertion: the node's writing, its new placeholders, and the
        target's own value back as a leaf."""
        self._disown(fragment, counted)
        for t in node.inputs:
            self.leaves.pop(tname(t))
            self.env.pop(tname(t))
        self._add_leaf(tname(target), old)

    def _write(self, node: GNode) -> Fragment:
        node.fragment = self.em.write(node)
        for name, array in node.fragment.arrays.items():
            if name.startswith("w"):
                self._add_leaf(name, array)
            else:
                self.constants[name] = self.env[name] = as_tensor(array)
        for name, array in node.fragment.runtime.items():
            self.constants[name] = self.env[name] = as_tensor(array)
        return node.fragment

    def _add_leaf(self, name: str, array: np.ndarray) -> None:
        self.leaves[name] = array
        self.env[name] = as_tensor(array)
        self.bits.pop(name, None)

    def _forget(self, fragment: Fragment) -> None:
        """Drop what a refused walk computed for the fragment's outputs: their names come
        back with the next insertion's tensors."""
        for n in fragment.nodes:
            for o in n.output:
                self.env.pop(o, None)
                self.bits.pop(o, None)

    def _disown(self, fragment: Fragment, counted: bool = True) -> None:
        """Undo `_write` for a refused node; `counted`: a refusal for its values."""
        self._forget(fragment)
        for name in [*fragment.arrays, *fragment.runtime]:
            self.leaves.pop(name, None)
            self.constants.pop(name, None)
            self.env.pop(name, None)
        self.stats.refused += counted

    def _current(self) -> Program:
        if self._program is None:
            self._program = Program.of_steps(self.steps, self.leaves, self.constants)
        return self._program

    def _rerun(self, program: Program, target: str, new: int) -> Failure | None:
        """After a backward insertion: run the `new` nodes in front and every node that
        depends on `target`, the rest keeping their values."""
        self.stats.checked += 1
        nodes = program.nodes[:new] + _downstream(program.nodes[new:], {target})
        return self._run(program, nodes, dict(self.env))

    def _run(self, program: Program, nodes: list[Node], env: dict[str, torch.Tensor]) -> Failure | None:
        """Run `nodes` of `program` on `env` (a copy of the witness's, with some values
        changed), the other nodes keeping theirs. When all are safe, `env` and `program`
        become the witness's; otherwise, the first unsafe node."""
        bits = dict(self.bits)
        with torch.no_grad():
            failure = next(program.walk(env, False, nodes, bits), None)
        if failure is None:
            self.env, self.bits, self._program = env, bits, program
        return failure

    def _repair(self, program: Program, failure: Failure) -> bool:
        """Search values that make every node of `program` safe, moving only the leaves the
        first unsafe node depends on. The nodes that do not depend on them keep their values
        and enter the search as constants, so a step runs only what it can change."""
        left = self.model_steps - self.stats.steps
        free = sorted(frozenset().union(*(program.ancestors.get(x, frozenset()) for x in failure.node.inputs if x)))
        if left <= 0 or failure.error is not None or not free:
            return False
        cone = _downstream(program.nodes, set(free), self.env)
        computed = {o for n in cone for o in n.outputs}
        outside = {x for n in cone for x in n.inputs if x and x not in computed and x not in free}
        search = Program.of_steps(
            cone,
            {k: self.leaves[k] for k in free},
            {x: self.env[x] for x in outside},
            {x: program.exact.get(x, True) for x in outside},
            {x: self.bits[x] for x in outside if x in self.bits},
        )
        leaves = Leaves(search.initial)
        tally = Tally()
        if self.method == "sampling":
            reason = sampling_search(search, leaves, self.rng, Budget(0, min(REPAIR_SAMPLES, left)), tally)
        else:
            reason = gradient_search(search, leaves, self.rng, Budget(min(REPAIR_STEPS, left), 0), tally)
        self.stats.steps += tally.steps + tally.samples
        return reason is None and self._adopt(program, cone, leaves.export())

    def _adopt(self, program: Program, cone: list[Node], found: dict[str, np.ndarray]) -> bool:
        """Take the repaired leaves once the nodes that depend on them, run in the whole
        program, are all safe."""
        env = dict(self.env)
        for name, array in found.items():
            env[name] = as_tensor(array)
        if self._run(program, cone, env) is not None:
            return False
        self.leaves.update(found)
        self.stats.repaired += 1
        return True

    def fresh(self, seed: int) -> dict[str, np.ndarray]:
        """Every leaf drawn anew, as emission draws it, from another generator: the random
        start a search over the finished model would have (bench/values.py)."""
        rng = np.random.default_rng(seed)
        return {
            name: draw_values(rng, a.shape, DType.from_numpy(a.dtype), self.em.fan_in.get(name, 1))
            for name, a in self.leaves.items()
        }

    @contextmanager
    def _clock(self) -> Iterator[None]:
        """Adds the time spent inside to the stats (measured, never a limit)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.stats.seconds += time.perf_counter() - t0


def _downstream(nodes: Sequence[Node], sources: set[str], known: Mapping[str, object] | None = None) -> list[Node]:
    """The nodes (in order) that read `sources` or what such nodes compute; with `known`, also
    those whose outputs it lacks: a walk that stopped at an unsafe node never ran the nodes
    after it, and a template may write one that reads none of its input (a weight's
    DequantizeLinear) after the one that failed."""
    reached = set(sources)
    out: list[Node] = []
    for node in nodes:
        unrun = known is not None and any(o and o not in known for o in node.outputs)
        if unrun or reached.intersection(node.inputs):
            out.append(node)
            reached.update(node.outputs)
    return out
