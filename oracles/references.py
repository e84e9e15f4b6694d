"""The computations a case is judged against, none of them the system under test.

In order of trust: the torch reference (fuzzbot's interpreter of the op registry), then
`onnx.reference` (an independent reading of the spec) where torch cannot compute a
model, then, in a two-build campaign, base as the reference for head (DeepDiffer's
oracle: head must not move away from base). Crashes, hangs and compile errors need none
of these. When the two references disagree on a wrong result, a third computation breaks
the tie: the torch reference re-run with every float tensor in float64, which neither
reference's rounding nor any backend's code shares; the reading closer to it wins.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from backends.memory import over_bound
from backends.reference import ReferenceError, RefusedForm, run_reference, trace_reference
from generator.ops.narrow import as_numpy
from generator.spec_constraints import undefined_keys, violations
from oracles.provenance import tensor_dtypes


class Source(StrEnum):
    """Which computation judged a case's values."""

    torch = "torch"
    onnx_reference = "onnx.reference"
    base = "base"
    """No reference could compute the case: head was compared with base (two builds)."""
    none = "none"
    """Nothing could judge its values: only crashes, hangs and compile errors count."""


@dataclass(frozen=True)
class Reading:
    """A case's reference outputs and where they came from; `gap` says why the torch
    reference could not give them, and `gap_op` which op type it stopped at (counted per
    op type in summary.json, so the reference's holes show up)."""

    outputs: dict[str, np.ndarray] | None
    source: Source
    gap: str = ""
    gap_op: str = ""
    warnings: int = 0
    """Warnings onnx.reference raised computing it (numpy's overflow, invalid value)."""


