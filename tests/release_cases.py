"""Real onnxruntime bugs that appear or vanish between two consecutive releases.

Found by running the PyPI wheels of onnxruntime 1.15 to 1.31 (the newest patch of
each minor release, listed in RELEASES) side by side on CPUExecutionProvider at
every optimization level, on systematic variants of the LayerNorm and RMSNorm
subgraphs that onnxruntime's LayerNormFusion and SimplifiedLayerNormFusion rewrite,
on single Div and Mod nodes, and on short fuzzbot campaigns (`fuzzbot gen`, eight
nodes, seeds 1000 to 1399). Each case was then reduced by hand and every fact in a
docstring was re-checked from a fresh subprocess per release and level (the script
that does it lives outside the project: /tmp/release-hunt/verify.py).

Each function returns a fresh `(model, inputs)`: a checked ONNX model built with
onnx.helper (no binary fixtures) and fixed literal inputs. "right" means equal to
onnx.reference.ReferenceEvaluator and to the numpy formula in the docstring (and to
the same release at `disable`) within 1e-3; "wrong" gives the max abs error against
that answer. `disable`, `basic` and `all` are ORT_DISABLE_ALL, ORT_ENABLE_BASIC and
ORT_ENABLE_ALL.

`ort_python(version)` builds (once) and returns the interpreter of a venv that holds
that release: releases up to 1.18 need numpy<2, later ones take numpy 2.4.6.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import yaml
from onnx import TensorProto, helper

from tests.venvs import cached_venv

Case = tuple[onnx.ModelProto, dict[str, np.ndarray]]

# The newest patch release of every minor release from 1.15 to 1.31.
RELEASES: tuple[str, ...] = (
    "1.15.1",
    "1.16.3",
    "1.17.3",
    "1.18.1",
    "1.19.2",
    "1.20.1",
    "1.21.1",
    "1.22.1",
    "1.23.2",
    "1.24.4",
    "1.25.1",
    "1.26.0",
    "1.27.0",
    "1.28.0",
    "1.29.0",
    "1.30.0",
    "1.31.1",
)

# (right, wrong): rms_norm_vector_epsilon, at `all`.
REGRESSION: tuple[str, str] = ("1.26.0", "1.27.0")
# (right, raises): layernorm_single_element_axis, at every level.
REGRESSION_RAISES: tuple[str, str] = ("1.20.1", "1.21.1")
# (right at `basic`, wrong at `basic`): layernorm_pattern_sub_swapped.
REGRESSION_BASIC: tuple[str, str] = ("1.19.2", "1.20.1")
# (right, wrong): maxpool_after_zero_pad, at `basic` and `all`; still wrong in 1.31.1.
REGRESSION_PAD_FUSION: tuple[str, str] = ("1.19.2", "1.20.1")
# (right, raises at load): average_pool_after_zero_pad_explicit_pads; still raises in 1.31.1.
REGRESSION_PAD_AVGPOOL_EXPLICIT: tuple[str, str] = ("1.18.1", "1.19.0")
# (right, dies of SIGABRT while optimizing): dequantize_slice_read_by_branches; still in 1.31.1.
REGRESSION_DQ_SLICE_IF: tuple[str, str] = ("1.18.1", "1.19.0")
# (right, wrong): dequantize_int8_reshape at opset 21, at `basic` and `all`.
REGRESSION_DQ_RESHAPE: tuple[str, str] = ("1.18.1", "1.19.0")
# (wrong, right): dequantize_int8_reshape at opset 21; at opsets 13 and 19 every release is wrong.
FIX_DQ_RESHAPE: tuple[str, str] = ("1.26.0", "1.27.0")
# (right, refused at load): quantize_4bit_maxpool at opset 26, at `all`; still in 1.31.1.
REGRESSION_Q4_MAXPOOL: tuple[str, str] = ("1.27.0", "1.28.0")
# (right, wrong): layernorm_pattern_pow_zero_float16, at `all`; still wrong in 1.31.1.
REGRESSION_NORM_FP16: tuple[str, str] = ("1.19.2", "1.20.1")
# (wrong, right): rms_norm_axis_not_last, at `all`.
FIX: tuple[str, str] = ("1.15.1", "1.16.3")
# (wrong, right): rms_norm_epsilon_first, at `all`.
FIX_EPSILON_FIRST: tuple[str, str] = ("1.27.0", "1.28.0")
# (wrong, right): reducel2_int32_overflow, at every level.
FIX_REDUCEL2_INT32: tuple[str, str] = ("1.26.0", "1.27.0")
# (raises, right): layernorm_single_element_axis, at every level.
FIX_LAYERNORM_SINGLE_ELEMENT: tuple[str, str] = ("1.23.2", "1.24.4")
# (right, wrong): clip_fp16_min_only, at every level (a kernel, not a fusion).
REGRESSION_CLIP_FP16: tuple[str, str] = ("1.18.1", "1.19.0")
# (wrong, right): clip_fp16_min_only; 1.19.2 is still wrong.
FIX_CLIP_FP16: tuple[str, str] = ("1.19.2", "1.20.1")
# Releases whose process dies of SIGFPE on an integer Div or Mod by zero (every level).
DIV_BY_ZERO_CRASHES: list[str] = list(RELEASES[: RELEASES.index("1.24.4") + 1])
# Releases that raise "Integer division by zero" / "Integer modulo by zero" instead.
DIV_BY_ZERO_RAISES: list[str] = list(RELEASES[RELEASES.index("1.25.1") :])
# (first, last) release that fuses layernorm_pattern_sub_swapped wrongly at `all`: all of them.
NORM_POW_MISCOMPILE: tuple[str, str] = ("1.15.1", "1.31.1")

_F32 = TensorProto.FLOAT
_I32 = TensorProto.INT32
_I64 = TensorProto.INT64


def ort_packages(version: str) -> list[str]:
    """The pip requirements of a venv holding onnxruntime `version` (1.15 or later)."""
    minor = int(version.split(".")[1])
    if minor <= 18:
        return ["numpy<2", "ml_dtypes==0.5.4", f"onnxruntime=={version}"]
    return ["numpy==2.4.6", f"onnxruntime=={version}"]


def ort_python(version: str) -> Path:
    """The interpreter of a cached venv with onnxruntime `version` (built on first use)."""
    return cached_venv(f"onnxruntime-{version}", ort_packages(version))


def pair_config(tmp: Path, base: str, head: str, **more: Any) -> Path:
    """A fuzzbot.yml in `tmp` comparing two onnxruntime releases at `all`, each a `python:`
    side (a build a CI job made earlier); `more` lies over it."""
    config: dict[str, Any] = {
        "backend": "onnxruntime:all",
        "cache_dir": str(tmp / "cache"),
        "compiler": {side: {"python": str(ort_python(v))} for side, v in {"base": base, "head": head}.items()},
        **more,
    }
    path = tmp / "fuzzbot.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _value(name: str, elem_type: int, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    initializers: list[onnx.TensorProto] | None = None,
    opset: int = 17,
    ir: int = 8,
) -> onnx.ModelProto:
    """A fully checked model; IR 8 and opset 17 load on every release from 1.15 on."""
    graph = helper.make_graph(nodes, "release_case", inputs, outputs, initializer=initializers or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir
    onnx.checker.check_model(model, full_check=True)
    return model


def _floats(name: str, shape: list[int], values: list[float]) -> onnx.TensorProto:
    return helper.make_tensor(name, _F32, shape, values)


# x for the normalization cases: signs mixed in every row and every column, so both
# x and x - mean(x) (the base of the Pow) are negative for some elements.
_X = [[-1.0, 0.5, -0.25, 2.0], [0.75, -1.5, 1.0, -0.5], [1.5, 0.25, -2.0, 0.5]]
_SCALE = [1.0, 2.0, 0.5, 1.5]
_BIAS = [0.25, -0.5, 1.0, 0.0]


def _rms_norm(eps: onnx.TensorProto, axis: int = -1, epsilon_first: bool = False) -> Case:
    """Pow(x, 2) -> ReduceMean -> Add(eps) -> Sqrt -> Div(x, .) -> Mul(scale): the RMSNorm
    subgraph that SimplifiedLayerNormFusion rewrites (at `all`)."""
    add_inputs = ["eps", "ms"] if epsilon_first else ["ms", "eps"]
    nodes = [
        helper.make_node("Pow", ["x", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["ms"], axes=[axis], keepdims=1),
        helper.make_node("Add", add_inputs, ["mse"]),
        helper.make_node("Sqrt", ["mse"], ["rms"]),
        helper.make_node("Div", ["x", "rms"], ["n"]),
        helper.make_node("Mul", ["n", "scale"], ["y"]),
    ]
    inits = [_floats("two", [], [2.0]), eps, _floats("scale", [4], _SCALE)]
    model = _model(nodes, [_value("x", _F32, [3, 4])], [_value("y", _F32, [3, 4])], inits)
    return model, {"x": np.array(_X, np.float32)}


def rms_norm_vector_epsilon() -> Case:
    """RMSNorm whose epsilon is a (4,) initializer of four equal values 1.0: 1.26.0 right,
    1.27.0 wrong at `all` (REGRESSION).

    y = x / sqrt(mean(x**2, axis=-1, keepdims=True) + 1.0) * scale; the (3, 1) mean
    plus the (4,) epsilon broadcasts to (3, 4), and since the four values are equal this
    is plain RMSNorm with epsilon 1.0. Every release fuses the six nodes into one
    SimplifiedLayerNormalization at `all` (`disable` and `basic` are right everywhere).
    Up to 1.26.0 the fused node takes epsilon from the initializer's first element
    (1.0): right. From 1.27.0 on (checked through 1.31.1) a non-scalar epsilon is
    ignored and the fused node gets the default epsilon=1e-05: wrong, max abs error
    0.864 on these inputs (row 0 comes out [-0.868, 0.868, -0.108, 2.603] instead of
    [-0.655, 0.655, -0.082, 1.966]; the saved optimized model shows epsilon=1e-05).
    A (1,) or (1, 1) epsilon is still read right by 1.27.0; a (1, 4) one is not (nor a
    (4, 1) one on a (4, 4) input). The same change hits LayerNormFusion, at `basic` too: a 9-node LayerNorm with
    a (4,) epsilon of equal values is right on 1.26.0 and wrong on 1.27.0 at `basic`
    and `all`. (Up to 1.26.0 an epsilon of unequal values was wrong in another way: the
    first element stood for all of them.)
    """
    return _rms_norm(_floats("eps", [4], [1.0, 1.0, 1.0, 1.0]))


def rms_norm_axis_not_last() -> Case:
    """RMSNorm that reduces over axis 0 (of 2) instead of the last axis: 1.15.1 wrong at
    `all`, 1.16.3 right (FIX).

    y = x / sqrt(mean(x**2, axis=0, keepdims=True) + 1e-05) * scale (the (4,) scale
    broadcasts over the last axis, as it happens). onnxruntime 1.15.1 at `all` fuses it
    into a SimplifiedLayerNormalization that normalizes over the last axis, without
    looking at ReduceMean's axes: wrong, max abs error 0.269. 1.16.3 and every later
    release (through 1.31.1) check the axes and leave the six nodes alone: right.
    `disable` and `basic` are right everywhere. The same release fixes the 9-node
    LayerNorm form, axes [-2] on a 3-D input, and two axes [0, 1] or [-2, -1] (which
    1.15.1 also fused as a last-axis norm).
    """
    return _rms_norm(_floats("eps", [], [1e-5]), axis=0)


def rms_norm_epsilon_first() -> Case:
    """RMSNorm written Add(eps, mean) instead of Add(mean, eps), epsilon 1.0: wrong at
    `all` from 1.15.1 through 1.27.0, right from 1.28.0 (FIX_EPSILON_FIRST).

    The fusion reads epsilon from the Add's second input only; with the constant first
    it finds no constant there and falls back to the default 1e-05: wrong, max abs
    error 0.864 (the same numbers as rms_norm_vector_epsilon on 1.27.0). 1.28.0 and
    later still fuse it, now with epsilon=1.0: right. `disable` and `basic` are right
    everywhere.
    """
    return _rms_norm(_floats("eps", [], [1.0]), epsilon_first=True)


def layernorm_pattern_sub_swapped() -> Case:
    """A LayerNorm written with Sub(mean, x) where LayerNorm has Sub(x, mean): every
    release fuses it wrongly (NORM_POW_MISCOMPILE), at `all` on 1.15.1 to 1.31.1 and at
    `basic` from 1.20.1 (REGRESSION_BASIC).

    d = mean(x, -1) - x; y = d / sqrt(mean(d**2, -1) + 1e-05) * scale + bias, that is
    -(LayerNorm(x)) * scale + bias. The Pow's base d is negative wherever x is above its
    row mean. The fusion matches the Sub whichever operand is x, so the nine nodes
    become LayerNormalization(x, scale, bias), which has the opposite sign before the
    scale: wrong, max abs error 5.717 (the optimized model, saved with
    optimized_model_filepath, is a single LayerNormalization). `disable` is right on
    every release. Up to 1.19.2 `basic` is right; from 1.20.1 on, LayerNormFusion runs
    at `basic` for opset >= 17 models, so `basic` is wrong too (the same model stamped
    opset 16 is still right at `basic` on 1.20.1).
    """
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1], keepdims=1),
        helper.make_node("Sub", ["mean", "x"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1], keepdims=1),
        helper.make_node("Add", ["var", "eps"], ["vare"]),
        helper.make_node("Sqrt", ["vare"], ["std"]),
        helper.make_node("Div", ["d", "std"], ["n"]),
        helper.make_node("Mul", ["n", "scale"], ["s"]),
        helper.make_node("Add", ["s", "bias"], ["y"]),
    ]
    inits = [
        _floats("two", [], [2.0]),
        _floats("eps", [], [1e-5]),
        _floats("scale", [4], _SCALE),
        _floats("bias", [4], _BIAS),
    ]
    model = _model(nodes, [_value("x", _F32, [3, 4])], [_value("y", _F32, [3, 4])], inits)
    return model, {"x": np.array(_X, np.float32)}


def layernorm_single_element_axis() -> Case:
    """LayerNormalization over a last axis of size 1: 1.20.1 right, 1.21.1 to 1.23.2
    raise at every level (REGRESSION_RAISES), 1.24.4 right again.

    With one element per row x - mean is 0, so y is the bias, 0.5 everywhere. 1.21.1,
    1.22.1 and 1.23.2 refuse it at run time: "... running LayerNormalization node.
    Name:'' Status Message: Size of X.shape[axis:] must be larger than 1, got 1"
    (INVALID_ARGUMENT). 1.15.1 to 1.20.1 and 1.24.4 to 1.31.1 return the bias. Found by a
    fuzzbot campaign (seed 1006) where a ReduceLogSumExp left one element.
    """
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1, epsilon=1e-5)
    inits = [_floats("scale", [1], [2.0]), _floats("bias", [1], [0.5])]
    model = _model([node], [_value("x", _F32, [3, 1])], [_value("y", _F32, [3, 1])], inits)
    return model, {"x": np.array([[-1.5], [0.25], [3.0]], np.float32)}


STACK_SMASH = "1.25.1"
"""A release that dies of a stack buffer overrun while optimizing a Shape -> Gather whose
indices are a large initializer (shape_gather_after_cast, shape_gather_beside_a_branch)."""


def _shape_gather(source: str, count: int, value: int) -> tuple[onnx.NodeProto, onnx.NodeProto, onnx.TensorProto]:
    indices = onnx.numpy_helper.from_array(np.full((5, 5, count), value, np.int64), "indices")
    return (
        helper.make_node("Shape", [source], ["shape"]),
        helper.make_node("Gather", ["shape", "indices"], ["y"]),
        indices,
    )


def shape_gather_after_cast() -> Case:
    """Cast to bool -> Shape -> Gather of a 5x5x67 initializer of ones, at opset 23: 1.25.1
    aborts while optimizing it ("*** stack smashing detected ***", SIGABRT; the campaign
    that found it saw a SIGSEGV, as memory corruption varies), after its
    Level1_RuleBasedTransformer, at every run; 1.24.4 runs it right at this opset (at
    opset 17 it dies too). Without the Cast neither dies. Found by a 1.24.4 to 1.25.1
    campaign, reported apart from shape_gather_beside_a_branch, the same death."""
    shape, gather, indices = _shape_gather("b", 67, 1)
    nodes = [helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BOOL), shape, gather]
    out = [_value("y", _I64, [5, 5, 67])]
    model = _model(nodes, [_value("x", TensorProto.UINT8, [1, 1])], out, [indices], opset=23, ir=11)
    return model, {"x": np.array([[3]], np.uint8)}


def shape_gather_beside_a_branch() -> Case:
    """Shape -> Gather of a 5x5x44 initializer of zeros beside a Dropout -> Mish branch on
    the same float input, at opset 23: 1.25.1 dies after Level1_RuleBasedTransformer as for
    shape_gather_after_cast; without the branch it runs right."""
    shape, gather, indices = _shape_gather("x", 44, 0)
    branch = [helper.make_node("Dropout", ["x"], ["d"]), helper.make_node("Mish", ["d"], ["m"])]
    out = [_value("y", _I64, [5, 5, 44]), _value("m", _F32, [1, 1])]
    model = _model([*branch, shape, gather], [_value("x", _F32, [1, 1])], out, [indices], opset=23, ir=11)
    return model, {"x": np.array([[-8.0]], np.float32)}


IDENTITY_TRANSPOSE_GEMM = "1.28.0"
"""A release whose GemmTransposeFusion folds an identity Transpose into Gemm as a real one."""


def identity_transpose_gemm_beside_gelu() -> Case:
    """Transpose(perm=[0, 1]) -> Gemm(transB=1) over float64, beside a float64 Gelu, at
    opset 25. 1.28.0 at `all` fails to compile it: GemmTransposeFusion takes the identity
    Transpose for a real one, and shape inference of the fused Gemm finds "Dimension
    mismatch in unification between 9 and 1" (1.27.0 fails it at run time instead). At
    `disable` 1.28.0 declines the model: the Gelu's function body needs a float64 Erf it
    has no kernel for. Found by a 1.27.0 to 1.28.0 campaign."""
    w = onnx.numpy_helper.from_array(np.linspace(-1, 1, 19 * 9).reshape(19, 9), "w")
    c = onnx.numpy_helper.from_array(np.zeros(1), "c")
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 1]),
        helper.make_node("Gemm", ["t", "w", "c"], ["y"], transB=1),
        helper.make_node("Gelu", ["x"], ["g"]),
    ]
    out = [_value("y", TensorProto.DOUBLE, [1, 19]), _value("g", TensorProto.DOUBLE, [1, 9])]
    model = _model(nodes, [_value("x", TensorProto.DOUBLE, [1, 9])], out, [w, c], opset=25, ir=11)
    return model, {"x": np.linspace(-2, 2, 9).reshape(1, 9)}


PAD_WRAP = "1.28.0"
"""A release whose "wrap" Pad writes zeros where a pad longer than the axis should repeat it
(1.27.0 too)."""


def _pad_wrap(then_div: bool) -> Case:
    nodes = [helper.make_node("Pad", ["x", "pads", "", "axes"], ["p"], mode="wrap")]
    if then_div:
        nodes.append(helper.make_node("Div", ["p", "p"], ["y"]))
    inits = [onnx.numpy_helper.from_array(np.array([0], np.int64), "axes")]
    ins = [_value("x", _I64, [1]), _value("pads", _I64, [2])]
    model = _model(nodes, ins, [_value("y" if then_div else "p", _I64, [38])], inits, opset=19, ir=9)
    return model, {"x": np.array([1461], np.int64), "pads": np.array([37, 0], np.int64)}


def pad_wrap_longer_than_the_axis() -> Case:
    """Pad(mode="wrap") of a one-element int64 vector by 37 before it, at opset 19: 1461 38
    times. 1.28.0 (and 1.27.0) give zeros for most of the padding."""
    return _pad_wrap(then_div=False)


def pad_wrap_read_by_an_add() -> Case:
    """pad_wrap_longer_than_the_axis, read by an Add: the Add's output is what mismatches,
    the Pad's the first wrong tensor."""
    model, inputs = _pad_wrap(then_div=False)
    model.graph.node.append(helper.make_node("Add", ["p", "p"], ["y"]))
    model.graph.output[0].name = "y"
    return model, inputs


