"""An ONNX graph as a torch module, built from the generator's operator registry.

The forward pass walks the nodes in order and calls each op's eager torch semantics,
the same functions the reference interpreter calls. Dynamo unrolls that loop while
tracing (the node list is fixed per module), so the compiled graph holds only the
tensor operations. Initializers become buffers, as the weights of a real model would.
"""

from __future__ import annotations

from typing import Any

import onnx
import torch
from onnx import TensorProto, numpy_helper

from generator.ops import registry
from generator.ops.base import node_attrs
from generator.ops.narrow import as_torch

NARROW = frozenset({"INT4", "UINT4", "FLOAT8E4M3FN", "FLOAT8E5M2"})
"""Element types a model holds between Q/DQ pairs (generator.ops.narrow) that the module's
buffers cannot hold: the builder declines them, in the words the adapter reads as unsupported."""


def _arrays(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: as_torch(numpy_helper.to_array(v)) if isinstance(v, TensorProto) else v for k, v in attrs.items()}


class OnnxModule(torch.nn.Module):
    def __init__(self, model: onnx.ModelProto) -> None:
        super().__init__()
        specs = registry()
        nodes = model.graph.node
        unknown = sorted({n.op_type for n in nodes if n.domain not in ("", "ai.onnx") or n.op_type not in specs})
        if unknown:
            raise NotImplementedError(f"op(s) not supported by the torch module builder: {', '.join(unknown)}")
        narrow = sorted({TensorProto.DataType.Name(t.data_type) for t in model.graph.initializer} & NARROW)
        if narrow:
            raise NotImplementedError(f"element type(s) not supported by the torch module builder: {', '.join(narrow)}")
        # Tensor attributes (ConstantOfShape's value) as tensors now: Dynamo asserts on a
        # numpy array it meets in the traced forward ("Expected np.nditer base").
        self.steps = [
            (specs[n.op_type].reference, _arrays(node_attrs(n)), list(n.input), list(n.output))
            for n in model.graph.node
        ]
        self.buffer_of: dict[str, str] = {}
        for i, init in enumerate(model.graph.initializer):
            self.buffer_of[init.name] = f"w{i}"
            self.register_buffer(f"w{i}", as_torch(numpy_helper.to_array(init)))  # bfloat16 weights too
        self.input_names = [i.name for i in model.graph.input if i.name not in self.buffer_of]
        self.output_names = [o.name for o in model.graph.output]

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        env: dict[str, torch.Tensor] = {name: getattr(self, buf) for name, buf in self.buffer_of.items()}
        env.update(zip(self.input_names, args, strict=True))
        for reference, attrs, inputs, outputs in self.steps:
            operands: list[Any] = [env[n] if n else None for n in inputs]  # None: an omitted optional input
            results = reference(attrs, operands)
            for name, value in zip(outputs, results, strict=False):
                if name:
                    env[name] = value
        return tuple(env[n] for n in self.output_names)
