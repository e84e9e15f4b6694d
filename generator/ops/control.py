"""Control flow: Loop and Scan, each with a body subgraph generated for it.

A compiler meets a subgraph on paths its straight-line graphs never take: the frontend's
converter for the body, shape inference through it, constant folding of what the body
reads, and the runtime's loop that feeds each iteration's state into the next. Exported
models carry them (beam search, torch loops exported as Loop, recurrent cells as Scan).

A body is valid by construction: its inputs are the loop's state (and, for Scan, one slice
of the scanned tensor; for Loop, the iteration count and the condition), and it writes the
next state through a bounded function (Tanh, Sigmoid, Sin, Cos), so the state stays finite
however many iterations run. Every op in a body is defined on every finite input, so no
unsafe domain hides inside a subgraph where the value search cannot see it; the reference
runs the body node by node with the registry's own references. A body reads nothing from
the outer scope: what it needs comes in as its inputs.

Loop sometimes stops early: its body's condition output is `iteration < K`, so a scan
output has K + 1 entries, fewer than the trip count, which the runtime learns only while
it runs.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

from generator.dtypes import FLOATS_32_FIRST, DType
from generator.ops.base import (
    CAPTURED,
    Attrs,
    Emitter,
    OpSpec,
    Unending,
    captured_names,
    node_attrs,
    register,
    registry,
    schema_dtypes,
)
from generator.ops.narrow import as_torch
from generator.ops.unsigned import carried
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType

BODY_BINARY = ("Add", "Sub", "Mul", "Max", "Min")
"""How a body combines its state with what comes in."""
BODY_SQUASH = ("Tanh", "Sigmoid", "Sin", "Cos")
"""How a body writes its next state: bounded, so no iteration count overflows it."""
BODY_UNARY = ("Identity", "Relu", "Abs", "Neg", "Tanh")
"""What a body emits per iteration from its new state."""

MAX_ITERATIONS = 1 << 12
"""The reference refuses a Loop that has not stopped after this many iterations (Unending):
a model with no trip count and a condition that never turns false would never return. A
reduction's candidate can be one (its body's condition reduced to the one it was given), and
each such candidate cost 11 s at 1 << 16; generated Loops run at most MAX_TRIPS."""
WHILE_SHARE = 1 / 3
"""The share of Loops whose body stops before the trip count that leave M out (a while loop):
an optional input is drawn absent and present (generator.ops.optional)."""


def run_body(
    body: onnx.GraphProto, values: Sequence[torch.Tensor], outer: Mapping[str, torch.Tensor] | None = None
) -> list[torch.Tensor]:
    """The body's outputs for its inputs `values` and the `outer` tensors it reads
    (generator.ops.base.CAPTURED), node by node with the registry's references. An op
    without a reference, or an outer tensor not given, is refused (NotImplementedError),
    never computed as something else."""
    env: dict[str, torch.Tensor] = dict(outer or {})
    env.update({i.name: v for i, v in zip(body.input, values, strict=True)})
    env.update({t.name: as_torch(numpy_helper.to_array(t)) for t in body.initializer})
    specs = registry()
    for node in body.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            value = next(a.t for a in node.attribute if a.name == "value")
            outs = [as_torch(numpy_helper.to_array(value))]
        elif node.domain in ("", "ai.onnx") and node.op_type in specs:
            reads = (*node.input, *captured_names(node))
            args = cast(list[torch.Tensor], [_read(env, x) for x in reads])  # optional inputs: None
            outs = carried(node.op_type, specs[node.op_type].reference)(node_attrs(node), args)
        else:
            raise NotImplementedError(f"body op {node.domain or 'ai.onnx'}::{node.op_type} has no reference")
        env.update({name: v for name, v in zip(node.output, outs, strict=False) if name})
    return [env[o.name] for o in body.output]


def _read(env: dict[str, torch.Tensor], name: str) -> torch.Tensor | None:
    if not name:
        return None
    if name not in env:
        raise NotImplementedError(f"the body reads {name!r} from an outer scope, which the reference does not compute")
    return env[name]


@dataclass(frozen=True)
class BodyPlan:
    """The ops of one body, drawn when the node is: combine, squash, and what it emits."""

    combine: str
    squash: str
    emits: str

    @classmethod
    def draw(cls, rng: random.Random, dtype: DType, opset: int) -> BodyPlan:
        ops = (BODY_BINARY, BODY_SQUASH, BODY_UNARY)
        combine, squash, emits = (rng.choice(typed_ops(o, dtype, opset)) for o in ops)
        return cls(combine, squash, emits)


def typed_ops(ops: tuple[str, ...], dtype: DType, opset: int) -> tuple[str, ...]:
    """The body ops of `ops` whose schema at `opset` takes `dtype` (Sin and Cos take
    bfloat16 from opset 22 on); every one of them takes the classic float types."""
    return tuple(op for op in ops if dtype in schema_dtypes(op, opset, 0)) or ops


class _Body:
    """A body graph being written: names under the node's own prefix, so that no body
    tensor shadows an outer one."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.nodes: list[onnx.NodeProto] = []

    def name(self, what: str) -> str:
        return f"{self.prefix}_{what}"

    def op(self, op_type: str, inputs: Sequence[str], what: str, **attrs: Any) -> str:
        out = self.name(what)
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [out], name=self.name(f"n{len(self.nodes)}"), **attrs)
        )
        return out

    def graph(self, inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto]) -> onnx.GraphProto:
        return helper.make_graph(self.nodes, self.name("body"), inputs, outputs)


