"""The spectral ops (generator.ops.signal), for every dtype each declares.

Every generated single-op model must pass onnx.checker's full check and strict shape inference,
and the torch reference must agree with onnxruntime 1.31.1 (optimizations off, and at their
default) and with onnx.reference.ReferenceEvaluator. onnxruntime lacks some kernels, which it
must say; where it is wrong, the form is listed in ORT_DEFECTS with what shows it wrong, and
each listed defect must still show. Every attribute and input form the specs draw must be drawn
over the seeds tried, and hand-worked answers check the references on their own. TVM 0.27's
Relax frontend converts none of these ops, so it has no test here.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented

from backends.reference import run_reference
from generator.api import GenConfig, GeneratedCase, generate
from generator.dtypes import DType
from generator.ops import registry
from generator.ops.base import OUTPUTS, OpSpec
from tests.op_family import classic_dtypes

FAMILY = "generator.ops.signal"
SPECS = {op: spec for op, spec in sorted(registry().items()) if spec.__module__ == FAMILY}
CASES = [(op, dtype) for op, spec in SPECS.items() for dtype in classic_dtypes(spec)]
OPSETS = {"DFT": (17, 19, 20, 21)}
"""DFT-17 (axis attribute) and DFT-20 (axis input); the other ops have one version."""
SEEDS = 12
FORM_SEEDS = 40

Inputs = dict[str, np.ndarray]
Known = Callable[[onnx.ModelProto, onnx.NodeProto], bool]


def opsets(op: str) -> tuple[int, ...]:
    return OPSETS.get(op, (17, 21))


def attr(node: onnx.NodeProto, name: str, default: object = None) -> object:
    for a in node.attribute:
        if a.name == name:
            value = helper.get_attribute_value(a)
            return value.decode() if isinstance(value, bytes) else value
    return default


def elem_type(model: onnx.ModelProto, name: str) -> int | None:
    """The element type of a graph input or initializer, None for a computed tensor."""
    for init in model.graph.initializer:
        if init.name == name:
            return int(init.data_type)
    for v in model.graph.input:
        if v.name == name:
            return int(v.type.tensor_type.elem_type)
    return None


def _half_edges_half_output(model: onnx.ModelProto, node: onnx.NodeProto) -> bool:
    return elem_type(model, node.input[3]) == TensorProto.FLOAT16 and attr(node, "output_datatype") == 10


ORT_DEFECTS: dict[str, tuple[str, Known, str]] = {
    "MelWeightMatrix": (
        "refuses the model when the edge hertz are float16 and output_datatype is float16: its"
        " float16-to-float32 cast insertion retypes the output to float, then rejects its own"
        " graph (even with optimizations off); the same node with float32 output runs, and the"
        " evaluator gives what torch gives",
        _half_edges_half_output,
        "InsertedPrecisionFreeCast",
    ),
}
"""op -> (how onnxruntime 1.31.1 is wrong, which nodes, words of its error): those models are
not run on it; test_listed_onnxruntime_defects_still_show pins each."""


def _half_output(model: onnx.ModelProto, node: onnx.NodeProto) -> bool:
    return attr(node, "output_datatype") == TensorProto.FLOAT16


def _mel_gap(model: onnx.ModelProto, node: onnx.NodeProto) -> bool:
    return _half_output(model, node) or elem_type(model, node.input[3]) != TensorProto.FLOAT


ORT_MISSING: dict[str, tuple[str, Known]] = {
    **{
        w: ("float16 output (at opset 19 and later; 17 and 18 run it)", _half_output)
        for w in ("HannWindow", "HammingWindow", "BlackmanWindow")
    },
    "MelWeightMatrix": ("float16 or float64 edge hertz (T2), or float16 output", _mel_gap),
}
"""Schema types onnxruntime 1.31.1 has no CPU kernel for (it says NOT_IMPLEMENTED), by node."""


def close(ours: np.ndarray, theirs: np.ndarray, what: str) -> None:
    """Shape and dtype exactly, values within the dtype's tolerance scaled by the largest magnitude."""
    theirs = np.asarray(theirs)
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} != {theirs.shape}"
    assert ours.dtype == theirs.dtype, f"{what}: dtype {ours.dtype} != {theirs.dtype}"
    rtol = 1e-2 if ours.dtype == np.float16 else 1e-4 if ours.dtype == np.float32 else 1e-7
    finite = np.abs(theirs[np.isfinite(theirs)]).astype(np.float64)
    atol = rtol * max(1.0, float(finite.max()) if finite.size else 1.0)
    np.testing.assert_allclose(ours.astype(np.float64), theirs.astype(np.float64), rtol=rtol, atol=atol, err_msg=what)


