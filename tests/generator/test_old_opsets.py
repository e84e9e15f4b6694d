"""Models at opsets 11 and 12, which exporters still write and converters keep code of their own
for (Squeeze's axes attribute, Softmax's 2-D coercion, Clip-11 without integers): every spec
says from which opset it writes its op, as the op's schema history has it; each writes the
form of the opset's version, never a later one; every template variant that exists there is
a valid model the reference and onnxruntime agree on; and the value search reads each node by
its version, as the reference does. tests/generator/test_opset_range.py generates whole models at 11
and 12, tests/generator/test_reference_parity.py checks their forms against onnx.reference."""

from __future__ import annotations

import random

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import helper
from onnx.reference import ReferenceEvaluator

from backends.reference import run_reference
from generator.api import OLDEST_GENERATED, GenConfig, _allowed, generate
from generator.binning import BinChooser
from generator.dtypes import DType
from generator.emit import IR_VERSION, emit_model
from generator.grow import Grower
from generator.ops import registry
from generator.ops.base import OLDEST_WRITTEN, op_version, schema_at
from generator.patterns import all_variants
from generator.patterns.base import Pattern
from generator.symbolic import SymCtx, TType
from generator.values import NoValidValues
from generator.values.interp import prepare
from generator.witness import Witness
from oracles.compare import compare

OLD = (11, 12)
LATER: dict[str, str] = {
    "GroupNormalization": "GroupNormalization-18 scales and shifts per group; the spec writes 21's per-channel form",
}
"""Specs that start later than their op, with why."""


def first_opset(op: str) -> int | None:
    return next((o for o in range(1, max(IR_VERSION) + 1) if schema_at(op, o) is not None), None)


def test_the_oldest_opset_written_is_11_and_a_single_model_still_defaults_to_17() -> None:
    assert OLDEST_GENERATED == OLDEST_WRITTEN == min(IR_VERSION) == 11
    assert GenConfig().written_opset == 17 and GenConfig(opset=11).written_opset == 11
    with pytest.raises(ValueError):
        GenConfig(opset=10)


@pytest.mark.parametrize("op", sorted(registry()))
def test_every_spec_starts_where_its_op_does(op: str) -> None:
    """A spec exists from OLDEST_WRITTEN, or from the opset its op arrived in, to the last
    opset its op has; a spec that starts later says why (LATER)."""
    spec, first = registry()[op], first_opset(op)
    assert first is not None
    expected = max(OLDEST_WRITTEN, first)
    starts = max(OLDEST_WRITTEN, spec.since_opset)
    assert starts == expected or (op in LATER and starts > expected), (op, spec.since_opset, first)
    assert all(schema_at(op, o) is not None for o in range(starts, max(IR_VERSION) + 1) if spec.exists_at(o))


def _specs_at(opset: int) -> list[str]:
    """The specs that exist at `opset`; at 12 only those whose version differs from 11's (the
    others write the same node there)."""
    specs = registry()
    return [
        op
        for op in sorted(specs)
        if specs[op].exists_at(opset) and (opset == 11 or not specs[op].exists_at(11) or _changed_at_12(op))
    ]


def _changed_at_12(op: str) -> bool:
    return op_version(op, 12) != op_version(op, 11)


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize(("op", "opset"), [(op, o) for o in OLD for op in _specs_at(o)])
def test_every_spec_writes_a_valid_model_of_the_old_opset(op: str, opset: int) -> None:
    """A few single-op models per spec: the full checker, strict shape inference at the
    opset's IR version, and the torch reference computes them."""
    made = 0
    cfg = GenConfig(nodes=2, ops=[op], opset=opset, edges=0.0, special_values=0.0)
    for seed in range(6):
        try:
            case = generate(seed, cfg)
        except (RuntimeError, NoValidValues):
            continue
        assert case.model.ir_version == IR_VERSION[opset]
        onnx.checker.check_model(case.model, full_check=True)
        onnx.shape_inference.infer_shapes(case.model, check_type=True, strict_mode=True, data_prop=True)
        run_reference(case.model, case.inputs)
        made += 1
        if made == 3:
            return
    assert made, f"{op} made no model at opset {opset}"


def place(variant: type[Pattern], seed: int, opset: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]] | None:
    """A model of `variant` alone at `opset`, its values kept safe by the witness."""
    dtype = DType.float32 if DType.float32 in variant.dtypes else variant.dtypes[0]
    for rank in sorted(range(1, 6), key=lambda r: (r != 3, r)):
        if not variant.slot_ok(0, TType(dtype, rank)):
            continue
        rng = random.Random(seed)
        witness = Witness(opset, seed, "gradient", 48)
        allowed = _allowed(GenConfig(opset=opset), None)
        grower = Grower(SymCtx(rng, opset=opset), [TType(dtype, rank)], allowed, BinChooser(7, rng), witness=witness)
        try:
            graph = grower.grow(1, 30, choose=lambda: variant)
        except RuntimeError:
            continue
        return emit_model(graph, opset, witness.em.values, set(), leaves=witness.leaves)
    return None


