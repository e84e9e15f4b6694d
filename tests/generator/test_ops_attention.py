"""The transformer-block ops of opset 23 (generator.ops.attention): RMSNormalization,
RotaryEmbedding and Attention, for every dtype each declares.

A generated single-op model must pass onnx.checker's full check and strict shape inference,
and the torch reference must agree with onnxruntime 1.31.1 (optimizer off and at its default
level) and with onnx.reference. Each op's forms must all be written, and a worked example per
op pins the reference to numbers found by hand. TVM 0.27 converts two of them; where it fails
on a valid model, the failure is pinned as the bug it is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from backends.client import WorkerClient
from backends.reference import run_reference
from backends.results import Status
from backends.spec import parse_backend
from generator.api import GenConfig, GeneratedCase, generate
from generator.dtypes import DType
from generator.ops import registry
from generator.ops.base import OpSpec
from tests.generator.test_reference_parity import _evaluate
from tests.op_family import classic_dtypes

pytestmark = [pytest.mark.worker]

FAMILY = "generator.ops.attention"
SPECS = {op: spec for op, spec in sorted(registry().items()) if spec.__module__ == FAMILY}
CASES = [(op, dtype) for op, spec in SPECS.items() for dtype in classic_dtypes(spec)]
SEEDS = 40


def _tolerance(dtype: np.dtype) -> float:
    return 1e-2 if dtype == np.float16 else 1e-5


def _run_ort(model: onnx.ModelProto, inputs: dict[str, np.ndarray], optimize: bool) -> list[np.ndarray]:
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return [np.asarray(v) for v in session.run(None, inputs)]


def single_op_cases(spec: type[OpSpec], dtype: DType, seeds: int = SEEDS) -> list[GeneratedCase]:
    """Single-op models holding the op, at its first opset (17 at the earliest) and at the newest
    on alternate seeds."""
    found = []
    for seed in range(seeds):
        opset = max(17, spec.since_opset) if seed % 2 else 26
        try:
            case = generate(seed, GenConfig(wide_types=0.0, nodes=1, ops=[spec.op_type], dtypes=[dtype], opset=opset))
        except RuntimeError:  # the first tensor cannot host the op
            continue
        if any(n.op_type == spec.op_type for n in case.model.graph.node):
            found.append(case)
    return found


def check_against_both_oracles(case: GeneratedCase, what: str) -> None:
    """Valid, and the reference equal to onnxruntime (both levels) and onnx.reference."""
    onnx.checker.check_model(case.model, full_check=True)
    onnx.shape_inference.infer_shapes(case.model, check_type=True, strict_mode=True)
    ours = run_reference(case.model, case.inputs)
    names = [o.name for o in case.model.graph.output]
    theirs = {
        "onnxruntime unoptimized": _run_ort(case.model, case.inputs, optimize=False),
        "onnxruntime": _run_ort(case.model, case.inputs, optimize=True),
        "onnx.reference": _evaluate(case.model, case.inputs),
    }
    for oracle, outputs in theirs.items():
        for name, got in zip(names, outputs, strict=True):
            want = ours[name]
            assert got.dtype == want.dtype and got.shape == want.shape, (what, oracle, name)
            tol = _tolerance(want.dtype)
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{what} vs {oracle}")


def _node(case: GeneratedCase, op: str) -> onnx.NodeProto:
    found: onnx.NodeProto = next(n for n in case.model.graph.node if n.op_type == op)
    return found


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


@pytest.mark.parametrize(("op", "dtype"), CASES, ids=[f"{op}-{d}" for op, d in CASES])
def test_op_is_valid_and_matches_onnxruntime_and_the_evaluator(op: str, dtype: DType) -> None:
    cases = single_op_cases(SPECS[op], dtype)
    assert len(cases) >= 10, f"only {len(cases)} {op}/{dtype} models"
    for case in cases:
        check_against_both_oracles(case, f"{op}/{dtype} seed {case.seed}")


def _attention_form(case: GeneratedCase) -> set[str]:
    node = _node(case, "Attention")
    a, inputs = _attrs(node), list(node.input)
    forms = {"3d" if "q_num_heads" in a else "4d", "self" if inputs[1] == inputs[0] else "cross"}
    if a.get("q_num_heads", 0) != a.get("kv_num_heads", 0):
        forms.add("grouped")
    forms |= {k for k in ("is_causal", "scale", "softcap", "softmax_precision") if k in a}
    if len(inputs) > 3 and inputs[3]:
        mask = next(i for i in case.model.graph.initializer if i.name == inputs[3])
        forms.add("bool mask" if mask.data_type == TensorProto.BOOL else "float mask")
    if len(inputs) > 6 and inputs[6]:  # at every key: what its absence means (generator.ops.optional)
        forms.add("nonpad_kv_seqlen")
    return forms


def _rotary_form(case: GeneratedCase) -> set[str]:
    node = _node(case, "RotaryEmbedding")
    a = _attrs(node)
    forms = {"3d" if "num_heads" in a else "4d", "position ids" if len(node.input) > 3 else "gathered caches"}
    return forms | {k for k in ("interleaved", "rotary_embedding_dim") if k in a}


def _rms_form(case: GeneratedCase) -> set[str]:
    node = _node(case, "RMSNormalization")
    scale = next(i for i in case.model.graph.initializer if i.name == node.input[1])
    x_rank = len(case.model.graph.input[0].type.tensor_type.shape.dim)
    forms = {k for k in ("axis", "epsilon", "stash_type") if k in _attrs(node)}
    return forms | {
        "broadcast scale" if len(scale.dims) < x_rank - (int(_attrs(node).get("axis", -1)) % x_rank) else "full"
    }


FORMS: dict[str, tuple[Callable[[GeneratedCase], set[str]], set[str]]] = {
    "Attention": (
        _attention_form,
        {"3d", "4d", "self", "cross", "grouped", "is_causal", "scale", "softcap", "softmax_precision"}
        | {"bool mask", "float mask", "nonpad_kv_seqlen"},
    ),
    "RotaryEmbedding": (
        _rotary_form,
        {"3d", "4d", "position ids", "gathered caches", "interleaved", "rotary_embedding_dim"},
    ),
    "RMSNormalization": (_rms_form, {"axis", "epsilon", "stash_type", "broadcast scale", "full"}),
}


@pytest.mark.parametrize("op", sorted(FORMS))
def test_every_form_is_written(op: str) -> None:
    read, wanted = FORMS[op]
    seen: Counter[str] = Counter()
    for case in single_op_cases(SPECS[op], DType.float32, seeds=120):
        seen.update(read(case))
    assert wanted <= set(seen), sorted(wanted - set(seen))


def _model(op: str, inputs: dict[str, np.ndarray], consts: dict[str, np.ndarray], **attrs: Any) -> onnx.ModelProto:
    feeds = [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in inputs.items()]
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in consts.items()]
    node = helper.make_node(op, [*inputs, *consts], ["y"], **attrs)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "g", feeds, [out], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def test_rms_normalization_by_hand() -> None:
    """[3, 4]: the mean square is 12.5, so each element is divided by sqrt(12.5) = 3.5355..."""
    x = np.array([[3.0, 4.0]], np.float32)
    model = _model("RMSNormalization", {"x": x}, {"s": np.array([1.0, 2.0], np.float32)}, epsilon=0.0)
    y = run_reference(model, {"x": x})["y"]
    np.testing.assert_allclose(y, [[3 / 12.5**0.5, 8 / 12.5**0.5]], rtol=1e-6)


def test_rotary_embedding_by_hand() -> None:
    """A quarter turn maps the pair (x1, x2) to (-x2, x1): split halves, then interleaved pairs;
    with rotary_embedding_dim 2 of 4 the last two features pass through."""
    x = np.array([[[[1.0, 5.0, 2.0, 7.0]]]], np.float32)  # [batch, heads, seq, head]
    cos, sin = np.zeros((1, 1, 2), np.float32), np.ones((1, 1, 2), np.float32)
    halves = run_reference(_model("RotaryEmbedding", {"x": x}, {"c": cos, "s": sin}), {"x": x})["y"]
    assert halves.reshape(-1).tolist() == [-2.0, -7.0, 1.0, 5.0]
    pairs = run_reference(_model("RotaryEmbedding", {"x": x}, {"c": cos, "s": sin}, interleaved=1), {"x": x})["y"]
    assert pairs.reshape(-1).tolist() == [-5.0, 1.0, -7.0, 2.0]
    c1, s1 = np.zeros((1, 1, 1), np.float32), np.ones((1, 1, 1), np.float32)
    partial = run_reference(_model("RotaryEmbedding", {"x": x}, {"c": c1, "s": s1}, rotary_embedding_dim=2), {"x": x})
    assert partial["y"].reshape(-1).tolist() == [-5.0, 1.0, 2.0, 7.0]


def test_attention_by_hand() -> None:
    """Equal scores average the values; the causal mask leaves the first query its first key;
    a boolean mask that keeps one key returns that key's value."""
    q = np.array([[[[1.0, 0.0], [1.0, 0.0]]]], np.float32)  # one head, two queries
    v = np.array([[[[2.0, 0.0], [4.0, 2.0]]]], np.float32)
    plain = run_reference(_model("Attention", {"q": q}, {"k": q, "v": v}), {"q": q})["y"]
    np.testing.assert_allclose(plain.reshape(2, 2), [[3.0, 1.0], [3.0, 1.0]], rtol=1e-6)
    causal = run_reference(_model("Attention", {"q": q}, {"k": q, "v": v}, is_causal=1), {"q": q})["y"]
    np.testing.assert_allclose(causal.reshape(2, 2), [[2.0, 0.0], [3.0, 1.0]], rtol=1e-6)
    keep_second = np.array([[False, True], [False, True]])
    masked = run_reference(_model("Attention", {"q": q}, {"k": q, "v": v, "m": keep_second}), {"q": q})["y"]
    np.testing.assert_allclose(masked.reshape(2, 2), [[4.0, 2.0], [4.0, 2.0]], rtol=1e-6)