def run_ort(model: onnx.ModelProto, inputs: Inputs, optimize: bool) -> list[np.ndarray] | None:
    """onnxruntime's outputs, or None where it says it has no kernel."""
    options = ort.SessionOptions()
    options.log_severity_level = 4
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except OrtNotImplemented as e:
        assert "NOT_IMPLEMENTED" in str(e), str(e)
        return None
    return [np.asarray(v) for v in session.run(None, inputs)]


def evaluate(model: onnx.ModelProto, inputs: Inputs) -> list[np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, inputs)]


def check_valid(model: onnx.ModelProto) -> None:
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)


def check_model(
    op: str,
    model: onnx.ModelProto,
    inputs: Inputs,
    ort_defects: dict[str, tuple[str, Known, str]],
    evaluator_defects: dict[str, tuple[str, Known]],
    missing: dict[str, tuple[str, Known]],
) -> int:
    """Validity, then the reference against both onnxruntime levels and the evaluator; returns
    the comparisons made."""
    check_valid(model)
    node = next(n for n in model.graph.node if n.op_type == op)
    names = [o.name for o in model.graph.output]
    ours = run_reference(model, inputs)
    compared = 0
    defect = ort_defects.get(op)
    if defect is None or not defect[1](model, node):
        for optimize in (False, True):
            got = run_ort(model, inputs, optimize)
            gap = op in missing and missing[op][1](model, node)
            assert got is not None or gap, f"{op}: onnxruntime lacks a kernel it should have"
            for name, value in zip(names, got or [], strict=False):
                close(ours[name], value, f"{op} {name} vs onnxruntime (optimize={optimize})")
                compared += 1
    known = evaluator_defects.get(op)
    if known is None or not known[1](model, node):
        for name, value in zip(names, evaluate(model, inputs), strict=True):
            close(ours[name], value, f"{op} {name} vs ReferenceEvaluator")
            compared += 1
    return compared


@functools.cache
def cases(op: str, dtype: DType, seeds: int = SEEDS) -> tuple[GeneratedCase, ...]:
    """Single-op models at the op's opsets, in turn."""
    found = []
    for seed in range(seeds):
        opset = opsets(op)[seed % len(opsets(op))]
        cfg = GenConfig(
            wide_types=0.0, nodes=1, ops=[op], dtypes=[dtype], opset=opset, values="none", max_elements=1024
        )
        found.append(generate(seed, cfg))
    return tuple(found)


@pytest.mark.parametrize(("op", "dtype"), CASES, ids=[f"{op}-{d}" for op, d in CASES])
def test_op_is_valid_runs_and_matches_both_oracles(op: str, dtype: DType) -> None:
    compared = sum(check_model(op, c.model, c.inputs, ORT_DEFECTS, {}, ORT_MISSING) for c in cases(op, dtype))
    assert compared >= SEEDS, f"{op} {dtype}: only {compared} comparisons"


def test_family_is_the_six_spectral_ops() -> None:
    assert set(SPECS) == {"HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix", "DFT", "STFT"}
    assert all(spec.since_opset == 17 for spec in SPECS.values())
    assert all(not spec.exists_at(16) for spec in SPECS.values())


