"""The torch reference: an eager interpreter of ONNX graphs built from the operator
registry, so any graph of registered ops runs on it, including reduced ones that
the generator never produced as such."""

from __future__ import annotations

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from generator.ops import registry
from generator.ops.base import node_attrs


class ReferenceError(Exception):
    """The reference cannot compute this model (an unregistered op, a bad attribute)."""


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(a, copy=True))


def run_reference(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    specs = registry()
    env: dict[str, torch.Tensor] = {i.name: _tensor(numpy_helper.to_array(i)) for i in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in inputs:
            env[inp.name] = _tensor(inputs[inp.name])
        elif inp.name not in env:
            raise ReferenceError(f"no value for graph input {inp.name!r}")
    with torch.no_grad():
        for node in model.graph.node:
            if node.domain not in ("", "ai.onnx") or node.op_type not in specs:
                raise ReferenceError(f"op {node.domain or 'ai.onnx'}::{node.op_type} has no reference")
            try:
                args = [env[name] if name else None for name in node.input]
            except KeyError as e:
                raise ReferenceError(f"node {node.name!r} reads undefined tensor {e}") from e
            try:
                results = specs[node.op_type].reference(node_attrs(node), args)  # type: ignore[arg-type]
            except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError) as e:
                raise ReferenceError(f"{node.op_type} node {node.name!r}: {type(e).__name__}: {e}") from e
            for name, value in zip(node.output, results, strict=False):
                if name:
                    env[name] = value
    return {o.name: env[o.name].numpy() for o in model.graph.output}
