"""RNN, GRU and LSTM: every form the generator draws is valid ONNX, and the torch reference
agrees with onnx.reference (on the forms it reads) and with onnxruntime (on every form it
runs), at every version of the ops (7, 14 with `layout`, 22).

onnx.reference reads only the default forms: it ignores sequence_lens, clip, activations,
their alpha and beta, and input_forget. onnxruntime declines `layout` 1, so a batch-first
model is checked on its batch-first-free rewrite (Transposes around a layout-0 node), and
it deviates from the spec in two places (ORT_DEVIATIONS): those forms are checked against
onnxruntime's reading, and each deviation is shown to still exist, so that the table
cannot outlive it. A deliberately wrong reading (a gate order, a direction) must fail the
same comparisons, or the comparisons would prove nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections import Counter
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from backends.client import WorkerClient
from backends.reference import ReferenceError, Substitute, run_reference
from backends.spec import parse_backend
from generator.api import GenConfig, GeneratedCase, generate
from generator.dtypes import DType
from generator.ops import registry
from generator.ops.base import Attrs
from generator.ops.recurrent import (
    ACTIVATIONS,
    PARAMS,
    Cell,
    Functions,
    Recurrent,
    Weights,
    gru_cell,
    lstm_cell,
    recurrence,
    rnn_cell,
)
from oracles.verdict import Verdict, judge

pytestmark = [pytest.mark.worker]

OPS = ("RNN", "GRU", "LSTM")
OPSETS = (13, 14, 17, 21, 22, 26, 18, 15)
SEEDS = 90
OLD_OPSETS = (7, 9, 11, 12)
"""Opsets below what the generator writes, where the ops are version 7: checked on layout-0
models rewritten to import them."""
CELLS: dict[str, Cell] = {"RNN": rnn_cell, "GRU": gru_cell, "LSTM": lstm_cell}
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
OUTPUTS = ("Y", "Y_h", "Y_c")

ort.set_default_logger_severity(3)


def _spec(op: str) -> type[Recurrent]:
    return cast(type[Recurrent], registry()[op])


@functools.cache
def _cases(op: str, dtype: DType = DType.float32, seeds: int = SEEDS) -> tuple[GeneratedCase, ...]:
    found = []
    for seed in range(seeds):
        cfg = GenConfig(
            wide_types=0.0,
            constant_twins=0.0,  # one node per model: the checks read and rewrite its first node
            nodes=1,
            ops=[op],
            dtypes=[dtype],
            opset=OPSETS[seed % len(OPSETS)],
        )
        try:
            found.append(generate(seed, cfg))
        except RuntimeError as e:
            assert "could be inserted" in str(e), str(e)
    return tuple(found)


def _node(model: onnx.ModelProto) -> onnx.NodeProto:
    found: onnx.NodeProto = next(n for n in model.graph.node if n.op_type in OPS)
    return found


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else [s.decode() for s in v] if a.name == "activations" else v
    return out


def _tolerance(dtype: np.dtype) -> tuple[float, float]:
    """(rtol, atol): float16 rounds every step's sums in one implementation and not in another."""
    return (2e-2, 2e-2) if dtype == np.float16 else (1e-4, 1e-5)


def _agree(ours: dict[str, np.ndarray], names: list[str], theirs: list[np.ndarray]) -> bool:
    for name, value in zip(names, theirs, strict=True):
        got, want = ours[name], np.asarray(value)
        if got.shape != want.shape or got.dtype != want.dtype:
            return False
        if not np.allclose(got.astype(np.float64), want.astype(np.float64), *_tolerance(got.dtype)):
            return False
    return True


def _names(model: onnx.ModelProto) -> list[str]:
    return [o.name for o in model.graph.output]