def _value(name: str, dtype: DType | int, shape: Sequence[int]) -> onnx.ValueInfoProto:
    elem = dtype if isinstance(dtype, int) else dtype.onnx
    return helper.make_tensor_value_info(name, elem, list(shape))


@register
class Scan(OpSpec):
    """A Scan over one axis of its input: a state (an initializer the op owns) combined with
    each slice in turn, the final state and the stacked per-slice outputs. Either direction
    in and out, and any axis in and out (`scan_input_axes`, `scan_output_axes`)."""

    op_type = "Scan"
    arity = 1
    min_rank = 2
    max_rank = 4
    dtypes = FLOATS_32_FIRST
    since_opset = 9
    """Scan-8 scans a batch of sequences, with its own sequence_lens input: another op."""
    reference_since = 9

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        rank = ins[0].rank
        self.in_axis = self.rng.randrange(rank) if self.rng.random() < 0.5 else 0
        self.out_axis = self.rng.randrange(rank) if self.rng.random() < 0.5 else 0
        self.in_reverse = self.rng.random() < 0.3
        self.out_reverse = self.rng.random() < 0.3
        self.negative_axes = self.rng.random() < 0.25
        self.plan = BodyPlan.draw(self.rng, ins[0].dtype, sc.opset)

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        return None

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def _state(self, shape: Sequence[Dim]) -> list[Dim]:
        return [d for i, d in enumerate(shape) if i != self.in_axis]

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        x = ins[0]
        state = self._state(x.shape)
        stacked = list(state)
        stacked.insert(self.out_axis, x.shape[self.in_axis])
        return [AbsTensor(x.dtype, state), AbsTensor(x.dtype, stacked)]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        dtype = self.inputs[0].dtype
        state = [em.ival(d) for d in self._state(self.inputs[0].shape)]
        b = _Body(outs[0])
        s_in, x_in = b.name("state"), b.name("slice")
        s_out = b.op(self.plan.squash, [b.op(self.plan.combine, [s_in, x_in], "mixed")], "next")
        y = b.op(self.plan.emits, [s_out], "emitted")
        body = b.graph(
            [_value(s_in, dtype, state), _value(x_in, dtype, state)],
            [_value(s_out, dtype, state), _value(y, dtype, state)],
        )
        rank = self.inputs[0].rank
        attrs: dict[str, Any] = {"body": body, "num_scan_inputs": 1}
        negative = self.negative_axes and em.opset >= 11
        if self.in_axis or negative:
            attrs["scan_input_axes"] = [self.in_axis - rank if negative else self.in_axis]
        if self.out_axis or negative:
            attrs["scan_output_axes"] = [self.out_axis - rank if negative else self.out_axis]
        if self.in_reverse:
            attrs["scan_input_directions"] = [1]
        if self.out_reverse:
            attrs["scan_output_directions"] = [1]
        em.node("Scan", [em.weight(state, dtype), ins[0]], outs, **attrs)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        body: onnx.GraphProto = attrs["body"]
        n_scan = int(attrs["num_scan_inputs"])
        n_state = len(inputs) - n_scan
        states, scans = list(inputs[:n_state]), inputs[n_state:]
        in_axes = [int(a) % s.dim() for a, s in zip(attrs.get("scan_input_axes", [0] * n_scan), scans, strict=True)]
        in_dirs = list(attrs.get("scan_input_directions", [0] * n_scan))
        length = scans[0].shape[in_axes[0]]
        collected: list[list[torch.Tensor]] = []
        for t in range(length):
            xs = [s.select(a, length - 1 - t if d else t) for s, a, d in zip(scans, in_axes, in_dirs, strict=True)]
            outs = run_body(body, [*states, *xs])
            states, emitted = outs[:n_state], outs[n_state:]
            collected.append(emitted)
        n_out = len(body.output) - n_state
        out_axes = list(attrs.get("scan_output_axes", [0] * n_out))
        out_dirs = list(attrs.get("scan_output_directions", [0] * n_out))
        results = list(states)
        for j in range(n_out):
            seq = [c[j] for c in collected]
            if out_dirs[j]:
                seq = seq[::-1]
            results.append(torch.stack(seq, dim=int(out_axes[j]) % (seq[0].dim() + 1)))
        return results


