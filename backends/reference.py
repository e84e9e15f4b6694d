"""The torch reference: an eager interpreter of ONNX graphs built from the operator
registry, so any graph of registered ops runs on it, including reduced ones that
the generator never produced as such.

Besides the plain run, the oracles ask it three things no backend can be trusted to
answer about itself: every intermediate tensor (`trace_reference`, where undefined
inputs and false-positive evidence are read), the same graph with float16 arithmetic
kept in float32 (`widen_float16`, the other edge of the precision envelope backends may
legitimately land in), and the graph with some nodes computed another way
(`substitute`, how a rule shows that a tie or a NaN choice explains a difference).

A node means what its op's version says: the version is the schema in force at the
model's default-domain opset (Softmax-11 normalizes a flattened tail, Softmax-13 one axis),
and a version or form the registry does not compute is refused (`refusals`), never read
as the current one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from backends.memory import over_bound
from generator.ops import registry
from generator.ops.base import CAPTURED, OLDEST_OPSET, Attrs, OpSpec, Unending, node_attrs, op_version
from generator.ops.narrow import as_numpy, as_torch
from generator.ops.unsigned import carried


class ReferenceError(Exception):
    """The reference cannot compute this model (an unregistered op, a bad attribute)."""


class RefusedForm(ReferenceError):
    """The model holds an op version or form whose meaning the reference does not compute:
    any reading of it would be another version's, so nothing may judge by it."""


Substitute = Callable[[Attrs, list[torch.Tensor | None]], list[torch.Tensor]]
"""Another computation for one node: attributes and inputs in, outputs out."""

ROUNDING_OPS = frozenset({"Cast", "CastLike"})
"""Ops whose float16 result is a rounding the graph asks for: kept even when widening."""


def _tensor(a: np.ndarray) -> torch.Tensor:
    return as_torch(a)  # int4, uint4 and float8 initializers on their stand-ins (generator.ops.narrow)


@dataclass
class Trace:
    """Every tensor the reference computed, up to the first node it could not compute."""

    env: dict[str, torch.Tensor] = field(default_factory=dict)
    error: ReferenceError | None = None
    failed_node: int | None = None
    """Index into graph.node of the node that raised, when one did."""
    widened: dict[str, torch.dtype] = field(default_factory=dict)
    """Tensors that stand for float16 or bfloat16 values (which of them) but were kept in
    float32 (widen_float16)."""

    def numpy(self, name: str) -> np.ndarray | None:
        t = self.env.get(name)
        return None if t is None else as_numpy(t)


def trace_reference(
    model: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    *,
    widen_float16: bool = False,
    substitute: Mapping[int, Substitute] | None = None,
) -> Trace:
    """Run the graph node by node and keep every tensor; a node that cannot be computed
    ends the walk, recorded in the trace rather than raised (what came before it is
    still evidence). `substitute` maps node indices to another computation."""
    specs = registry()
    opset = model_opset(model)
    trace = Trace(env={i.name: _tensor(numpy_helper.to_array(i)) for i in model.graph.initializer})
    for inp in model.graph.input:
        if inp.name in inputs:
            trace.env[inp.name] = _tensor(inputs[inp.name])
        elif inp.name not in trace.env:
            trace.error = ReferenceError(f"no value for graph input {inp.name!r}")
            return trace
    with torch.no_grad():
        for index, node in enumerate(model.graph.node):
            try:
                _step(node, opset, specs, trace, widen_float16, (substitute or {}).get(index))
            except ReferenceError as e:
                trace.error, trace.failed_node = e, index
                return trace
    return trace


def model_opset(model: onnx.ModelProto) -> int:
    """The default-domain opset the model imports (the newest onnx knows, when it names none)."""
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return versions[0] if versions else onnx.defs.onnx_opset_version()


