"""A small differentiable interpreter of one ONNX graph, built once per model.

The value search evaluates the same graph tens of times, so everything that does not
depend on the values is done here once: attributes are parsed, each node's torch
reference (with proxy derivatives) is bound, the unsafe-op predicates are looked up, and
the constants are converted to tensors. An evaluation is then a plain loop over nodes
that stops at the first op whose operand is inside its margin or whose output is not
finite, which is exactly the "first failing op" NNSmith's search optimises for.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import cast

import numpy as np
import onnx
import onnx.defs
import torch
from onnx import numpy_helper

from generator.ops import registry
from generator.ops.base import CAPTURED, node_attrs, op_version
from generator.ops.narrow import as_torch
from generator.ops.unsigned import carried, stand_in
from generator.values.predicate import Attrs, Predicate
from generator.values.proxies import Reference, Tensors, with_proxy
from generator.values.unsafe import exact_output, predicates, same_bits


class UnsupportedModel(ValueError):
    """The model has an op the reference cannot run, so no value can be checked."""


@dataclass
class Failure:
    """The first op that is unsafe under the current values, and why."""

    node: Node
    operands: Tensors
    predicate: Predicate | None = None
    """None: an output is not finite although no predicate of the table is violated."""
    f: torch.Tensor | None = None
    margin: float = 0.0
    bad: torch.Tensor | None = None
    """Where it is unsafe: the elements within the margin, or the non-finite outputs."""
    error: str | None = None
    """The reference raised; no value change is known to help."""
    exact: bool = False
    """The predicate's operands are exact: its closed boundary is not near (Predicate.within)."""
    env: dict[str, torch.Tensor] | None = None
    """The values computed up to the failing op (for tracing positions back to leaves)."""

    @property
    def key(self) -> tuple[int, str]:
        """Identifies the loss being optimised; the optimiser restarts when it changes."""
        return self.node.index, self.predicate.name if self.predicate else "finite"

    def describe(self) -> str:
        what = self.error or (self.predicate.name if self.predicate else "non-finite output")
        return f"{self.node.label}: {what}"

    def loss(self) -> torch.Tensor:
        if self.predicate is not None:
            assert self.f is not None
            return self.predicate.margin_loss(self.f, self.margin, self.exact)
        # No known domain: an overflow, so pull the operands' magnitudes down.
        parts = [t.abs().sum() for t in self.operands if t is not None and t.requires_grad]
        return torch.stack(parts).sum() if parts else torch.zeros(())

    def slots(self) -> list[int]:
        """Operands the failure is about: those to repair or re-randomise."""
        if self.predicate is not None:
            return [self.predicate.repair] if self.predicate.integer else list(self.predicate.slots)
        return [i for i, t in enumerate(self.operands) if t is not None]


def model_opset(model: onnx.ModelProto) -> int:
    """The default-domain opset the model imports (the newest onnx knows, when it names none)."""
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return versions[0] if versions else onnx.defs.onnx_opset_version()


def as_tensor(a: np.ndarray) -> torch.Tensor:
    return as_torch(a)


@dataclass(frozen=True)
class Step:
    """An ONNX node ready to run, before it has a place in a program: what `prepare` works
    out once (attributes parsed, reference bound, predicates looked up), so that a graph
    growing node by node (generator.witness) never prepares a node twice."""

    name: str
    op_type: str
    attrs: Attrs
    run: Reference
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    checks: tuple[Predicate, ...]


@dataclass(frozen=True)
class Node(Step):
    """A step at its place in one program."""

    index: int
    exact: tuple[bool, ...]
    """Per input: the same bits in every backend (see `unsafe.exact_output`)."""

    @property
    def label(self) -> str:
        return f"{self.name or '#' + str(self.index)} ({self.op_type})"


STEP_FIELDS = tuple(f.name for f in fields(Step))
"""What a Node takes over from the Step it places (a Node is a Step too)."""


def prepare(n: onnx.NodeProto, opset: int | None = None) -> Step:
    """The node ready to run in a model importing `opset`: computed by its op's version there,
    as the backends' reference computes it (Softmax-11 normalizes the flattened tail, and a
    value kept safe under another reading may not be); None: the current meaning."""
    specs = registry()
    if n.domain not in ("", "ai.onnx") or n.op_type not in specs:
        raise UnsupportedModel(f"op {n.domain or 'ai.onnx'}::{n.op_type} has no reference")
    version = None if opset is None else op_version(n.op_type, opset)
    spec = specs[n.op_type]
    computed = spec.reference if version is None else spec.reference_at(version)
    # Optional inputs left empty arrive as None, as in the backends' reference.
    ref = with_proxy(n.op_type, carried(n.op_type, cast(Reference, computed)))
    attrs = node_attrs(n, version)
    inputs = (*n.input, *attrs.get(CAPTURED, ()))  # an If's branches read outer tensors
    return Step(n.name, n.op_type, attrs, ref, inputs, tuple(n.output), predicates(n.op_type))