def pad_wrap_then_div() -> Case:
    """pad_wrap_longer_than_the_axis, divided by itself: 1.28.0 raises "Integer division by
    zero" on the zeros its Pad wrote, where every quotient is 1. A 1.27.0 to 1.28.0
    campaign reported it apart from the wrong Pad itself."""
    return _pad_wrap(then_div=True)


QUICK_GELU_FLOAT64 = ("1.28.0", "1.31.1")
"""Releases whose QuickGeluFusion makes a float64 com.microsoft.QuickGelu it has no kernel
for (1.20.1 to 1.28.0), and one that runs the model (1.31.1)."""


def quick_gelu_float64() -> Case:
    """x * Sigmoid(x) * 1.702 over float64: at `all`, 1.20.1 to 1.28.0 fuse it into a
    com.microsoft.QuickGelu and then fail to load the model: "Failed to find kernel for
    com.microsoft.QuickGelu(1) (node:'/QuickGeluFusion/' ...)" (NOT_IMPLEMENTED). At
    `disable` they run it; 1.31.1 runs it at every level. A 1.27.0 to 1.28.0 campaign set 17
    such cases aside as declined."""
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"]),
        helper.make_node("Mul", ["x", "s"], ["m"]),
        helper.make_node("Mul", ["m", "c"], ["y"]),
    ]
    c = onnx.numpy_helper.from_array(np.array(1.702), "c")
    model = _model(nodes, [_value("x", TensorProto.DOUBLE, [4])], [_value("y", TensorProto.DOUBLE, [4])], [c])
    return model, {"x": np.linspace(-2, 2, 4)}


