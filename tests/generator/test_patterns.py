"""Rewrite templates and their near misses (generator.patterns), run through the real
onnxruntime: every variant is a valid model that computes what the reference computes
with the optimizer off, the exact forms make onnxruntime's fusions fire, and the near
misses that must not be fused are not (or, where onnxruntime fuses one anyway, it is a
bug of its own, pinned here as what the templates find)."""

from __future__ import annotations

import collections
import random
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors

from backends.reference import run_reference
from generator.api import GenConfig, _allowed, generate, pattern_variants, with_safe_values
from generator.binning import BinChooser
from generator.coverage import Coverage
from generator.dtypes import DType
from generator.emit import emit_model
from generator.grow import Grower
from generator.ops import registry
from generator.patterns import TEMPLATES, all_variants
from generator.patterns.base import EXACT, LIFTED, Pattern
from generator.patterns.choose import FIRED_NEAR_MISS, PatternChooser, weight
from generator.patterns.qdq import MOVES
from generator.symbolic import SymCtx, TType
from generator.witness import Witness
from oracles.compare import compare

OPSET = 17
Placed = tuple[onnx.ModelProto, dict[str, np.ndarray]]


def place(variant: type[Pattern], seed: int) -> Placed | None:
    """A model made of `variant` alone (with its values kept safe by the witness), read by
    one Neg so that its output is an inner tensor, as in a grown model (onnxruntime leaves
    a subgraph whose last node writes a graph output alone)."""
    dtype = DType.float32 if DType.float32 in variant.dtypes else variant.dtypes[0]
    ranks = sorted(range(1, 6), key=lambda r: (r != 3, r))
    opset = max(OPSET, variant.since_opset)
    for rank in (r for r in ranks if variant.slot_ok(0, TType(dtype, r))):
        rng = random.Random(seed)
        witness = Witness(opset, seed, "gradient", 48)
        grower = Grower(
            SymCtx(rng), [TType(dtype, rank)], _allowed(GenConfig(), None), BinChooser(7, rng), witness=witness
        )
        try:
            graph = grower.grow(1, 30, choose=lambda: variant)
        except RuntimeError:
            continue
        model, inputs = emit_model(graph, opset, witness.em.values, set(), leaves=witness.leaves)
        first = model.graph.output[0]
        if first.type.tensor_type.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE):
            model.graph.node.append(onnx.helper.make_node("Neg", [first.name], ["read"]))
            first.name = "read"
        return model, inputs
    return None


def placed(variant: type[Pattern]) -> Placed:
    """The first seed's placement. Sixteen seeds: a SpaceToDepth needs both spatial dims of
    the tensor drawn to divide by its blocksize, and a per-channel variant two channels more."""
    for seed in range(16):
        found = place(variant, seed)
        if found is not None:
            return found
    raise AssertionError(f"{variant.name()} could not be placed in 16 seeds")


def optimized(
    model: onnx.ModelProto, inputs: dict[str, np.ndarray], level: str
) -> tuple[collections.Counter[str], dict[str, np.ndarray]]:
    """The op types of onnxruntime's optimized graph at `level`, and its outputs."""
    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        so.optimized_model_filepath = str(Path(tmp) / "opt.onnx")
        so.log_severity_level = 3
        session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        ops = collections.Counter(
            f"{n.domain or 'ai.onnx'}::{n.op_type}" for n in onnx.load(so.optimized_model_filepath).graph.node
        )
    names = [o.name for o in model.graph.output]
    return ops, dict(zip(names, session.run(names, inputs), strict=True))


VARIANTS = all_variants()


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name())
def test_every_variant_is_a_valid_model_the_reference_and_unoptimized_onnxruntime_agree_on(
    variant: type[Pattern],
) -> None:
    model, inputs = placed(variant)
    onnx.checker.check_model(model, full_check=True)
    written = {n.op_type for n in model.graph.node}
    assert written <= set(registry()), (
        f"{variant.name()} writes ops the reference cannot run: {written - set(registry())}"
    )
    _, actual = optimized(model, inputs, "ORT_DISABLE_ALL")
    assert compare(run_reference(model, inputs), actual).ok