# --- forms ---------------------------------------------------------------------------------


def _producer(model: onnx.ModelProto, name: str) -> str:
    found = next((n.op_type for n in model.graph.node if name in n.output), None)
    return found or ("runtime" if any(v.name == name for v in model.graph.input) else "const")


def _size_form(model: onnx.ModelProto, node: onnx.NodeProto) -> str:
    source = {"Gather": "shape", "runtime": "runtime", "const": "const"}[_producer(model, node.input[0])]
    type_name = "" if source == "shape" else f"/{elem_type(model, node.input[0])}"
    return source + type_name


def _signal_form(model: onnx.ModelProto, node: onnx.NodeProto) -> str:
    return {"Unsqueeze": "real", "Concat": "complex"}.get(_producer(model, node.input[0]), "direct")


def form_of(op: str, model: onnx.ModelProto) -> set[str]:
    """The attribute and input forms a node shows, as short words."""
    node = next(n for n in model.graph.node if n.op_type == op)
    opset = model.opset_import[0].version
    written = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    inputs = [i for i in node.input]
    forms = {f"{k}={v}" for k, v in written.items() if k != "axis"}
    forms |= {f"no {k}" for k in ("periodic", "output_datatype", "inverse", "onesided", "axis") if k not in written}
    if "Window" in op:
        forms.add(_size_form(model, node))
    elif op == "DFT":
        forms |= {_signal_form(model, node), f"v{20 if opset >= 20 else 17}"}
        forms.add("dft_length" if len(inputs) > 1 and inputs[1] else "no dft_length")
        if len(inputs) > 2:
            forms.add("axis input")
        if len(inputs) > 1 and inputs[1]:
            forms.add(_producer(model, inputs[1]) + " dft_length")
        if "axis" in written:
            forms.add("axis attr " + ("neg" if int(written["axis"]) < 0 else "nonneg"))
    elif op == "STFT":
        forms.add(_signal_form(model, node))
        forms.add("window" if len(inputs) > 2 and inputs[2] else "no window")
        forms.add("frame_length" if len(inputs) > 3 else "no frame_length")
        forms.add(_producer(model, inputs[1]) + " step")
    elif op == "MelWeightMatrix":
        forms |= {_producer(model, inputs[0]) + " scalars", f"edges {elem_type(model, inputs[3])}"}
    return forms


EXPECTED_FORMS = {
    **{
        w: {"periodic=0", "periodic=1", "no periodic", "output_datatype=1", "output_datatype=10"}
        | {"output_datatype=11", "no output_datatype", "shape", "const/7", "const/6", "runtime/7"}
        for w in ("HannWindow", "HammingWindow", "BlackmanWindow")
    },
    "DFT": {"real", "complex", "direct", "v17", "v20", "inverse=1", "inverse=0", "onesided=1", "onesided=0"}
    | {"no inverse", "no onesided", "dft_length", "no dft_length", "axis input", "runtime dft_length"}
    | {"const dft_length", "axis attr neg", "axis attr nonneg", "no axis"},
    "STFT": {"real", "complex", "direct", "window", "no window", "frame_length", "no frame_length"}
    | {"onesided=0", "onesided=1", "runtime step", "const step"},
    "MelWeightMatrix": {"const scalars", "runtime scalars", "edges 1", "edges 11"}
    | {"output_datatype=1", "output_datatype=10", "output_datatype=11", "no output_datatype"},
}


@pytest.mark.parametrize("op", sorted(SPECS))
def test_every_drawn_form_is_emitted(op: str) -> None:
    seen: set[str] = set()
    for dtype in classic_dtypes(SPECS[op]):
        for case in cases(op, dtype, FORM_SEEDS):
            seen |= form_of(op, case.model)
    assert EXPECTED_FORMS[op] <= seen, f"{op}: never emitted {sorted(EXPECTED_FORMS[op] - seen)}"


