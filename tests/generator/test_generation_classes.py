"""Forms generation must draw, each because a compiler regression hid in it while generation
never did: a sibling consumer in a template, an attribute written at its default, both
operand orders of a commutative op and rank-1 inputs in templates, a size-1 constant of more
rank than its partner, an edge value on every sibling op of its family, and a node whose
every input is a constant. Each test draws
a few hundred small cases, asserts the form comes up, and that what came up is a valid model
whose torch reference agrees with another evaluator."""

from __future__ import annotations

import collections
import random
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from backends.reference import run_reference
from generator.api import GenConfig, GeneratedCase, _allowed, generate, grow_case
from generator.binning import ABSENT, AT_DEFAULT, BinChooser
from generator.constant_twins import PREFIX, with_constant_twin
from generator.coverage import Coverage
from generator.dtypes import DType
from generator.edges import divisor_form
from generator.emit import EXPLICIT_SHARE, ExplicitDefaults, emit_model
from generator.graph import Graph
from generator.grow import Grower
from generator.ops.base import OpSpec, attribute_default
from generator.ops.families import EMPTY_AXES, NEGATIVE_INDEX, ZERO_DIVISOR
from generator.ops.matched import MATCHED, MATCHED_SHARE, NEAR_SHARE, draw_matched, settings
from generator.patterns import all_variants
from generator.patterns.base import COMMUTATIVE, LIFTED, Pattern
from generator.spec_constraints import undefined_forms
from generator.symbolic import SymCtx, TType
from generator.witness import Witness
from oracles.compare import compare

Model = tuple[Graph, onnx.ModelProto, dict[str, np.ndarray]]


def grow(specs: Sequence[type[OpSpec]], seed: int, first: TType, nodes: int = 1, opset: int = 17) -> Model | None:
    """A graph grown from `first` with `specs` alone (values kept safe by the witness), as a
    model grows: the template tests read which ONNX nodes each insertion wrote."""
    rng = random.Random(seed)
    witness = Witness(opset, seed, "gradient", 48)
    grower = Grower(
        SymCtx(rng, opset=opset), [first], _allowed(GenConfig(opset=opset), None), BinChooser(7, rng), witness=witness
    )
    try:
        graph = grower.grow(nodes, 30 * nodes, choose=lambda: rng.choice(list(specs)))
    except RuntimeError:
        return None
    model, inputs = emit_model(graph, opset, witness.em.values, set(), leaves=witness.leaves)
    return graph, model, inputs