def _ort(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """onnxruntime's outputs; None where it declines the form or the type (`layout` 1, or a
    double GRU: both said in their own words, which the check below pins)."""
    try:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return [np.asarray(v) for v in session.run(None, inputs)]
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own untyped exceptions
        declined = ("Batchwise recurrent operations (layout == 1) are not supported", "does not support double")
        assert any(d in str(e) for d in declined) or ": 9 : NOT_IMPLEMENTED" in str(e), str(e)
        return None


def _evaluate(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    outputs = ReferenceEvaluator(model).run(None, inputs)
    assert isinstance(outputs, list)
    return [np.asarray(v) for v in outputs]


def evaluator_reads(node: onnx.NodeProto, spec: type[Recurrent]) -> bool:
    """Whether onnx.reference computes this node as the spec does: it ignores every form
    below (it reads no sequence_lens, clip, activations, alpha, beta or input_forget)."""
    attrs = _attrs(node)
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    named = attrs.get("activations", list(spec.defaults) * dirs) != list(spec.defaults) * dirs
    ignored = {"clip", "activation_alpha", "activation_beta"} & set(attrs) or attrs.get("input_forget", 0)
    return not (named or ignored or (len(node.input) > 4 and node.input[4]))


# onnxruntime's deviations from the spec -------------------------------------------------


def _thresholded_alpha_defaults_to_zero(attrs: Attrs, spec: type[Recurrent]) -> Attrs:
    """onnxruntime gives ThresholdedRelu alpha 0 where the node's alpha list runs out; the spec
    says the operator's default, ThresholdedRelu's 1.0. Written out, both read the same."""
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    names = [n.decode() if isinstance(n, bytes) else n for n in attrs.get("activations", spec.defaults * dirs)]
    readers = [n for n in names if n in PARAMS]
    given = list(attrs.get("activation_alpha", []))
    rest = [0.0 if n == "ThresholdedRelu" else PARAMS[n][0] for n in readers[len(given) :]]
    return {**attrs, "activation_alpha": given + rest} if readers else attrs


def _lstm_h_unclipped(x: torch.Tensor, s: list[torch.Tensor], p: Weights, fn: Functions) -> list[torch.Tensor]:
    """onnxruntime clips the gates' inputs but not the cell state on its way into h, which the
    spec lists among the activations whose input `clip` bounds."""
    free = dataclasses.replace(fn, clip=None)

    def mixed(k: int, t: torch.Tensor) -> torch.Tensor:
        return free(k, t) if k == 2 else fn(k, t)

    return lstm_cell(x, s, p, cast(Functions, mixed))


def ort_reading(spec: type[Recurrent]) -> Substitute:
    cell = _lstm_h_unclipped if spec.op_type == "LSTM" else CELLS[spec.op_type]

    def compute(attrs: Attrs, inputs: list[torch.Tensor | None]) -> list[torch.Tensor]:
        return recurrence(_thresholded_alpha_defaults_to_zero(attrs, spec), inputs, cell, spec.defaults, spec.gates)

    return compute


def _missing_thresholded_alpha(attrs: dict[str, Any], spec: type[Recurrent]) -> bool:
    filled = _thresholded_alpha_defaults_to_zero(attrs, spec)
    return filled.get("activation_alpha", []) != attrs.get("activation_alpha", []) and any(
        n == "ThresholdedRelu" for n in attrs.get("activations", [])
    )


ORT_DEVIATIONS: dict[str, Callable[[dict[str, Any], type[Recurrent]], bool]] = {
    "ThresholdedRelu's alpha defaults to 0, not 1": _missing_thresholded_alpha,
    "LSTM's clip does not bound h's input (the cell state)": lambda a, s: s.op_type == "LSTM" and "clip" in a,
}
"""onnxruntime 1.31.1 (CPU) against the spec; a form that meets one is checked against
onnxruntime's reading (`ort_reading`), and test_each_deviation_still_exists pins both."""


# rewrites -----------------------------------------------------------------------------


def as_layout0(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same computation with a layout-0 node: X, initial_h and initial_c transposed on
    the way in, Y, Y_h and Y_c on the way out (what onnxruntime runs)."""
    m = copy.deepcopy(model)
    node = _node(m)
    for a in node.attribute:
        if a.name == "layout":
            a.i = 0
    extra: list[onnx.NodeProto] = []
    for slot in (0, 5, 6):
        if slot < len(node.input) and node.input[slot]:
            moved = f"{node.input[slot]}_seq_first"
            extra.append(helper.make_node("Transpose", [node.input[slot]], [moved], perm=[1, 0, 2]))
            node.input[slot] = moved
    after = []
    for slot, name in enumerate(node.output):
        if name:
            node.output[slot] = f"{name}_seq_first"
            perm = [2, 0, 1, 3] if slot == 0 else [1, 0, 2]
            after.append(helper.make_node("Transpose", [node.output[slot]], [name], perm=perm))
    nodes = [*extra, *m.graph.node, *after]
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def evaluator_form(model: onnx.ModelProto) -> onnx.ModelProto:
    """The node without the forms onnx.reference ignores (sequence_lens, clip, activations
    with their alpha and beta, input_forget): a second model it reads, for every case."""
    m = copy.deepcopy(model)
    node = _node(m)
    kept = [a for a in node.attribute if a.name not in EVALUATOR_IGNORES]
    del node.attribute[:]
    node.attribute.extend(kept)
    if len(node.input) > 4:
        node.input[4] = ""
    return m


EVALUATOR_IGNORES = frozenset({"clip", "activations", "activation_alpha", "activation_beta", "input_forget"})


def at_opset(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    m = copy.deepcopy(model)
    m.opset_import[0].version = opset
    return m


# the comparisons ------------------------------------------------------------------------


@dataclasses.dataclass
class Tally:
    evaluator: int = 0
    ort: int = 0
    ort_by_its_reading: Counter[str] = dataclasses.field(default_factory=Counter)
    ort_declined: int = 0


def check_case(
    case: GeneratedCase, spec: type[Recurrent], tally: Tally, substitute: Substitute | None = None
) -> list[str]:
    """Compares one case with onnx.reference and onnxruntime; returns what disagreed."""
    model, inputs = case.model, case.inputs
    node, names = _node(model), _names(model)
    sub = {0: substitute} if substitute is not None else None
    ours = run_reference(model, inputs, substitute=sub)
    wrong = []
    readable = model if evaluator_reads(node, spec) else evaluator_form(model)
    mine = ours if readable is model else run_reference(readable, inputs, substitute=sub)
    tally.evaluator += 1
    if not _agree(mine, names, _evaluate(readable, inputs)):
        wrong.append("onnx.reference")
    runnable = as_layout0(model) if _attrs(node).get("layout", 0) == 1 else model
    theirs = _ort(runnable, inputs)
    if theirs is None:
        tally.ort_declined += 1
        return wrong
    tally.ort += 1
    if _agree(ours, names, theirs):
        return wrong
    met = [why for why, meets in ORT_DEVIATIONS.items() if meets(_attrs(node), spec)]
    if substitute is None and met:
        by_its = run_reference(model, inputs, substitute={0: ort_reading(spec)})
        if _agree(by_its, names, theirs):
            tally.ort_by_its_reading.update(met)
            return wrong
    return [*wrong, "onnxruntime"]


@pytest.mark.parametrize("op", OPS)
def test_reference_agrees_with_onnx_reference_and_onnxruntime(op: str) -> None:
    spec, tally = _spec(op), Tally()
    for case in _cases(op):
        assert check_case(case, spec, tally) == [], (op, _attrs(_node(case.model)), list(_node(case.model).input))
    assert tally.evaluator >= 60, tally
    assert tally.ort >= 60, tally


@pytest.mark.parametrize("op", OPS)
def test_version_7_means_what_version_14_means(op: str) -> None:
    """Opsets 7 to 12 hold version 7, which lacks only `layout`."""
    spec, tally, checked = _spec(op), Tally(), 0
    for case in _cases(op):
        if case.model.opset_import[0].version != 13:
            continue
        for opset in OLD_OPSETS:
            old = dataclasses.replace(case, model=at_opset(case.model, opset))
            onnx.checker.check_model(old.model, full_check=True)
            assert check_case(old, spec, tally) == [], (op, opset, _attrs(_node(case.model)))
            checked += 1
    assert checked >= 20 and tally.ort >= 20, (checked, tally)


@pytest.mark.parametrize(("op", "dtype"), [(op, d) for op in OPS for d in (DType.float16, DType.float64)])
def test_other_float_types_agree_where_they_run(op: str, dtype: DType) -> None:
    spec, tally = _spec(op), Tally()
    for case in _cases(op, dtype, 24):
        assert check_case(case, spec, tally) == [], (op, dtype, _attrs(_node(case.model)))
    assert tally.evaluator + tally.ort >= 10, tally


def _wrong_lstm(x: torch.Tensor, s: list[torch.Tensor], p: Weights, fn: Functions) -> list[torch.Tensor]:
    """The gates read as i, f, o, c (PyTorch's order is i, f, g, o; ONNX's i, o, f, c)."""
    n = s[0].shape[-1]
    order = [0, 2, 1, 3]

    def swap(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([t[k * n : (k + 1) * n] for k in order])

    return lstm_cell(x, s, dataclasses.replace(p, w=swap(p.w), r=swap(p.r), wb=swap(p.wb), rb=swap(p.rb)), fn)


def _wrong_gru(x: torch.Tensor, s: list[torch.Tensor], p: Weights, fn: Functions) -> list[torch.Tensor]:
    """linear_before_reset read the other way round."""
    return gru_cell(x, s, dataclasses.replace(p, linear_before_reset=not p.linear_before_reset), fn)


WRONG: dict[str, Callable[[Attrs, list[torch.Tensor | None]], list[torch.Tensor]]] = {
    "LSTM": lambda a, i: recurrence(a, i, _wrong_lstm, ("Sigmoid", "Tanh", "Tanh"), 4),
    "GRU": lambda a, i: recurrence(a, i, _wrong_gru, ("Sigmoid", "Tanh"), 3),
    # A reversed direction run forwards.
    "RNN": lambda a, i: recurrence(
        {**a, "direction": "forward"} if a.get("direction") == "reverse" else a, i, rnn_cell, ("Tanh",), 1
    ),
}


@pytest.mark.parametrize("op", OPS)
def test_a_wrong_reading_is_caught(op: str) -> None:
    spec, tally = _spec(op), Tally()
    caught: Counter[str] = Counter()
    for case in _cases(op):
        caught.update(check_case(case, spec, tally, substitute=WRONG[op]))
    assert caught["onnxruntime"] >= 5, (caught, tally)
    assert caught["onnx.reference"] >= 1, (caught, tally)


def _forms(case: GeneratedCase) -> set[str]:
    node = _node(case.model)
    attrs = _attrs(node)
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    out = {f"direction={attrs.get('direction', 'forward')}", f"layout={attrs.get('layout', 0)}"}
    out |= {f"activation={a}" for a in attrs.get("activations", [])}
    out |= {f"{k}={attrs[k]}" for k in ("linear_before_reset", "input_forget") if k in attrs}
    out |= {k for k in ("activations", "activation_alpha", "activation_beta", "clip") if k in attrs}
    if "activation_alpha" in attrs and len(attrs["activation_alpha"]) < sum(
        a in PARAMS for a in attrs.get("activations", [])
    ):
        out.add("alpha prefix")
    given = {INPUTS[k] for k, name in enumerate(node.input) if name}
    made = {OUTPUTS[k] for k, name in enumerate(node.output) if name}
    out |= {f"{name} given" for name in given} | {f"{name} made" for name in made}
    out |= {f"{name} absent" for name in INPUTS[3 : len(_spec(node.op_type).optional) + 3] if name not in given}
    out |= {f"{name} absent" for name in OUTPUTS[: _spec(node.op_type).outputs] if name not in made}
    if "" in node.input or "" in node.output:
        out.add("empty name")
    if node.input[-1] == "" or node.output[-1] == "":
        out.add("trailing empty name")
    del dirs
    return out


@pytest.mark.parametrize("op", OPS)
def test_the_generator_draws_every_form(op: str) -> None:
    spec = _spec(op)
    seen: Counter[str] = Counter()
    for case in _cases(op):
        seen.update(_forms(case))
    want = {f"direction={d}" for d in ("forward", "reverse", "bidirectional")} | {"layout=0", "layout=1"}
    want |= {"activations", "activation_alpha", "activation_beta", "empty name", "trailing empty name"}
    want |= {"clip"} if spec.clip_drawn else set()
    want |= {f"{n} given" for n in spec.optional} | {f"{n} absent" for n in spec.optional}
    want |= {f"{n} made" for n in OUTPUTS[: spec.outputs]} | {f"{n} absent" for n in OUTPUTS[: spec.outputs]}
    if op == "GRU":
        want |= {"linear_before_reset=0", "linear_before_reset=1"}
    if op == "LSTM":
        want |= {"input_forget=0", "input_forget=1"}
        assert "clip" not in seen, "an LSTM clip has two readings (LSTM.clip_drawn)"
    assert want <= set(seen), sorted(want - set(seen))


def test_every_activation_is_drawn_and_alpha_lists_that_run_out() -> None:
    seen = {a for op in OPS for case in _cases(op) for a in _attrs(_node(case.model)).get("activations", [])}
    assert seen == set(ACTIVATIONS)
    assert any("alpha prefix" in _forms(case) for op in OPS for case in _cases(op))


@pytest.mark.parametrize("op", OPS)
def test_emitted_models_pass_the_full_checker_and_strict_inference(op: str) -> None:
    for case in _cases(op):
        onnx.checker.check_model(case.model, full_check=True)
        onnx.shape_inference.infer_shapes(case.model, check_type=True, strict_mode=True, data_prop=True)
        node = _node(case.model)
        arrays = {**case.inputs, **{i.name: numpy_helper.to_array(i) for i in case.model.graph.initializer}}
        if len(node.input) > 4 and node.input[4]:
            lens, x = arrays[node.input[4]], arrays[node.input[0]]
            seq = x.shape[1] if _attrs(node).get("layout", 0) == 1 else x.shape[0]
            assert lens.dtype == np.int32 and lens.min() >= 1 and lens.max() <= seq, (lens, seq)
        ours = run_reference(case.model, case.inputs)
        assert all(np.isfinite(v).all() for v in ours.values())


def _one_node(op: str, dtype: np.dtype[Any], gates: int, **attrs: Any) -> onnx.ModelProto:
    elem = helper.np_dtype_to_tensor_dtype(dtype)
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (1, gates * 2, 3)).astype(dtype), "W")
    r = numpy_helper.from_array(rng.uniform(-1, 1, (1, gates * 2, 2)).astype(dtype), "R")
    node = helper.make_node(op, ["X", "W", "R"], ["Y"], hidden_size=2, **attrs)
    shape = [4, 2, 3] if attrs.get("layout", 0) == 0 else [2, 4, 3]
    x = helper.make_tensor_value_info("X", elem, shape)
    graph = helper.make_graph([node], "g", [x], [helper.make_tensor_value_info("Y", elem, None)], [w, r])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@pytest.mark.parametrize(
    ("op", "dtype", "gates", "attrs"),
    [("LSTM", np.float32, 4, {"layout": 1}), ("GRU", np.float64, 3, {})],
)
def test_onnxruntime_declining_a_recurrent_form_is_unsupported_not_a_crash(
    op: str, dtype: type, gates: int, attrs: dict[str, Any]
) -> None:
    """onnxruntime refuses layout 1 ("Batchwise recurrent operations (layout == 1) are not
    supported") and a float64 GRU ("GRU operator does not support double yet"): its own
    declared limits, which a campaign must not report as crashes. A real bug of the same
    kernels stays reported: an RNN whose ThresholdedRelu takes no alpha computes it with 0
    where the spec's default is 1.0, a wrong result."""
    model = _one_node(op, np.dtype(dtype), gates, **attrs)
    shape = (2, 4, 3) if attrs.get("layout") else (4, 2, 3)
    x: np.ndarray = np.random.default_rng(1).uniform(-2, 2, shape).astype(dtype)
    rnn = _one_node("RNN", np.dtype(np.float32), 1, activations=["ThresholdedRelu"])
    rnn_x = {"X": np.random.default_rng(2).uniform(-2, 2, (4, 2, 3)).astype(np.float32)}
    with WorkerClient(parse_backend("onnxruntime:all")) as client:
        declined = judge(client.run(model.SerializeToString(), {"X": x}), {}, "")
        wrong = judge(client.run(rnn.SerializeToString(), rnn_x), run_reference(rnn, rnn_x), "RNN")
    assert declined.verdict is Verdict.unsupported, declined.message
    assert wrong.verdict is Verdict.wrong_result, wrong.message


def test_a_sequence_length_beyond_the_sequence_is_no_model_to_judge() -> None:
    """sequence_lens past X's sequence is undefined, and onnxruntime refuses it ("All values
    must be >= 0 and <= seq_length"); the reference refuses it too, so a reduction that
    shortens X under a kept sequence_lens is no candidate and its refusal no crash. A valid
    one still computes."""
    node = helper.make_node("RNN", ["X", "W", "R", "", "lens"], ["Y"], hidden_size=2)
    w = numpy_helper.from_array(np.ones((1, 2, 3), np.float32), "W")
    r = numpy_helper.from_array(np.ones((1, 2, 2), np.float32), "R")
    x = helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [2, 1, 3])
    lens = helper.make_tensor_value_info("lens", onnx.TensorProto.INT32, [1])
    y = helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, None)
    model = helper.make_model(
        helper.make_graph([node], "g", [x, lens], [y], [w, r]), opset_imports=[helper.make_opsetid("", 14)]
    )
    xs = np.full((2, 1, 3), 0.1, np.float32)
    assert run_reference(model, {"X": xs, "lens": np.array([2], np.int32)})["Y"].shape == (2, 1, 1, 2)
    with pytest.raises(ReferenceError, match="sequence_lens"):
        run_reference(model, {"X": xs, "lens": np.array([3], np.int32)})