@register
class Loop(OpSpec):
    """A Loop carrying one tensor through a trip count of iterations: each adds the
    iteration number to its state and squashes it, and may emit a per-iteration output,
    stacked. The trip count is a constant or a graph input of fixed value, or left out where
    the body stops first; the condition is left out, a constant true, or computed in the body
    as `iteration < K` to stop early."""

    op_type = "Loop"
    arity = 1
    min_rank = 1
    max_rank = 3
    dtypes = FLOATS_32_FIRST
    since_opset = 11
    """Loop-1 meant the same, but its scan outputs' shape rules were looser: from 11 on."""
    reference_since = 11
    MAX_TRIPS: ClassVar[int] = 5

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.trips = self.rng.randint(1, self.MAX_TRIPS)
        self.stop_after = self.rng.randrange(self.trips - 1) if self.trips > 1 and self.rng.random() < 0.3 else None
        """K: the body's condition is `iteration < K`, so K + 1 iterations run."""
        self.condition = self.rng.choice(("absent", "true", "true"))
        if self.condition == "absent":
            # (trip_count, ""): the spec's for loop ignores the body's condition, where
            # onnxruntime and onnx.reference stop on it: a body that stops first would make
            # a build that reads the spec look wrong. Without a condition input it never stops.
            self.stop_after = None
        self.trip_count = self.stop_after is None or self.condition == "absent" or self.rng.random() >= WHILE_SHARE
        """Whether M is written: a body that stops first (its condition `iteration < K` beside a
        condition input) runs as many iterations without one, as a while loop."""
        self.emits = self.rng.random() < 0.7
        self.plan = BodyPlan.draw(self.rng, ins[0].dtype, sc.opset)

    @classmethod
    def schema_allows(cls, opset: int, ins: Sequence[TType]) -> bool:
        """The carried value is the schema's third input (after M and cond)."""
        return ins[0].dtype in schema_dtypes(cls.op_type, opset, 2)

    @property
    def iterations(self) -> int:
        return self.trips if self.stop_after is None else self.stop_after + 1

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        return None

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        v = ins[0]
        outs = [AbsTensor(v.dtype, list(v.shape))]
        if self.emits:
            outs.append(AbsTensor(v.dtype, [self.iterations, *v.shape]))
        return outs

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        dtype = self.inputs[0].dtype
        shape = [em.ival(d) for d in self.inputs[0].shape]
        b = _Body(outs[0])
        i_in, c_in, v_in = b.name("iteration"), b.name("cond"), b.name("state")
        count = b.op("Cast", [i_in], "count", to=dtype.onnx)
        v_out = b.op(self.plan.squash, [b.op(self.plan.combine, [v_in, count], "mixed")], "next")
        if self.stop_after is None:
            c_out = b.op("Identity", [c_in], "cond_out")
        else:
            limit = helper.make_tensor(b.name("k"), onnx.TensorProto.INT64, [], [self.stop_after])
            k = b.op("Constant", [], "k", value=limit)
            c_out = b.op("Less", [i_in, k], "cond_out")
        body_outs = [_value(c_out, onnx.TensorProto.BOOL, []), _value(v_out, dtype, shape)]
        if self.emits:
            body_outs.append(_value(b.op(self.plan.emits, [v_out], "emitted"), dtype, shape))
        body = b.graph(
            [
                _value(i_in, onnx.TensorProto.INT64, []),
                _value(c_in, onnx.TensorProto.BOOL, []),
                _value(v_in, dtype, shape),
            ],
            body_outs,
        )
        trips = em.shape_operand(np.array(self.trips, dtype=np.int64)) if self.trip_count else ""
        cond = "" if self.condition == "absent" else em.const(np.array(True))
        em.node("Loop", [trips, cond, ins[0]], outs, body=body)

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        body: onnx.GraphProto = attrs["body"]
        trips, cond, carried = inputs[0], inputs[1] if len(inputs) > 1 else None, list(inputs[2:])
        limit = None if trips is None else int(trips.reshape(-1)[0])
        going = True if cond is None else bool(cond.reshape(-1)[0])
        n_state = len(carried)
        collected: list[list[torch.Tensor]] = []
        i = 0
        while going and (limit is None or i < limit):
            if i >= MAX_ITERATIONS:
                raise Unending(f"the loop has not stopped after {MAX_ITERATIONS} iterations")
            outs = run_body(body, [torch.tensor(i, dtype=torch.int64), torch.tensor(going), *carried])
            going = bool(outs[0].reshape(-1)[0])
            carried = outs[1 : 1 + n_state]
            collected.append(outs[1 + n_state :])
            i += 1
        n_out = len(body.output) - 1 - n_state
        if n_out and not collected:
            raise NotImplementedError("a Loop that runs no iteration has scan outputs of no known shape")
        return [*carried, *(torch.stack([c[j] for c in collected]) for j in range(n_out))]