def test_grouped_query_heads_share_their_key_and_value_head() -> None:
    """Two query heads over one key/value head: each query head reads the same values."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    k, v = rng.standard_normal((1, 1, 5, 4)).astype(np.float32), rng.standard_normal((1, 1, 5, 4)).astype(np.float32)
    y = run_reference(_model("Attention", {"q": q}, {"k": k, "v": v}), {"q": q})["y"]
    for head in range(2):
        scores = q[0, head] @ k[0, 0].T / 2.0
        p = np.exp(scores - scores.max(axis=-1, keepdims=True))
        np.testing.assert_allclose(y[0, head], (p / p.sum(axis=-1, keepdims=True)) @ v[0, 0], rtol=1e-5)


def _tvm_status(client: WorkerClient, case: GeneratedCase) -> tuple[Status, str]:
    result = client.run(case.model.SerializeToString(), case.inputs)
    if result.status is not Status.ok:
        return result.status, result.message or ""
    ours = run_reference(case.model, case.inputs)
    assert all(np.allclose(result.outputs[k], v, rtol=1e-4, atol=1e-4) for k, v in ours.items())
    return result.status, ""


def test_tvm_agrees_on_rms_normalization_and_fails_where_its_frontend_is_wrong() -> None:
    """TVM 0.27 computes RMSNormalization as the reference does, except when the normalized axes
    are all of the input's, where it fails at compile ('Tensor dimension mismatch'); and it
    reads the standard Attention as onnxruntime's contrib op, asking for a `num_heads` the
    standard op does not have. Both are valid models: the failures are TVM's bugs."""
    rms = single_op_cases(SPECS["RMSNormalization"], DType.float32, seeds=20)
    attention = single_op_cases(SPECS["Attention"], DType.float32, seeds=6)
    with WorkerClient(parse_backend("tvm:default"), timeout_s=120, compile_timeout_s=300) as tvm:
        for case in rms:
            node = _node(case, "RMSNormalization")
            rank = len(case.model.graph.input[0].type.tensor_type.shape.dim)
            every_axis = int(_attrs(node).get("axis", -1)) % rank == 0
            status, message = _tvm_status(tvm, case)
            assert (status is Status.ok) != every_axis, (case.seed, message)
            if every_axis:
                assert "dimension mismatch" in message, message
        for case in attention:
            status, message = _tvm_status(tvm, case)
            assert status is not Status.ok and "num_heads" in message, (case.seed, message)


