"""compile_graph: run the level's passes, then bind every node to its kernel up front,
so an unsupported op is reported at compile time rather than halfway through a run."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from .graph import Graph
from .kernels import Kernel, fused_mul_add, kernel
from .passes import Pass, fuse_mul_add

LEVELS: dict[str, tuple[Pass, ...]] = {
    "O0": (),
    "O1": (fuse_mul_add,),
}


@dataclass
class Step:
    fn: Kernel
    inputs: list[str]
    output: str


@dataclass
class Program:
    steps: list[Step]
    outputs: list[str]
    constants: dict[str, np.ndarray]

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        values = {**self.constants, **inputs}
        for step in self.steps:
            values[step.output] = step.fn(*(values[i] for i in step.inputs))
        return {name: np.asarray(values[name]) for name in self.outputs}


def _bind(op: str, attrs: dict[str, float]) -> Kernel:
    if op == "FusedMulAdd":
        return partial(fused_mul_add, sign=attrs.get("sign", 1.0))
    return kernel(op)


def compile_graph(graph: Graph, level: str) -> Program:
    for rewrite in LEVELS[level]:
        graph = rewrite(graph)
    for name, value in graph.constants.items():
        if value.dtype.kind not in "biuf":  # numpy's own numbers; bfloat16 and strings are not
            raise NotImplementedError(f"toycc: dtype {value.dtype} of {name} not supported")
    steps = []
    for node in graph.nodes:
        if len(node.outputs) != 1:
            raise NotImplementedError(f"toycc: op {node.op} not supported with {len(node.outputs)} outputs")
        steps.append(Step(_bind(node.op, node.attrs), node.inputs, node.outputs[0]))
    return Program(steps, graph.outputs, graph.constants)