SQUEEZE_AS_SCALAR = ("1.17.3", "1.18.0")
"""Releases around onnxruntime's inference of an opset-11 Squeeze without axes, on an input
of unknown shape, as a scalar: 1.18.0 computes the Squeeze right, folds a Shape of it to an
empty tensor at `all`, and refuses every consumer whose inference reads its rank; 1.17.3
runs each model right. A 5-minute campaign between them reported it as ten regressions."""

SQUEEZE_CONSUMERS = ("shape", "unsqueeze", "gather_of_shape", "onehot_of_shape")


def squeeze_of_unknown_shape_then(consumer: str) -> Case:
    """TopK with k a graph input (its outputs' dims unknown until run), Squeeze without
    axes, then `consumer`: a Shape (1.18.0: shape (0,) for (2,)), an Unsqueeze (refused at
    load, "values in 'axes' are beyond the bounds", naming the node), or a Gather of the
    Shape (refused at load by the folding, "indices element out of data bounds", naming none),
    or a OneHot of the Shape (the optimizer dies of a SIGFPE folding it)."""
    tail = {
        "shape": [helper.make_node("Shape", ["s"], ["y"])],
        "unsqueeze": [helper.make_node("Unsqueeze", ["s"], ["y"], axes=[2, 1])],
        "gather_of_shape": [helper.make_node("Shape", ["s"], ["z"]), helper.make_node("Gather", ["z", "c"], ["y"])],
        "onehot_of_shape": [
            helper.make_node("Shape", ["s"], ["z"]),
            helper.make_node("OneHot", ["z", "depth", "onoff"], ["y"]),
        ],
    }[consumer]
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-2), helper.make_node("Squeeze", ["i"], ["s"])]
    c = onnx.numpy_helper.from_array(np.array([1], np.int64), "c")
    d = onnx.numpy_helper.from_array(np.array([19.0], np.float32), "depth")
    v = onnx.numpy_helper.from_array(np.array([0, 1], np.int32), "onoff")
    inputs = [_value("x", _F32, [3, 5, 1, 1]), _value("k", _I64, [1])]
    shape = {"shape": [2], "unsqueeze": [3, 1, 1, 5], "gather_of_shape": [1], "onehot_of_shape": [2, 19]}[consumer]
    model = _model(
        nodes + tail,
        inputs,
        [_value("y", _I32 if consumer == "onehot_of_shape" else _I64, shape)],
        {"gather_of_shape": [c], "onehot_of_shape": [d, v]}.get(consumer, []),
        opset=11,
        ir=6,
    )
    x = np.random.default_rng(0).uniform(-1, 1, (3, 5, 1, 1)).astype(np.float32)
    return model, {"x": x, "k": np.array([1], np.int64)}


