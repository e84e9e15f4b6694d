"""What the sampling and region op families' tests share: comparing a generated single-op
model's reference with onnxruntime (optimizer off and on, a float copy where it has no double
kernel) and with onnx.reference, skipping each where a listed defect applies."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented

from backends.client import WorkerClient
from backends.reference import run_reference
from backends.results import Status
from generator.dtypes import DType
from generator.ops.base import OpSpec

Inputs = dict[str, np.ndarray]
Known = Callable[[onnx.NodeProto, onnx.ModelProto, int], bool]
"""(node, model, opset) -> whether a known defect applies."""
Defects = Mapping[str, tuple[str, Known]]
"""op -> (why an oracle is wrong, which nodes it is wrong for)."""


def attr(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            value = helper.get_attribute_value(a)
            return value.decode() if isinstance(value, bytes) else value
    return default


def assert_close(ours: np.ndarray, theirs: np.ndarray, what: str) -> None:
    theirs = np.asarray(theirs)
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} != {theirs.shape}"
    assert ours.dtype == theirs.dtype, f"{what}: dtype {ours.dtype} != {theirs.dtype}"
    rtol = 1e-2 if ours.dtype == np.float16 else 1e-4 if ours.dtype == np.float32 else 1e-5
    finite = np.abs(theirs[np.isfinite(theirs)])
    atol = rtol * max(1.0, float(finite.max()) if finite.size else 1.0)
    np.testing.assert_allclose(ours.astype(np.float64), theirs.astype(np.float64), rtol=rtol, atol=atol, err_msg=what)


def run_ort(model: onnx.ModelProto, inputs: Inputs, optimize: bool) -> list[np.ndarray]:
    """onnxruntime's outputs; a model it has no double kernel for runs as float, and its
    results are compared as doubles (float precision still checks a float64 reference)."""
    options = ort.SessionOptions()
    options.log_severity_level = 4
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except OrtNotImplemented as e:
        assert "Could not find an implementation" in str(e) and "float64" in _types(model), str(e)
        narrow, inputs32 = as_float32(model, inputs)
        return [v.astype(np.float64) for v in run_ort(narrow, inputs32, optimize)]
    return [np.asarray(v) for v in session.run(None, inputs)]


def _types(model: onnx.ModelProto) -> set[str]:
    return {onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type).name for v in model.graph.input}


def as_float32(model: onnx.ModelProto, inputs: Inputs) -> tuple[onnx.ModelProto, Inputs]:
    """The model with every double tensor made float: onnxruntime lacks many double kernels, and
    float results still check a float64 reference to float32 precision."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for v in [*m.graph.input, *m.graph.output]:
        if v.type.tensor_type.elem_type == onnx.TensorProto.DOUBLE:
            v.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    for i, init in enumerate(m.graph.initializer):
        if init.data_type == onnx.TensorProto.DOUBLE:
            array = numpy_helper.to_array(init).astype(np.float32)
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(array, init.name))
    return m, {k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in inputs.items()}


def opset_for(spec: type[OpSpec], seed: int) -> int:
    return max(13, spec.since_opset) if seed % 2 == 0 else 21


def check_model(
    op: str,
    opset: int,
    seed: int,
    model: onnx.ModelProto,
    inputs: Inputs,
    ort_defects: Defects,
    evaluator_defects: Defects,
) -> int:
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    node = next(n for n in model.graph.node if n.op_type == op)
    names = [o.name for o in model.graph.output]
    ours = run_reference(model, inputs)
    agreed = 0
    ort_defect = ort_defects.get(op)
    if ort_defect is None or not ort_defect[1](node, model, opset):
        for optimize in (False, True):
            for name, value in zip(names, run_ort(model, inputs, optimize), strict=True):
                assert_close(ours[name], value, f"{op} seed {seed} opset {opset} {name} vs onnxruntime")
                agreed += 1
    ev_defect = evaluator_defects.get(op)
    if ev_defect is None or not ev_defect[1](node, model, opset):
        for name, value in zip(names, ReferenceEvaluator(model).run(None, inputs), strict=True):
            assert_close(ours[name], value, f"{op} seed {seed} opset {opset} {name} vs ReferenceEvaluator")
            agreed += 1
    return agreed


def evaluate(model: onnx.ModelProto, inputs: Inputs) -> list[np.ndarray]:
    return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, inputs)]


Make = Callable[[str, DType, int, int], tuple[onnx.ModelProto, Inputs]]
"""(op, dtype, opset, seed) -> a generated single-op model and its inputs."""


def tvm_agreement(tvm: WorkerClient, cases: list[tuple[str, int]], make: Make, tvm_defects: Defects) -> int:
    """How many outputs of float32 models (eight seeds per op and opset) TVM computed as the
    reference does; a model a listed TVM defect covers is not compared, any other must run."""
    compared = 0
    for op, opset in cases:
        for seed in range(8):
            model, inputs = make(op, DType.float32, opset, seed)
            node = next(n for n in model.graph.node if n.op_type == op)
            if op in tvm_defects and tvm_defects[op][1](node, model, opset):
                continue
            result = tvm.run(model.SerializeToString(), inputs)
            assert result.status is Status.ok, (op, seed, result.message)
            for name, want in run_reference(model, inputs).items():
                assert_close(want, result.outputs[name], f"{op} seed {seed} opset {opset} {name} vs TVM")
                compared += 1
    return compared


def classic_dtypes(spec: type[OpSpec]) -> tuple[DType, ...]:
    """The spec's types but bfloat16: the per-family checks judge outputs at their own type's
    bounds against onnxruntime, which runs bfloat16 in data movement alone. bfloat16 is
    checked in tests/generator/test_bfloat16.py, and against onnx.reference at bfloat16's bounds in
    tests/generator/test_reference_parity.py."""
    return tuple(d for d in spec.dtypes if d is not DType.bfloat16)