FIRING = {
    "LayerNorm": "+ai.onnx::LayerNormalization",
    "RmsNorm": "+ai.onnx::SimplifiedLayerNormalization",
    "SkipLayerNorm": "+com.microsoft::SkipLayerNormalization",
    "Gelu": "+com.microsoft::Gelu",
    "BiasGelu": "+com.microsoft::BiasGelu",
    "FastGelu": "+com.microsoft::FastGelu",
    "QuickGelu": "+com.microsoft::QuickGelu",
    "MatMulAdd": "+ai.onnx::Gemm",
    "MatMulScale": "+com.microsoft::FusedMatMul",
    "TransposeMatMul": "+com.microsoft::FusedMatMul",
    "GemmActivation": "+com.microsoft::FusedGemm",
    "MatMulBatchNorm": "+ai.onnx::Gemm",
    "IntegerMatMulScale": "+com.microsoft::MatMulIntegerToFloat",
    "DynamicQuantizeMatMul": "+com.microsoft::DynamicQuantizeMatMul",
    "QdqMatMul": "+ai.onnx::QLinearMatMul",
    "ConvActivation": "+com.microsoft::FusedConv",
    "ConvBatchNorm": "-ai.onnx::BatchNormalization",
    "ConvAffine": "-ai.onnx::Mul",
    "GatherSplit": "+ai.onnx::Split",
    "ShapeReshape": "-ai.onnx::Shape",
    "ReshapeRoundTrip": "-ai.onnx::Reshape",
    "TransposePair": "-ai.onnx::Transpose",
    "NotWhere": "-ai.onnx::Not",
    "QdqAdd": "+com.microsoft::QLinearAdd",
    "QdqMul": "+com.microsoft::QLinearMul",
    "QdqSigmoid": "+com.microsoft::QLinearSigmoid",
    "QdqLeakyRelu": "+com.microsoft::QLinearLeakyRelu",
    "QdqSoftmax": "+com.microsoft::QLinearSoftmax",
    "QdqAveragePool": "+com.microsoft::QLinearAveragePool",
    "QdqGlobalAveragePool": "+com.microsoft::QLinearGlobalAveragePool",
    "QdqMove": "-ai.onnx::DequantizeLinear",
}
"""The rewrite onnxruntime 1.31 performs on each template's exact form at ENABLE_EXTENDED."""