BODY_LOSES_NOOP = "1.17.3"
"""A release that runs float64 ReduceLogSum, ReduceL1 and ReduceL2 at opset 18 as their
function bodies, and loses `noop_with_empty_axes` in them: given no axes, it reduces over all
of them instead of passing the input on. The bodies as the spec writes them run right on it,
as does ReduceSum itself (1.18.0 too)."""

BODY_OPS = ("ReduceLogSum", "ReduceL1", "ReduceL2")


def reduce_over_no_axes(op: str) -> Case:
    """`op` over float64 with an empty `axes` and `noop_with_empty_axes`: the input itself,
    reduced over nothing."""
    nodes = [helper.make_node(op, ["x", "axes"], ["y"], noop_with_empty_axes=1, keepdims=1)]
    axes = onnx.numpy_helper.from_array(np.zeros(0, np.int64), "axes")
    x, y = _value("x", TensorProto.DOUBLE, [2, 3]), _value("y", TensorProto.DOUBLE, [2, 3])
    model = _model(nodes, [x], [y], [axes], opset=18)
    return model, {"x": np.arange(1.0, 7.0).reshape(2, 3)}


IRFFT_DECLINED = "1.17.3"
"""A release whose DFT schema refuses `inverse` and `onesided` together ("is_onesided and
inverse attributes cannot be enabled at the same time", 1.17.1 to 1.19.2 at least). The spec
left the form unclear until onnx/onnx#7574 defined it as the inverse of a one-sided spectrum
(irfft), which onnxruntime#27028 implemented: a declared limit of its time, and 1.31.1
computes it."""


