"""Where a model reads a graph input as a shape, a count, axes or indices rather than data.

A generated model may take a Tile's repeats or a Reshape's target shape as a graph input
(so that a compiler cannot fold it as a constant); fuzzbot then stores the value that
makes the model valid. A model handed over without its inputs has no such value, and a
value drawn like data (a repeat of -3, an index past the end) makes every build refuse the
model alike, which is no compiler bug. These are the operand slots whose values are not
data, the static shapes around them that say what a valid value is, and the graph inputs
that reach one of them only through other ops (a shape built by Concat).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from generator import onnx_checks

REDUCE_OPS = (
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
)

SLOTS: dict[str, dict[int, str]] = {
    "Tile": {1: "repeats"},
    "Reshape": {1: "shape"},
    "Expand": {1: "shape"},
    "Slice": {1: "starts", 2: "ends", 3: "axes", 4: "steps"},
    "TopK": {1: "k"},
    "Pad": {1: "pads", 3: "axes"},
    "Resize": {1: "roi", 2: "scales", 3: "sizes"},
    "Upsample": {1: "scales"},
    "ConstantOfShape": {0: "shape"},
    "Range": {0: "start", 1: "limit", 2: "delta"},
    "OneHot": {1: "depth"},
    "Unsqueeze": {1: "axes"},
    "Squeeze": {1: "axes"},
    "Split": {1: "split"},
    "Gather": {1: "indices"},
    "GatherElements": {1: "indices"},
    "GatherND": {1: "indices"},
    "Scatter": {1: "indices"},
    "ScatterElements": {1: "indices"},
    "ScatterND": {1: "indices"},
    "CumSum": {1: "axis"},
    "Trilu": {1: "k"},
    "CenterCropPad": {1: "shape"},
    "RoiAlign": {2: "batch_indices"},
    "Col2Im": {1: "image_shape", 2: "block_shape"},
    **{op: {1: "axes"} for op in REDUCE_OPS},
}
"""op type -> operand slot -> what the operand is, for every slot whose value must fit the
model's shapes (ONNX's shape-like, count, axis and index operands)."""

FIRST = ("axes", "axis", "starts", "steps", "start", "delta", "roi", "scales")
"""Roles decided before the others of their node: Slice's ends follow its axes, starts and
steps; Range's limit its start and delta; Pad's pads its axes."""

SHAPE_ONLY = frozenset({"Shape", "Size"})
"""Ops that read their input's shape, never its values: a path through one carries no value."""


@dataclass
class Site:
    """One operand slot of one node that a drawn graph input fills, and what is known
    around it: static shapes, and the values of the node's constant (or already chosen)
    operands."""

    node: onnx.NodeProto
    slot: int
    role: str
    dims: list[int]
    """The graph input's declared static dims."""
    dtype: np.dtype[Any]
    shapes: Mapping[str, list[int]]
    values: Mapping[str, np.ndarray]
    rng: np.random.Generator

    def shape(self, name: str) -> list[int] | None:
        return self.shapes.get(name) if name else None

    @property
    def data(self) -> list[int] | None:
        """The static shape of the node's first operand (the data it reshapes, pads, ...)."""
        return self.shape(self.node.input[0]) if self.node.input else None

    @property
    def out(self) -> list[int] | None:
        return self.shape(self.node.output[0]) if self.node.output else None

    @property
    def length(self) -> int:
        """How many values the operand holds."""
        return int(np.prod(self.dims)) if self.dims else 1

    def operand(self, slot: int) -> np.ndarray | None:
        """The value at another slot of the node, when it is a constant or already chosen."""
        name = self.node.input[slot] if slot < len(self.node.input) else ""
        return self.values.get(name) if name else None

    def attr(self, name: str, default: Any) -> Any:
        for a in self.node.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default