def test_dft_emits_irfft_and_rfft() -> None:
    """The one-sided forms: RFFT of a real signal, IRFFT (inverse, real [..., 1] result) of a complex one."""
    seen = set()
    for dtype in classic_dtypes(SPECS["DFT"]):
        for case in cases("DFT", dtype, FORM_SEEDS):
            node = next(n for n in case.model.graph.node if n.op_type == "DFT")
            out = case.model.graph.output[0].type.tensor_type.shape.dim[-1].dim_value
            seen.add((_signal_form(case.model, node), attr(node, "inverse", 0), attr(node, "onesided", 0), out))
    assert ("real", 0, 1, 2) in seen and ("complex", 1, 1, 1) in seen, sorted(seen)


# --- hand-worked answers -------------------------------------------------------------------


def _ref(op: str, attrs: dict[str, object], *inputs: np.ndarray | None, version: int = 17) -> list[np.ndarray]:
    """The reference on numpy inputs, None for an absent optional one (as interpreters pass it)."""
    spec: type[OpSpec] = SPECS[op]
    args = [None if a is None else torch.from_numpy(np.asarray(a)) for a in inputs]
    return [t.numpy() for t in spec.reference_at(version)(attrs, args)]  # type: ignore[arg-type]


ALPHA = 25 / 46


@pytest.mark.parametrize(
    ("op", "periodic", "size", "expected"),
    [
        ("HannWindow", 1, 4, [0.0, 0.5, 1.0, 0.5]),
        ("HannWindow", 0, 5, [0.0, 0.5, 1.0, 0.5, 0.0]),
        ("HammingWindow", 0, 3, [2 * ALPHA - 1, 1.0, 2 * ALPHA - 1]),
        ("HammingWindow", 1, 2, [2 * ALPHA - 1, 1.0]),
        ("BlackmanWindow", 1, 4, [0.0, 0.34, 1.0, 0.34]),
        ("BlackmanWindow", 0, 3, [0.0, 1.0, 0.0]),
    ],
)
def test_windows_by_hand(op: str, periodic: int, size: int, expected: list[float]) -> None:
    (w,) = _ref(op, {"periodic": periodic, "output_datatype": 11}, np.asarray(size, dtype=np.int64))
    np.testing.assert_allclose(w, expected, atol=1e-12)
    (half,) = _ref(op, {"periodic": periodic, "output_datatype": 10}, np.asarray(size, dtype=np.int32))
    assert half.dtype == np.float16
    (default,) = _ref(op, {}, np.asarray(size, dtype=np.int64))
    assert default.dtype == np.float32  # output_datatype 1 and periodic 1 when left out
    (periodic_w,) = _ref(op, {"periodic": 1}, np.asarray(size, dtype=np.int64))
    np.testing.assert_array_equal(default, periodic_w)


def _pairs(values: list[complex]) -> np.ndarray:
    return np.asarray([[v.real, v.imag] for v in values])


def test_dft_by_hand() -> None:
    """fft([1, 2, 3, 4]) = [10, -2+2j, -2, -2-2j], its inverse, RFFT, IRFFT and a cut to 2."""
    x = np.asarray([[1.0], [2.0], [3.0], [4.0]])[None]  # [batch 1, 4, real]
    spectrum = [10, -2 + 2j, -2, -2 - 2j]
    for version, axis in ((17, {"axis": 1}), (20, {})):
        axis_input = () if version == 17 else (np.asarray(-2, dtype=np.int64),)
        none = () if version == 17 else (None,)
        (y,) = _ref("DFT", dict(axis), x, *none, *axis_input, version=version)
        np.testing.assert_allclose(y[0], _pairs(spectrum), atol=1e-12)
        (r,) = _ref("DFT", {**axis, "onesided": 1}, x, *none, *axis_input, version=version)
        np.testing.assert_allclose(r[0], _pairs(spectrum[:3]), atol=1e-12)
        complex_spectrum = _pairs(spectrum)[None]
        (back,) = _ref("DFT", {**axis, "inverse": 1}, complex_spectrum, *none, *axis_input, version=version)
        np.testing.assert_allclose(back[0], _pairs([1, 2, 3, 4]), atol=1e-12)
        (real,) = _ref("DFT", {**axis, "inverse": 1, "onesided": 1}, complex_spectrum[:, :3], *none, *axis_input)
        np.testing.assert_allclose(real[0, :, 0], [1, 2, 3, 4], atol=1e-12)
        (cut,) = _ref("DFT", dict(axis), x, np.asarray(2, dtype=np.int64), *axis_input, version=version)
        np.testing.assert_allclose(cut[0], _pairs([3, -1]), atol=1e-12)