def irfft() -> Case:
    """The inverse DFT of a one-sided complex spectrum of 5 bins, to a real signal of 8."""
    nodes = [helper.make_node("DFT", ["x", "n", "axis"], ["y"], inverse=1, onesided=1)]
    consts = [
        onnx.numpy_helper.from_array(np.array(8, np.int64), "n"),
        onnx.numpy_helper.from_array(np.array(1, np.int64), "axis"),
    ]
    model = _model(nodes, [_value("x", _F32, [2, 5, 2])], [_value("y", _F32, [2, 8, 1])], consts, opset=20)
    return model, {"x": np.random.default_rng(7).uniform(-1, 1, (2, 5, 2)).astype(np.float32)}


RESIZE_NEGATIVE_AXES = "1.18.0"
"""A release that mishandles Resize's negative `axes` (1.17.3 too): given them, it refuses
its scales at load, refuses the output's rank at run, or makes the wrong shape. Written from
the front, each model runs right."""

RESIZE_FORMS = ("scales_refused", "rank_refused", "wrong_shape")


def resize_over_negative_axes(form: str) -> Case:
    """A Resize whose `axes` count from the back, in the three ways a 1.17.3 -> 1.18.0
    campaign found it fail: three reports of one defect."""
    data: np.ndarray
    if form == "scales_refused":
        node = helper.make_node("Resize", ["x", "", "scales"], ["y"], axes=[-2])
        data, arg, out = np.arange(4, dtype=np.int32).reshape(4, 1), np.array([0.25], np.float32), [1, 1]
    elif form == "rank_refused":
        node = helper.make_node(
            "Resize", ["x", "", "", "sizes"], ["y"], axes=[0, -1], keep_aspect_ratio_policy="not_smaller"
        )
        data, arg, out = np.full((1, 1, 1, 1), 8, np.int32), np.array([10, 12], np.int64), [12, 1, 1, 12]
    else:
        node = helper.make_node("Resize", ["x", "", "scales"], ["y"], axes=[-3], mode="linear")
        data = np.linspace(-1.0, 1.0, 6 * 10 * 15 * 3, dtype=np.float32).reshape(6, 10, 15, 3)
        arg, out = np.array([1.5], np.float32), [6, 15, 15, 3]
    dtype = helper.np_dtype_to_tensor_dtype(data.dtype)
    name = "sizes" if form == "rank_refused" else "scales"
    model = _model(
        [node],
        [_value("x", dtype, list(data.shape))],
        [_value("y", dtype, out)],
        [onnx.numpy_helper.from_array(arg, name)],
        opset=19,
    )
    return model, {"x": data}


RNN_ALPHA_ABORT = "1.28.0"
"""A release that aborts on a bidirectional RNN given an activation_alpha its activations
do not read (1.27.0 too)."""


def relu_then_rnn_with_an_unread_alpha() -> Case:
    """Relu -> a bidirectional RNN (hidden 3, its default Tanh activations, which read no
    alpha) with activation_alpha [0.5], at opset 22: 1.28.0 reads the alpha list by
    position and dies of its own bounds assertion ("stl_vector.h ... operator[]", SIGABRT)
    when it runs the node. Found by a 1.27.0 to 1.28.0 campaign."""
    rng = np.random.default_rng(0)
    inits = [
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (2, 3, 2)).astype(np.float32), "w"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (2, 3, 3)).astype(np.float32), "r"),
    ]
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node(
            "RNN", ["a", "w", "r"], ["y"], hidden_size=3, direction="bidirectional", activation_alpha=[0.5]
        ),
    ]
    model = _model(nodes, [_value("x", _F32, [4, 1, 2])], [_value("y", _F32, [4, 2, 1, 3])], inits, opset=22, ir=10)
    return model, {"x": rng.uniform(-1, 1, (4, 1, 2)).astype(np.float32)}


def rms_norm_single_element_axis() -> Case:
    """The RMSNorm pattern over a last axis of size 1, which SimplifiedLayerNormFusion fuses
    at `extended` and above: 1.21.1 to 1.23.2 refuse it with the very check
    layernorm_single_element_axis meets, "... running SimplifiedLayerNormalization node.
    ... Size of X.shape[axis:] must be larger than 1, got 1". One check of one kernel,
    reached through two ops (a campaign between 1.22.1 and 1.23.2 reported it twice)."""
    nodes = [
        helper.make_node("Pow", ["x", "two"], ["p"]),
        helper.make_node("ReduceMean", ["p"], ["m"], axes=[-1]),
        helper.make_node("Add", ["m", "eps"], ["a"]),
        helper.make_node("Sqrt", ["a"], ["s"]),
        helper.make_node("Div", ["x", "s"], ["d"]),
        helper.make_node("Mul", ["d", "scale"], ["y"]),
    ]
    inits = [_floats("two", [], [2.0]), _floats("eps", [], [1e-5]), _floats("scale", [1], [2.0])]
    model = _model(nodes, [_value("x", _F32, [3, 1])], [_value("y", _F32, [3, 1])], inits)
    return model, {"x": np.array([[-1.5], [0.25], [3.0]], np.float32)}