class Program:
    """One model, ready to evaluate under changing values of its `free` tensors."""

    def __init__(self, model: onnx.ModelProto, inputs: Mapping[str, np.ndarray], free: Collection[str]) -> None:
        arrays = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        arrays.update(inputs)
        missing = [v.name for v in model.graph.input if v.name not in arrays]
        if missing:
            raise UnsupportedModel(f"no value for graph inputs {missing}")
        steps = [prepare(n, model_opset(model)) for n in model.graph.node]
        initial = {n: arrays[n] for n in arrays if n in free}
        self._start(initial, {n: as_tensor(a) for n, a in arrays.items() if n not in free})
        self.extend(steps)

    @classmethod
    def of_steps(
        cls,
        steps: Sequence[Step],
        initial: Mapping[str, np.ndarray],
        constants: Mapping[str, torch.Tensor],
        exact: Mapping[str, bool] | None = None,
        bits: Mapping[str, bool] | None = None,
    ) -> Program:
        """A program over prepared steps (in topological order): `initial` are the free
        tensors' values, `constants` the rest. When the constants include tensors another
        part of a graph computed, `exact` and `bits` say what is known of them (see
        `exact` and `walk`); a constant they do not name is exact."""
        program = cls.__new__(cls)
        program._start(initial, constants)
        program.exact.update(exact or {})
        program.given_bits.update(bits or {})
        program.extend(steps)
        return program

    def _start(self, initial: Mapping[str, np.ndarray], constants: Mapping[str, torch.Tensor]) -> None:
        self.free = list(initial)
        self.initial = dict(initial)
        self.constants = dict(constants)
        self.nodes: list[Node] = []
        self.producer: dict[str, Node] = {}
        """The node computing each intermediate tensor, for walks back toward the leaves."""
        self.ancestors: dict[str, frozenset[str]] = {n: frozenset([n]) for n in self.free}
        self.exact: dict[str, bool] = {}
        """Per tensor: the same bits in every backend (see `unsafe.exact_output`); absent: a
        leaf or constant, which is exact."""
        self.given_bits: dict[str, bool] = {}
        """`walk`'s `bits` of the constants, when they were computed elsewhere."""

    def add_leaves(self, initial: Mapping[str, np.ndarray]) -> None:
        """Free tensors that appear after the program was built (the weights of a node
        about to be appended), so that `ancestors` leads back to them."""
        for name, array in initial.items():
            self.free.append(name)
            self.initial[name] = array
            self.ancestors[name] = frozenset([name])

    def extend(self, steps: Sequence[Step]) -> None:
        """Append steps whose inputs are all computed before them (or are leaves)."""
        for step in steps:
            ins_exact = tuple(self.exact.get(x, True) for x in step.inputs)
            parts = {f: getattr(step, f) for f in STEP_FIELDS}
            node = Node(**parts, index=len(self.nodes), exact=ins_exact)
            self.nodes.append(node)
            up = frozenset().union(*(self.ancestors.get(x, frozenset()) for x in step.inputs if x))
            out_exact = exact_output(step.op_type, [e for x, e in zip(step.inputs, ins_exact, strict=True) if x])
            for o in step.outputs:
                self.ancestors[o] = up
                self.exact[o] = out_exact
                if o:
                    self.producer[o] = node

    def env(self, leaves: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {**self.constants, **leaves}

    def first_failure(self, env: dict[str, torch.Tensor]) -> Failure | None:
        return next(self.walk(env, every=False), None)

    def walk(
        self,
        env: dict[str, torch.Tensor],
        every: bool,
        nodes: Sequence[Node] | None = None,
        bits: dict[str, bool] | None = None,
    ) -> Iterator[Failure]:
        """Run `nodes` (all, by default) in order, yielding each unsafe op; with `every`,
        keep going past it.

        `env` gains every intermediate tensor computed, and `bits`, when given, whether each
        has the same bits in every backend (see `same_bits`): running some of the nodes
        needs the values and `bits` of what the others computed.
        """
        bits = dict(self.given_bits) if bits is None else bits
        for node in self.nodes if nodes is None else nodes:
            ops: Tensors = [env[x] if x else None for x in node.inputs]
            # The predicates read uint16/32/64 on the stand-ins their op computes on
            signed: Tensors = [None if t is None else stand_in(t) for t in ops]
            same = [bits.get(x, True) for x in node.inputs]
            unsafe = False
            for p in node.checks:
                exact = all(node.exact[s] for s in p.slots)
                if (p.inexact_only and all(same[s] for s in p.slots)) or not p.relevant(signed, node.attrs):
                    continue
                f = p.f(signed, node.attrs)
                operand = ops[p.slots[0]]
                assert operand is not None
                margin = p.margin(operand.dtype)
                bad = p.within(f, margin, exact)
                if bool(bad.any()):
                    unsafe = True
                    yield Failure(node, ops, p, f, margin, bad, exact=exact, env=env)
                    if not every:
                        return
            if unsafe and any(p.integer for p in node.checks if p.relevant(signed, node.attrs)):
                return  # an integer division by zero raises in torch: nothing after it can run
            try:
                outs = node.run(node.attrs, ops)
            except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError) as e:
                yield Failure(node, ops, error=f"{type(e).__name__}: {e}")
                return
            out_same = same_bits(node.op_type, [b for x, b in zip(node.inputs, same, strict=True) if x])
            for name, value in zip(node.outputs, outs, strict=False):
                if name:
                    env[name] = value
                    # Integer results are exact: overflow and the float-to-int jumps are checked.
                    bits[name] = out_same or not value.is_floating_point()
            for t in (t for t in outs if t.is_floating_point()):
                # float8 has no isfinite of its own: its values are float32's
                finite = torch.isfinite(t.detach().float() if t.element_size() == 1 else t.detach())
                if not bool(finite.all()):
                    yield Failure(node, ops, bad=~finite, env=env)
                    if not every:
                        return
                    break