def _attention_model(opset: int, names: list[str], feeds: dict[str, np.ndarray], **attrs: Any) -> onnx.ModelProto:
    ins = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in feeds.items()
    ]
    node = helper.make_node("Attention", names, ["y"], **attrs)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "g", ins, [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def test_attention_reads_padding_and_empty_rows_by_version() -> None:
    """nonpad_kv_seqlen (24 on) hides each batch row's keys from its length on: a row of length
    one returns its first value. A query whose boolean mask keeps no key gives zeros from 25
    on (NaN before). onnxruntime agrees on the padding, onnx.reference on the zero rows."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 1, 3, 4)).astype(np.float32) for _ in range(3))
    lengths = np.array([1, 3], np.int64)
    feeds: dict[str, np.ndarray] = {"q": q, "k": k, "v": v, "n": lengths}
    padded = _attention_model(24, ["q", "k", "v", "", "", "", "n"], feeds)
    ours = run_reference(padded, feeds)["y"]
    np.testing.assert_allclose(ours[0, 0], np.repeat(v[0, 0, :1], 3, axis=0), rtol=1e-6)
    np.testing.assert_allclose(ours, _run_ort(padded, feeds, optimize=False)[0], rtol=1e-5, atol=1e-6)
    keep = np.ones((3, 3), bool)
    keep[1] = False
    masked: dict[str, np.ndarray] = {"q": q, "k": k, "v": v, "m": keep}
    at_25 = run_reference(_attention_model(25, ["q", "k", "v", "m"], masked), masked)["y"]
    assert np.all(at_25[:, :, 1] == 0) and np.isfinite(at_25).all()
    np.testing.assert_allclose(
        at_25, _evaluate(_attention_model(25, ["q", "k", "v", "m"], masked), masked)[0], rtol=1e-5
    )
    at_24 = run_reference(_attention_model(24, ["q", "k", "v", "m"], masked), masked)["y"]
    assert np.isnan(at_24[:, :, 1]).all() and np.isfinite(at_24[:, :, [0, 2]]).all()