def _resolve(node: onnx.NodeProto, opset: int, specs: dict[str, type[OpSpec]]) -> tuple[type[OpSpec], int, Attrs]:
    """The node's spec, op version and attributes; RefusedForm when its meaning at that
    version is not the reference's to compute."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in specs:
        raise ReferenceError(f"op {node.domain or 'ai.onnx'}::{node.op_type} has no reference")
    if opset < OLDEST_OPSET:
        raise RefusedForm(f"opset {opset} is older than the reference computes (opset {OLDEST_OPSET} on)")
    try:
        version = op_version(node.op_type, opset)
    except onnx.defs.SchemaError as e:
        raise RefusedForm(f"op {node.op_type} does not exist at opset {opset}") from e
    spec, attrs = specs[node.op_type], node_attrs(node, version)
    why = spec.refusal(version, attrs)
    if why is not None:
        raise RefusedForm(f"node {node.name!r}: {why}")
    return spec, version, attrs


def refusals(model: onnx.ModelProto) -> list[str]:
    """Why the reference refuses each node it refuses, read from the graph alone (no
    values): a model with any must not be judged by the reference, nor by another
    reference standing in for it (that would hide a hole as a verdict)."""
    specs, opset, out = registry(), model_opset(model), []
    for node in model.graph.node:
        try:
            _resolve(node, opset, specs)
        except RefusedForm as e:
            out.append(str(e))
        except ReferenceError:
            continue  # an op without a reference: onnx.reference stands in, as it always has
    return out


def _step(
    node: onnx.NodeProto,
    opset: int,
    specs: dict[str, type[OpSpec]],
    trace: Trace,
    widen: bool,
    other: Substitute | None,
) -> None:
    spec, version, attrs = _resolve(node, opset, specs)
    try:
        reads = (*node.input, *attrs.get(CAPTURED, ()))  # an If's branches read outer tensors
        args: list[torch.Tensor | None] = [trace.env[name] if name else None for name in reads]
    except KeyError as e:
        raise ReferenceError(f"node {node.name!r} reads undefined tensor {e}") from e
    # Widening: an op (not a cast, whose 16-bit float result is a rounding the graph asks
    # for) with float16 or bfloat16 operands computes in float32, and its float32 results
    # stand for the narrow type.
    halves = [h for h in (_half(a, n, trace) for a, n in zip(args, reads, strict=True)) if h is not None]
    wide = widen and node.op_type not in ROUNDING_OPS and bool(halves)
    if wide:
        args = [a.float() if a is not None and a.dtype in HALF_FLOATS else a for a in args]
    compute = carried(node.op_type, other or cast(Substitute, spec.reference_at(version)))
    try:
        results = compute(attrs, args)
    except Unending as e:  # no other reading either: onnx.reference would run it until memory runs out
        raise RefusedForm(f"{node.op_type} node {node.name!r}: {e}") from e
    except (RuntimeError, ValueError, TypeError, LookupError, NotImplementedError, ZeroDivisionError) as e:
        if over_bound(e):
            raise  # the case asks more than the bot's bound (backends.memory), not a gap in the reference
        raise ReferenceError(f"{node.op_type} node {node.name!r}: {type(e).__name__}: {e}") from e
    missing = [name for name in node.output[len(results) :] if name]
    if missing:
        raise ReferenceError(f"{node.op_type} node {node.name!r}: the reference gives no value for {missing}")
    for name, value in zip(node.output, results, strict=False):
        if name:
            trace.env[name] = value
            if wide and value.dtype == torch.float32:
                trace.widened[name] = halves[0]


HALF_FLOATS = (torch.float16, torch.bfloat16)


def _half(arg: torch.Tensor | None, name: str, trace: Trace) -> torch.dtype | None:
    """The 16-bit float type `arg` holds or stands for, if any."""
    if arg is None:
        return None
    return arg.dtype if arg.dtype in HALF_FLOATS else trace.widened.get(name)


def run_reference(
    model: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    *,
    widen_float16: bool = False,
    substitute: Mapping[int, Substitute] | None = None,
) -> dict[str, np.ndarray]:
    """The graph outputs; raises ReferenceError when some node cannot be computed. With
    `widen_float16`, float16 outputs kept wider are rounded to float16 once, at the end."""
    trace = trace_reference(model, inputs, widen_float16=widen_float16, substitute=substitute)
    if trace.error is not None:
        raise trace.error
    out: dict[str, np.ndarray] = {}
    for o in model.graph.output:
        value = trace.env[o.name]
        if o.name in trace.widened:
            value = value.to(trace.widened[o.name])
        out[o.name] = as_numpy(value)
    return out