def rewrites(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> set[str]:
    before = collections.Counter(f"ai.onnx::{n.op_type}" for n in model.graph.node)
    after, _ = optimized(model, inputs, "ORT_ENABLE_EXTENDED")
    return {f"+{k}" for k in set(after) - set(before)} | {f"-{k}" for k in before - after}


ORDER_BOUND = {"DynamicQuantizeMatMul", "ConvAffine"}
"""Templates whose onnxruntime fusion (1.31) matches one operand order of a commutative op
alone (DynamicQuantizeMatMulFusion, ConvMulFusion: the product first): a template writes
both (generator.patterns.base.Writer.op), and the exact form fires in the order onnxruntime
matches, not in the other."""


@pytest.mark.parametrize("template", sorted(FIRING))
def test_the_exact_form_makes_onnxruntimes_fusion_fire(template: str) -> None:
    exact = next(v for v in VARIANTS if v.template == template and v.variant == EXACT)
    if template in ORDER_BOUND:
        fired = [FIRING[template] in rewrites(*p) for seed in range(8) if (p := place(exact, seed)) is not None]
        assert any(fired) and not all(fired), f"onnxruntime {ort.__version__} now matches both operand orders"
    else:
        assert FIRING[template] in rewrites(*placed(exact))
    assert FIRING[template] in exact.fires, "the template's own `fires` names what onnxruntime does"


QDQ_OPS = ("QdqAdd", "QdqMul", "QdqSigmoid", "QdqLeakyRelu", "QdqSoftmax", "QdqAveragePool", "QdqGlobalAveragePool")

NOT_FUSED = [
    ("LayerNorm", "axis"),
    ("LayerNorm", "eps_position"),
    ("Gelu", "constant"),
    ("Gelu", "runtime_constant"),
    ("Gelu", "second_consumer"),
    ("MatMulAdd", "bias_broadcast"),
    ("MatMulAdd", "second_consumer"),
    ("MatMulScale", "vector_scale"),
    ("MatMulScale", "runtime_scale"),
    ("GemmActivation", "activation"),
    ("ConvActivation", "activation"),
    ("ConvActivation", "runtime_clip"),
    ("ConvBatchNorm", "runtime_weight"),
    ("TransposeMatMul", "perm"),
    ("QuickGelu", "second_consumer"),
    ("DynamicQuantizeMatMul", "own_zero_point"),
    ("DynamicQuantizeMatMul", "weight_scale_only"),
    ("DynamicQuantizeMatMul", "second_consumer"),
    ("QdqMatMul", "float_output"),
    ("QdqMatMul", "second_consumer"),
    *((t, miss) for t in QDQ_OPS for miss in ("float_output", "second_consumer")),
    # QdqMove~float_output is not here: a DequantizeLinear of int8 written without its zero
    # point, into a Reshape, Transpose, Squeeze or Unsqueeze, is computed wrong with the
    # optimizer on (every release from 1.15.1 to 1.31.1 at opset 13 and 19), rewrite or not.
    *(("QdqMove", miss) for miss in ("other_scale", "per_axis_input", "second_consumer", "negative_scale")),
]


@pytest.mark.parametrize(("template", "near_miss"), NOT_FUSED)
def test_a_near_miss_is_left_alone_and_still_computes_the_reference(template: str, near_miss: str) -> None:
    variant = next(v for v in VARIANTS if v.template == template and v.variant == near_miss)
    model, inputs = placed(variant)
    assert FIRING.get(template, template) not in rewrites(model, inputs)
    _, actual = optimized(model, inputs, "ORT_ENABLE_EXTENDED")
    assert compare(run_reference(model, inputs), actual).ok


def test_layernorm_with_a_fourth_power_is_fused_anyway_and_computes_something_else() -> None:
    """A real onnxruntime bug the near misses found (every release from 1.15 to 1.31):
    LayerNormFusion never checks Pow's exponent, so (x - mean)^4 is taken for a variance."""
    variant = next(v for v in VARIANTS if v.name() == "LayerNorm~exponent")
    model, inputs = placed(variant)
    fired = rewrites(model, inputs)
    if "+ai.onnx::LayerNormalization" not in fired:
        pytest.skip(f"onnxruntime {ort.__version__} checks the exponent now")
    _, actual = optimized(model, inputs, "ORT_ENABLE_EXTENDED")
    assert not compare(run_reference(model, inputs), actual).ok


def test_a_matmul_quantized_per_column_is_fused_into_a_qlinearmatmul_that_refuses_it() -> None:
    """A real onnxruntime bug the near misses found: the QDQ transformer turns DQ -> MatMul ->
    Q into QLinearMatMul without checking that Q's scale is per-tensor, and the kernel then
    fails at run time on a valid model that runs unoptimized."""
    variant = next(v for v in VARIANTS if v.name() == "QdqMatMul~per_axis_output")
    model, inputs = placed(variant)
    _, unoptimized = optimized(model, inputs, "ORT_DISABLE_ALL")
    assert compare(run_reference(model, inputs), unoptimized).ok
    try:
        fired = rewrites(model, inputs)
    except ort_errors.Fail as e:
        assert "QLinearMatmul" in str(e)
        return
    assert "+ai.onnx::QLinearMatMul" not in fired, f"onnxruntime {ort.__version__} fuses and runs it now"


def test_two_quantizations_of_other_scales_around_a_no_op_expand_are_merged_into_one() -> None:
    """A real onnxruntime behaviour the QdqMove near misses found (every release from 1.15.1
    to 1.31.1, from the basic level): Q1 -> DQ1 -> Expand -> Q2 -> DQ2, Q2's scale half of
    Q1's and the Expand a no-op. The Expand is eliminated, and DoubleQDQPairsRemover merges
    the two pairs into one at Q2's scale, so x is rounded once, finely, where the model
    rounds it twice: values one step of Q2 off. Persistent, so no PR check reports it."""
    variant = next(v for v in VARIANTS if v.name() == "QdqMove~other_scale@Expand")
    model, inputs = placed(variant)
    reference = run_reference(model, inputs)
    assert compare(reference, optimized(model, inputs, "ORT_DISABLE_ALL")[1]).ok
    ops, actual = optimized(model, inputs, "ORT_ENABLE_BASIC")
    if compare(reference, actual).ok:
        pytest.skip(f"onnxruntime {ort.__version__} keeps both roundings now")
    assert ops["ai.onnx::QuantizeLinear"] == 1 and "ai.onnx::Expand" not in ops


@pytest.mark.parametrize("template", QDQ_OPS)
def test_an_op_quantized_per_channel_is_fused_into_a_qlinear_kernel_that_cannot_hold_it(template: str) -> None:
    """The same onnxruntime bug in every QDQ selector the templates reach (1.31.1): DQ -> op ->
    Q with a per-channel Q is fused into a QLinear kernel whose output scale is a scalar. The
    model, valid and right unoptimized, then fails to load, fails to run, or (QLinearSoftmax)
    computes other values."""
    variant = next(v for v in VARIANTS if v.name() == f"{template}~per_axis_output")
    model, inputs = placed(variant)
    reference = run_reference(model, inputs)
    _, unoptimized = optimized(model, inputs, "ORT_DISABLE_ALL")
    assert compare(reference, unoptimized).ok
    try:
        fired, actual = rewrites(model, inputs), optimized(model, inputs, "ORT_ENABLE_EXTENDED")[1]
    except (ort_errors.Fail, ort_errors.RuntimeException) as e:
        assert "QLinear" in str(e) or "qlinear" in str(e), str(e)
        return
    assert FIRING[template] in fired and not compare(reference, actual).ok, (
        f"onnxruntime {ort.__version__} now leaves a per-channel {template} alone or runs it right"
    )


def test_templates_record_what_they_are() -> None:
    names = [t.template for t in TEMPLATES]
    assert len(names) == len(set(names)) >= 25
    for t in TEMPLATES:
        assert t.source and t.fires and t.uses, t.template
        assert all(k[0] in "+-" and "::" in k for k in t.fires)
    # One class per variant (the lifted-constant near miss of a lifting template included)
    # and per consumer of the template's family that the variant admits.
    forms = [(t, v) for t in TEMPLATES for v in (EXACT, *t.near_misses, *((LIFTED,) if t.lifts else ()))]
    assert len(VARIANTS) == sum(max(1, sum(t.admits(v, c) for c in t.consumers)) for t, v in forms)
    assert len({v.name() for v in VARIANTS}) == len(VARIANTS)


def test_templates_are_seeded_and_counted_apart_from_op_types() -> None:
    cov, again = Coverage(), Coverage()
    first = [generate(s, GenConfig(), coverage=cov).model.SerializeToString() for s in range(40)]
    second = [generate(s, GenConfig(), coverage=again).model.SerializeToString() for s in range(40)]
    assert first == second
    assert sum(cov.patterns.values()) >= 20
    assert not any(k.startswith("pattern:") for k in cov.ops)


def test_no_template_without_its_ops() -> None:
    only = ["MatMul", "Add", "Relu", "Transpose"]
    allowed = pattern_variants(GenConfig(ops=only), None)
    assert {v.template for v in allowed} == {"MatMulAdd", "TransposeMatMul", "TransposePair"}
    for s in range(20):
        case = generate(s, GenConfig(ops=only))
        assert {n.op_type for n in case.model.graph.node} <= set(only)
    assert pattern_variants(GenConfig(patterns=0), None) == []
    support = {"MatMul": {DType.float32}, "Add": {DType.float32}}
    assert {v.template for v in pattern_variants(GenConfig(), support)} == {"MatMulAdd"}


def test_unfired_rewrites_get_their_exact_form_fired_ones_their_near_misses() -> None:
    exact = next(v for v in VARIANTS if v.name() == "MatMulScale")
    miss = next(v for v in VARIANTS if v.name() == "MatMulScale~vector_scale")
    cov = Coverage()
    assert weight(exact, cov) > weight(miss, cov)
    cov.rewrites["+com.microsoft::FusedMatMul"] = 5
    assert weight(miss, cov) > weight(exact, cov)
    assert weight(miss, cov) / weight(exact, cov) == pytest.approx(FIRED_NEAR_MISS)
    cov.patterns[miss.name()] = 99
    assert weight(miss, cov) < weight(exact, cov), "a variant tried often comes up less"
    chooser = PatternChooser([exact, miss], 1.0, random.Random(0), cov)
    draws = collections.Counter(chooser.draw(10, {TType(DType.float32, 2)}) for _ in range(200))
    assert draws[exact] > draws[miss] > 0
    assert chooser.draw(10, {TType(DType.bool, 2)}) is None, "no template reads a bool tensor"


def test_runtime_shapes_are_graph_inputs_no_value_search_moves() -> None:
    only = ["Reshape", "Slice", "Tile", "Expand", "Relu"]
    cfg = GenConfig(runtime_shapes=1.0, ops=only, patterns=0, dtypes=[DType.float32])
    case = next(c for c in (generate(s, cfg) for s in range(30)) if any(k.startswith("r") for k in c.inputs))
    runtime = {k: v for k, v in case.inputs.items() if k.startswith("r")}
    initialized = {i.name for i in case.model.graph.initializer}
    assert runtime and not set(runtime) & initialized
    assert all(v.dtype.kind == "i" for v in runtime.values())
    _, actual = optimized(case.model, case.inputs, "ORT_ENABLE_ALL")
    assert compare(run_reference(case.model, case.inputs), actual).ok
    searched = with_safe_values(case, GenConfig())
    for k, v in runtime.items():
        np.testing.assert_array_equal(searched.inputs[k], v)


def test_no_template_is_placed_with_the_share_at_zero(tmp_path: Path) -> None:
    cov = Coverage()
    for s in range(30):
        generate(s, GenConfig(patterns=0), coverage=cov)
    assert not cov.patterns and sum(cov.ops.values()) > 0


def test_qdq_moves_ranks_lie_within_each_members_registered_spec() -> None:
    """QdqMove's MOVES repeats each member's ranks (a variant class is made before the
    registry is filled): each must stay within what the member's spec takes."""
    for op, (low, high) in MOVES.items():
        spec = registry()[op]
        assert spec.min_rank <= low <= high <= spec.max_rank, op
