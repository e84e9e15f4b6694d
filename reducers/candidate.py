"""A reduction candidate (an ONNX model plus the input values it is run with) and its invariants.

Every candidate a pass proposes goes through `finalize`: value_info is dropped and
re-inferred, and the ONNX checker (full check, with strict shape inference) must
accept it. A candidate it refuses is never shown to the predicate, so invalid
models neither cost a test nor make a backend crash for the wrong reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from generator.onnx_checks import check_model, infer_shapes

TensorValues = Callable[[onnx.ModelProto, dict[str, np.ndarray]], dict[str, np.ndarray]]
"""Values of every tensor a model computes (node outputs, inputs, initializers) for
given inputs. The reducer calls it once per accepted model, to feed tensors it cuts
with the values they had, so a wrong-result bug keeps its operands."""


@dataclass(frozen=True)
class Candidate:
    """A model and the inputs it runs with, as the reducer tests it: the original failing
    one and every smaller one a pass proposes (the generator's output is
    generator.api.GeneratedCase; the bot's runnable case, bot.cases.making.Prepared)."""

    model: onnx.ModelProto
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    """Values for graph inputs; may be empty when an external check makes its own."""

    def key(self) -> str:
        """Content hash: same model and inputs, same answer, whichever pass built it."""
        h = hashlib.sha256(self.model.SerializeToString(deterministic=True))
        for name in sorted(self.inputs):
            a = np.ascontiguousarray(self.inputs[name])
            h.update(f"\0{name}\0{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
        return h.hexdigest()

    def shape_key(self) -> str:
        """Content hash with every name erased: candidates that differ only in tensor or
        node names (as after the renaming pass) share one cache entry. Names are
        assumed not to matter to a bug; the renaming pass itself is still tested."""
        m = onnx.ModelProto()
        m.CopyFrom(self.model)
        g = m.graph
        names: dict[str, str] = {}
        for name in [*(v.name for v in g.input), *(t.name for t in g.initializer)]:
            names.setdefault(name, f"v{len(names)}")
        for node in g.node:
            for out in node.output:
                names.setdefault(out, f"v{len(names)}")
        for node in g.node:
            node.name = ""
            node.input[:] = [names.get(x, x) for x in node.input]
            node.output[:] = [names.get(x, x) for x in node.output]
        for vi in [*g.input, *g.output, *g.value_info]:
            vi.name = names.get(vi.name, vi.name)
        for t in g.initializer:
            t.name = names.get(t.name, t.name)
        g.name = ""
        return Candidate(m, {names.get(k, k): v for k, v in self.inputs.items()}).key()

    @property
    def size(self) -> int:
        """Nodes, with those inside a node's subgraphs (an If's branches, a Loop's body):
        an If that hides a branch of ten nodes is no smaller than the ten."""
        return _nodes(self.model.graph)


def _nodes(g: onnx.GraphProto) -> int:
    inner = (sub for n in g.node for a in n.attribute for sub in ((a.g,) if a.HasField("g") else a.graphs))
    return len(g.node) + sum(_nodes(sub) for sub in inner)


def finalize(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """The model with re-inferred value_info, or None when the checker refuses it."""
    del model.graph.value_info[:]
    try:
        inferred = infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        check_model(inferred, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError, ValueError, RuntimeError):
        return None
    return inferred


def tensor_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Declared or inferred type of every named tensor in the model."""
    try:
        inferred = infer_shapes(model)
    except (onnx.shape_inference.InferenceError, ValueError, RuntimeError):
        inferred = model
    g = inferred.graph
    types = {v.name: v.type for v in [*g.value_info, *g.input, *g.output]}
    for init in g.initializer:
        types.setdefault(init.name, helper.make_tensor_type_proto(init.data_type, list(init.dims)))
    return types


def value_info_for(name: str, value: np.ndarray | None, known: onnx.TypeProto | None) -> onnx.ValueInfoProto | None:
    """A graph input/output entry for `name`, typed by its value when there is one."""
    if value is not None:
        elem = helper.np_dtype_to_tensor_dtype(value.dtype)
        return helper.make_tensor_value_info(name, elem, list(value.shape))
    if known is not None and known.HasField("tensor_type"):
        vi = onnx.ValueInfoProto(name=name)
        vi.type.CopyFrom(known)
        return vi
    return None


def with_all_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose graph outputs are every node output: how reference executors are
    asked for intermediate values."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for node in m.graph.node:
        for out in node.output:
            if out and out not in have:
                m.graph.output.append(onnx.ValueInfoProto(name=out))
                have.add(out)
    return m


def onnx_reference_values(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`TensorValues` from onnx's own reference evaluator (no backend needed)."""
    from onnx.reference import ReferenceEvaluator

    full = with_all_outputs(model)
    names = [o.name for o in full.graph.output]
    # numpy's overflow and invalid-value warnings inside the evaluator: a reduction's log is
    # no place for them. numpy's error state is this thread's own; warnings.catch_warnings
    # would swap the process's filters under every other thread.
    with np.errstate(all="ignore"):
        results = ReferenceEvaluator(full).run(None, inputs)
    values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    values.update(inputs)
    values.update({n: np.asarray(v) for n, v in zip(names, results, strict=True)})
    return values
