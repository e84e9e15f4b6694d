"""Which names a normalized message keeps: what says which bug it is (an op, an op type, an
attribute value, a dtype) stays, what differs between two runs of one bug (tensor and node
names, paths, shapes) goes. The messages are the systems' own, copied from real runs (the
build each came from is named), except where a test says it follows a system's template."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from backends.client import WorkerClient
from backends.results import BackendInfo, RunResult, Stage, Status
from backends.spec import parse_backend
from bot.findings.bundle import Finding
from oracles.bug_identity import crash_site_fingerprint
from oracles.signature import crash_site, is_meaningful_name, normalize
from oracles.verdict import judge
from tests import release_cases as rc

pytestmark = [pytest.mark.worker]

TVM = BackendInfo(name="tvm", level="O0", version="0.27.0.post1")

_TVM_FLOAT_ONLY = (
    'TypeError: ir.Op(span=None, ty=ir.Type(span=None), name="{op}", description="", '
    'arguments=(ir.ArgumentInfo(name="x", type_info="Tensor", description="The input tensor."),), '
    'attrs_type_key="", num_inputs=1, support_level=10) requires the input tensor to have float dtype. '
    "However, the given input dtype is T.{dtype}"
)
"""apache-tvm 0.27.0.post1, stage import, for an integer ReduceL2 (`relax.sqrt`), ReduceLogSum
or Log (`relax.log`) and Sqrt (`relax.sqrt`)."""

_ORT_RESHAPE = (
    "Fail: [ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Reshape node. "
    "Name:'{node}' Status Message: /onnxruntime_src/onnxruntime/core/providers/cpu/tensor/reshape_helper.h:91 "
    "onnxruntime::ReshapeHelper::ReshapeHelper(const onnxruntime::TensorShape&, onnxruntime::TensorShapeVector&, "
    "bool) input_shape_size == requested_shape_size was false. The input tensor cannot be reshaped to the "
    "requested shape. Input shape:{shape}, requested shape:{{5,7}}"
)
"""onnxruntime 1.31.1 at run time, for a Reshape whose target does not fit: the node name is
the model's (`n4` as fuzzbot names nodes, `/model/Reshape_7` as torch.onnx does)."""

_ORT_TYPE_ERROR = (
    "Fail: [ONNXRuntimeError] : 1 : FAIL : Type Error: Type parameter (T) of Optype ({op}) bound to "
    "different types (tensor(float) and tensor(int64) in node ({node})."
)
"""onnxruntime 1.31.1 loading a model whose Add mixes float and int64 inputs."""

_OV_SELECT = (
    "RuntimeError: Exception from src/inference/src/cpp/core.cpp:117:\n"
    "Exception from src/inference/src/dev/plugin.cpp:54:\n"
    "Check 'element::Type::merge(result_et, get_input_element_type(1), get_input_element_type(2))' failed at "
    "src/core/src/op/select.cpp:68:\n"
    "While validating node 'opset1::Select {out} (opset1::Convert Convert_{a}[0]:boolean[4], opset1::Convert "
    "Convert_{a}[0]:boolean[4], opset1::Convert Convert_{b}[0]:u8[4]) -> (boolean[4])' with friendly_name '{out}':\n"
    "Argument 1 and 2 element types must match.\n"
)
"""openvino 2026.4.1 compiling Where(c, c, a) on bool (tests/oracle_cases.py
openvino_where_bool_condition_as_branch); the Convert numbers count up within a process."""

_OV_NULLNODE = (
    "RuntimeError: Exception from src/inference/src/cpp/core.cpp:117:\n"
    "Exception from src/inference/src/dev/plugin.cpp:54:\n"
    "Check '!shape.rank().is_dynamic()' failed at src/plugins/intel_cpu/src/node.cpp:108:\n"
    "Unexpected: CPU plug-in doesn't support NullNode operation with dynamic rank. Operation name: NullNode_{n}\n"
)
"""openvino 2026.4.1 compiling a ConvInteger with an omitted x_zero_point."""


def test_tvm_int_reducel2_and_reducelogsum_are_two_bugs() -> None:
    """TVM quotes the op it failed in; erasing quotes made these two one fingerprint."""
    sqrt = normalize(_TVM_FLOAT_ONLY.format(op="relax.sqrt", dtype="int32"))
    log = normalize(_TVM_FLOAT_ONLY.format(op="relax.log", dtype="int32"))
    assert sqrt != log
    assert 'name="relax.sqrt"' in sqrt and 'name="relax.log"' in log
    assert "name=<name>" in sqrt, "the op's argument name `x` is still erased"


