"""A node replaced by its op's function body, as a build without a kernel for the op runs it.

onnxruntime runs an op it has no kernel for (ReduceLogSum at some opsets and types, the
Reduce ops' `noop_with_empty_axes` forms, HardSigmoid) as the schema's function body,
inlined at load. A wrong output is then made by the body's last node: a campaign on 1.17.3
-> 1.18.0 named one Reduce defect by `Log`, the last node of ReduceLogSum's body, where the
same defect reached directly was named by its ReduceSum. Expanded in the model, the body's
tensors are the graph's own, and the first wrong one names the kernel the defect is in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx
import onnx.defs
import onnx.inliner
from onnx import helper, numpy_helper

_PRIVATE = "fuzzbot.function_body"
"""The domain the expanded node is moved to, so that the inliner takes it and no other."""


def body_ops(model: onnx.ModelProto, node: onnx.NodeProto, types: Mapping[str, int]) -> set[str] | None:
    """The op types of `node`'s function body at the model's opset, or None where it has none."""
    body = _function(model, node, types)
    return None if body is None else {n.op_type for n in body.node}


def expand(model: onnx.ModelProto, index: int, types: Mapping[str, int]) -> onnx.ModelProto | None:
    """The model with its node `index` replaced by the node's function body (attributes the
    body refers to resolved from the node's, internal tensors renamed apart), or None where
    the op has no body at the model's opset or the inliner cannot expand it. `types`: each
    tensor's element type, which a context-dependent body (Clip's) is made for."""
    body = _function(model, model.graph.node[index], types)
    if body is None:
        return None
    calling = onnx.ModelProto()
    calling.CopyFrom(model)
    calling.graph.node[index].domain = body.domain = _PRIVATE
    calling.graph.node[index].op_type = body.name = "expanded"
    calling.functions.append(body)
    calling.opset_import.append(helper.make_opsetid(_PRIVATE, 1))
    try:
        expanded = onnx.inliner.inline_selected_functions(calling, [(_PRIVATE, "expanded")], exclude=False)
        kept = [o for o in expanded.opset_import if o.domain != _PRIVATE]
        del expanded.opset_import[:]
        expanded.opset_import.extend(kept)
        del expanded.functions[:]
        expanded.functions.extend(model.functions)
    except (RuntimeError, ValueError):
        return None
    left = any(n.domain == _PRIVATE for n in expanded.graph.node)
    return None if left else _constants_as_initializers(expanded)


_CONSTANT_VALUES: dict[str, Callable[[onnx.AttributeProto], np.ndarray]] = {
    "value_float": lambda a: np.array(a.f, np.float32),
    "value_floats": lambda a: np.array(list(a.floats), np.float32),
    "value_int": lambda a: np.array(a.i, np.int64),
    "value_ints": lambda a: np.array(list(a.ints), np.int64),
}


def _constants_as_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """A body's Constant nodes (HardSigmoid's alpha and beta) as initializers, which the
    reference reads, as every generated model holds its constants."""
    kept: list[onnx.NodeProto] = []
    for node in model.graph.node:
        attr = node.attribute[0] if node.op_type == "Constant" and len(node.attribute) == 1 else None
        if attr is not None and attr.name == "value":
            tensor = onnx.TensorProto()
            tensor.CopyFrom(attr.t)
            tensor.name = node.output[0]
            model.graph.initializer.append(tensor)
        elif attr is not None and attr.name in _CONSTANT_VALUES:
            model.graph.initializer.append(numpy_helper.from_array(_CONSTANT_VALUES[attr.name](attr), node.output[0]))
        else:
            kept.append(node)
    del model.graph.node[:]
    model.graph.node.extend(kept)
    return model


def _function(model: onnx.ModelProto, node: onnx.NodeProto, types: Mapping[str, int]) -> onnx.FunctionProto | None:
    domain = node.domain if node.domain != "ai.onnx" else ""
    names = (domain,) if domain else ("", "ai.onnx")
    opset = next((o.version for o in model.opset_import if o.domain in names), None)
    if opset is None:
        return None
    try:
        made = _body_bytes(onnx.defs.get_schema(node.op_type, opset, domain), opset, node, types)
    except (onnx.defs.SchemaError, RuntimeError, ValueError):
        return None
    if made is None:
        return None
    body = onnx.FunctionProto()
    body.ParseFromString(made)
    # The body is written at the opset its schema gave it one (HardSigmoid's at 18), which
    # the inliner refuses beside another; a build inlines it at the model's, as here.
    imported = {o.domain: o.version for o in model.opset_import}
    for o in body.opset_import:
        o.version = imported.get(o.domain, o.version)
    return body if body.node else None


def _body_bytes(schema: Any, opset: int, node: onnx.NodeProto, types: Mapping[str, int]) -> bytes | None:
    """The serialized body; `schema` is Any since onnx's type stubs lack its function API."""
    if schema.has_context_dependent_function:
        if any(t and t not in types for t in node.input):
            return None
        typed = [_typed(types[t]) if t else b"" for t in node.input]
        return bytes(schema.get_context_dependent_function_with_opset_version(opset, node.SerializeToString(), typed))
    if schema.has_function:
        return bytes(schema.get_function_with_opset_version(opset))
    return None


def _typed(elem: int) -> bytes:
    return bytes(helper.make_tensor_type_proto(elem, None).SerializeToString())


__all__ = ["body_ops", "expand"]
