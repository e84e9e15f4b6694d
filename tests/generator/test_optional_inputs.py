"""Optional inputs drawn absent and present (generator.ops.optional): a converter branches on
an optional input's absence as on an attribute's (TVM's QuantizeLinear-21 reads its zero point
only `if len(inputs) > 2`), so a generator that always writes one leaves the other branch
unreached. Each test draws a few hundred small cases, asserts both forms come up, and that
what came up is a valid model whose torch reference agrees with onnxruntime (optimizer off)."""

from __future__ import annotations

import collections
import random
from collections.abc import Iterable

import numpy as np
import onnx
from onnx import TensorProto, helper

from generator.api import GenConfig, generate
from generator.binning import ABSENT, PRESENT
from generator.coverage import Coverage
from generator.dtypes import DType
from generator.ops import registry
from generator.ops.base import OLDEST_WRITTEN
from generator.ops.optional import (
    OPTIONAL,
    OPTIONAL_SHARE,
    NodeView,
    OptionalInputs,
    form_key,
    optional_slots,
    owned_or_zero,
    quantize_zero_point,
)
from tests.generator.test_generation_classes import agrees_with_onnxruntime, valid

NEWEST = 26
F32 = DType.float32
QUIET = {"patterns": 0.0, "edges": 0.0, "symbolic_dims": 0.0, "wide_types": 0.0}


def written_ops() -> dict[str, tuple[int, int]]:
    """Every op a spec writes (not a template), with the opsets it is written at."""
    return {
        op: (max(OLDEST_WRITTEN, spec.since_opset), min(NEWEST, spec.until_opset))
        for op, spec in registry().items()
        if spec.since_opset <= NEWEST
    }


def test_the_audit_names_every_optional_input_of_every_op_written() -> None:
    """OPTIONAL is the audit: every input an op's schema lets a node leave out, at any opset a
    spec writes it, has an entry saying what its absence means and who draws its two forms
    (the spec, a drop or make rule here, or why neither)."""
    missing, stale = [], []
    for op, (low, high) in written_ops().items():
        slots = {s for opset in range(low, high + 1) for s in optional_slots(op, opset)}
        missing += [f"{op}[{s}]" for s in sorted(slots - set(OPTIONAL.get(op, {})))]
        stale += [f"{op}[{s}]" for s in sorted(set(OPTIONAL.get(op, {})) - slots)]
    assert not missing and not stale, (missing, stale)
    assert set(OPTIONAL) <= set(written_ops())
    for op, entries in OPTIONAL.items():
        for slot, s in entries.items():
            assert s.spec or s.drop or s.make or s.never, f"{op}[{slot}] {s.name}: nobody draws it"
            assert bool(s.never) != bool(s.spec or s.drop or s.make), f"{op}[{slot}] {s.name}"


def _forms(cov: Coverage, wanted: Iterable[tuple[str, int]]) -> list[str]:
    """The (op, slot) forms of `wanted` that no model had."""
    return [
        f"{form_key(op, s)}={f}"
        for op, s in wanted
        for f in (ABSENT, PRESENT)
        if f"{form_key(op, s)}={f}" not in cov.attrs
    ]


def _compared(model: onnx.ModelProto, opset: int) -> bool:
    """Whether to judge the model against onnxruntime: it holds an optional input, and no
    batch-first recurrent layer (layout 1), which onnxruntime declines in every release."""
    nodes = model.graph.node
    batch_first = any(a.name == "layout" and a.i == 1 for n in nodes for a in n.attribute)
    return not batch_first and any(optional_slots(n.op_type, opset) for n in nodes)


def _sweep(ops: list[str], opset: int, count: int, checked: int, dtypes: list[DType] | None = None) -> Coverage:
    """`count` small cases of `ops` at `opset`, each through the full checker and strict shape
    inference, the first `checked` holding an optional input against onnxruntime."""
    cov = Coverage()
    cfg = GenConfig(nodes=3, ops=ops, opset=opset, dtypes=dtypes, **QUIET)
    compared = 0
    for seed in range(count):
        try:
            case = generate(seed, cfg, coverage=cov)
        except RuntimeError:
            continue
        valid(case.model)
        if compared < checked and _compared(case.model, opset):
            agrees_with_onnxruntime(case.model, case.inputs)
            compared += 1
    return cov


def test_optional_inputs_come_absent_and_present() -> None:
    """Both forms of each op's optional inputs, at opset 21: those the specs draw themselves
    (Conv's bias, Gemm's C, Pad's constant, Slice's axes and steps, Dropout's ratio and
    training_mode, LayerNormalization's B, GRU's B and initial_h) and those drawn at emission
    (the quantizers' zero points, Resize's roi and scales, NonMaxSuppression's iou_threshold)."""
    ops = [
        "QuantizeLinear",
        "DequantizeLinear",
        "Conv",
        "Gemm",
        "Pad",
        "Slice",
        "Resize",
        "Dropout",
        "LayerNormalization",
        "GRU",
        "NonMaxSuppression",
        "Relu",
    ]
    cov = _sweep(ops, 21, 360, 40, [F32, DType.uint8, DType.int8])
    wanted = [
        ("QuantizeLinear", 2),
        ("DequantizeLinear", 2),
        ("Conv", 2),
        ("Gemm", 2),
        ("Pad", 2),
        ("Slice", 3),
        ("Slice", 4),
        ("Resize", 1),
        ("Resize", 2),
        ("Dropout", 1),
        ("Dropout", 2),
        ("LayerNormalization", 2),
        ("GRU", 3),
        ("GRU", 5),
        ("NonMaxSuppression", 3),
    ]
    assert not _forms(cov, wanted), _forms(cov, wanted)