def test_the_fingerprints_of_two_tvm_bugs_differ_and_of_one_bug_do_not() -> None:
    want = {"y": np.ones(3, np.float32)}

    def fp(message: str) -> str:
        result = RunResult(status=Status.error, stage=Stage.import_, message=message, backend=TVM)
        return judge(result, want, "ReduceL2").fingerprint

    sqrt = _TVM_FLOAT_ONLY.format(op="relax.sqrt", dtype="int32")
    assert fp(sqrt) != fp(_TVM_FLOAT_ONLY.format(op="relax.log", dtype="int32"))
    assert fp(sqrt) == fp(sqrt.replace("support_level=10", "support_level=11"))


@pytest.mark.parametrize(
    "token", ["relax.sqrt", "tir.exp", "R.power", "T.int32", "opset1::Select", "ov::op::v1::Add", "aten::add"]
)
def test_an_op_in_a_known_namespace_is_kept(token: str) -> None:
    assert is_meaningful_name(token)


@pytest.mark.parametrize("token", ["Shrink", "MaxPool", "ReduceL2", "Col2Im", "SAME_LOWER", "NOTSET", "VALID"])
def test_an_onnx_op_type_or_an_upper_case_attribute_value_is_kept(token: str) -> None:
    assert is_meaningful_name(token)


@pytest.mark.parametrize("token", ["uint8", "float16", "int64", "bfloat16", "bool", "u8", "f32", "boolean"])
def test_a_dtype_is_kept(token: str) -> None:
    assert is_meaningful_name(token)


@pytest.mark.parametrize(
    "token",
    ["x_12", "t3", "n4", "onnx::Add_7", "input", "y", "conv1.weight", "", "The input tensor.", "Tensor", "min"],
)
def test_a_tensor_or_node_name_or_prose_is_erased(token: str) -> None:
    assert not is_meaningful_name(token)


def test_a_uint8_shrink_and_a_same_lower_maxpool_are_two_bugs() -> None:
    """Shaped like TVM's OpAttributeInvalid template (`Value {} in attribute {} of operator {}
    is invalid.`), with every field quoted: before, both read `Value <name> in attribute
    <name> of operator <name> is invalid.`"""
    template = "OpAttributeInvalid: Value '{value}' in attribute '{attr}' of operator '{op}' is invalid."
    shrink = normalize(template.format(value="uint8", attr="dtype", op="Shrink"))
    maxpool = normalize(template.format(value="SAME_LOWER", attr="auto_pad", op="MaxPool"))
    assert shrink == "OpAttributeInvalid: Value 'uint8' in attribute <name> of operator 'Shrink' is invalid."
    assert maxpool == "OpAttributeInvalid: Value 'SAME_LOWER' in attribute <name> of operator 'MaxPool' is invalid."


def test_dtypes_and_op_types_with_digits_survive_unquoted() -> None:
    """The number rule used to turn `int32` into `int<n>` and `ReduceL2` into `ReduceL<n>`."""
    exp = "AssertionError: Types ['float', 'float32', 'double', 'float64', 'float16', 'bfloat16'] are supported only, "
    int32 = normalize(exp + "but int32 is given")  # apache-tvm 0.27.0.post1, Exp on int32
    assert int32.endswith("but int32 is given") and "'float16'" in int32
    assert int32 != normalize(exp + "but uint8 is given")
    ort = "Fail: [ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running {} node. Name:'n3'"
    assert "ReduceL2 node" in normalize(ort.format("ReduceL2"))
    assert normalize(ort.format("ReduceL1")) != normalize(ort.format("ReduceL2"))


def test_onnxruntime_node_names_and_shapes_that_differ_between_seeds_collapse() -> None:
    fuzzbot = normalize(_ORT_RESHAPE.format(node="n4", shape="{2,3}"))
    exported = normalize(_ORT_RESHAPE.format(node="/model/Reshape_7", shape="{4,2}"))
    assert fuzzbot == exported
    assert "Reshape node. Name:<name>" in fuzzbot
    assert normalize(_ORT_RESHAPE.format(node="onnx::Reshape_12", shape="{3,2,1}")) == fuzzbot
    a = normalize(_ORT_TYPE_ERROR.format(op="Add", node="n4"))
    assert a == normalize(_ORT_TYPE_ERROR.format(op="Add", node="n9"))
    assert "tensor(int64)" in a, "the dtype onnxruntime names is part of the bug"
    assert a != normalize(_ORT_TYPE_ERROR.format(op="Mul", node="n4"))


def test_openvino_names_collapse_across_seeds_and_two_bugs_stay_apart() -> None:
    seed_a = normalize(_OV_SELECT.format(out="y", a=25029, b=25030))
    seed_b = normalize(_OV_SELECT.format(out="t3", a=8899, b=8900))
    assert seed_a == seed_b
    assert seed_a.startswith("RuntimeError: Check <name> failed at <path>:<n>: While validating node <name>")
    nullnode = normalize(_OV_NULLNODE.format(n=25034))
    assert nullnode == normalize(_OV_NULLNODE.format(n=4))
    assert nullnode != seed_a and "NullNode operation with dynamic rank" in nullnode