@pytest.mark.parametrize("opset", OLD)
def test_every_template_variant_of_the_old_opsets_is_valid_and_computed_right(opset: int) -> None:
    """Each variant that exists at the opset (per-axis Q/DQ and the Dropout mask do not before
    13 and 12) is placed alone: valid, and the reference agrees with onnxruntime."""
    variants = [v for v in all_variants() if v.exists_at(opset)]
    assert len(variants) >= 200
    for v in variants:
        found = next((p for s in range(8) if (p := place(v, s, opset)) is not None), None)
        assert found is not None, f"{v.name()} could not be placed at opset {opset}"
        model, inputs = found
        onnx.checker.check_model(model, full_check=True)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        names = [o.name for o in model.graph.output]
        got = dict(zip(names, _session(model).run(names, inputs), strict=True))
        assert compare(run_reference(model, inputs), got).ok, v.name()


def test_the_variants_that_need_a_later_version_start_with_it() -> None:
    names = {o: {v.name() for v in all_variants() if v.exists_at(o)} for o in (11, 12, 13)}
    assert "QdqAdd~per_axis_output" in names[13] - names[12]
    assert "QdqMatMul~per_axis_output" in names[13] - names[12]
    assert "DropoutChain~second_consumer" in names[12] - names[11]
    assert "SkipRmsNorm" in names[11] and "SkipLayerNorm" not in names[13]


def test_the_value_search_reads_a_node_by_its_version() -> None:
    """Softmax-11 normalizes the input flattened to 2-D at its axis: the value search must
    see the values the model computes, not Softmax-13's."""
    x = torch.randn(2, 3, 4)
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    old, current = prepare(node, 11), prepare(node, 13)
    coerced = torch.softmax(x.reshape(2, 12), dim=1).reshape(2, 3, 4)
    assert torch.allclose(old.run(old.attrs, [x])[0], coerced)
    assert torch.allclose(current.run(current.attrs, [x])[0], torch.softmax(x, dim=1))
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=6)
    assert np.allclose(run_reference(model, {"x": x.numpy()})["y"], coerced.numpy())


@pytest.mark.parametrize("opset", OLD)
def test_no_bfloat16_before_cast_takes_it(opset: int) -> None:
    """A bfloat16 tensor crosses the graph's boundary through Cast, which takes it from 13:
    before, a case that would start from it starts from another type."""
    cfg = GenConfig(nodes=3, opset=opset, wide_types=1.0, values="none", edges=0.0)
    types: set[int] = set()
    for seed in range(40):
        model = generate(seed, cfg).model
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        values = [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]
        types |= {v.type.tensor_type.elem_type for v in values}
    assert onnx.TensorProto.BFLOAT16 not in types
    assert types & {onnx.TensorProto.INT16, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32}


MODELS = 120
"""Models of four nodes per old opset: what reaches most op types, in a few seconds each."""


def _float_onehot_indices(model: onnx.ModelProto) -> bool:
    """OneHot over float indices: the spec casts them to int64 first (0.8 is class 0); the
    evaluator and onnxruntime before 1.32 compare them uncast (tests/generator/test_reference_parity.py
    pins the evaluator's side; the torch reference follows the spec)."""
    inferred = onnx.shape_inference.infer_shapes(model).graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*inferred.value_info, *inferred.input]}
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16}
    return any(n.op_type == "OneHot" and types.get(n.input[0]) in floats for n in model.graph.node)


def _evaluator(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    try:
        values = ReferenceEvaluator(model).run(None, inputs)
    except Exception:  # noqa: BLE001 - the evaluator raises whatever numpy raises
        return None
    return {o.name: np.asarray(v) for o, v in zip(model.graph.output, values, strict=True)}


def _onnxruntime(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    try:
        names = [o.name for o in model.graph.output]
        return dict(zip(names, _session(model).run(names, inputs), strict=True))
    except Exception:  # noqa: BLE001 - a kernel onnxruntime lacks at this version, mostly
        return None


@pytest.mark.parametrize("opset", OLD)
def test_whole_models_of_the_old_opsets_are_valid_and_computed_right(opset: int) -> None:
    """Every model: the full checker, strict shape inference, and the torch reference agreeing
    with onnx.reference, or with onnxruntime (optimizer off) where onnx.reference misreads a
    form (tests/test_reference_parity.EVALUATOR_DEFECTS: Softmax before 13, BatchNormalization-9,
    Squeeze-11's unsorted axes...)."""
    made, by_evaluator, by_onnxruntime, unjudged = 0, 0, 0, []
    cfg = GenConfig(nodes=4, opset=opset, edges=0.0, max_elements=1024)
    for seed in range(MODELS):
        try:
            case = generate(seed, cfg)
        except (RuntimeError, NoValidValues):
            continue
        made += 1
        model, inputs = case.model, case.inputs
        onnx.checker.check_model(model, full_check=True)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        ours = run_reference(model, inputs)
        theirs = _evaluator(model, inputs)
        if theirs is not None and compare(ours, theirs).ok:
            by_evaluator += 1
            continue
        theirs = _onnxruntime(model, inputs)
        if theirs is not None and compare(ours, theirs).ok:
            by_onnxruntime += 1
            continue
        assert theirs is None or _float_onehot_indices(model), (seed, [n.op_type for n in model.graph.node])
        unjudged.append(seed)
    assert made >= 0.95 * MODELS
    assert by_evaluator >= 0.6 * made and len(unjudged) <= 0.1 * made, (by_evaluator, by_onnxruntime, unjudged)