BRANCH_BINARY = ("Add", "Sub", "Mul", "Max", "Min")
BRANCH_UNARY = ("Identity", "Relu", "Abs", "Neg", "Tanh", "Sigmoid", "Sin", "Cos")
"""What a branch computes from the outer values it reads: ops defined on every finite input."""


@dataclass(frozen=True)
class BranchPlan:
    """One branch: `unary(binary(x, w))`, or `unary(x)` when it reads no weight."""

    binary: str | None
    unary: str

    @classmethod
    def draw(cls, rng: random.Random, dtype: DType, opset: int) -> BranchPlan:
        binary = rng.choice(typed_ops(BRANCH_BINARY, dtype, opset)) if rng.random() < 0.6 else None
        return cls(binary, rng.choice(typed_ops(BRANCH_UNARY, dtype, opset)))


@register
class If(OpSpec):
    """An If whose two branches transform the same outer tensor (and an outer weight) into
    one of its shape, as an exported `torch.cond` does. The condition is a graph input of
    fixed value, which a compiler cannot fold, or a constant, which it folds into the branch
    taken (constant folding into a branch). The branches read the outer tensors they
    transform from the enclosing graph: what a subgraph captures is where converters and
    optimizers take their own paths."""

    op_type = "If"
    arity = 1
    min_rank = 0
    max_rank = 4
    dtypes = FLOATS_32_FIRST
    since_opset = 11
    reference_since = 11

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.taken = self.rng.random() < 0.5
        self.folded = self.rng.random() < 0.4
        """The condition is a constant (else a graph input holding `taken`)."""
        self.branches = (
            BranchPlan.draw(self.rng, ins[0].dtype, sc.opset),
            BranchPlan.draw(self.rng, ins[0].dtype, sc.opset),
        )

    @classmethod
    def schema_allows(cls, opset: int, ins: Sequence[TType]) -> bool:
        """The schema types the outputs, not the condition: any tensor type."""
        return True

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(ins[0].dtype, list(ins[0].shape))]

    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        dtype = self.inputs[0].dtype
        shape = [em.ival(d) for d in self.inputs[0].shape]
        weight = em.weight(shape, dtype) if any(b.binary for b in self.branches) else ""
        graphs = []
        for side, plan in zip(("then", "else"), self.branches, strict=True):
            b = _Body(f"{outs[0]}_{side}")
            x = b.op(plan.binary, [ins[0], weight], "mixed") if plan.binary else ins[0]
            y = b.op(plan.unary, [x], "out")
            graphs.append(b.graph([], [_value(y, dtype, shape)]))
        flag = np.array(self.taken)
        cond = em.const(flag) if self.folded else em.runtime(flag)
        em.node("If", [cond], outs, then_branch=graphs[0], else_branch=graphs[1])

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        names = attrs.get(CAPTURED, ())
        outer = dict(zip(names, inputs[1:], strict=True))
        branch = attrs["then_branch"] if bool(inputs[0].reshape(-1)[0]) else attrs["else_branch"]
        return run_body(branch, [], outer)