def test_forms_older_and_newer_opsets_bring_come_absent_and_present() -> None:
    """Split's sizes before 18 (equal parts left out, one per output), a Loop's trip count
    where its body stops first (a while loop), Attention's nonpad_kv_seqlen at its default
    (24 on), a quantizer's zero point at 13 (uint8 alone where absent)."""
    cov = _sweep(["Split", "Loop", "QuantizeLinear", "DequantizeLinear", "Relu"], 13, 300, 20, [F32, DType.uint8])
    assert not _forms(cov, [("Split", 1), ("Loop", 0), ("QuantizeLinear", 2), ("DequantizeLinear", 2)])
    cov = _sweep(["Attention", "Relu"], 24, 80, 12, [F32])
    assert not _forms(cov, [("Attention", 6)])


def _quantizers(opset: int, seeds: int) -> Iterable[tuple[onnx.ModelProto, dict[str, np.ndarray], onnx.NodeProto]]:
    cfg = GenConfig(nodes=2, ops=["QuantizeLinear", "Relu"], opset=opset, dtypes=[F32], **QUIET)
    for seed in range(seeds):
        case = generate(seed, cfg)
        for n in case.model.graph.node:
            if n.op_type == "QuantizeLinear":
                yield case.model, case.inputs, n


def test_a_quantizer_without_zero_point_is_uint8_unless_output_dtype_names_another() -> None:
    """Without a zero point QuantizeLinear outputs uint8; an int8 one is left out only where
    the opset has output_dtype (21 on), which then names int8, and the reference and the value
    search read that type (an int8 output saturates at -128, a uint8 one at 0)."""
    types: dict[int, set[int]] = collections.defaultdict(set)
    for opset in (17, 21):
        compared = 0
        for model, inputs, node in _quantizers(opset, 120):
            out = {o.name: o.type.tensor_type.elem_type for o in valid(model).graph.value_info}
            out |= {o.name: o.type.tensor_type.elem_type for o in model.graph.output}
            if len(node.input) > 2:
                continue
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            elem = out[node.output[0]]
            types[opset].add(elem)
            assert elem == (attrs.get("output_dtype") or TensorProto.UINT8), (opset, attrs)
            if compared < 6:
                agrees_with_onnxruntime(model, inputs)
                compared += 1
    assert types[17] == {TensorProto.UINT8}
    assert types[21] == {TensorProto.UINT8, TensorProto.INT8}


class _Known:
    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.arrays = arrays

    def array(self, name: str) -> np.ndarray | None:
        return self.arrays.get(name)

    def typed(self, name: str) -> tuple[list[int], DType] | None:
        return None


def _view(op: str, opset: int, zero: np.ndarray | None, own: bool, attrs: dict[str, int] | None = None) -> NodeView:
    arrays = {"s": np.asarray(0.5, np.float32)} | ({"z": zero} if zero is not None else {})
    return NodeView(op, opset, ["x", "s", "z"], 1, attrs or {}, own, _Known(arrays))


def test_a_template_loses_only_inputs_that_hold_what_their_absence_means() -> None:
    """The op's own node may leave out what it drew (its reference reads the node as written);
    a template's only a zero point of 0, so the variant keeps its meaning; a graph tensor never."""
    nonzero, zero = np.asarray(130, np.uint8), np.asarray(0, np.uint8)
    assert owned_or_zero(_view("DequantizeLinear", 21, nonzero, own=True), 2) == {}
    assert owned_or_zero(_view("DequantizeLinear", 21, nonzero, own=False), 2) is None
    assert owned_or_zero(_view("DequantizeLinear", 21, zero, own=False), 2) == {}
    assert owned_or_zero(_view("DequantizeLinear", 21, None, own=True), 2) is None
    int8 = np.asarray(3, np.int8)
    assert quantize_zero_point(_view("QuantizeLinear", 19, int8, own=True), 2) is None
    assert quantize_zero_point(_view("QuantizeLinear", 21, int8, own=True), 2) == {"output_dtype": TensorProto.INT8}
    assert quantize_zero_point(_view("QuantizeLinear", 13, nonzero, own=True), 2) == {}


def test_coverage_tips_the_optional_input_toward_the_form_not_seen() -> None:
    seen = {"QuantizeLinear.input2=present"}
    drawn = OptionalInputs(random.Random(0), lambda key, i: 0.0 if f"{key}={i}" in seen else 2.0)
    assert drawn.share("QuantizeLinear.input2", ABSENT) > 0.5 > OPTIONAL_SHARE
    seen = {"QuantizeLinear.input2=absent"}
    assert drawn.share("QuantizeLinear.input2", ABSENT) < OPTIONAL_SHARE
    assert OptionalInputs(random.Random(0)).share("QuantizeLinear.input2", ABSENT) == OPTIONAL_SHARE