def _one_hot(depth: np.ndarray) -> onnx.ModelProto:
    node = helper.make_node("OneHot", ["x", "depth", "values"], ["y"])
    inits = [numpy_helper.from_array(depth, "depth"), numpy_helper.from_array(np.zeros(2, np.float32), "values")]
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [3])
    graph = helper.make_graph([node], "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_one_refused_ffi_argument_is_one_crash_site_whatever_the_value_it_got() -> None:
    """TVM's OneHot converter hands a constant depth to `relax.op.one_hot`, whose FFI wants
    an `int`: a scalar float depth "got `float`", a depth of shape [1] "got `ffi.Array`",
    two reports of one line in a TVM 0.25 to 0.27 campaign. The function refusing it is kept
    in the name (the quoted call signature was erased whole), so a refusal by another
    function stays another site. Run on the real TVM."""
    x = {"x": np.array([0, 1, 2], np.int64)}
    with WorkerClient(parse_backend("tvm:default"), timeout_s=120) as client:
        messages = [
            client.run(_one_hot(d).SerializeToString(), x).message
            for d in (np.array(3.0, np.float32), np.array([3], np.float16))
        ]
    sites = {crash_site(normalize(m)) for m in messages}
    assert len(sites) == 1 and "`relax.op.one_hot`" in sites.pop(), messages
    other = messages[0].replace("relax.op.one_hot", "relax.op.reshape")
    assert crash_site(normalize(other)) != crash_site(normalize(messages[0]))


def test_a_check_onnxruntime_reports_for_a_named_node_is_one_site_whatever_the_node() -> None:
    """onnxruntime 1.27 and 1.28's QDQ rewrites make QuantizeLinear nodes whose output_dtype
    does not match their zero point's type; the type check names the node, `t1_q` in one
    graph and `gemm_input_reshape_arg_q` in another: two reports of a 1.27.0 to 1.28.0
    campaign (the messages below are theirs). The node is the trigger's; the op type and
    the check are the site, and another op's check stays another site."""
    check = "[TypeInferenceError] output_dtype INT8 does not match y_zero_point type UINT8."
    sites = {
        crash_site(normalize(f"Fail: [ONNXRuntimeError] : 1 : FAIL : Node ({node}) Op (QuantizeLinear) {check}"))
        for node in ("t1_q", "gemm_input_reshape_arg_q")
    }
    assert len(sites) == 1, sites
    other = crash_site(normalize(f"Fail: [ONNXRuntimeError] : 1 : FAIL : Node (t1_q) Op (DequantizeLinear) {check}"))
    assert other not in sites


def _scatter_nd_of_symbolic_updates(through_compress: bool) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """ScatterND whose updates have a dim TVM cannot prove equal to the indices': a symbolic
    `batch` (updates = data) or a Compress's `num_nonzero` (the triggers of a TVM 0.25 to
    0.27 campaign; a Range's `range_len_0` was the third)."""
    vi = helper.make_tensor_value_info
    if through_compress:
        nodes = [
            helper.make_node("Compress", ["x", "c"], ["u"], axis=0),
            helper.make_node("ScatterND", ["x", "i", "u"], ["y"]),
        ]
        ins = [vi("x", TensorProto.INT64, [1, 4]), vi("c", TensorProto.BOOL, [1])]
        idx = np.zeros((1, 4, 2), np.int64)
        feeds = {"x": np.arange(4, dtype=np.int64).reshape(1, 4), "c": np.array([True])}
    else:
        nodes = [helper.make_node("ScatterND", ["x", "i", "x"], ["y"])]
        ins = [vi("x", TensorProto.INT64, ["batch", 1])]
        idx = np.zeros((3, 1, 2), np.int64)
        feeds = {"x": np.arange(3, dtype=np.int64).reshape(3, 1)}
    graph = helper.make_graph(nodes, "g", ins, [vi("y", TensorProto.INT64, None)], [numpy_helper.from_array(idx, "i")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), feeds


def test_one_shape_check_is_one_site_whatever_symbolic_dims_it_prints() -> None:
    """TVM prints the shapes its ScatterND check refused, symbolic dims by their names: one
    check, three reports (`batch`, `num_nonzero`, `range_len_0`) in a TVM 0.25 to 0.27
    campaign. The shapes are the trigger's; the check is the site. Another check on
    symbolic shapes stays another site. Run on the real TVM."""
    with WorkerClient(parse_backend("tvm:default"), timeout_s=120) as client:
        messages = [
            client.run(m.SerializeToString(), x).message for m, x in map(_scatter_nd_of_symbolic_updates, (False, True))
        ]
    assert all("ScatterND op requires the updates tensor" in m for m in messages), messages
    assert "batch" in messages[0] and "num_nonzero" in messages[1], messages
    sites = {crash_site(normalize(m)) for m in messages}
    assert len(sites) == 1 and "R.shape([<dims>])" in next(iter(sites)), sites
    other = "ValueError: Size mismatch: relax.dequantize expects scale of R.shape([sequence]), got R.shape([2])"
    assert crash_site(normalize(other)) not in sites


def test_a_name_glued_to_the_next_word_is_erased_whole() -> None:
    """onnxruntime 1.30.0's ReshapeFusion leaves a node reading a tensor that is gone, and
    says so with the name glued to the next word: "t5for node" in one model, "t3_0for node"
    in another. They were two reports of one check (the messages are theirs, paths cut)."""
    head = (
        "Fail: [ONNXRuntimeError] : 1 : FAIL : Exception during initialization: "
        "/onnxruntime_src/onnxruntime/core/graph/graph_utils.cc:36 int onnxruntime::graph_utils::GetIndexFromName("
        "const onnxruntime::Node&, const std::string&, bool) itr != node_args.end() was false. "
        "Attempting to get index by a name which does not exist:"
    )
    one, other = (normalize(f"{head}{name}for node: {node}") for name, node in (("t5", "n7"), ("t3_0", "n2_Reshape")))
    assert one == other and "does not exist: <name> for node" in one, (one, other)


def test_one_check_of_a_cpp_template_is_one_site_at_every_instantiation() -> None:
    """onnxruntime 1.17.3's STFT refuses a window as long as the signal with one check of a
    function template, and gcc prints the instantiation: three `fixed` reports of one
    1.17.3 to 1.18.0 campaign, at float, double and complex input (their messages below).
    The types are the trigger's; the check is the site. Another check of the template stays
    another site."""
    check = (
        "RuntimeException: [ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while "
        "running STFT node. Name:'{node}' Status Message: /onnxruntime_src/onnxruntime/core/providers/cpu/signal/"
        "dft.cc:509 onnxruntime::common::Status onnxruntime::short_time_fourier_transform(OpKernelContext*, bool, "
        "bool) [with T = {t}; U = {u}] window_size < signal_size was false. Ensure that the dft size is smaller "
        "than the signal.\n"
    )
    seen = [("n1_STFT", "float", "float"), ("n8_STFT", "double", "double"), ("n2_STFT", "float", "std::complex<float>")]
    names = {normalize(check.format(node=n, t=t, u=u)) for n, t, u in seen}
    assert len(names) == 1 and "[with <types>]" in next(iter(names)), names
    assert next(iter(names)).endswith("smaller than the signal."), "cut at the same place, whole here"
    other = check.format(node="n1_STFT", t="float", u="float").replace("window_size < signal_size", "frame_step > 0")
    assert crash_site(normalize(other)) not in {crash_site(n) for n in names}


def _reduce_over_absent_axes(op: str, constant: bool) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """`op` with `noop_with_empty_axes` and no axes input, over a graph input or an initializer."""
    data = np.arange(6.0).reshape(2, 1, 3)
    node = helper.make_node(op, ["x"], ["y"], noop_with_empty_axes=1)
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)
    inits = [numpy_helper.from_array(data, "x")] if constant else []
    graph = helper.make_graph([node], "g", [] if constant else [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    return model, {} if constant else {"x": data}


@pytest.mark.release
def test_a_source_check_failed_at_load_and_at_run_is_one_crash() -> None:
    """onnxruntime 1.17.3 fails one check of its reductions ("Reduction on all axes, output
    size should be 1") on a Reduce with `noop_with_empty_axes` and no axes: at run over an
    input, while making the session when its constant folding runs the kernel over an
    initializer. One check, two reports in a 1.17.3 -> 1.18.0 campaign: a check named by its
    source line is one crash at any stage."""
    findings = []
    with WorkerClient(parse_backend("onnxruntime:all"), str(rc.ort_python("1.17.3")), 30.0) as client:
        for op, constant in (("ReduceMax", False), ("ReduceMean", True)):
            model, inputs = _reduce_over_absent_axes(op, constant)
            j = judge(client.run(model.SerializeToString(), inputs), {}, op)
            findings.append(Finding(**j.model_dump(), backend=BackendInfo(name="onnxruntime", level="all", version="")))
    assert [f.stage for f in findings] == ["run", "compile"], [(f.stage, f.message) for f in findings]
    assert all("Reduction on all axes" in f.message for f in findings)
    assert len({crash_site_fingerprint(f, "persistent") for f in findings}) == 1
    # a check named by no source line keeps its stage
    plain = [f.model_copy(update={"signature": "ONNXRuntimeError: refused"}) for f in findings]
    assert len({crash_site_fingerprint(f, "persistent") for f in plain}) == 2
