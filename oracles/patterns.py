"""Static facts about one model's graph that the known-false-positive rules ask for.

Everything here reads the ONNX graph only (no values), so a rule can reject a case by its
shape before anything is computed. The producer chain looks through pure data-movement
ops because a Reshape or a Transpose between a Sigmoid and a Floor copies the Sigmoid's
rounding unchanged: the discontinuity still sees an inexact operand.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

import onnx
from onnx import TensorProto

from generator import onnx_checks

DATA_MOVEMENT: dict[str, tuple[int, ...] | None] = {
    "Identity": (0,),
    "Reshape": (0,),
    "Transpose": (0,),
    "Squeeze": (0,),
    "Unsqueeze": (0,),
    "Flatten": (0,),
    "Expand": (0,),
    "Tile": (0,),
    "Slice": (0,),
    "Gather": (0,),
    "GatherElements": (0,),
    "GatherND": (0,),
    "DepthToSpace": (0,),
    "SpaceToDepth": (0,),
    "Split": (0,),
    "Concat": None,
}
"""Ops that copy elements without computing on them, and which inputs carry those elements
(None: every input). Their outputs have exactly their data inputs' bits."""

TIE_OPS: dict[str, tuple[int, bool]] = {
    "ArgMax": (0, True),
    "ArgMin": (0, False),
    "Hardmax": (-1, True),
    "TopK": (-1, True),
}
"""Op -> (default axis, largest first); TopK reads `largest` from its attributes."""

ANY_PRODUCER = "*"
"""In a producer list: any op that computes (not data movement, not a graph input or a
constant), so its result carries that op's rounding."""

FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16})
BOOL_TYPES = frozenset({TensorProto.BOOL})


def dtype_class(elem_type: int) -> str:
    """'float', 'int' or 'bool': the distinction the rules draw (a float-to-int Cast)."""
    if elem_type in FLOAT_TYPES:
        return "float"
    return "bool" if elem_type in BOOL_TYPES else "int"


def node_key(node: onnx.NodeProto, index: int) -> str:
    """How reports name a node: its name, or its position when it has none."""
    return repr(node.name) if node.name else f"#{index}"


@dataclass(frozen=True)
class NodeRef:
    index: int
    node: onnx.NodeProto

    @property
    def label(self) -> str:
        return f"{self.node.op_type} node {node_key(self.node, self.index)}"


class GraphView:
    """One model's graph, indexed once: producers, element types, and ancestor cones."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.nodes = [NodeRef(i, n) for i, n in enumerate(model.graph.node)]
        self.producer: dict[str, NodeRef] = {o: ref for ref in self.nodes for o in ref.node.output if o}

    @cached_property
    def op_types(self) -> frozenset[str]:
        return frozenset(ref.node.op_type for ref in self.nodes)

    @cached_property
    def elem_types(self) -> dict[str, int]:
        """Element type per tensor name, from the declarations and ONNX shape inference.

        A model shape inference rejects keeps its declared types only: a rule that needs an
        unknown type then does not match, which errs on the side of reporting."""
        graph = self.model.graph
        with contextlib.suppress(onnx.checker.ValidationError, onnx.shape_inference.InferenceError, RuntimeError):
            graph = onnx_checks.infer_shapes(self.model).graph
        types = {v.name: v.type.tensor_type.elem_type for v in (*graph.input, *graph.value_info, *graph.output)}
        types.update({t.name: t.data_type for t in graph.initializer})
        return {name: t for name, t in types.items() if t != TensorProto.UNDEFINED}

    def input_class(self, ref: NodeRef, slot: int = 0) -> str | None:
        if slot >= len(ref.node.input) or not ref.node.input[slot]:
            return None
        t = self.elem_types.get(ref.node.input[slot])
        return dtype_class(t) if t is not None else None

    def output_class(self, ref: NodeRef) -> str | None:
        t = self.elem_types.get(ref.node.output[0]) if ref.node.output else None
        return dtype_class(t) if t is not None else None

    def tensor_cone(self, outputs: Iterable[str]) -> frozenset[str]:
        """The tensors some of these output tensors depend on, themselves included."""
        found = set(outputs)
        for i in self.cone(outputs):
            found.update(x for x in self.nodes[i].node.input if x)
        return frozenset(found)

    def cone(self, outputs: Iterable[str]) -> frozenset[int]:
        """Indices of the nodes some of these output tensors depend on."""
        seen: set[int] = set()
        stack = [self.producer[o] for o in outputs if o in self.producer]
        while stack:
            ref = stack.pop()
            if ref.index in seen:
                continue
            seen.add(ref.index)
            stack.extend(self.producer[x] for x in ref.node.input if x in self.producer)
        return frozenset(seen)

    def sources(self, tensor: str) -> Iterator[NodeRef | None]:
        """The computing ops behind a tensor, looking through data movement; None for a
        graph input or a constant (data that no op of the graph rounded)."""
        seen: set[str] = set()
        stack = [tensor]
        while stack:
            name = stack.pop()
            if name in seen or not name:
                continue
            seen.add(name)
            ref = self.producer.get(name)
            if ref is None or ref.node.op_type in ("Constant", "ConstantOfShape"):
                yield None
            elif ref.node.op_type in DATA_MOVEMENT:
                slots = DATA_MOVEMENT[ref.node.op_type]
                ins = ref.node.input if slots is None else [ref.node.input[s] for s in slots if s < len(ref.node.input)]
                stack.extend(ins)
            else:
                yield ref

    def fed_by(self, ref: NodeRef, producers: frozenset[str]) -> NodeRef | None:
        """The first producer of one of `ref`'s inputs whose op type is listed (or any
        computing op for `*`), through data movement."""
        for tensor in ref.node.input:
            for src in self.sources(tensor):
                if src is not None and (ANY_PRODUCER in producers or src.node.op_type in producers):
                    return src
        return None
