"""Standalone repro scripts.

The script rebuilds the model with onnx.helper (no model file needed), embeds the
inputs and the reference outputs, runs the named backend at the named level, and
exits 1 while the bug is present, so it can serve as a bisection or CI check.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from backends.adapters.base import adapter_snippet
from backends.spec import BackendSpec, adapter_class
from oracles.tolerances import Tolerance, tolerance_for


def _array(a: np.ndarray) -> str:
    data = base64.b64encode(a.tobytes()).decode()
    return f"arr({a.dtype.str!r}, {list(a.shape)!r}, {data!r})"


def _attr(a: onnx.AttributeProto) -> str:
    v = helper.get_attribute_value(a)
    if isinstance(v, onnx.TensorProto):
        return f"numpy_helper.from_array({_array(numpy_helper.to_array(v))})"
    if isinstance(v, bytes):
        return repr(v.decode())
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return repr([x.decode() for x in v])
    return repr(v)


def _node(n: onnx.NodeProto) -> str:
    attrs = "".join(f", {a.name}={_attr(a)}" for a in n.attribute)
    domain = f", domain={n.domain!r}" if n.domain else ""
    return f"helper.make_node({n.op_type!r}, {list(n.input)!r}, {list(n.output)!r}, name={n.name!r}{domain}{attrs}),"


def _value_info(v: onnx.ValueInfoProto) -> str:
    t = v.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim]
    return f"helper.make_tensor_value_info({v.name!r}, {t.elem_type}, {dims!r}),"


def _block(lines: list[str], indent: str = "    ") -> str:
    return "\n".join(indent + line for line in lines)


_CHECK_AND_MAIN = """
def mismatches(name, want, got):
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{name}: expected {want.dtype}{list(want.shape)}, got {got.dtype}{list(got.shape)}"
    if want.dtype.kind not in "fc":
        bad = int((want != got).sum())
        return f"{name}: {bad} elements differ" if bad else None
    if not np.array_equal(np.isnan(want), np.isnan(got)) or not np.array_equal(np.isinf(want), np.isinf(got)):
        return f"{name}: NaN/Inf positions differ"
    atol, rtol = TOLERANCES[name]
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    bad = np.nan_to_num((err > atol) & (err > rtol * np.abs(want.astype(np.float64))))
    if bad.any():
        worst = np.nanmax(err)
        return f"{name}: {int(bad.sum())} elements beyond atol={atol} rtol={rtol}, max abs error {worst:.3g}"
    return None


def main():
    try:
        got = run(model.SerializeToString(), INPUTS)
    except Exception as e:
        print(f"BUG: {type(e).__name__}: {e}")
        return 1
    found = [mismatches(name, want, got.get(name, np.array([]))) for name, want in EXPECTED.items()]
    problems = [m for m in found if m]
    for p in problems:
        print("BUG:", p)
    if not problems:
        print("OK: outputs match the reference")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
""".lstrip("\n")
"""The fixed end of every repro: compare with the reference, exit 1 on a mismatch."""


def render_repro(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    expected: dict[str, np.ndarray],
    spec: BackendSpec,
    title: str,
    bounds: Mapping[str, Tolerance] | None = None,
) -> str:
    """`bounds`: the per-output tolerances the oracle judged with (default: by dtype)."""
    if spec.plugin:
        module, _, qualname = spec.adapter.partition(":")
        folder = str(Path(spec.plugin_file).parent) if spec.plugin_file else None
        snippet = adapter_snippet(module, qualname, spec.level, folder)
    else:
        snippet = adapter_class(spec.adapter).repro_snippet(spec.level)
    tols = {name: (bounds or {}).get(name) or tolerance_for(a.dtype) for name, a in expected.items()}
    opsets = ", ".join(f"helper.make_opsetid({o.domain!r}, {o.version})" for o in model.opset_import)
    head = f'''#!/usr/bin/env python3
"""fuzzbot repro: {title}

Backend: {spec.name}, level {spec.level}. Exits 1 while the bug is present, 0 once it is gone.
Needs numpy, onnx and the backend; nothing else.
"""
import base64
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper


def arr(dtype, shape, data):
    return np.frombuffer(base64.b64decode(data), dtype=np.dtype(dtype)).reshape(shape).copy()


'''
    body = f"""NODES = [
{_block([_node(n) for n in model.graph.node])}
]
INITIALIZERS = [
{_block([f"numpy_helper.from_array({_array(numpy_helper.to_array(i))}, {i.name!r})," for i in model.graph.initializer])}
]
GRAPH_INPUTS = [
{_block([_value_info(v) for v in model.graph.input])}
]
GRAPH_OUTPUTS = [
{_block([_value_info(v) for v in model.graph.output])}
]
INPUTS = {{
{_block([f"{k!r}: {_array(v)}," for k, v in inputs.items()])}
}}
EXPECTED = {{
{_block([f"{k!r}: {_array(v)}," for k, v in expected.items()])}
}}
TOLERANCES = {{
{_block([f"{k!r}: ({t.atol!r}, {t.rtol!r})," for k, t in tols.items()])}
}}

graph = helper.make_graph(NODES, "repro", GRAPH_INPUTS, GRAPH_OUTPUTS, initializer=INITIALIZERS)
model = helper.make_model(graph, opset_imports=[{opsets}], ir_version={model.ir_version})
onnx.checker.check_model(model)


{snippet}

"""
    return head + body + _CHECK_AND_MAIN
