"""Generation at opsets 11 and 12 (the oldest the generator writes) and at every opset after
17, up to the newest it writes (the newest onnxruntime 1.31.1 loads): every model passes the
full checker and strict shape inference, the torch reference computes it, and the real
onnxruntime runs it; each opset's new forms appear from the opset that brought them, never
before it, and the forms of 11 and 12 that 13 replaced never after."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as KernelMissing

from backends.adapters.base import is_unsupported
from backends.adapters.ort import OrtAdapter
from backends.client import WorkerClient
from backends.reference import model_opset, run_reference
from backends.spec import parse_backend
from bot.sides.probe import probe_opsets
from generator.api import GenConfig, Support, generate
from generator.dtypes import DType
from generator.emit import IR_VERSION, NEWEST_OPSET
from generator.values import NoValidValues

pytestmark = [pytest.mark.worker]

OPSETS = (11, 12, *range(18, NEWEST_OPSET + 1))
MODELS = 300
"""Small models per opset: four seconds each, enough to reach most of the 137 op types."""
NODES = 4


@pytest.fixture(scope="module")
def supports(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Support]:
    """onnxruntime's support at every opset, probed at the level the models are run at."""
    with WorkerClient(parse_backend("onnxruntime:disable")) as client:
        assert client.info is not None
        cache = tmp_path_factory.mktemp("cache")
        probed = [11, 12, *range(17, NEWEST_OPSET + 1)]
        found = probe_opsets(client, client.info, probed, cache, lambda f: None)
    return {opset: matrix.support() for opset, matrix in found.items()}


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    """No graph optimization: the kernels of the opset the model imports, not a fusion's bugs."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _attr(node: onnx.NodeProto, name: str) -> object:
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), None)


def float16_affine_grid_2d(model: onnx.ModelProto) -> bool:
    """A real onnxruntime bug (tests/generator/test_ops_sampling.py pins it): AffineGrid-20 over float16
    with a 2-D theta [N, 2, 3] fails at run time inside the function body it expands ("Split:
    axis 1 is not in valid range [-1,0]")."""
    inferred = onnx.shape_inference.infer_shapes(model).graph
    types = {v.name: v.type.tensor_type for v in [*inferred.value_info, *inferred.input]}
    thetas = [types.get(n.input[0]) for n in model.graph.node if n.op_type == "AffineGrid"]
    return any(
        t is not None and t.elem_type == onnx.TensorProto.FLOAT16 and [d.dim_value for d in t.shape.dim][1:] == [2, 3]
        for t in thetas
    )


def resize_keeps_aspect_over_a_negative_axis(model: onnx.ModelProto) -> bool:
    """A real onnxruntime bug the opset-18 attributes reach: Resize with keep_aspect_ratio_policy
    and an axis spelled negatively. 1.15 to 1.17 abort on an assertion, 1.18 to 1.26 die of
    SIGSEGV, 1.27 to 1.31.1 leave the negative axes unresized (a wrong output shape)."""
    return any(
        n.op_type == "Resize"
        and _attr(n, "keep_aspect_ratio_policy") not in (None, b"stretch")
        and any(a < 0 for a in _attr(n, "axes") or [])  # type: ignore[attr-defined]
        for n in model.graph.node
    )


@pytest.mark.parametrize("opset", OPSETS)
def test_models_at_every_newer_opset_are_valid_computed_and_run(opset: int, supports: dict[int, Support]) -> None:
    made, declined, op_types, wrong_shapes = 0, 0, set(), []
    for seed in range(MODELS):
        try:
            case = generate(seed, GenConfig(nodes=NODES, opset=opset, edges=0.0), support=supports[opset])
        except (RuntimeError, NoValidValues):
            continue
        made += 1
        model = case.model
        assert model_opset(model) == opset and model.ir_version == IR_VERSION[opset]
        onnx.checker.check_model(model, full_check=True)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        expected = run_reference(model, case.inputs)
        try:
            got = _session(model).run(None, case.inputs)
        except Exception as e:
            if resize_keeps_aspect_over_a_negative_axis(model):  # its wrong shape, met by a later node
                wrong_shapes.append(seed)
                continue
            if float16_affine_grid_2d(model):
                continue
            if not isinstance(e, KernelMissing) and not is_unsupported(OrtAdapter.unsupported, str(e)):
                raise
            declined += 1  # a kernel missing, or a form refused (layout 1), for a pair the probe kept
            continue
        shapes = [np.shape(g) for g in got]
        if shapes != [v.shape for v in expected.values()]:
            wrong_shapes.append(seed)
            assert resize_keeps_aspect_over_a_negative_axis(model), (
                seed,
                shapes,
                [n.op_type for n in model.graph.node],
            )
        op_types |= {n.op_type for n in model.graph.node}
    assert made >= 0.95 * MODELS
    assert declined <= 0.05 * made, f"{declined} of {made} models declined at opset {opset}"
    assert len(op_types) >= 100, f"only {len(op_types)} op types at opset {opset}"


def _node_of(op: str, model: onnx.ModelProto) -> onnx.NodeProto | None:
    return next((n for n in model.graph.node if n.op_type == op), None)


def _inputs(node: onnx.NodeProto) -> int:
    return sum(1 for i in node.input if i)


Form = tuple[int, str, str, Callable[[onnx.NodeProto], bool], tuple[DType, ...]]

FORMS: list[Form] = [
    (12, "ArgMax", "select_last_index", lambda n: _attr(n, "select_last_index") is not None, (DType.float32,)),
    (12, "GatherND", "batch_dims", lambda n: _attr(n, "batch_dims") is not None, (DType.float32,)),
    (12, "Dropout", "ratio as an input", lambda n: _inputs(n) >= 2, (DType.float32,)),
    (12, "Dropout", "seed", lambda n: _attr(n, "seed") is not None, (DType.float32,)),
    (12, "Einsum", "the op", lambda n: True, (DType.float32,)),
    (12, "Celu", "the op", lambda n: True, (DType.float32,)),
    # Resize-11's roi is a required (empty) tensor; from 13 it is drawn absent or present
    # empty (generator.ops.optional), so the absent form is the new one.
    (13, "Resize", "roi left out", lambda n: n.input[1] == "", (DType.float32,)),
    (12, "GreaterOrEqual", "the op", lambda n: True, (DType.float32,)),
    (12, "NegativeLogLikelihoodLoss", "the op", lambda n: True, (DType.float32,)),
    (13, "Squeeze", "axes as an input", lambda n: _inputs(n) == 2, (DType.float32,)),
    (13, "Unsqueeze", "axes as an input", lambda n: _inputs(n) == 2, (DType.float32,)),
    (13, "Split", "sizes as an input", lambda n: _inputs(n) == 2, (DType.float32,)),
    (13, "ReduceSum", "axes as an input", lambda n: _inputs(n) == 2, (DType.float32,)),
    (13, "QuantizeLinear", "per-axis scales", lambda n: _attr(n, "axis") is not None, (DType.float32,)),
    (13, "Resize", "roi left out", lambda n: n.input[1] == "", (DType.float32,)),
    (18, "ReduceMean", "axes as an input", lambda n: _inputs(n) == 2, (DType.float32,)),
    (18, "ReduceL2", "axes as an input", lambda n: _inputs(n) == 2, (DType.float32,)),
    (18, "Split", "num_outputs", lambda n: _attr(n, "num_outputs") is not None, (DType.float32,)),
    (18, "Pad", "axes", lambda n: _inputs(n) == 4, (DType.float32,)),
    (18, "Resize", "axes", lambda n: _attr(n, "axes") is not None, (DType.float32,)),
    (18, "Resize", "antialias", lambda n: _attr(n, "antialias") == 1, (DType.float32,)),
    (18, "Resize", "keep_aspect_ratio_policy", lambda n: _attr(n, "keep_aspect_ratio_policy") is not None, ()),
    (18, "ScatterElements", "max or min", lambda n: _attr(n, "reduction") in (b"max", b"min"), (DType.float32,)),
    (18, "LpPool", "ceil_mode", lambda n: _attr(n, "ceil_mode") == 1, (DType.float32,)),
    (18, "BitwiseAnd", "the op", lambda n: True, (DType.int32,)),
    (18, "CenterCropPad", "the op", lambda n: True, (DType.float32,)),
    (19, "Pad", "wrap", lambda n: _attr(n, "mode") == b"wrap", (DType.float32,)),
    (
        19,
        "Resize",
        "half_pixel_symmetric",
        lambda n: _attr(n, "coordinate_transformation_mode") == b"half_pixel_symmetric",
        (),
    ),
    (19, "AveragePool", "dilations", lambda n: _attr(n, "dilations") is not None, (DType.float32,)),
    (20, "ReduceMax", "bool", lambda n: True, (DType.bool,)),
    (20, "Gelu", "the op", lambda n: True, (DType.float32,)),
    (21, "GroupNormalization", "the op", lambda n: True, (DType.float32,)),
]
"""(opset, op, form, whether a node has it, dtypes): each opset's new inputs, attributes and ops."""
SEEDS = 60


def _has_form(opset: int, op: str, has: Callable[[onnx.NodeProto], bool], dtypes: tuple[DType, ...]) -> bool:
    cfg = GenConfig(nodes=1, ops=[op], opset=opset, values="none", **({"dtypes": list(dtypes)} if dtypes else {}))
    for seed in range(SEEDS):
        try:
            node = _node_of(op, generate(seed, cfg).model)
        except (RuntimeError, ValueError):
            return False  # the op does not exist at this opset, or takes none of these dtypes there
        if node is not None and has(node):
            return True
    return False


@pytest.mark.parametrize("form", FORMS, ids=[f"{f[1]}-{f[2]}" for f in FORMS])
def test_each_opsets_new_forms_appear_from_that_opset_and_never_before(form: Form) -> None:
    opset, op, _, has, dtypes = form
    assert _has_form(opset, op, has, dtypes)
    assert _has_form(NEWEST_OPSET, op, has, dtypes)
    assert not _has_form(opset - 1, op, has, dtypes)


OLD_FORMS: list[Form] = [
    (12, "Squeeze", "axes as an attribute", lambda n: _attr(n, "axes") is not None, (DType.float32,)),
    (12, "Unsqueeze", "axes as an attribute", lambda n: _attr(n, "axes") is not None, (DType.float32,)),
    (12, "Split", "sizes as an attribute", lambda n: _attr(n, "split") is not None, (DType.float32,)),
    (12, "ReduceSum", "axes as an attribute", lambda n: _attr(n, "axes") is not None, (DType.float32,)),
    (
        12,
        "Resize",
        "tf_half_pixel_for_nn",
        lambda n: _attr(n, "coordinate_transformation_mode") == b"tf_half_pixel_for_nn",
        (DType.float32,),
    ),
    (11, "Dropout", "ratio as an attribute", lambda n: _attr(n, "ratio") is not None, (DType.float32,)),
    (17, "ReduceMean", "axes as an attribute", lambda n: _attr(n, "axes") is not None, (DType.float32,)),
]
"""(last opset, op, form, whether a node has it, dtypes): the forms an op's later version
replaced, written from the oldest opset the generator writes up to the last one they exist at."""


@pytest.mark.parametrize("form", OLD_FORMS, ids=[f"{f[1]}-{f[2]}" for f in OLD_FORMS])
def test_each_old_form_appears_until_its_last_opset_and_never_after(form: Form) -> None:
    last, op, _, has, dtypes = form
    assert _has_form(min(IR_VERSION), op, has, dtypes)
    assert _has_form(last, op, has, dtypes)
    assert not _has_form(last + 1, op, has, dtypes)


def test_each_opset_is_written_at_the_lowest_ir_version_onnx_allows() -> None:
    """An older runtime refuses a newer IR version even at an opset it loads."""
    assert sorted(IR_VERSION) == list(range(min(IR_VERSION), NEWEST_OPSET + 1))
    for opset, ir in IR_VERSION.items():
        assert ir == helper.find_min_ir_version_for([helper.make_opsetid("", opset)]), opset
