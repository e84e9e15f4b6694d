"""Graph growth by forward and backward insertion (NNSmith Algorithm 1).

All shape and attribute constraints go into one incremental z3 solver: an accepted
insertion keeps its push scope, a rejected one is popped, so the solver never
re-checks what it has already accepted.
"""

from __future__ import annotations

import z3

from generator.graph import GNode, Graph
from generator.ops.base import OpSpec
from generator.symbolic import AbsTensor, Cond, SymCtx, TType, numel

CHECK_TIMEOUT_MS = 300
"""A check z3 cannot settle this fast (nonlinear shapes) counts as a rejected insertion."""


class Grower:
    def __init__(self, sc: SymCtx, specs: list[type[OpSpec]], dtypes: list[TType]) -> None:
        self.sc = sc
        self.rng = sc.rng
        self.specs = specs
        self.graph = Graph()
        self.solver = z3.Solver(ctx=sc.ctx)
        self.solver.set("timeout", CHECK_TIMEOUT_MS)
        self.model: z3.ModelRef | None = None
        """A model of everything accepted so far."""
        usable = [t for t in dtypes if any(spec.slot_ok(0, t) for spec in specs)]
        seed_type = self.rng.choice(usable or dtypes)
        first = self.new_tensor(seed_type)
        if not self.try_add(self.valid(self.graph.tensors[first])):
            raise RuntimeError("cannot create the first placeholder")
        self.graph.placeholders.append(first)

    def new_tensor(self, t: TType) -> int:
        return self.graph.add_tensor(AbsTensor(t.dtype, self.sc.fresh_shape(t.rank)))

    def valid(self, t: AbsTensor) -> list[Cond]:
        """Every dimension at least 1 and a cap on elements, for every tensor in the graph."""
        return [*(d >= 1 for d in t.shape), numel(t.shape) <= self.sc.max_elements]

    def try_add(self, cons: list[Cond]) -> bool:
        self.solver.push()
        self.solver.add(*(self.sc.cond(c) for c in cons))
        if self.solver.check() == z3.sat:
            self.model = self.solver.model()
            return True
        self.solver.pop()
        return False

    def grow(self, nodes: int, max_attempts: int) -> Graph:
        attempts = 0
        while len(self.graph.nodes) < nodes and attempts < max_attempts:
            attempts += 1
            spec = self.rng.choice(self.specs)
            binnable = len(self.sc.binnable)
            inserted = self.forward(spec) if self.rng.random() < 0.5 else self.backward(spec)
            if not inserted:
                del self.sc.binnable[binnable:]
        if not self.graph.nodes:
            raise RuntimeError("no operator could be inserted")
        return self.graph

    def forward(self, spec: type[OpSpec]) -> bool:
        """Insert `spec` as a consumer of existing tensors."""
        tensors = self.graph.tensors
        picked: list[int] = []
        for slot in range(spec.draw_arity(self.rng)):
            if picked and self.rng.random() < 0.7:
                same = [i for i, t in enumerate(tensors) if t.ttype == tensors[picked[0]].ttype]
                picked.append(self.rng.choice(same))
                continue
            cands = [i for i, t in enumerate(tensors) if spec.slot_ok(slot, t.ttype)]
            if not cands:
                return False
            picked.append(self.rng.choice(cands))
        sig = [tensors[i].ttype for i in picked]
        if not spec.accepts(sig):
            return False
        op = spec(self.sc, sig)
        cons, outs = op.bind([tensors[i] for i in picked])
        for o in outs:
            cons += self.valid(o)
        if not self.try_add(cons):
            return False
        out_ids = [self.graph.add_tensor(o) for o in outs]
        self.graph.nodes.append(GNode(op, picked, out_ids))
        return True

    def backward(self, spec: type[OpSpec]) -> bool:
        """Replace a placeholder by `spec`, whose inputs become new placeholders."""
        if not self.graph.placeholders:
            return False
        target = self.rng.choice(self.graph.placeholders)
        v = self.graph.tensors[target]
        sig = spec.backward_inputs(v.ttype, self.rng)
        if sig is None or not spec.accepts(sig):
            return False
        op = spec(self.sc, sig, out=v.ttype)
        new = [AbsTensor(t.dtype, self.sc.fresh_shape(t.rank)) for t in sig]
        cons, outs = op.bind(new)
        if len(outs) != 1 or outs[0].ttype != v.ttype:
            return False
        cons += [a == b for a, b in zip(outs[0].shape, v.shape, strict=False)]
        for t in new:
            cons += self.valid(t)
        if not self.try_add(cons):
            return False
        new_ids = [self.graph.add_tensor(t) for t in new]
        self.graph.placeholders.remove(target)
        self.graph.placeholders += new_ids
        self.graph.nodes.append(GNode(op, new_ids, [target]))
        return True
