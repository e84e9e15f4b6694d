"""The torch reference agrees with onnx.reference.ReferenceEvaluator, op by op."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from backends.reference import ReferenceError, run_reference
from generator.api import GenConfig, generate
from generator.dtypes import DType
from generator.ops import registry
from tests.generator.test_reference_parity import Instance
from tests.op_family import classic_dtypes
from tests.paths import TESTS

pytestmark = [pytest.mark.worker]

FAMILY_TESTS = {
    **{f"generator.ops.{m}": "test_ops_layout.py" for m in ("shape", "joining", "padding", "resize")},
    **{f"generator.ops.{m}": "test_ops_layout.py" for m in ("indexing", "selection")},
    **{f"generator.ops.{m}": "test_ops_nn.py" for m in ("nn", "windows", "conv", "pool", "norm", "reduce")},
    "generator.ops.quant": "test_ops_quant.py",
    "generator.ops.recurrent": "test_ops_recurrent.py",
    "generator.ops.dynamic": "test_ops_dynamic.py",
    "generator.ops.control": "test_ops_control.py",
    "generator.ops.picking": "test_ops_dynamic.py",
    "generator.ops.signal": "test_ops_signal.py",
    "generator.ops.linalg": "test_ops_linalg.py",
    "generator.ops.losses": "test_ops_losses.py",
    "generator.ops.sampling": "test_ops_sampling.py",
    "generator.ops.regions": "test_ops_regions.py",
    "generator.ops.attention": "test_ops_attention.py",
}
"""Op families whose own test files check them op x dtype (with their evaluator workarounds);
this file checks the elementwise families and that no op is left without such a test."""
ELEMENTWISE = ("generator.ops.elementwise", "generator.ops.unary", "generator.ops.clip_cast")


def _op_dtypes() -> list[tuple[str, DType]]:
    specs = registry()
    names = sorted(n for n, s in specs.items() if s.__module__ not in FAMILY_TESTS)
    return [(name, d) for name in names for d in classic_dtypes(specs[name])]


def test_every_op_family_has_a_semantic_test() -> None:
    here = TESTS / "generator"
    for name, spec in registry().items():
        if spec.__module__ in FAMILY_TESTS:
            assert (here / FAMILY_TESTS[spec.__module__]).exists(), name
        else:
            assert spec.__module__ in ELEMENTWISE, (name, spec.__module__)


def _assert_agrees(op_type: str, ours: np.ndarray, theirs: np.ndarray, seed: int) -> None:
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, (op_type, seed, ours.dtype, theirs.dtype)
    if ours.dtype.kind == "f":
        tol = 1e-2 if ours.dtype == np.float16 else 1e-4
        np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol, equal_nan=True, err_msg=f"{op_type} seed {seed}")
    else:
        np.testing.assert_array_equal(ours, theirs, err_msg=f"{op_type} seed {seed}")


@pytest.mark.parametrize(("op_type", "dtype"), _op_dtypes(), ids=lambda v: str(v))
def test_op_reference_matches_onnx_reference_evaluator(op_type: str, dtype: DType) -> None:
    """Single-op models of each declared dtype: valid ONNX, and the torch reference agrees
    with onnx.reference on every output (NaN where it has NaN)."""
    spec = registry()[op_type]
    cfg = GenConfig(wide_types=0.0, nodes=1, ops=[op_type], dtypes=[dtype], opset=max(17, spec.since_opset))
    checked = 0
    for seed in range(60):
        if checked >= 3:
            break
        try:
            case = generate(seed, cfg)
        except RuntimeError:  # the first tensor cannot host the op
            continue
        if not any(n.op_type == op_type for n in case.model.graph.node):
            continue
        if Instance(op_type, dtype, cfg.written_opset, f"seed {seed}", case.model, case.inputs).defects:
            continue  # onnx.reference is known wrong here: test_reference_parity.EVALUATOR_DEFECTS says why
        onnx.checker.check_model(case.model, full_check=True)
        ours = run_reference(case.model, case.inputs)
        theirs = ReferenceEvaluator(case.model).run(None, case.inputs)
        for out, value in zip(case.model.graph.output, theirs, strict=True):
            _assert_agrees(op_type, ours[out.name], np.asarray(value), seed)
        checked += 1
    assert checked >= 3, f"{op_type}/{dtype}: only {checked} models contained the op"


def _tiny_graph(op_type: str, **attrs: str) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node(op_type, ["x", "w"], ["y"], **attrs)
    w = numpy_helper.from_array(np.full((2, 3), 0.5, dtype=np.float32), "w")
    return helper.make_model(helper.make_graph([node], "g", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 17)])


def test_hand_built_graph_runs_on_the_reference() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = run_reference(_tiny_graph("Sub"), {"x": x})
    np.testing.assert_array_equal(out["y"], x - 0.5)


def test_unregistered_op_is_a_reference_error() -> None:
    with pytest.raises(ReferenceError, match="NoSuchOp"):
        run_reference(_tiny_graph("NoSuchOp"), {"x": np.zeros((2, 3), np.float32)})
