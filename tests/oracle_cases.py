"""Real bugs on real backends, each reduced by hand to a model of one to three nodes.

Most cases were found by short fuzzbot campaigns and minimized by hand; the
Pad+pool fusions came from a known onnxruntime issue (#22177, Pad fused into
AveragePool) and the NaN, unsupported and reference cases from probing what each
system does. The docstring of each says which build does what and why. tests/oracles/test_oracle_cases.py
checks every stated fact against the real systems, so the oracle tests built on
these cases are tests against what the backends really do, not against a mock.

Each function returns a fresh `(model, inputs)`: a checked ONNX model built with
onnx.helper (no binary fixtures) and fixed inputs. Builds the facts were taken on:
onnxruntime 1.31.1 (the main env) and 1.20.1 (`old_ort_python()`, a cached venv),
apache-tvm 0.27.0.post1, openvino 2026.4.1, onnx 1.23.2, torch 2.13.0 (reference).

Where a fact names the optimization level: onnxruntime's `all` and `basic` run the
graph rewrites (the fusion bugs), `disable` runs the kernels alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from tests.venvs import cached_venv

Case = tuple[onnx.ModelProto, dict[str, np.ndarray]]

ORT_OLD = "1.20.1"
ORT_NEW = "1.31.1"
ORT_OLD_PACKAGES = ("numpy==2.4.6", f"onnxruntime=={ORT_OLD}")
TVM_VERSION = "0.27.0.post1"
OPENVINO_VERSION = "2026.4.1"

_F32 = TensorProto.FLOAT
_F64 = TensorProto.DOUBLE
_I8 = TensorProto.INT8
_I32 = TensorProto.INT32
_I64 = TensorProto.INT64
_U8 = TensorProto.UINT8
_BOOL = TensorProto.BOOL


def old_ort_python() -> Path:
    """The interpreter of the onnxruntime 1.20.1 venv (the one tests/backends/test_two_ort.py uses)."""
    return cached_venv(f"onnxruntime-{ORT_OLD}", list(ORT_OLD_PACKAGES))


def _value(name: str, elem_type: int, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    initializers: list[onnx.TensorProto] | None = None,
    opset: int = 18,
) -> onnx.ModelProto:
    """A fully checked model: every case must be valid ONNX, or it proves nothing."""
    graph = helper.make_graph(nodes, "oracle_case", inputs, outputs, initializer=initializers or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # every build above reads IR 8
    onnx.checker.check_model(model, full_check=True)
    return model


def _int64s(name: str, values: list[int]) -> onnx.TensorProto:
    return helper.make_tensor(name, _I64, [len(values)], values)


def _scalar(name: str, elem_type: int, value: float) -> onnx.TensorProto:
    return helper.make_tensor(name, elem_type, [], [value])


# (a) Two onnxruntime releases disagree: one is wrong (or crashes), the other is right.


def ort_pad_averagepool_fusion() -> Case:
    """Pad (constant 0) then AveragePool (count_include_pad=0): 1.20.1 wrong, 1.31.1 right.

    onnxruntime 1.20.1 at `basic` and `all` fuses the Pad into the pool's own pads
    but keeps count_include_pad=0, so the padded zeros, which are real data after an
    explicit Pad, drop out of the divisor: every border window is too large (max abs
    error 3.89 on these inputs; -5.0 is expected at [0,0,0,0], not -3.0). At
    `disable` 1.20.1 is right. 1.31.1 is right at every level (the fusion now checks
    count_include_pad). A wrong_result, not a crash, that only the old release has.
    """
    x = -np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["p"], mode="constant"),
        helper.make_node("AveragePool", ["p"], ["y"], kernel_shape=[3, 3], count_include_pad=0),
    ]
    pads = _int64s("pads", [0, 0, 1, 1, 0, 0, 1, 1])
    model = _model(nodes, [_value("x", _F32, [1, 1, 3, 3])], [_value("y", _F32, [1, 1, 3, 3])], [pads], opset=19)
    return model, {"x": x}


def ort_convinteger_omitted_x_zero_point() -> Case:
    """ConvInteger with x_zero_point omitted ("") but w_zero_point given: 1.20.1 segfaults.

    onnxruntime 1.20.1 dereferences the absent optional input 2 while reading input 3
    and the worker dies with SIGSEGV at every optimization level (verdict crash,
    symptom `signal SIGSEGV`, message `worker killed by SIGSEGV`). 1.31.1 computes the
    right answer [[19, 25], [37, 43]]. Found by a 1.20.1 campaign (seed 1460, eight
    ConvIntegers and two MaxPools); the one node is the whole bug.
    """
    nodes = [helper.make_node("ConvInteger", ["x", "w", "", "w_zero"], ["y"])]
    inits = [helper.make_tensor("w", _U8, [1, 1, 2, 2], [1, 2, 3, 4]), _scalar("w_zero", _U8, 1)]
    model = _model(nodes, [_value("x", _U8, [1, 1, 3, 3])], [_value("y", _I32, [1, 1, 2, 2])], inits)
    return model, {"x": np.arange(9, dtype=np.uint8).reshape(1, 1, 3, 3)}


def _reducesum_noop(elem_type: int, x: np.ndarray) -> Case:
    node = helper.make_node("ReduceSum", ["x"], ["y"], noop_with_empty_axes=1)
    shape = list(x.shape)
    return _model([node], [_value("x", elem_type, shape)], [_value("y", elem_type, shape)]), {"x": x}


def ort_reducesum_noop_empty_axes_float() -> Case:
    """ReduceSum with no axes and noop_with_empty_axes=1 (the identity): 1.20.1 raises.

    onnxruntime 1.20.1, every level, at run time: "Non-zero status code returned while
    running ReduceSum node. Name:'' Status Message: /onnxruntime_src/onnxruntime/core/
    providers/cpu/reduction/reduction_ops.cc:484 void onnxruntime::ValidateNoTransposeReduce
    (int64_t) count == 1 was false. Reduction on all axes, output size should be 1."
    It takes "no axes" for "all axes" and then finds an output of 6 elements.
    1.31.1 returns the input unchanged, as the spec says. Same bug as
    ort_reducesum_noop_empty_axes_int32 (identical message).
    """
    return _reducesum_noop(_F32, np.arange(6, dtype=np.float32).reshape(2, 3))


def ort_reducesum_noop_empty_axes_int32() -> Case:
    """The same 1.20.1 ReduceSum bug as ort_reducesum_noop_empty_axes_float, hit by an
    int32 model of another shape: same message, byte for byte. Found by a 1.20.1
    campaign (seed 1629, ten nodes, int32) before the float version was written."""
    return _reducesum_noop(_I32, np.arange(24, dtype=np.int32).reshape(2, 3, 4))


def ort_einsum_transpose_reduce() -> Case:
    """Einsum 'abcd->dc' (sum over a and b, then transpose): 1.20.1 raises, 1.31.1 is right.

    onnxruntime 1.20.1, every level, at run time: "... Einsum node. Name:'' Status
    Message: /onnxruntime_src/onnxruntime/core/providers/cpu/math/einsum_utils/
    einsum_auxiliary_ops.cc:18 ... DataCopy(...) output.SizeInBytes() == input.SizeInBytes()
    was false. Einsum op: The candidate output does not match the actual output's shape".
    A different bug from the ReduceSum one on the same release (another kernel, another
    message). Found by a 1.20.1 campaign (seed 1028, int32); float32 fails the same way.
    """
    node = helper.make_node("Einsum", ["x"], ["y"], equation="abcd->dc")
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    return _model([node], [_value("x", _F32, [1, 2, 3, 4])], [_value("y", _F32, [4, 3])]), {"x": x}


def ort_shape_unsqueeze_add() -> Case:
    """Shape, Unsqueeze(axes=[1]), then Add of the (2,) shape and its (2, 1) column: the
    reverse direction, 1.31.1 refuses a model that 1.20.1 runs right.

    onnxruntime 1.31.1, every level (so not a graph rewrite), while creating the
    session (stage compile): "Fail: [ONNXRuntimeError] : 1 : FAIL : Node () Op (Add)
    [ShapeInferenceError] Invalid rank for Add broadcasting: (2) vs (3)." It seems to
    take the propagated shape *values* (3, 6) for dimensions. onnx's own strict shape
    inference with data propagation accepts the model, and 1.20.1 returns the right
    [[6, 9], [9, 12]] at every level. Found by a 1.31.1 campaign (seed 9261, ten
    nodes, via Expand of a bool input); 1.20.1 declined that model over its EyeLike.
    """
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Unsqueeze", ["s", "axes"], ["u"]),
        helper.make_node("Add", ["s", "u"], ["y"]),
    ]
    model = _model(nodes, [_value("x", _F32, [3, 6])], [_value("y", _I64, [2, 2])], [_int64s("axes", [1])])
    return model, {"x": np.ones((3, 6), np.float32)}


# (b) Bugs in the main env's builds.


def _relu_clip(elem_type: int, dtype: type[np.integer], n: int) -> Case:
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Clip", ["r", "lo", "hi"], ["y"])]
    inits = [_scalar("lo", elem_type, 1), _scalar("hi", elem_type, 5)]
    x = (np.arange(n) * 3 - 4).astype(dtype)
    return _model(nodes, [_value("x", elem_type, [n])], [_value("y", elem_type, [n])], inits), {"x": x}


def ort_relu_clip_fusion_int8() -> Case:
    """Relu then Clip on int8: onnxruntime's ReluClip fusion refuses integer Clip bounds.

    onnxruntime 1.31.1 at `basic`/`all`, while creating the session: "Exception during
    initialization: /onnxruntime_src/onnxruntime/core/optimizer/relu_clip_fusion.cc:83
    virtual onnxruntime::common::Status onnxruntime::FuseReluClip::Apply(...) const
    Unexpected data type for Clip 'min' input of 3" (3 is TensorProto.INT8). At
    `disable` it is right. 1.20.1 has the same bug at relu_clip_fusion.cc:77 (and a
    RUNTIME_EXCEPTION status where 1.31.1 says FAIL). Same bug as
    ort_relu_clip_fusion_int32, whose message ends "input of 6".
    """
    return _relu_clip(_I8, np.int8, 4)


def ort_relu_clip_fusion_int32() -> Case:
    """The ReluClip fusion bug of ort_relu_clip_fusion_int8, from an int32 model of another
    length: the message differs only in the type code ("input of 6", TensorProto.INT32)."""
    return _relu_clip(_I32, np.int32, 6)


def ort_pad_maxpool_fusion() -> Case:
    """Pad (constant 0) then MaxPool over all-negative data: wrong on 1.31.1 and 1.20.1.

    At `basic`/`all` both releases fold the Pad into MaxPool's pads, but MaxPool pads
    with -inf, so the padded zeros that should win every border window vanish: the
    border comes out -1, -2, -4, -5 where 0 is right (max abs error 5.0). `disable` is
    right. A wrong result in the current release that the two-release oracle must
    not blame on either (both agree and both are wrong).
    """
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["p"], mode="constant"),
        helper.make_node("MaxPool", ["p"], ["y"], kernel_shape=[3, 3]),
    ]
    pads = _int64s("pads", [0, 0, 1, 1, 0, 0, 1, 1])
    model = _model(nodes, [_value("x", _F32, [1, 1, 3, 3])], [_value("y", _F32, [1, 1, 3, 3])], [pads])
    return model, {"x": -np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)}


def _pow(exponent_type: int, base: np.ndarray, exponent: np.ndarray) -> Case:
    shape = list(base.shape)
    node = helper.make_node("Pow", ["a", "b"], ["y"])
    inputs = [_value("a", _F32, shape), _value("b", exponent_type, shape)]
    return _model([node], inputs, [_value("y", _F32, shape)]), {"a": base, "b": exponent}


def tvm_pow_int64_exponent() -> Case:
    """Pow(float32, int64), valid ONNX (Pow's exponent has its own type T1): TVM's
    frontend emits R.power on mixed dtypes and fails at import.

    apache-tvm 0.27.0.post1, stage import, both levels: "TypeError: Binary operators
    must have the same datatype for both operands.  However, R.power(a, b) uses
    datatype T.float32 on the LHS (Type of R.Tensor((3,), dtype="float32")), and
    datatype T.int64 on the RHS (Type of R.Tensor((3,), dtype="int64"))." Same bug
    as tvm_pow_int32_exponent (other shapes and dtype in the message).
    """
    return _pow(_I64, np.array([1.5, 2.0, 3.0], np.float32), np.array([2, 3, 1], np.int64))


def tvm_pow_int32_exponent() -> Case:
    """The TVM Pow bug of tvm_pow_int64_exponent from another model: a 2x2 float32 base
    and an int32 exponent, so the message names ((2, 2), "int32") instead."""
    base = np.array([[1.5, 2.0], [3.0, 4.0]], np.float32)
    return _pow(_I32, base, np.array([[2, 3], [1, 0]], np.int32))


def tvm_equal_bool() -> Case:
    """Equal on two bool tensors: TVM lowers it to a float compare of i1 and LLVM rejects it.

    apache-tvm 0.27.0.post1, stage compile: "InternalError: LLVM module verification
    failed with the following errors: \\nInvalid operand types for FCmp instruction\\n
    %10 = fcmp oeq i1 %6, %9, !dbg !42\\n". A different bug from the Pow one on the
    same backend (another stage, another message).
    """
    node = helper.make_node("Equal", ["a", "b"], ["y"])
    inputs = [_value("a", _BOOL, [3]), _value("b", _BOOL, [3])]
    model = _model([node], inputs, [_value("y", _BOOL, [3])])
    return model, {"a": np.array([True, False, True]), "b": np.array([True, True, False])}


def tvm_reducemax_bool() -> Case:
    """ReduceMax over bool (allowed since opset 20): TVM has no identity value for bool.

    apache-tvm 0.27.0.post1, stage compile: "InternalError: Cannot decide min_value for
    typeT.bool". A third TVM bug. (ReduceMin over bool fails the same way with
    "max_value": the same root cause with a different message.)
    """
    node = helper.make_node("ReduceMax", ["x"], ["y"], keepdims=1)
    model = _model([node], [_value("x", _BOOL, [2, 3])], [_value("y", _BOOL, [1, 1])], opset=20)
    return model, {"x": np.array([[True, False, False], [False, False, False]])}


def _where_bool(names: list[str], node_inputs: list[str]) -> Case:
    values = {
        "c": np.array([True, False, True, False]),
        "a": np.array([True, True, False, False]),
        "b": np.array([False, True, False, True]),
    }
    node = helper.make_node("Where", node_inputs, ["y"])
    model = _model([node], [_value(n, _BOOL, [4]) for n in names], [_value("y", _BOOL, [4])])
    return model, {n: values[n] for n in names}


def openvino_where_bool() -> Case:
    """Where(c, c, c) on bool: OpenVINO's CPU eltwise JIT is asked for a bool output.

    openvino 2026.4.1, stage compile: "RuntimeError: Exception from src/inference/src/
    cpp/core.cpp:117:\\nException from src/inference/src/dev/plugin.cpp:54:\\nException from
    src/plugins/intel_cpu/src/nodes/kernels/x64/jit_uni_eltwise_generic.cpp:807:\\n
    unsupported dst_prc: boolean\\n". The CPU plugin computes bool Select branches as
    u8 through inserted Converts, but a tensor that is also the condition keeps its
    bool Convert; with distinct c, a, b the same op is right. Found by a campaign
    (seed 5140: IsInf then Where(t0, t0, t0)). Valid ONNX (Where's T includes bool),
    and the message matches none of the adapter's `unsupported` patterns: a crash.
    onnxruntime declines every bool Where as unsupported (ort_unsupported_where_bool).
    """
    return _where_bool(["c"], ["c", "c", "c"])


def openvino_where_bool_condition_as_branch() -> Case:
    """Where(c, c, a) on bool: by all appearances the root cause of openvino_where_bool
    (only the branch that is also the condition keeps type boolean), but the graph now
    fails validation before the JIT, with another message:

    openvino 2026.4.1, stage compile: "... Check 'element::Type::merge(result_et,
    get_input_element_type(1), get_input_element_type(2))' failed at src/core/src/op/
    select.cpp:68:\\nWhile validating node 'opset1::Select y (opset1::Convert
    Convert_8899[0]:boolean[4], opset1::Convert Convert_8899[0]:boolean[4], opset1::Convert
    Convert_8900[0]:u8[4]) -> (boolean[4])' with friendly_name 'y':\\nArgument 1 and 2
    element types must match." A message-based fingerprint cannot tie the two
    together; a pair for "one cause, two symptoms", not for fingerprint equality.
    """
    return _where_bool(["c", "a"], ["c", "c", "a"])


def openvino_convinteger_omitted_x_zero_point() -> Case:
    """The model of ort_convinteger_omitted_x_zero_point (x_zero_point omitted as "",
    w_zero_point given): OpenVINO turns the empty optional input into a NullNode of
    dynamic rank that its CPU plugin cannot build.

    openvino 2026.4.1, stage compile: "RuntimeError: Exception from src/inference/src/
    cpp/core.cpp:117:\\nException from src/inference/src/dev/plugin.cpp:54:\\nCheck
    '!shape.rank().is_dynamic()' failed at src/plugins/intel_cpu/src/node.cpp:108:\\n
    Unexpected: CPU plug-in doesn't support NullNode operation with dynamic rank.
    Operation name: NullNode_4\\n". A different bug from openvino_where_bool_condition_as_branch,
    yet both messages' first meaningful line is OpenVINO's "Check '...' failed at
    FILE:LINE:", which today's normalize reduces to the same "RuntimeError: Check <name>
    failed at <path>:<n>:", so the two get one fingerprint. Found by a campaign (seed
    5004). TVM declines the model (OpNotImplemented ... ConvInteger).
    """
    return ort_convinteger_omitted_x_zero_point()


def _opset17_reduce(op_type: str, x: np.ndarray, axes: list[int], out_shape: list[int], keepdims: int) -> Case:
    node = helper.make_node(op_type, ["x"], ["y"], axes=axes, keepdims=keepdims)
    model = _model([node], [_value("x", _F32, list(x.shape))], [_value("y", _F32, out_shape)], opset=17)
    return model, {"x": x}


def openvino_reducel1_axes_attribute() -> Case:
    """ReduceL1 at opset 17 (axes as an attribute), keepdims=0: OpenVINO ignores the axes.

    openvino 2026.4.1 reduces over every axis and returns a rank-0 tensor where (2, 4)
    is expected: a wrong_result with a shape mismatch ("shape expected (2, 4), got ()").
    The opset-18 form (axes as an input) is right, and so are ReduceSum, ReduceMax,
    ReduceL2, ReduceMean, ReduceProd and ReduceSumSquare at opset 17; ReduceLogSumExp
    has the same bug (openvino_reducelogsumexp_axes_attribute).
    """
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(2, 3, 4)
    return _opset17_reduce("ReduceL1", x, [1], [2, 4], keepdims=0)


def openvino_reducelogsumexp_axes_attribute() -> Case:
    """The OpenVINO opset-17 axes bug of openvino_reducel1_axes_attribute on another op
    and with keepdims=1: ReduceLogSumExp over axes [-1] of a (3, 2) tensor comes back
    (1, 1) instead of (3, 1). Found by a campaign (seed 5130) through an ArgMin that
    then had the wrong shape too."""
    x = np.array([[0.5, -1.0], [2.0, 0.0], [-0.5, 1.5]], np.float32)
    return _opset17_reduce("ReduceLogSumExp", x, [-1], [3, 1], keepdims=1)


# (c) NaN semantics: systems that disagree only on how NaN propagates.


def nan_max() -> Case:
    """Max of two tensors with NaN in either operand.

    The torch reference, onnx's ReferenceEvaluator and onnxruntime (1.31.1 and 1.20.1)
    all give [nan, nan, nan]: a NaN operand wins. TVM 0.27 and OpenVINO 2026.4 give
    [1, nan, nan]: an `a > b ? a : b` select, so the result depends on operand order
    (NaN first loses, NaN second wins). Judged today as wrong_result (nonfinite);
    a NaN-semantics difference the oracles should filter, not report.
    """
    node = helper.make_node("Max", ["a", "b"], ["y"])
    inputs = [_value("a", _F32, [3]), _value("b", _F32, [3])]
    model = _model([node], inputs, [_value("y", _F32, [3])])
    nan = np.float32(np.nan)
    return model, {"a": np.array([nan, 1, nan], np.float32), "b": np.array([1, nan, nan], np.float32)}


def nan_reducemax() -> Case:
    """ReduceMax over a row holding one NaN.

    The torch reference and ReferenceEvaluator give [nan]; onnxruntime (1.31.1 and
    1.20.1, every level), TVM 0.27 and OpenVINO 2026.4 all give [3.]: their max kernels
    skip NaN. So here the backend disagrees with both references: judged today as
    wrong_result (nonfinite) on onnxruntime; a NaN-semantics difference to filter.
    """
    node = helper.make_node("ReduceMax", ["x"], ["y"], keepdims=1)
    model = _model([node], [_value("x", _F32, [4])], [_value("y", _F32, [1])])
    return model, {"x": np.array([1, np.nan, 3, 2], np.float32)}


def nan_clip() -> Case:
    """Clip(NaN, 0, 1): the references and onnxruntime keep NaN; TVM 0.27 and OpenVINO
    2026.4 return 0 (a max-then-min clamp turns NaN into the lower bound)."""
    node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"])
    inits = [_scalar("lo", _F32, 0.0), _scalar("hi", _F32, 1.0)]
    model = _model([node], [_value("x", _F32, [3])], [_value("y", _F32, [3])], inits)
    return model, {"x": np.array([np.nan, 0.5, 2.0], np.float32)}


# (d) Declared limitations: each backend declines the model in its own words.


def ort_unsupported_averagepool_float64() -> Case:
    """AveragePool on float64: onnxruntime's CPU provider registers float only.

    onnxruntime 1.31.1 and 1.20.1, stage compile: "NotImplemented: [ONNXRuntimeError] :
    9 : NOT_IMPLEMENTED : Could not find an implementation for AveragePool(11) node with
    name ''" (opset 18 resolves to AveragePool-11). Status unsupported, verdict
    unsupported: never a finding. TVM and OpenVINO run it.
    """
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2])
    model = _model([node], [_value("x", _F64, [1, 1, 2, 2])], [_value("y", _F64, [1, 1, 1, 1])])
    return model, {"x": np.arange(4, dtype=np.float64).reshape(1, 1, 2, 2)}


def ort_unsupported_where_bool() -> Case:
    """Where(c, a, b) on bool: onnxruntime has no bool kernel for Where and says
    "NOT_IMPLEMENTED : Could not find an implementation for Where(16) node with name ''"
    (unsupported), at both releases. OpenVINO runs this one right (and crashes when the
    condition is also a branch, openvino_where_bool)."""
    return _where_bool(["c", "a", "b"], ["c", "a", "b"])


def tvm_unsupported_celu() -> Case:
    """Celu: absent from TVM's ONNX converter map.

    apache-tvm 0.27.0.post1, stage import: "OpNotImplemented: The following operators
    are not supported for frontend ONNX: Celu" (unsupported). onnxruntime and the
    torch reference compute it.
    """
    node = helper.make_node("Celu", ["x"], ["y"], alpha=1.0)
    model = _model([node], [_value("x", _F32, [4])], [_value("y", _F32, [4])])
    return model, {"x": np.array([-2.0, -0.5, 0.0, 1.5], np.float32)}


def openvino_unsupported_det() -> Case:
    """Det: OpenVINO's ONNX frontend has no conversion rule for it.

    openvino 2026.4.1, stage import: "OpConversionFailure: Model wasn't fully
    converted. Summary: -- No conversion rule found for operations: Det-18 ..."
    (unsupported). TVM declines it too (OpNotImplemented ... Det); onnxruntime and the
    torch reference compute it (-2).
    """
    node = helper.make_node("Det", ["x"], ["y"])
    model = _model([node], [_value("x", _F32, [2, 2])], [_value("y", _F32, [])])
    return model, {"x": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)}


# (e) onnx.reference.ReferenceEvaluator disagrees with fuzzbot's torch reference.


def reference_mean_first_input_broadcasts() -> Case:
    """Mean(a[1], b[3]): ReferenceEvaluator adds in place into the first input and raises
    "ValueError: non-broadcastable output operand with shape (1,) doesn't match the
    broadcast shape (3,)" (tests/generator/test_reference.py EVALUATOR_DEFECTS). The torch
    reference, onnxruntime, TVM and OpenVINO all give [1, 1.5, 2]."""
    node = helper.make_node("Mean", ["a", "b"], ["y"])
    inputs = [_value("a", _F32, [1]), _value("b", _F32, [3])]
    model = _model([node], inputs, [_value("y", _F32, [3])])
    return model, {"a": np.array([1.0], np.float32), "b": np.array([1.0, 2.0, 3.0], np.float32)}


def reference_maxpool_asymmetric_pads() -> Case:
    """MaxPool 2x2 with pads [0, 0, 1, 1] (bottom and right only): ReferenceEvaluator
    reads the pads in the wrong order and returns shape (1, 1, 2, 4); the torch
    reference, onnxruntime, TVM and OpenVINO return the right (1, 1, 3, 3)
    (tests/generator/test_reference.py EVALUATOR_DEFECTS: "sizes padded outputs wrongly")."""
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], pads=[0, 0, 1, 1])
    model = _model([node], [_value("x", _F32, [1, 1, 3, 3])], [_value("y", _F32, [1, 1, 3, 3])])
    return model, {"x": np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)}


SAME_BUG_PAIRS = (
    (ort_reducesum_noop_empty_axes_float, ort_reducesum_noop_empty_axes_int32),
    (ort_relu_clip_fusion_int8, ort_relu_clip_fusion_int32),
    (openvino_reducel1_axes_attribute, openvino_reducelogsumexp_axes_attribute),
)
"""Two models that hit one bug: a fingerprint should not tell them apart. The last pair
is two wrong results (different ops, one root cause), the others are crashes."""

SAME_BUG_AT_TWO_DTYPES = ((tvm_pow_int64_exponent, tvm_pow_int32_exponent),)
"""One bug whose message names the dtype it was hit at. A normalized message keeps dtype
names (a dtype often is the bug: a uint8 Shrink), so the two get two fingerprints that
differ only in the dtype; whether the type matters is for the builds to say (reduction's
dtype generalization), not the message."""

DIFFERENT_BUG_PAIRS = (
    (ort_reducesum_noop_empty_axes_float, ort_einsum_transpose_reduce),
    (tvm_pow_int64_exponent, tvm_equal_bool),
    (tvm_equal_bool, tvm_reducemax_bool),
    (ort_relu_clip_fusion_int8, ort_pad_maxpool_fusion),
    (openvino_where_bool_condition_as_branch, openvino_convinteger_omitted_x_zero_point),
)
"""Two bugs of one build: a fingerprint must tell them apart."""