def maxpool_after_zero_pad() -> Case:
    """A zero Pad in front of a MaxPool: right on 1.15.1 to 1.19.2, wrong at `basic` and
    `all` from 1.20.1 to 1.31.1 (REGRESSION_PAD_FUSION); right at `disable` everywhere.

    Every 2x3 window of the padded 3x3 tensor holds a padded 0 beside x = -1.5, so both
    outputs are 0. From 1.20.1 PadFusion folds the Pad into the MaxPool's own pads, which
    MaxPool fills with -inf, and both outputs become -1.5. Found by a fuzzbot campaign
    between 1.19.2 and 1.20.1 (the PadWindow template's max_pool near miss), reduced to
    these two nodes.
    """
    nodes = [
        helper.make_node("Pad", ["x", "pads", "zero"], ["p"]),
        helper.make_node("MaxPool", ["p"], ["y"], kernel_shape=[2, 3]),
    ]
    inits = [helper.make_tensor("pads", _I64, [8], [0, 0, 1, 1, 0, 0, 1, 1]), _floats("zero", [], [0.0])]
    model = _model(nodes, [_value("x", _F32, [1, 1, 1, 1])], [_value("y", _F32, [1, 1, 2, 1])], inits)
    return model, {"x": np.array([[[[-1.5]]]], np.float32)}


def _pad_then_average_pool(opset: int, pool_pads: list[int] | None = None) -> Case:
    pool = helper.make_node("AveragePool", ["p"], ["y"], kernel_shape=[1], strides=[2])
    if pool_pads is not None:
        pool.attribute.append(helper.make_attribute("pads", pool_pads))
    nodes = [helper.make_node("Pad", ["x", "pads", "zero"], ["p"]), pool]
    inits = [helper.make_tensor("pads", _I64, [6], [0, 0, 1, 0, 0, 1]), _floats("zero", [], [0.0])]
    model = _model(nodes, [_value("x", _F32, [1, 1, 1])], [_value("y", _F32, [1, 1, 2])], inits, opset=opset)
    return model, {"x": np.array([[[2.5]]], np.float32)}


def average_pool_after_zero_pad_explicit_pads() -> Case:
    """A zero Pad of one element on each side of the last axis, into an AveragePool of
    kernel 1 and stride 2 whose `pads` are written out at their default, [0, 0], at opset 15:
    right on 1.17.3 and 1.18.1, and from 1.19.0 to 1.31.1 the session fails to load
    (REGRESSION_PAD_AVGPOOL_EXPLICIT): "pads[dim] < kernel_shape[dim] && ... was false" in
    PoolAttributes. The padded tensor is [0, 2.5, 0], and the pool reads its elements 0 and
    2: y = [0, 0]. PadFusion folds the Pad into the pool's own pads, which a kernel of 1
    cannot take. Found by a fuzzbot campaign between 1.18.1 and 1.19.0 (plain generation),
    reduced to these two nodes. With `pads` absent, 1.19.x loads it and 1.20.1 does not:
    average_pool_after_zero_pad."""
    return _pad_then_average_pool(15, [0, 0])


def average_pool_after_zero_pad() -> Case:
    """average_pool_after_zero_pad_explicit_pads with the pool's `pads` absent, at opset 16:
    right on 1.18.1 to 1.19.2, and from 1.20.1 to 1.31.1 it fails to load the same way
    (REGRESSION_PAD_FUSION, the release where PadFusion took MaxPool too:
    maxpool_after_zero_pad). Found by a fuzzbot campaign between 1.19.2 and 1.20.1."""
    return _pad_then_average_pool(16)