def valid(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model through the full checker and strict shape inference, inferred."""
    onnx.checker.check_model(model, full_check=True)
    return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)


def agrees_with_onnx_reference(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> None:
    ours = run_reference(model, inputs)
    theirs = ReferenceEvaluator(model).run(None, inputs)
    for out, value in zip(model.graph.output, theirs, strict=True):
        np.testing.assert_allclose(ours[out.name], np.asarray(value), rtol=1e-4, atol=1e-4, err_msg=out.name)


def agrees_with_onnxruntime(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> None:
    """Against onnxruntime with its optimizer off, where onnx.reference has known defects
    (pools: tests/test_reference_parity.EVALUATOR_DEFECTS)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    assert compare(run_reference(model, inputs), dict(zip(names, session.run(names, inputs), strict=True))).ok


def variant(name: str) -> type[Pattern]:
    return next(v for v in all_variants() if v.name() == name)


def template_nodes(graph: Graph) -> Iterator[tuple[Pattern, onnx.NodeProto]]:
    """Every ONNX node a template insertion wrote, with the template."""
    for n in graph.nodes:
        if isinstance(n.op, Pattern) and n.fragment is not None:
            yield from ((n.op, node) for node in n.fragment.nodes)


def initializers(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def ranks(inferred: onnx.ModelProto) -> dict[str, int]:
    """Every tensor's rank, read off the inferred model."""
    values = [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]
    found = {v.name: len(v.type.tensor_type.shape.dim) for v in values}
    found.update({i.name: len(i.dims) for i in inferred.graph.initializer})
    return found


F32 = DType.float32


def test_commutative_ops_inside_templates_come_in_both_operand_orders() -> None:
    """Mul(a, b) and Mul(b, a): a template writes each commutative op's operands in a drawn
    order (Writer.op), exact forms included."""
    templates = [variant(n) for n in ("Gelu", "QuickGelu", "LayerNorm", "MatMulScale", "NeutralArith", "QdqAdd")]
    where: dict[str, set[int]] = collections.defaultdict(set)
    for seed in range(60):
        grown = grow(templates, seed, TType(F32, 2), nodes=3)
        assert grown is not None
        graph, model, inputs = grown
        valid(model)
        constants = initializers(model)
        for _, node in template_nodes(graph):
            held = [i for i, name in enumerate(node.input) if name in constants]
            if node.op_type in COMMUTATIVE and len(node.input) == 2 and len(held) == 1:
                where[node.op_type].add(held[0])
        if seed < 6:  # onnx.reference has no DequantizeLinear-13 (QdqAdd): onnxruntime judges
            agrees_with_onnxruntime(model, inputs)
    assert where["Mul"] == {0, 1} and where["Add"] == {0, 1}, dict(where)


def test_templates_are_drawn_at_rank_one() -> None:
    """A template case starts from a float32 tensor of rank 1 to 4: the templates whose ops
    take rank 1 meet it."""
    cov = Coverage()
    for seed in range(150):
        case = generate(seed, GenConfig(nodes=4, values="none", edges=0.0, symbolic_dims=0.0), coverage=cov)
        if seed < 40:
            valid(case.model)
    at_one = {k.split("[", 1)[0] for k in cov.inputs if k.startswith("pattern:") and ":r1:" in k}
    assert len(at_one) >= 4, at_one
    for name in ("Gelu", "LayerNorm", "NeutralArith"):  # each alone at rank 1, checked against onnx.reference
        grown = grow([variant(name)], 1, TType(F32, 1))
        assert grown is not None
        agrees_with_onnx_reference(*grown[1:])


WINDOWED = ["Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool"]
AXIS_OPS = ["Softmax", "Gather", "Flatten", "ReduceSum", "Concat"]


def test_defaulted_attributes_come_absent_and_explicit_at_their_default() -> None:
    """Every defaulted attribute is drawn absent and written at its default (list defaults
    included: dilations and strides of ones, pads of zeros), counted apart by coverage, and
    no model writes an attribute its opset's schema lacks (the full checker)."""
    cov = Coverage()
    cfg = GenConfig(nodes=2, dtypes=[F32], values="none", patterns=0.0, edges=0.0, symbolic_dims=0.0, opset=19)
    cfg = cfg.model_copy(update={"wide_types": 0.0})
    for ops, count in ((WINDOWED, 300), (AXIS_OPS, 100)):
        for seed in range(count):
            try:
                case = generate(seed, cfg.model_copy(update={"ops": [*ops, "Relu"]}), coverage=cov)
            except RuntimeError:  # a first tensor (rank 5) only a window op takes, and it would not fit
                continue
            valid(case.model)
            if seed < 8:
                agrees_with_onnxruntime(case.model, case.inputs)
    wanted = [
        *(f"{op}.{a}" for op in ("Conv", "ConvTranspose") for a in ("dilations", "strides", "pads", "group")),
        *(f"{op}.{a}" for op in ("MaxPool", "AveragePool", "LpPool") for a in ("strides", "pads", "ceil_mode")),
        "AveragePool.count_include_pad",
        "LpPool.p",
        "MaxPool.storage_order",
        "Softmax.axis",
        "Gather.axis",
        "Flatten.axis",
        "ReduceSum.keepdims",
    ]
    missing = [f"{k}={b}" for k in wanted for b in (ABSENT, AT_DEFAULT) if f"{k}={b}" not in cov.attrs]
    assert not missing, missing


def test_attributes_onnx_misreads_when_absent_are_never_left_out() -> None:
    """STFT's onesided and MeanVarianceNormalization's axes are written even at their
    default (generator.emit.ALWAYS_WRITTEN): left out, onnx's strict inference reads onesided
    as 0 and its full check cannot expand the function body. The explicit-defaults draw
    once left them out, and 2 of 43 STFT models failed strict inference."""
    cfg = GenConfig(nodes=3, dtypes=[F32], opset=18, wide_types=0.0)
    written: collections.Counter[str] = collections.Counter()
    for seed in range(300):
        case = generate(seed, cfg.model_copy(update={"ops": ["STFT", "MeanVarianceNormalization", "Relu"]}))
        valid(case.model)
        for node in case.model.graph.node:
            attribute = {"STFT": "onesided", "MeanVarianceNormalization": "axes"}.get(node.op_type)
            if attribute is not None:
                assert attribute in {a.name for a in node.attribute}, (seed, node.op_type)
                written[node.op_type] += 1
    assert written["STFT"] >= 10 and written["MeanVarianceNormalization"] >= 10, written


def test_coverage_tips_the_explicit_default_toward_the_form_not_seen() -> None:
    seen = {"Conv.dilations=absent"}
    explicit = ExplicitDefaults(random.Random(0), lambda key, i: 0.0 if f"{key}={i}" in seen else 2.0)
    assert explicit.share("Conv.dilations") > 0.5 > EXPLICIT_SHARE
    seen = {"Conv.dilations=default"}
    assert explicit.share("Conv.dilations") < EXPLICIT_SHARE
    assert ExplicitDefaults(random.Random(0)).share("Conv.dilations") == EXPLICIT_SHARE


def lifted_constants(model: onnx.ModelProto, nodes: Sequence[onnx.NodeProto]) -> list[str]:
    """Binary nodes among `nodes` with a size-1 initializer of more rank than the other operand."""
    rank = ranks(valid(model))
    constants = initializers(model)
    found = []
    for node in nodes:
        if len(node.input) != 2:
            continue
        for mine, other in (node.input, reversed(node.input)):
            if mine in constants and constants[mine].size == 1 and rank[mine] > rank.get(other, rank[mine]):
                found.append(node.op_type)
    return found


def test_size_one_constants_take_more_rank_than_the_tensor_they_scale() -> None:
    """x * c, x + c with c of size 1 at every rank from 0 to x's rank plus one: in the lifted
    near miss of every template that scales or shifts by a constant, and in random growth of
    the binary ops, the output's rank rising with it."""
    lifting = [v for v in all_variants() if v.variant == LIFTED]
    assert {v.template for v in lifting} >= {"Gelu", "LayerNorm", "RmsNorm", "NeutralArith", "MatMulScale"}
    for v in lifting:
        grown = grow([v], 3, TType(F32, 3))
        assert grown is not None, v.name()
        graph, model, inputs = grown
        assert lifted_constants(model, [n for _, n in template_nodes(graph)]), v.name()
        assert len(model.graph.output[0].type.tensor_type.shape.dim) == 4, v.name()
        agrees_with_onnx_reference(model, inputs)
    cfg = GenConfig(nodes=3, ops=["Add", "Mul", "Sub", "Div", "Max", "Relu"], dtypes=[F32], patterns=0.0)
    cfg = cfg.model_copy(update={"edges": 0.0, "symbolic_dims": 0.0})
    rank_of_constant: set[int] = set()
    lifted = 0
    for seed in range(250):
        case = generate(seed, cfg)
        lifted += len(lifted_constants(case.model, list(case.model.graph.node)))
        constants = initializers(case.model)
        rank_of_constant |= {constants[i].ndim for n in case.model.graph.node for i in n.input if i in constants}
        if seed < 15:
            agrees_with_onnx_reference(case.model, case.inputs)
    assert lifted >= 3 and rank_of_constant >= {0, 1, 2, 3}, (lifted, rank_of_constant)


def _conv_own(n: onnx.NodeProto) -> bool:
    return _attr(n, "group", 1) != 1 or _ints(n, "strides") > 1 or _ints(n, "dilations") > 1


def _pool_own(n: onnx.NodeProto) -> bool:
    return _ints(n, "strides") > 1 or _attr(n, "ceil_mode", 0) == 1 or _attr(n, "auto_pad", "NOTSET") != "NOTSET"


CONSUMER_ATTRS: dict[str, Callable[[onnx.NodeProto], bool]] = {
    "Conv": _conv_own,
    "ConvTranspose": _conv_own,
    "MaxPool": _pool_own,
    "AveragePool": lambda n: _pool_own(n) or _attr(n, "count_include_pad", 0) == 1,
    "LpPool": lambda n: _attr(n, "p", 2) != 2 or _pool_own(n),
    "GlobalLpPool": lambda n: _attr(n, "p", 2) != 2,
}
"""Per consumer, one of its own non-default attributes, which must come up as the consumer
takes the template's place."""


def _attr(node: onnx.NodeProto, name: str, default: object) -> object:
    value = next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)
    return value.decode() if isinstance(value, bytes) else value


def _ints(node: onnx.NodeProto, name: str) -> int:
    values = _attr(node, name, [1])
    return max((int(v) for v in values), default=1) if isinstance(values, list) else 1


def test_every_sibling_consumer_takes_the_templates_place_with_its_own_attributes() -> None:
    """Each pool and each conv-like op takes the place of a template's window op (PadWindow,
    the Q/DQ pools, the Conv templates), and each data-movement op QdqMove's, named apart in
    coverage, with its own attribute draws."""
    with_family = [v for v in all_variants() if v.consumer]
    assert len({v.name() for v in with_family}) == len(with_family)
    consumers = {v.consumer for v in with_family if v.template == "PadWindow"}
    assert consumers == {*WINDOWED, "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}
    assert {v.consumer for v in with_family if v.template.startswith("Qdq")} >= {"MaxPool", "LpPool", "GlobalMaxPool"}
    assert {v.consumer for v in with_family if v.template == "ConvActivation"} == {"Conv", "ConvTranspose"}
    own: set[str] = set()
    for v in with_family:
        # Rank 4 where the member takes it (an Unsqueeze of QdqMove takes 3 at most); six
        # seeds, and up to sixteen for a member that fits few tensors (SpaceToDepth needs
        # both spatial dims to divide by its blocksize).
        placed: list[Model] = []
        for seed in range(16):
            if seed >= 6 and placed:
                break
            if (g := grow([v], seed, TType(F32, min(4, v.max_rank)))) is not None:
                placed.append(g)
        assert placed, v.name()
        for graph, model, _ in placed:
            valid(model)
            written = [node for _, node in template_nodes(graph) if node.op_type == v.consumer]
            assert written, v.name()
            own |= {v.consumer for node in written if CONSUMER_ATTRS.get(v.consumer, bool)(node)}
        if v.template == "PadWindow" or v.variant == "":
            agrees_with_onnxruntime(*placed[0][1:])
    assert own >= set(CONSUMER_ATTRS), set(CONSUMER_ATTRS) - own


def _negative_owned_index(model: onnx.ModelProto, op_type: str) -> bool:
    """Whether an `op_type` node reads an owned index constant (input 1) with a negative entry."""
    constants = initializers(model)
    indices = [constants.get(n.input[1]) for n in model.graph.node if n.op_type == op_type and len(n.input) > 1]
    return any(i is not None and i.dtype.kind == "i" and bool((i < 0).any()) for i in indices)


def _negative_graph_index(case: GeneratedCase) -> bool:
    """Whether a OneHot reads its indices from a graph input holding a negative one."""
    hot = [n for n in case.model.graph.node if n.op_type == "OneHot"]
    return any(n.input[0] in case.inputs and bool((case.inputs[n.input[0]] < 0).any()) for n in hot)


def test_negative_indices_reach_every_op_of_the_family() -> None:
    cfg = GenConfig(nodes=2, values="none", patterns=0.0, edges=0.0, dtypes=[F32, DType.int64], wide_types=0.0)
    reached: set[str] = set()
    for op in sorted(NEGATIVE_INDEX):
        for seed in range(30):
            case = generate(seed, cfg.model_copy(update={"ops": [op, "Identity"]}))
            negative = _negative_owned_index(case.model, op) if op != "OneHot" else _negative_graph_index(case)
            if negative:
                valid(case.model)
                agrees_with_onnxruntime(case.model, case.inputs)
                reached.add(op)
                break
    assert reached == set(NEGATIVE_INDEX)
    template_gathers = 0
    for seed in range(30):  # the templates' Gathers too (GatherSplit, ShapeReshape, the shape pieces)
        grown = grow([variant("GatherSplit"), variant("ShapeReshape"), variant("ViewReshape")], seed, TType(F32, 3))
        if grown is not None and _negative_owned_index(grown[1], "Gather"):
            template_gathers += 1
            agrees_with_onnx_reference(*grown[1:])
    assert template_gathers >= 3


def test_empty_axes_reach_every_reduction_and_squeeze() -> None:
    """An empty axes list, absent or an explicitly empty input, on every Reduce*, and
    Squeeze's absent axes."""
    forms: dict[str, set[str]] = collections.defaultdict(set)
    cfg = GenConfig(nodes=2, values="none", patterns=0.0, edges=0.0, dtypes=[F32], opset=18)
    for op in sorted(EMPTY_AXES):
        for seed in range(80):
            case = generate(seed, cfg.model_copy(update={"ops": [op]}))
            constants = initializers(case.model)
            for n in case.model.graph.node:
                if n.op_type != op or any(a.name == "axes" for a in n.attribute):
                    continue
                axes = n.input[1] if len(n.input) > 1 else ""
                if not axes:
                    forms[op].add("absent")
                elif axes in constants and constants[axes].size == 0:
                    forms[op].add("empty")
                    valid(case.model)
                    agrees_with_onnx_reference(case.model, case.inputs)
            if forms[op] >= ({"absent"} if op == "Squeeze" else {"absent", "empty"}):
                break
    for op in EMPTY_AXES:
        assert forms[op] >= ({"absent"} if op == "Squeeze" else {"absent", "empty"}), (op, forms[op])


@pytest.mark.parametrize("dtype", [DType.int32, DType.int64])
def test_a_zero_divisor_reaches_every_op_of_the_family(dtype: DType) -> None:
    """Div and Mod under fmod 0 and 1: each is the target of a zero-divisor case, the values
    never compared (undefined) but the model valid."""
    cfg = GenConfig(nodes=2, edges=1.0, patterns=0.0, dtypes=[dtype], ops=sorted(ZERO_DIVISOR))
    reached: set[str] = set()
    for seed in range(120):
        case = generate(seed, cfg)
        if case.edge != "zero_divisor":
            continue
        valid(case.model)
        for n in case.model.graph.node:
            slot = ZERO_DIVISOR.get(n.op_type, (None, ""))[0]
            if slot is not None and n.input[slot] in case.inputs and (case.inputs[n.input[slot]] == 0).any():
                reached.add(divisor_form(n))
        if len(reached) == 3:
            break
    assert reached == {"Div", "Mod(fmod=0)", "Mod(fmod=1)"}, reached


def _layer_norm(shape: list[int], scale_first: bool) -> onnx.ModelProto:
    """LayerNorm written out as exporters write it, its scale Mul's operands in either order."""
    d = shape[-1]
    arrays = {"two": np.array(2.0), "eps": np.array(1e-5), "scale": np.ones(d), "bias": np.zeros(d)}
    make = onnx.helper.make_node
    nodes = [
        make("ReduceMean", ["x"], ["m"], axes=[-1]),
        make("Sub", ["x", "m"], ["c"]),
        make("Pow", ["c", "two"], ["p"]),
        make("ReduceMean", ["p"], ["v"], axes=[-1]),
        make("Add", ["v", "eps"], ["ve"]),
        make("Sqrt", ["ve"], ["s"]),
        make("Div", ["c", "s"], ["n"]),
        make("Mul", ["scale", "n"] if scale_first else ["n", "scale"], ["sc"]),
        make("Add", ["sc", "bias"], ["y"]),
        make("Neg", ["y"], ["out"]),
    ]
    graph = onnx.helper.make_graph(
        nodes,
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
        [onnx.helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(a.astype(np.float32), k) for k, a in arrays.items()],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8)


def test_onnxruntimes_layernorm_fusion_breaks_the_graph_at_rank_one_with_the_scale_first() -> None:
    """What the rank-1 and operand-order draws found (onnxruntime 1.31.1): LayerNormFusion on
    a 1-D input whose scale comes first in its Mul removes a tensor a node still reads, and
    the optimized model fails to load; rank 2, or the scale second, is fused fine."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.log_severity_level = 3

    def loads(model: onnx.ModelProto) -> bool:
        valid(model)
        try:
            ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        except ort.capi.onnxruntime_pybind11_state.InvalidArgument:
            return False
        return True

    assert loads(_layer_norm([3], scale_first=False)) and loads(_layer_norm([2, 3], scale_first=True))
    if loads(_layer_norm([3], scale_first=True)):
        pytest.skip(f"onnxruntime {ort.__version__} fuses a rank-1 LayerNorm with its scale first now")


MATCHED_SEEDS = 200
INPUT_SLOTS: dict[str, dict[str, int]] = {"Clip": {"min": 1, "max": 2}, "Pow": {"Y": 1}}
"""Where an op's matched values sit when they are operands rather than attributes."""


def _held(node: onnx.NodeProto, constants: dict[str, np.ndarray], opset: int) -> dict[str, float | None]:
    """What the node holds for each name its op's matched settings use: an owned constant
    operand's value (None when left out), else the attribute (its default when absent)."""
    slots, held = INPUT_SLOTS.get(node.op_type, {}), {}
    for name in {k for s in settings(node.op_type) for k in s}:
        if name in slots:
            given = node.input[slots[name]] if slots[name] < len(node.input) else ""
            held[name] = float(constants[given].reshape(-1)[0]) if given in constants else None
            continue
        attr = next((a for a in node.attribute if a.name == name), None)
        held[name] = (
            float(helper.get_attribute_value(attr))
            if attr is not None
            else attribute_default(node.op_type, name, opset)
        )
    return held


def _setting_key(setting: Mapping[str, float | None]) -> tuple[tuple[str, float | None], ...]:
    return tuple(sorted((k, None if v is None else float(np.float32(v))) for k, v in setting.items()))


def test_matched_constants_and_their_near_values_come_up_and_are_computed_right() -> None:
    """Clip(0, 6) (ReLU6 to onnx2torch), HardSigmoid(1/6, 0.5) (torch's Hardsigmoid) and the
    other values converters match (generator.ops.matched) are drawn, and so are values just off
    them; the reference agrees with onnx.reference on each model that holds a new one."""
    cfg = GenConfig(nodes=2, patterns=0.0, edges=0.0, dtypes=[F32], wide_types=0.0, special_values=0.0)
    seen: dict[str, set[tuple[tuple[str, float | None], ...]]] = collections.defaultdict(set)
    for op in sorted(MATCHED):
        wanted = {_setting_key(s) for s in settings(op)}
        for seed in range(MATCHED_SEEDS):
            case = generate(seed, cfg.model_copy(update={"ops": [op]}))
            constants = initializers(case.model)
            held = {_setting_key(_held(n, constants, 17)) for n in case.model.graph.node if n.op_type == op}
            if (held & wanted) - seen[op]:
                valid(case.model)
                agrees_with_onnx_reference(case.model, case.inputs)
                seen[op] |= held & wanted
            if seen[op] == wanted:
                break
    assert _setting_key({"min": 0.0, "max": 6.0}) in seen["Clip"]
    assert _setting_key({"alpha": 1 / 6, "beta": 0.5}) in seen["HardSigmoid"]
    for op, entry in MATCHED.items():
        assert {_setting_key(s) for s in entry.exact} & seen[op], f"{op}: no matched value drawn"
        assert {_setting_key(s) for s in entry.near} & seen[op], f"{op}: no near value drawn"
    assert all(_setting_key(s) in seen[op] for op in ("Clip", "HardSigmoid") for s in settings(op))


def test_matched_values_are_drawn_for_about_their_share_of_nodes() -> None:
    """The share is the data's (MATCHED_SHARE, NEAR_SHARE), and an op without an entry draws
    nothing, so its models are what they were."""
    rng = random.Random(5)
    draws = [draw_matched("HardSigmoid", rng) for _ in range(4000)]
    exact = sum(
        d is not None and _setting_key(d) in {_setting_key(s) for s in MATCHED["HardSigmoid"].exact} for d in draws
    )
    near = sum(d is not None for d in draws) - exact
    assert abs(exact / 4000 - MATCHED_SHARE) < 0.03 and abs(near / 4000 - NEAR_SHARE) < 0.03
    before = rng.getstate()
    assert draw_matched("Relu", rng) is None and rng.getstate() == before


def _twins(model: onnx.ModelProto) -> tuple[list[onnx.NodeProto], onnx.NodeProto | None]:
    """The twin's nodes, and the node it copies last (its output is the twin's)."""
    twins = [n for n in model.graph.node if n.name.startswith(f"{PREFIX}_")]
    return twins, (model.graph.node[int(twins[-1].name.rsplit("_", 1)[1])] if twins else None)


def test_a_node_with_every_input_constant_comes_up_as_a_constant_twin() -> None:
    """TVM's frontend divides two integer constants at import with numpy and rounds toward
    zero itself; a mutant of that rounding survived every campaign, since no generated Div
    read two constants. A twin copies one node, or a short chain, onto initializers holding
    the values its original read: every input of the twin's first nodes is constant, its
    output is a graph output, and the reference gives it what it gives the original."""
    cfg = GenConfig(nodes=4, constant_twins=1.0, edges=0.0, special_values=0.0, symbolic_dims=0.0, wide_types=0.0)
    chains: collections.Counter[int] = collections.Counter()
    checked = 0
    for seed in range(40):
        case, witness = grow_case(seed, cfg)
        twins, original = _twins(case.model)
        if original is None:
            continue
        chains[len(twins)] += 1
        made = {o for n in twins for o in n.output}
        constant = set(initializers(case.model))
        assert all(i in constant or i in made for n in twins for i in n.input if i), seed
        outputs = [o.name for o in case.model.graph.output]
        assert [o for o in twins[-1].output if o] == outputs[len(outputs) - len(twins[-1].output) :], seed
        if checked < 12 and all(n.domain == "" for n in case.model.graph.node):
            valid(case.model)
            ours = run_reference(case.model, case.inputs)
            for mine, theirs in zip(twins[-1].output, original.output, strict=True):
                expected = witness.env[theirs].detach().numpy()
                np.testing.assert_allclose(ours[mine], expected, rtol=1e-5, atol=1e-6, err_msg=f"{seed} {mine}")
            checked += 1
    assert sum(chains.values()) >= 30 and checked >= 10, (chains, checked)
    assert chains[1] and any(k > 1 for k in chains), chains
    integer = GenConfig(nodes=3, ops=["Div", "Add", "Mul"], dtypes=[DType.int32, DType.int64], constant_twins=1.0)
    integer = integer.model_copy(update={"edges": 0.0, "special_values": 0.0, "patterns": 0.0})
    signs_differ = 0
    for seed in range(60):
        case = generate(seed, integer)
        twins, original = _twins(case.model)
        constants = initializers(case.model)
        for n in twins:
            if n.op_type == "Div" and n.input[0] in constants and n.input[1] in constants:
                a, b = np.broadcast_arrays(constants[n.input[0]], constants[n.input[1]])
                signs_differ += int(np.any((np.sign(a) * np.sign(b) < 0) & (a % b != 0)))
    assert signs_differ >= 3, signs_differ


def test_a_twin_takes_a_node_of_an_op_the_diff_names_half_the_time() -> None:
    """A diff that changes Div's converter changes how Div folds: where a model holds a Div
    that can be twinned, the twin copies it in about half the cases, and in far fewer when
    nothing is named."""
    cfg = GenConfig(nodes=6, ops=["Div", "Add", "Mul", "Sub", "Relu"], constant_twins=0.0, patterns=0.0)
    picked = {"named": 0, "not named": 0}
    for seed in range(60):
        case, witness = grow_case(seed, cfg)
        for key, prefer in (("named", ("Div",)), ("not named", ())):
            twinned = with_constant_twin(case.model, witness.env, random.Random(seed), prefer)
            twins, _ = _twins(twinned) if twinned is not None else ([], None)
            picked[key] += bool(twins) and twins[-1].op_type == "Div"
    assert picked["named"] >= 20 and picked["named"] >= 1.5 * picked["not named"], picked


def test_a_case_without_a_twin_is_the_model_it_was_before_twins() -> None:
    """The twin draws from a stream of its own: with the share at 0, or for a seed the share
    passes over, the model is byte for byte the one generation wrote without the feature."""
    cfg = GenConfig(nodes=4)
    off = cfg.model_copy(update={"constant_twins": 0.0})
    differ = 0
    for seed in range(30):
        with_twins, without = generate(seed, cfg).model, generate(seed, off).model
        twins, _ = _twins(with_twins)
        differ += bool(twins)
        if not twins:
            assert with_twins.SerializeToString() == without.SerializeToString(), seed
        else:
            assert len(with_twins.graph.node) > len(without.graph.node), seed
    assert 0 < differ < 15, differ


def test_a_value_held_under_a_narrow_tag_is_never_twinned() -> None:
    """int4 is held as its bytes under torch's uint4 tag, which no initializer can be (a
    campaign with every case twinned died of `.numpy()` on one): neither the QuantizeLinear
    that makes it nor the DequantizeLinear that reads it gets a twin; the Relu after does."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [4])
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s"], ["q"], output_dtype=onnx.TensorProto.UINT4),
        helper.make_node("DequantizeLinear", ["q", "s"], ["y"]),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    scale = numpy_helper.from_array(np.array(0.5, np.float32), "s")
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [scale]))
    values = torch.tensor([0.0, 1.0, 2.0, 3.0])
    q = torch.tensor([0, 2, 4, 6], dtype=torch.uint8).view(torch.uint4)  # type: ignore[attr-defined]
    env = {"x": values, "s": torch.tensor(0.5), "q": q, "y": values, "z": values}
    for seed in range(20):
        twinned = with_constant_twin(model, env, random.Random(seed))
        assert twinned is not None
        twins, original = _twins(twinned)
        assert [n.op_type for n in twins] == ["Relu"] and original is not None and original.op_type == "Relu"


def _int_attr(node: onnx.NodeProto, name: str, default: int) -> int:
    value = _attr(node, name, default)
    assert isinstance(value, int), (name, value)
    return value


def _dims(inferred: onnx.ModelProto) -> dict[str, list[int]]:
    """Every tensor's dims, read off the inferred model."""
    values = [*inferred.graph.value_info, *inferred.graph.input]
    found = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in values}
    return found | {i.name: list(i.dims) for i in inferred.graph.initializer}


@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
def test_blocked_quantization_comes_up_with_partial_and_whole_axis_blocks(op: str) -> None:
    """A converter's blocked path (opset 21's `block_size`) is its own code, which per-axis
    draws never run. Each blocked model is valid, defined by the schema's shape rule, and
    computed as onnxruntime computes it."""
    cfg = GenConfig(nodes=3, opset=21, patterns=0.0, dtypes=[F32, DType.uint8, DType.int8], wide_types=0.0)
    partial = whole = checked = 0
    for seed in range(40):
        case = generate(seed, cfg.model_copy(update={"ops": [op, "Relu"]}))
        inferred = valid(case.model)
        dims = _dims(inferred)
        for node in (n for n in inferred.graph.node if n.op_type == op and _int_attr(n, "block_size", 0)):
            axis, block = _int_attr(node, "axis", 1), _int_attr(node, "block_size", 0)
            dim, blocks = dims[node.input[0]][axis], dims[node.input[1]][axis]
            whole += blocks == 1
            partial += blocks > 1 and dim % block != 0
            assert undefined_forms(case.model) == []
            if checked < 8:
                agrees_with_onnxruntime(case.model, case.inputs)
                checked += 1
    assert whole >= 2 and partial >= 2 and checked == 8