def test_dft_17_reads_its_axis_attribute_and_20_its_input() -> None:
    """[[1, 2], [3, 4]] along axis 0 gives [[4, 6], [-2, -2]], along axis 1 [[3, -1], [7, -1]]."""
    x = np.asarray([[1.0, 2.0], [3.0, 4.0]])[..., None]
    (by_attr,) = _ref("DFT", {"axis": 0}, x, version=17)
    (by_input,) = _ref("DFT", {}, x, None, np.asarray(0, dtype=np.int64), version=20)
    (default_17,) = _ref("DFT", {}, x, version=17)
    (default_20,) = _ref("DFT", {}, x, version=20)
    np.testing.assert_allclose(by_attr[..., 0], [[4, 6], [-2, -2]], atol=1e-12)
    np.testing.assert_array_equal(by_attr, by_input)
    np.testing.assert_allclose(default_17[..., 0], [[3, -1], [7, -1]], atol=1e-12)
    np.testing.assert_array_equal(default_17, default_20)  # axis 1 and -2 name the same dim here
    dft = SPECS["DFT"]
    assert dft.refusal(17, {OUTPUTS: 1, "axis": 0}) is None
    assert dft.refusal(20, {OUTPUTS: 1, "axis": 0}) is not None  # DFT-20 reads its axis input only


def test_stft_by_hand() -> None:
    """Frames [1, 2, 3] and [3, 4, 5] of [1..5] at step 2; X[1] of both is -1.5 + (sqrt(3)/2)j."""
    signal = np.arange(1.0, 6.0)[None, :, None]
    step = np.asarray(2, dtype=np.int64)
    (y,) = _ref("STFT", {"onesided": 1}, signal, step, None, np.asarray(3, dtype=np.int64))
    h = math.sqrt(3) / 2
    np.testing.assert_allclose(y[0], [_pairs([6, -1.5 + h * 1j]), _pairs([12, -1.5 + h * 1j])], atol=1e-12)
    (windowed,) = _ref("STFT", {"onesided": 0}, signal, step, np.asarray([0.0, 1.0, 0.0]))
    np.testing.assert_allclose(windowed[0, 0], _pairs([2, -1 - 2 * h * 1j, -1 + 2 * h * 1j]), atol=1e-12)
    (whole,) = _ref("STFT", {"onesided": 1}, signal, step)
    assert whole.shape == (1, 1, 3, 2) and whole[0, 0, 0, 0] == 15.0


def test_mel_weight_matrix_by_hand() -> None:
    """16 kHz, a 16-point DFT (9 bins), one band from 100 to 8000 Hz: mel 150.49 to 2840.02 in
    three steps of 896.51 puts its edges at 100, 1072.4 and 3226.8 Hz, (16 + 1) * hz / 16000 =
    0.106, 1.139 and 3.429, so bins 0, 1 and 3: the band is 1 at bin 1 and 0.5 at bin 2."""
    scalars = [np.asarray(v, dtype=np.int64) for v in (1, 16, 16000)]
    edges = [np.asarray(v, dtype=np.float32) for v in (100.0, 8000.0)]
    (w,) = _ref("MelWeightMatrix", {}, *scalars, *edges)
    assert w.dtype == np.float32 and w.shape == (9, 1)
    np.testing.assert_array_equal(w[:, 0], [0, 1, 0.5, 0, 0, 0, 0, 0, 0])
    two = [np.asarray(v, dtype=np.int64) for v in (2, 16, 16000)]
    (w2,) = _ref("MelWeightMatrix", {"output_datatype": 11}, *two, *edges)
    assert w2.dtype == np.float64 and w2.shape == (9, 2)
    assert (w2.max(axis=0) == 1).all()  # every band peaks at 1


