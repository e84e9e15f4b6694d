"""What each graph output depends on: the op types in its ancestor cone, and the float
arithmetic whose rounding reaches it.

Tolerances and false-positive rules judge an output by what produced it. A float64
output computed by float16 arithmetic carries float16 rounding, so comparing it at float64
bounds reports rounding as a bug. But only inexact arithmetic rounds differently from one
backend to another: a Cast, data movement, selection (Max, Where, Relu), a comparison or
integer arithmetic gives the same bits everywhere from the same operands. So an output is
judged at the width of the narrowest inexact float computation behind it, and exactly
when there is none: a float32 -> float16 -> float32 round trip of an input must come back
rounded, and a backend that skips it is wrong by one float16 ulp, not within tolerance.
An op-type override (say, looser bounds wherever Softmax is involved) must reach the
outputs Softmax feeds and no others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import onnx
from onnx import helper

from generator import onnx_checks
from generator.values.unsafe import same_bits

_FLOAT_BITS = {"bfloat16": 8, "float16": 16, "float32": 32, "float64": 64}
"""A float type's rank by precision, narrowest first: its width, but 8 for bfloat16, whose
8 significant bits round coarser than float16's 11 though both are 16 bits wide."""
_BY_BITS = {rank: name for name, rank in _FLOAT_BITS.items()}
HALF_WIDTHS = frozenset({_FLOAT_BITS["bfloat16"], _FLOAT_BITS["float16"]})
"""The ranks of the 16-bit floats, whose arithmetic a backend may keep wider (oracles.case)."""

Rounding = int | None
"""The narrowest float width (bits) whose inexact arithmetic reaches a tensor; None: the
tensor is exact (the same bits in every correct backend, given the same inputs)."""


@dataclass
class Cone:
    """The ancestors of one graph output."""

    ops: set[str] = field(default_factory=set)
    nodes: set[int] = field(default_factory=set)
    """Indices into graph.node."""
    rounding: Rounding = None
    """The output's own rounding (see `rounding_widths`)."""

    @property
    def rounding_dtype(self) -> str | None:
        """The float type whose bounds judge the output; None: it must match exactly."""
        return None if self.rounding is None else _BY_BITS.get(self.rounding, "float16")


@cache
def _np_name(elem: int) -> str:
    """numpy's dtype `.name` is slow enough to show in a campaign's profile: read once per type."""
    return helper.tensor_dtype_to_np_dtype(elem).name


def tensor_dtypes(model: onnx.ModelProto) -> dict[str, str]:
    """numpy dtype names of every typed tensor, after shape inference fills in the middle."""
    try:
        inferred = onnx_checks.infer_shapes(model)
    except (onnx.shape_inference.InferenceError, RuntimeError):  # judge with what is declared
        inferred = model
    g = inferred.graph
    out: dict[str, str] = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        elem = vi.type.tensor_type.elem_type
        if elem:
            out[vi.name] = _np_name(elem)
    for init in g.initializer:
        out[init.name] = _np_name(init.data_type)
    return out


def rounding_widths(model: onnx.ModelProto, dtypes: dict[str, str] | None = None) -> dict[str, Rounding]:
    """Per tensor, the narrowest width of inexact float arithmetic behind it (None: exact).

    Graph inputs and constants are exact. An op that gives the same bits on the same
    operands (`generator.values.unsafe.same_bits`, or any op with an integer or boolean
    result) keeps its operands' rounding, narrowed to its own float type; any other op
    with a float result rounds at its own width. A result whose type shape inference
    could not tell is taken to round at float16's width: the loosest reading."""
    dtypes = dtypes if dtypes is not None else tensor_dtypes(model)
    widths: dict[str, Rounding] = {}
    for node in model.graph.node:
        carried = [w for w in (widths.get(i) for i in node.input if i) if w is not None]
        exact_op = same_bits(node.op_type, [True] * len(node.input))
        inner = _stash_bits(node)
        for out in node.output:
            bits = _FLOAT_BITS.get(dtypes[out]) if out in dtypes else 16
            own = [] if bits is None or (exact_op and not carried) else [min(bits, inner)]
            widths[out] = min([*carried, *own], default=None)
    return widths


_STASH_OPS = {"LayerNormalization": 1, "GroupNormalization": 1}
"""Ops whose `stash_type` (default: float32) is, by the ONNX spec, the precision of their
mean and variance: a float64 LayerNormalization may compute its statistics in float32,
so its result carries float32 rounding (onnxruntime's does)."""


def _stash_bits(node: onnx.NodeProto) -> int:
    """The width an op computes in inside, where its spec lets that be narrower than its
    result type; 64 (no narrowing) for every other op."""
    if node.op_type not in _STASH_OPS:
        return 64
    stash = next((a.i for a in node.attribute if a.name == "stash_type"), _STASH_OPS[node.op_type])
    name = helper.tensor_dtype_to_np_dtype(stash).name if stash else "float32"
    return _FLOAT_BITS.get(name, 16)


def output_cones(model: onnx.ModelProto) -> dict[str, Cone]:
    """The cone of every graph output (top-level graph; subgraphs count as their node)."""
    dtypes = tensor_dtypes(model)
    widths = rounding_widths(model, dtypes)
    producer = {name: i for i, n in enumerate(model.graph.node) for name in n.output if name}
    cones: dict[str, Cone] = {}
    for out in model.graph.output:
        cone = Cone(rounding=widths.get(out.name))
        stack = [out.name]
        seen: set[str] = set()
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            i = producer.get(name)
            if i is None:
                continue
            cone.nodes.add(i)
            cone.ops.add(model.graph.node[i].op_type)
            stack.extend(x for x in model.graph.node[i].input if x)
        cones[out.name] = cone
    return cones