def dequantize_slice_read_by_branches() -> Case:
    """DequantizeLinear of an int8 [2, 15] -> Slice (starts 12, ends 0, step -1, axis 1, the
    starts and steps graph inputs) whose output only the two branches of an If read, at opset
    21: 1.18.1 runs it right; from 1.19.0 to 1.31.1 the process dies of SIGABRT while
    optimizing it, in a checked std::vector<NodeArg*>::operator[]
    (REGRESSION_DQ_SLICE_IF). Which rewrite indexes past the vector was not looked into.
    Found by a fuzzbot campaign between 1.18.1 and 1.19.0 (plain generation), reduced
    to these three nodes and made smaller by hand."""
    then = helper.make_graph(
        [helper.make_node("Add", ["s", "w"], ["a"]), helper.make_node("Neg", ["a"], ["then_out"])],
        "then",
        [],
        [_value("then_out", _F32, [2, 12])],
    )
    abs_of_s = [helper.make_node("Abs", ["s"], ["else_out"])]
    other = helper.make_graph(abs_of_s, "else", [], [_value("else_out", _F32, [2, 12])])
    nodes = [
        helper.make_node("DequantizeLinear", ["q", "scale", "zero_point"], ["d"]),
        helper.make_node("Slice", ["d", "starts", "ends", "axes", "steps"], ["s"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
    ]
    inits = [
        _floats("scale", [], [1.0]),
        helper.make_tensor("zero_point", TensorProto.INT8, [], [0]),
        helper.make_tensor("ends", _I32, [1], [0]),
        helper.make_tensor("axes", _I32, [1], [1]),
        _floats("w", [2, 12], [0.0] * 24),
    ]
    inputs = [
        _value("c", TensorProto.BOOL, []),
        _value("q", TensorProto.INT8, [2, 15]),
        _value("starts", _I32, [1]),
        _value("steps", _I32, [1]),
    ]
    model = _model(nodes, inputs, [_value("y", _F32, [2, 12])], inits, opset=21, ir=10)
    q = np.arange(30, dtype=np.int8).reshape(2, 15) - 8
    return model, {"c": np.array(False), "q": q, "starts": np.array([12], np.int32), "steps": np.array([-1], np.int32)}


def dequantize_int8_reshape() -> Case:
    """DequantizeLinear of an int8 [3] with no zero point, scale 1, into a Reshape to [-1],
    at opset 21: y = [-5, 3, -128]. At `basic`, 1.19.0 to 1.26.0 give [0, 3, 0]; 1.18.1
    and 1.27.0 on are right (REGRESSION_DQ_RESHAPE, FIX_DQ_RESHAPE). The negative values
    become 0, as if a rewrite re-quantized through the default zero point's type, uint8.
    The same model at opset 13 or 19 is wrong on every release from 1.15.1 (1.16.3 for 19)
    to 1.31.1, so the flips are of which opsets the rewrite takes, not of the rewrite. Found
    by a fuzzbot campaign between 1.18.1 and 1.19.0 (plain generation), reduced to these
    two nodes."""
    nodes = [
        helper.make_node("DequantizeLinear", ["q", "scale"], ["d"]),
        helper.make_node("Reshape", ["d", "shape"], ["y"]),
    ]
    inits = [_floats("scale", [], [1.0]), helper.make_tensor("shape", _I64, [1], [-1])]
    model = _model(nodes, [_value("q", TensorProto.INT8, [3])], [_value("y", _F32, [3])], inits, opset=21, ir=10)
    return model, {"q": np.array([-5, 3, -128], np.int8)}


def quantize_4bit_maxpool() -> Case:
    """QuantizeLinear of a float [1, 1, 6, 6] to uint4 (scale 1, zero point 0), its
    DequantizeLinear, then a MaxPool of kernel and stride 3, at opset 26: y holds each
    block's largest value. At `all`, 1.28.0 to 1.31.1 refuse the model at load ("Type
    'tensor(uint4)' of input parameter ... of operator (MaxPool) ... is invalid"), int4 the
    same; 1.27.0 runs it right (REGRESSION_Q4_MAXPOOL). At opset 21 both releases refuse
    it, so what changed is that a rewrite takes opset 26. Found by a fuzzbot campaign
    between 1.27.0 and 1.28.0 (plain generation, with a Pad before the pool), reduced by hand."""
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "scale", "zero_point"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "scale", "zero_point"], ["d"]),
        helper.make_node("MaxPool", ["d"], ["y"], kernel_shape=[3, 3], strides=[3, 3]),
    ]
    inits = [_floats("scale", [], [1.0]), helper.make_tensor("zero_point", TensorProto.UINT4, [], [0])]
    x = _value("x", _F32, [1, 1, 6, 6])
    model = _model(nodes, [x], [_value("y", _F32, [1, 1, 2, 2])], inits, opset=26, ir=13)
    return model, {"x": (np.arange(36, dtype=np.float32) % 7).reshape(1, 1, 6, 6)}


def layernorm_pattern_pow_zero_float16() -> Case:
    """The LayerNorm pattern over float16 with the Pow's exponent 0 where LayerNorm squares:
    right on 1.18.1 to 1.19.2, wrong at `all` from 1.20.1 to 1.31.1 (REGRESSION_NORM_FP16).

    d = x - mean(x); d**0 = 1, so the "variance" is 1 and y = d / sqrt(1 + 1) = d / 1.414.
    LayerNormFusion does not check the exponent (layernorm_pattern_sub_swapped's float32
    miscompile, NORM_POW_MISCOMPILE, on every release); before 1.20.1 it fused float32
    only, and from 1.20.1 it fuses float16 too, so this float16 model turns wrong there.
    Found by a fuzzbot campaign between 1.19.2 and 1.20.1 (plain generation, at opset 21),
    reduced to nine nodes; checked at opset 17 on 1.18.1 to 1.20.1 and 1.31.1."""

    def half(name: str, shape: list[int], values: list[float]) -> onnx.TensorProto:
        return onnx.numpy_helper.from_array(np.array(values, np.float16).reshape(shape), name)

    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]),
        helper.make_node("Sub", ["x", "mean"], ["d"]),
        helper.make_node("Pow", ["d", "zero"], ["p"]),
        helper.make_node("ReduceMean", ["p"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "one"], ["vare"]),
        helper.make_node("Sqrt", ["vare"], ["std"]),
        helper.make_node("Div", ["d", "std"], ["n"]),
        helper.make_node("Mul", ["n", "scale"], ["s"]),
        helper.make_node("Add", ["bias", "s"], ["y"]),
    ]
    inits = [half("zero", [1], [0]), half("one", [], [1]), half("scale", [4], [1] * 4), half("bias", [4], [0] * 4)]
    f16 = TensorProto.FLOAT16
    model = _model(nodes, [_value("x", f16, [1, 4])], [_value("y", f16, [1, 4])], inits, opset=17)
    return model, {"x": np.array([[-1.0, 0.5, -0.25, 2.0]], np.float16)}


def clip_fp16_min_only() -> Case:
    """A float16 Clip given only its lower bound, 0: right on 1.18.1, wrong at every level on
    1.19.0 and 1.19.2, right again from 1.20.1 (REGRESSION_CLIP_FP16, FIX_CLIP_FP16).

    y = max(x, 0) = [0, 0.5, 1] for x = [-1, 0.5, 1]. 1.19's float16 kernel takes the absent
    upper bound for 0 instead of +inf and returns [0, 0, 0] (onnxruntime issue #21957, which
    the 1.20 release fixed). float32 is right on every release. Checked with this model on
    1.18.1, 1.19.0, 1.19.2 and 1.20.1, at `disable` and `all`."""
    low = helper.make_tensor("low", TensorProto.FLOAT16, [], np.array(0.0, np.float16).tobytes(), raw=True)
    node = helper.make_node("Clip", ["x", "low"], ["y"])
    model = _model([node], [_value("x", TensorProto.FLOAT16, [3])], [_value("y", TensorProto.FLOAT16, [3])], [low])
    return model, {"x": np.array([-1.0, 0.5, 1.0], np.float16)}


def reducel2_int32_overflow() -> Case:
    """ReduceL2 on int32 whose sum of squares passes 2**31 while the result does not:
    wrong on 1.15.1 to 1.26.0 at every level, right from 1.27.0 (FIX_REDUCEL2_INT32).

    sqrt(30000**2 + 40000**2) = 50000 exactly, which int32 holds; but 2.5e9 does not, and
    up to 1.26.0 the kernel sums the squares in int32, wraps to a negative sum and
    returns [-2147483648] (INT32_MIN, at every level). 1.27.0 and later return [50000],
    as ReferenceEvaluator does. Found by a fuzzbot campaign (seed 1255,
    ConvInteger into ReduceL2).
    """
    node = helper.make_node("ReduceL2", ["x"], ["y"], axes=[-1], keepdims=0)
    model = _model([node], [_value("x", _I32, [1, 2])], [_value("y", _I32, [1])])
    return model, {"x": np.array([[30000, 40000]], np.int32)}