# --- onnxruntime's departures --------------------------------------------------------------


def _model(
    node: onnx.NodeProto, inits: list[onnx.TensorProto], out: int, shape: list[int], opset: int
) -> onnx.ModelProto:
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", out, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def test_listed_onnxruntime_defects_still_show() -> None:
    """MelWeightMatrix, float16 edges, float16 output: onnxruntime refuses the valid model at
    both levels, the evaluator and torch agree, and with a float32 output it runs."""
    scalars = [
        numpy_helper.from_array(np.asarray(v, dtype=np.int64), n) for n, v in zip("abc", (4, 8, 16000), strict=True)
    ]
    edges = [
        numpy_helper.from_array(np.asarray(v, dtype=np.float16), n) for n, v in zip("de", (100.0, 4000.0), strict=True)
    ]
    node = helper.make_node("MelWeightMatrix", list("abcde"), ["y"], output_datatype=TensorProto.FLOAT16)
    model = _model(node, scalars + edges, TensorProto.FLOAT16, [5, 4], 17)
    check_valid(model)
    assert ORT_DEFECTS["MelWeightMatrix"][1](model, node)
    for level in (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        with pytest.raises(Exception, match=ORT_DEFECTS["MelWeightMatrix"][2]):
            ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    close(run_reference(model, {})["y"], evaluate(model, {})[0], "MelWeightMatrix vs evaluator")
    as_float = helper.make_node("MelWeightMatrix", list("abcde"), ["y"])
    float_model = _model(as_float, scalars + edges, TensorProto.FLOAT, [5, 4], 17)
    got = run_ort(float_model, {}, optimize=False)
    assert got is not None
    close(run_reference(float_model, {})["y"], got[0], "MelWeightMatrix float output vs onnxruntime")


def test_irfft_of_a_spectrum_longer_or_shorter_than_the_length_is_not_generated() -> None:
    """IRFFT where the spectrum does not hold dft_length // 2 + 1 bins: onnxruntime departs from
    numpy's irfft (which the spec cites, and the evaluator and torch follow) for some lengths,
    e.g. 4 bins to 5 points; the generator writes only matching lengths (DFT.requires)."""
    spectrum = np.random.default_rng(1).normal(size=(2, 4, 2))
    inits = [numpy_helper.from_array(np.asarray(5, dtype=np.int64), "n")]
    node = helper.make_node("DFT", ["x", "n"], ["y"], inverse=1, onesided=1, axis=1)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 4, 2])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 5, 1])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    check_valid(model)
    ours = run_reference(model, {"x": spectrum})["y"]
    numpy_answer = np.fft.irfft(spectrum[..., 0] + 1j * spectrum[..., 1], n=5, axis=1)[..., None]
    np.testing.assert_allclose(ours, numpy_answer, atol=1e-12)
    close(ours, evaluate(model, {"x": spectrum})[0], "IRFFT vs evaluator")
    got = run_ort(model, {"x": spectrum}, optimize=False)
    assert got is not None and not np.allclose(got[0], ours, atol=1e-3)
    for dtype in classic_dtypes(SPECS["DFT"]):
        for case in cases("DFT", dtype, FORM_SEEDS):
            node = next(n for n in case.model.graph.node if n.op_type == "DFT")
            if attr(node, "inverse", 0) and attr(node, "onesided", 0):
                bins = case.model.graph.output[0].type.tensor_type.shape.dim
                assert len(bins) >= 2