@dataclass(frozen=True)
class SiteRef:
    """A shape-like slot that graph inputs to be drawn fill: `operand` is the tensor in the
    slot, and `sources` the drawn inputs whose values flow into it (the operand itself when
    `direct`, else through other ops, such as a Concat that builds a Reshape's target)."""

    node: onnx.NodeProto
    slot: int
    role: str
    operand: str
    sources: tuple[str, ...]

    @property
    def direct(self) -> bool:
        return self.sources == (self.operand,)

    @property
    def what(self) -> str:
        return f"{self.node.op_type} {self.role}" + ("" if self.direct else ", through other ops")


def find_sites(model: onnx.ModelProto, drawn: set[str]) -> list[SiteRef]:
    """Where the graph inputs in `drawn` are read as shapes, counts, axes or indices, in
    graph order (a node's axes before its ends, see FIRST)."""
    sites: list[SiteRef] = []
    made_by = producers(model)
    for node in model.graph.node:
        slots = SLOTS.get(node.op_type, {})
        ordered = sorted(slots.items(), key=lambda kv: (kv[1] not in FIRST, kv[0]))
        for slot, role in ordered:
            name = node.input[slot] if slot < len(node.input) else ""
            sources = tuple(sorted(_sources(name, made_by, drawn))) if name else ()
            if sources:
                sites.append(SiteRef(node, slot, role, name, (name,) if name in drawn else sources))
    return sites


def producers(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    """Tensor name -> the node that computes it: what finding a slot's sources and tracing a
    value back to the drawn inputs (bot.cases.drawn_inputs) both walk."""
    return {out: node for node in model.graph.node for out in node.output}


def _sources(name: str, producers: Mapping[str, onnx.NodeProto], drawn: set[str]) -> set[str]:
    """The graph inputs in `drawn` whose values flow into tensor `name`."""
    found: set[str] = set()
    stack, seen = [name], set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current in drawn:
            found.add(current)
        node = producers.get(current)
        if node is not None and node.op_type not in SHAPE_ONLY:
            stack.extend(i for i in node.input if i)
    return found


def bake(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """The model with the graph inputs in `values` made initializers of those values."""
    baked = onnx.ModelProto()
    baked.CopyFrom(model)
    graph = baked.graph
    kept = [v for v in graph.input if v.name not in values]
    del graph.input[:]
    graph.input.extend(kept)
    graph.initializer.extend(numpy_helper.from_array(np.asarray(v), name) for name, v in values.items())
    return baked


def consistent(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> bool:
    """Whether ONNX's strict shape inference, with `values` as constants, finds no shape
    that differs from one the model declares: a Reshape target that makes a later output
    [918, 1] where [3, 6] is declared is no value for it."""
    try:
        onnx_checks.infer_shapes(bake(model, values), strict_mode=True, data_prop=True)
    except Exception:  # noqa: BLE001 - any inference error counts against the values
        return False
    return True


def static_shapes(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> dict[str, list[int]]:
    """Every tensor's fully static shape that the model declares or shape inference finds,
    with `values` (graph inputs already chosen) taken as constants, so that what follows a
    Reshape whose target is now known has a shape too."""
    baked = bake(model, values)
    try:
        inferred = onnx_checks.infer_shapes(baked, data_prop=True)
    except Exception:  # noqa: BLE001 - an inference that fails leaves the declared shapes
        inferred = baked
    shapes: dict[str, list[int]] = {}
    g = inferred.graph
    for v in (*g.input, *g.value_info, *g.output):
        dims = _static(v)
        if dims is not None:
            shapes[v.name] = dims
    for init in g.initializer:
        shapes[init.name] = list(init.dims)
    return shapes


def _static(v: onnx.ValueInfoProto) -> list[int] | None:
    t = v.type.tensor_type
    if not v.type.HasField("tensor_type") or not t.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
    return None if any(d < 0 for d in dims) else dims


def constants(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The model's initializers and Constant nodes' values, by tensor name."""
    values = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            for a in node.attribute:
                if a.name == "value":
                    values[node.output[0]] = numpy_helper.to_array(a.t)
    return values