def read_reference(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> Reading:
    """The torch reference, else onnx.reference, else nothing."""
    trace = trace_reference(model, inputs)
    if trace.error is None:
        return Reading({o.name: as_numpy(trace.env[o.name]) for o in model.graph.output}, Source.torch)
    index = trace.failed_node
    op = model.graph.node[index].op_type if index is not None else "graph input"
    if isinstance(trace.error, RefusedForm):  # onnx.reference reads old versions by newer meanings
        return Reading(None, Source.none, str(trace.error), op)
    warned: Counter[str] = Counter()
    second, why = onnx_reference(model, inputs, warned)
    if second is not None:
        return Reading(second, Source.onnx_reference, str(trace.error), op, warned.total())
    return Reading(None, Source.none, f"{trace.error}; {why}", op, warned.total())


def onnx_reference(
    model: onnx.ModelProto, inputs: Mapping[str, np.ndarray], warned: Counter[str] | None = None
) -> tuple[dict[str, np.ndarray] | None, str]:
    """onnx.reference's outputs, or None and why it could not compute them (one line)."""
    try:
        with counted_warnings(warned):
            values = ReferenceEvaluator(model).run(None, dict(inputs))
    except Exception as e:  # any evaluator failure means "no reading", but one past the memory bound
        if over_bound(e):
            raise  # past the bot's bound (backends.memory): the case is dropped, not judged without a reading
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return None, f"onnx.reference failed: {type(e).__name__}: {first}"[:300]
    names = [o.name for o in model.graph.output]
    return {n: np.asarray(v) for n, v in zip(names, values, strict=True)}, ""


@contextmanager
def counted_warnings(warned: Counter[str] | None) -> Iterator[None]:
    """onnx.reference's numpy warnings (a division by zero on an undefined input) counted in
    `warned` as RuntimeWarnings, never printed: a log full of them reads as errors.

    Counted through numpy's error state, which is the calling thread's own (numpy 2), not
    through `warnings.catch_warnings`, which swaps the process's one filter list: two triage
    threads inside it at once restored each other's lists, and left "always" in front for
    the rest of the campaign, so every later warning was printed (ResourceWarnings at exit)
    and one thread's warnings were counted by another."""

    def count(kind: str, flag: int) -> None:
        if warned is not None:
            warned["RuntimeWarning"] += 1

    with np.errstate(divide="call", over="call", invalid="call", call=count):
        yield


_WIDE = {t: TensorProto.DOUBLE for t in (TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.BFLOAT16)}
_DTYPE_ATTRS = ("to", "dtype")
"""Attributes that name an element type (Cast's `to`, EyeLike's and RandomX's `dtype`)."""


def as_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same graph with every float tensor, float constant and arithmetic in float64:
    what the computation means without the rounding of narrower types. An explicit Cast to
    a narrower float still rounds there (it is part of the model's meaning, not rounding
    noise): it becomes that Cast followed by a Cast back to float64."""
    narrow = {name: helper.np_dtype_to_tensor_dtype(np.dtype(d)) for name, d in tensor_dtypes(model).items()}
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    _widen_graph(wide.graph, narrow)
    return wide


def _widen_graph(g: onnx.GraphProto, narrow: Mapping[str, int]) -> None:
    """`as_float64` on one graph, and on every subgraph a node holds (a Loop's or Scan's
    body): a body left narrow would meet widened outer values and not run at all."""
    for value in (*g.input, *g.output, *g.value_info):
        t = value.type.tensor_type
        t.elem_type = _WIDE.get(t.elem_type, t.elem_type)
    for init in g.initializer:
        _widen_tensor(init)
    nodes: list[onnx.NodeProto] = []
    for node in g.node:
        target = _narrowing_target(node, narrow)
        for attr in node.attribute:
            if attr.name in _DTYPE_ATTRS and attr.type == onnx.AttributeProto.INT and target is None:
                attr.i = _WIDE.get(attr.i, attr.i)
            elif attr.type == onnx.AttributeProto.TENSOR:
                _widen_tensor(attr.t)
            elif attr.type == onnx.AttributeProto.GRAPH:
                _widen_graph(attr.g, narrow)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    _widen_graph(sub, narrow)
        if node.op_type in FLOAT32_OPS:
            nodes.extend(_at_float32(node, narrow))
            continue
        if target is None:
            nodes.append(node)
            continue
        rounded = f"{node.output[0]}__rounded"
        nodes.append(helper.make_node("Cast", [node.input[0]], [rounded], to=target, name=node.name))
        nodes.append(helper.make_node("Cast", [rounded], [node.output[0]], to=TensorProto.DOUBLE))
    del g.node[:]
    g.node.extend(nodes)


FLOAT32_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})
"""Ops whose float side is float32 by definition (a scale, the data a scale divides): they
have no float64 meaning, so the float64 re-run computes them at float32, as the model
does, and widens what comes out. Without this the re-run could not compute a
DequantizeLinear -> MatMul at all, and a missing reading once set a real regression aside."""


def _at_float32(node: onnx.NodeProto, dtypes: Mapping[str, int]) -> list[onnx.NodeProto]:
    """`node` computed at float32 in the widened graph: its float inputs cast down, its float
    outputs cast back up under their own names."""
    floats = {TensorProto.FLOAT, TensorProto.DOUBLE}
    before: list[onnx.NodeProto] = []
    after: list[onnx.NodeProto] = []
    narrow = onnx.NodeProto()
    narrow.CopyFrom(node)
    for i, name in enumerate(node.input):
        if name and dtypes.get(name) == TensorProto.FLOAT:
            narrow.input[i] = f"{name}__float32_for_{node.output[0]}"
            before.append(helper.make_node("Cast", [name], [narrow.input[i]], to=TensorProto.FLOAT))
    for i, name in enumerate(node.output):
        if name and dtypes.get(name) in floats:
            narrow.output[i] = f"{name}__float32"
            after.append(helper.make_node("Cast", [narrow.output[i]], [name], to=TensorProto.DOUBLE))
    return [*before, narrow, *after]


def _narrowing_target(node: onnx.NodeProto, dtypes: Mapping[str, int]) -> int | None:
    """The narrower float type a Cast or CastLike rounds to, or None."""
    if node.op_type == "Cast":
        to = next((a.i for a in node.attribute if a.name == "to"), None)
    elif node.op_type == "CastLike" and len(node.input) > 1:
        to = dtypes.get(node.input[1])
    else:
        return None
    return to if to in _WIDE else None


def _widen_tensor(t: onnx.TensorProto) -> None:
    if t.data_type in _WIDE:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))


def float64_reference(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """The torch reference of the float64 version of the case, or None when it cannot run."""
    wide = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in inputs.items()}
    try:
        return run_reference(as_float64(model), wide)
    except ReferenceError:
        return None


def distance(a: np.ndarray, b: np.ndarray, where: np.ndarray | None = None) -> float:
    """How far two readings of one output are apart (summed over `where`, or everywhere):
    absolute difference for floats (NaN against a number counts as infinitely far),
    differing elements otherwise."""
    if a.shape != b.shape:
        return float("inf")
    mask = np.ones(a.shape, bool) if where is None else where
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        x, y = a.astype(np.float64)[mask], b.astype(np.float64)[mask]
        both_nan = np.isnan(x) & np.isnan(y)
        with np.errstate(invalid="ignore"):
            d = np.where(both_nan, 0.0, np.abs(x - y))
        return float(np.nan_to_num(d, nan=np.inf).sum())
    return float((a[mask] != b[mask]).sum())


def invalid_by_reference(model: onnx.ModelProto, reference: Mapping[str, np.ndarray] | None) -> str | None:
    """Why a model is not valid ONNX by an independent check, or None: the reference must
    compute it, into outputs of the element types and static dims the graph declares. The
    checker and strict shape inference pass models whose Slice has a step of 0, whose Resize
    sizes hold a 0 or whose Tile repeats miss a dim; the reference refuses them."""
    if reference is None:
        return "the reference cannot compute it"
    for out in model.graph.output:
        value = reference.get(out.name)
        if value is None:
            return f"the reference gives no value for output {out.name!r}"
        t = out.type.tensor_type
        if t.elem_type and helper.tensor_dtype_to_np_dtype(t.elem_type) != value.dtype:
            return f"output {out.name!r} is {value.dtype}, declared {helper.tensor_dtype_to_np_dtype(t.elem_type)}"
        if t.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
            if len(dims) != value.ndim or any(d is not None and d != n for d, n in zip(dims, value.shape, strict=True)):
                return f"output {out.name!r} has shape {list(value.shape)}, declared {dims}"
    return None


UNFED_TYPES = frozenset({TensorProto.BFLOAT16})
"""Element types no build's binding takes or gives as a graph input or output: a generated
model casts into and out of them inside the graph (generator.emit.BF16_BOUNDARY)."""


def unfed_boundary(model: onnx.ModelProto) -> str | None:
    """Why a reduction candidate cannot be run as it stands (a cut left a bfloat16 tensor as
    a graph input or output), or None."""
    for side, values in (("input", model.graph.input), ("output", model.graph.output)):
        for v in values:
            if v.type.tensor_type.elem_type in UNFED_TYPES:
                return f"{v.name!r} is a bfloat16 graph {side}"
    return None


@dataclass(frozen=True)
class Validity:
    """What a reduction candidate must keep of the original's validity (bot.reduce): when the
    reference computed the original, the reference must compute the candidate
    (`invalid_by_reference`); when the original had no empty output, neither may the
    candidate. A reduction once shrank a Resize's input dim to 1 under a scale of 0.75, so
    that TVM's bug (a channel scale ignored) showed on an output of 0 elements, a model no
    maintainer takes for the one the campaign found.

    Nor may a candidate hold a form the schema text leaves undefined and the checker lets
    pass (generator.spec_constraints: a DFT input whose last dim is 3, an AffineGrid theta
    that is not N x 2 x 3 for a 4-element size) unless the original held it too: a reduced
    model a backend fails on for saying nothing the spec defines is no bug report. The
    original's forms are kept by op and constraint, not node name, since reduction renames
    nodes; `undefined` None (nothing recorded of an original) checks none."""

    computed: bool = False
    empty_ok: bool = True
    undefined: frozenset[str] | None = None

    @classmethod
    def of(cls, model: onnx.ModelProto, reference: Mapping[str, np.ndarray] | None) -> Validity:
        computed = invalid_by_reference(model, reference) is None
        empty = reference is not None and any(v.size == 0 for v in reference.values())
        return cls(computed=computed, empty_ok=not computed or empty, undefined=undefined_keys(model))

    def refuses(self, model: onnx.ModelProto, reference: Mapping[str, np.ndarray] | None) -> str | None:
        """Why a candidate is no candidate, or None."""
        crossing = unfed_boundary(model)
        if crossing is not None:
            return crossing
        if self.undefined is not None:
            new = next((v for v in violations(model) if v.constraint.key not in self.undefined), None)
            if new is not None:
                return f"it holds a form the schema leaves undefined, which the original did not: {new.line()}"
        if not self.computed:
            return None
        why = invalid_by_reference(model, reference)
        if why is None and not self.empty_ok and reference is not None:
            empty = next((name for name, v in reference.items() if v.size == 0), None)
            why = f"output {empty!r} is empty, and the original's outputs were not" if empty else None
        return why