def reducesum_int32_overflow() -> Case:
    """ReduceSum on int32 whose exact sum, 2**31, does not fit: an overflow, which ONNX
    leaves undefined. 1.20.1 and 1.26.0 wrap to -2147483648 (as the torch reference does);
    1.27.0 and 1.31.1 saturate to 2147483647 (checked on those four releases; the same
    change turned ReduceL1, ReduceProd and ReduceSumSquare from wrapping to saturating).
    Neither answer is wrong: a value difference here is never a bug."""
    node = helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)
    model = _model([node], [_value("x", _I32, [1, 2])], [_value("y", _I32, [])])
    return model, {"x": np.array([[2**30, 2**30]], np.int32)}


def _binary_by_zero(op_type: str, elem_type: int, dtype: type[np.signedinteger]) -> Case:
    node = helper.make_node(op_type, ["a", "b"], ["y"])
    inputs = [_value("a", elem_type, [3]), _value("b", elem_type, [3])]
    model = _model([node], inputs, [_value("y", elem_type, [3])])
    return model, {"a": np.array([7, -7, 5], dtype), "b": np.array([2, 0, 1], dtype)}


def div_int32_by_zero() -> Case:
    """Div on int32 with a zero in the divisor (7/2, -7/0, 5/1).

    1.15.1 to 1.24.4: the process dies of SIGFPE, at every level, inside session.run
    (DIV_BY_ZERO_CRASHES). 1.25.1 to 1.31.1: an exception, "[ONNXRuntimeError] : 1 :
    FAIL : Non-zero status code returned while running Div node. Name:'' Status
    Message: element_wise_ops.cc:692 Compute Integer division by zero"
    (DIV_BY_ZERO_RAISES). No release returns a value. ONNX leaves the result undefined.
    With the zero in a constant divisor instead, 1.15.1 to 1.24.4 die of SIGFPE while
    the session is created at `basic`/`all` (constant folding runs the Div) and in run
    at `disable`; 1.25.1 on refuse the session at every level ("Div<T>::Div ...
    b_data[i] != T{0} was false. Integer division by zero").
    """
    return _binary_by_zero("Div", _I32, np.int32)


def div_int64_by_zero() -> Case:
    """div_int32_by_zero on int64: the same outcome on every release (SIGFPE up to
    1.24.4, the same "Integer division by zero" exception from 1.25.1)."""
    return _binary_by_zero("Div", _I64, np.int64)


def mod_int32_by_zero() -> Case:
    """Mod (fmod=0) on int32 with a zero divisor: SIGFPE on 1.15.1 to 1.24.4 at every
    level; from 1.25.1 an exception "... running Mod node. Name:'' Status Message:
    element_wise_ops.cc:<line> operator() Integer modulo by zero" (line 2239 on 1.25.1,
    2231 on 1.26.0, 2242 on 1.27.0 and 1.28.0, 2256 from 1.29.0)."""
    return _binary_by_zero("Mod", _I32, np.int32)


def mod_int64_by_zero() -> Case:
    """mod_int32_by_zero on int64: the same outcome on every release."""
    return _binary_by_zero("Mod", _I64, np.int64)


CASES = {
    "rms_norm_vector_epsilon": rms_norm_vector_epsilon,
    "rms_norm_axis_not_last": rms_norm_axis_not_last,
    "rms_norm_epsilon_first": rms_norm_epsilon_first,
    "layernorm_pattern_sub_swapped": layernorm_pattern_sub_swapped,
    "layernorm_single_element_axis": layernorm_single_element_axis,
    "clip_fp16_min_only": clip_fp16_min_only,
    "reducel2_int32_overflow": reducel2_int32_overflow,
    "div_int32_by_zero": div_int32_by_zero,
    "div_int64_by_zero": div_int64_by_zero,
    "mod_int32_by_zero": mod_int32_by_zero,
    "mod_int64_by_zero": mod_int64_by_zero,
}


def gather_of_a_wrapping_range() -> Case:
    """Gather(x[1,4], Range(2, -5, -1), axis=1) with the Range's inputs fed at run time: the
    indices 2..-4 wrap. At `extended` and `all` every release 1.15.1 to 1.31.1 gives 3
    columns, not 7: GatherToSliceFusion makes it a Slice, which clamps where Gather wraps;
    `basic` is right."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Range", ["a", "b", "c"], ["r"]), helper.make_node("Gather", ["x", "r"], ["y"], axis=1)]
    scalars = [vi(n, TensorProto.INT32, []) for n in "abc"]
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [1, 4]), *scalars], [vi("y", 1, [1, 7])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    return model, {"x": x, "a": np.array(2, np.int32), "b": np.array(-5, np.int32), "c": np.array(-1, np.int32)}


def saved(tmp: Path, cases: list[Case]) -> list[Path]:
    """Each case as `caseN.onnx` with its inputs beside it (`caseN.npz`), as a user has them."""
    paths = []
    for i, (model, inputs) in enumerate(cases):
        onnx.save(model, str(tmp / f"case{i}.onnx"))
        np.savez(tmp / f"case{i}.npz", **inputs)  # type: ignore[arg-type]
        paths.append(tmp / f"case{i}.onnx")
    return paths


MVN_AXES_DECLINED = "1.15.1"
"""MeanVarianceNormalization over axes other than [0, 2] or [0, 2, 3] is refused at session
creation ("only supports NHW and NCHW reduction for axes attribute"); 1.19.0 runs it."""


def mvn_over_channels() -> Case:
    """MeanVarianceNormalization over axes [1, 2, 3] of an NCHW input."""
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[1, 2, 3])
    model = _model([node], [_value("x", _F32, [2, 3, 4, 5])], [_value("y", _F32, [2, 3, 4, 5])], opset=13)
    x = np.random.default_rng(5).uniform(-2, 2, (2, 3, 4, 5)).astype(np.float32)
    return model, {"x": x}
