"""NaN/Inf-free values: the unsafe-op table, proxy derivatives, the search, integer repair,
the margin check, dropped cases and determinism, on real torch and real onnx models."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from backends.reference import run_reference
from bot.campaign.run import Campaign
from bot.config import FuzzConfig
from generator.api import GenConfig, generate
from generator.dtypes import DType
from generator.ops import registry
from generator.values import MARGIN, UNSAFE, NoValidValues, apply_values, find_values, margin_hits
from generator.values.predicate import JUMP_MARGIN, Predicate, growth_limit
from generator.values.proxies import ALPHA, with_proxy
from oracles.margin import is_unstable, unstable_ops

pytestmark = [pytest.mark.worker, pytest.mark.campaign]

F32 = np.float32


def _info(name: str, a: np.ndarray) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))


def build(
    nodes: list[onnx.NodeProto], inputs: dict[str, np.ndarray], inits: dict[str, np.ndarray] | None = None
) -> onnx.ModelProto:
    """A one-path model whose last node's output is the graph output."""
    out = helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.UNDEFINED, None)
    graph = helper.make_graph(
        nodes,
        "g",
        [_info(k, v) for k, v in inputs.items()],
        [out],
        [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def node(op: str, ins: list[str], out: str, **attrs: Any) -> onnx.NodeProto:
    return helper.make_node(op, ins, [out], **attrs)


def uniform(seed: int, shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, size=shape).astype(F32)


# --- the table ---------------------------------------------------------------------------

POINTS = np.array([-3.0, -1.0, -0.5, -1e-4, 0.0, 1e-4, 0.5, 0.999, 1.0, 1.001, 2.0, 39.9, 40.0, 40.5, 90.0])

# op, predicate index, truth: where the op's domain holds, per element of POINTS.
DOMAINS: list[tuple[str, int, Callable[[np.ndarray], np.ndarray]]] = [
    ("Log", 0, lambda x: x > 0),
    ("Sqrt", 0, lambda x: x >= 0),
    ("Reciprocal", 0, lambda x: x != 0),
    ("Asin", 0, lambda x: np.abs(x) <= 1),
    ("Acos", 0, lambda x: np.abs(x) <= 1),
    ("Atanh", 0, lambda x: np.abs(x) < 1),
    ("Acosh", 0, lambda x: x >= 1),
    ("Exp", 0, lambda x: x <= 40),
    ("Softplus", 0, lambda x: x <= 40),
]


def _f(p: Predicate, ops: Sequence[torch.Tensor | None], attrs: dict[str, object] | None = None) -> torch.Tensor:
    return p.f(ops, attrs or {})


@pytest.mark.parametrize(("op", "index", "truth"), DOMAINS, ids=[d[0] for d in DOMAINS])
def test_domain_loss_is_positive_exactly_outside_the_domain(
    op: str, index: int, truth: Callable[[np.ndarray], np.ndarray]
) -> None:
    p = UNSAFE[op][index]
    x = torch.tensor(POINTS, dtype=torch.float32)
    for value, ok in zip(x, truth(POINTS), strict=True):
        loss = p.domain_loss(_f(p, [value.reshape(1)]))
        assert (float(loss) > 0) == (not ok), (op, float(value))


@pytest.mark.parametrize(
    ("fn", "truth"),
    [(torch.log, lambda x: x > 0), (torch.sqrt, lambda x: x >= 0), (torch.asin, lambda x: np.abs(x) <= 1)],
)
def test_the_domains_are_where_torch_is_finite(
    fn: Callable[[torch.Tensor], torch.Tensor], truth: Callable[[np.ndarray], np.ndarray]
) -> None:
    finite = torch.isfinite(fn(torch.tensor(POINTS))).numpy()
    assert np.array_equal(finite, truth(POINTS))


def test_binary_and_integer_predicates() -> None:
    div_float, div_int = UNSAFE["Div"]
    b = torch.tensor([-1.0, 0.0, 0.3])
    assert [float(div_float.domain_loss(_f(div_float, [None, v.reshape(1)]))) > 0 for v in b] == [False, True, False]
    ints = [torch.ones(3, dtype=torch.int32), torch.tensor([2, 0, -1], dtype=torch.int32)]
    assert div_int.relevant(ints, {}) and not div_float.relevant(ints, {})
    assert div_int.violated(_f(div_int, ints)).tolist() == [False, True, False]
    pow_base, pow_growth = UNSAFE["Pow"][:2]
    # A negative base is defined under an integer exponent (x**2), NaN under 2.5; a zero
    # base under a negative integer exponent divides by zero.
    x, y = torch.tensor([2.0, 2.0, -1.0, -1.0, 0.0]), torch.tensor([10.0, 60.0, 2.0, 2.5, -1.0])
    assert pow_base.violated(_f(pow_base, [x, y])).tolist() == [False, False, False, True, True]
    assert pow_growth.violated(_f(pow_growth, [x, y])).tolist() == [False, True, False, False, True]
    cast = UNSAFE["Cast"][0]
    v = torch.tensor([-128.9, -129.0, 127.5, 128.0, 3.0])
    assert cast.violated(_f(cast, [v], {"to": TensorProto.INT8})).tolist() == [False, True, False, True, False]
    assert not cast.relevant([v], {"to": TensorProto.FLOAT})


def test_margin_loss_is_positive_within_delta_and_thresholds_follow_the_dtype() -> None:
    p = UNSAFE["Log"][0]
    delta = MARGIN[torch.float32]
    for value, near in [(-1.0, True), (0.0, True), (delta / 2, True), (2 * delta, False), (1.0, False)]:
        assert (float(p.margin_loss(_f(p, [torch.tensor([value])]), delta)) > 0) == near, value
    assert 5 < growth_limit(torch.float16) < 11 < growth_limit(torch.float32) == 40.0
    exp = UNSAFE["Exp"][0]
    assert bool(exp.violated(_f(exp, [torch.tensor([8.0], dtype=torch.float16)])).all())
    assert not bool(exp.violated(_f(exp, [torch.tensor([8.0])])).any())


# --- proxy derivatives ---------------------------------------------------------------------


def test_proxy_derivatives_keep_the_forward_value_and_give_a_slope() -> None:
    def relu(attrs: dict[str, object], ins: list[torch.Tensor | None]) -> list[torch.Tensor]:
        assert ins[0] is not None
        return [torch.relu(ins[0])]

    def floor(attrs: dict[str, object], ins: list[torch.Tensor | None]) -> list[torch.Tensor]:
        assert ins[0] is not None
        return [torch.floor(ins[0])]

    x = torch.tensor([-2.0, -0.5, 0.7, 3.2], requires_grad=True)
    for op, ref, slope in [("Relu", relu, [ALPHA, ALPHA, 1.0, 1.0]), ("Floor", floor, [1.0] * 4)]:
        (y,) = with_proxy(op, ref)({}, [x])
        assert torch.equal(y, ref({}, [x.detach()])[0])
        (g,) = torch.autograd.grad(y.sum(), x)
        assert torch.allclose(g, torch.tensor(slope)), op
        (true_g,) = torch.autograd.grad(ref({}, [x])[0].sum(), x)
        assert float(true_g.abs().min()) == 0.0  # the true gradient would not move these


@pytest.mark.parametrize("op", ["Relu", "Floor", "Ceil", "Round", "Sign", "ThresholdedRelu"])
def test_the_search_moves_values_through_zero_gradient_ops(op: str) -> None:
    x = uniform(1, (4, 6), -3.0, -1.0)  # Relu/Sign of these is flat, Floor's gradient is zero
    m = build([node(op, ["x"], "a"), node("Log", ["a"], "y")], {"x": x})
    found = find_values(m, {"x": x}, {"x"}, seed=0, method="gradient", max_samples=0)
    assert found.outcome.found and found.outcome.method == "gradient", found.outcome
    assert margin_hits(m, {"x": found.values["x"]}) == []


def test_clip_proxy_lets_the_loss_through_the_clamped_region() -> None:
    x = uniform(2, (8,), -4.0, -2.0)
    lo, hi = np.array(-1.0, F32), np.array(1.0, F32)
    m = build([node("Clip", ["x", "lo", "hi"], "a"), node("Sqrt", ["a"], "y")], {"x": x}, {"lo": lo, "hi": hi})
    found = find_values(m, {"x": x}, {"x"}, seed=0, max_samples=0)
    assert found.outcome.found and found.outcome.method == "gradient"
    assert float(found.values["x"].min()) >= MARGIN[torch.float32]


def test_a_negative_zero_divisor_behind_a_proxy_is_pushed_down() -> None:
    # Ceil(Clip(x, -2, -0.5)) is -0.0 for x in (-1, -0.5): only x <= -1 gives a nonzero
    # divisor, upwards the Clip holds it at -0.5. The proxy must keep the -0.0 negative so
    # that the divisor's loss pushes down, not up into the clamped region.
    x = uniform(6, (12,), -0.95, -0.55)
    lo, hi = np.array(-2.0, F32), np.array(-0.5, F32)
    nodes = [node("Clip", ["x", "lo", "hi"], "c"), node("Ceil", ["c"], "d"), node("Div", ["x", "d"], "y")]
    m = build(nodes, {"x": x}, {"lo": lo, "hi": hi})
    found = find_values(m, {"x": x}, {"x"}, seed=0, method="gradient", max_samples=0)
    assert found.outcome.found and found.outcome.method == "gradient", found.outcome
    assert float(found.values["x"].max()) <= -1.0

    def ceil(attrs: dict[str, object], ins: list[torch.Tensor | None]) -> list[torch.Tensor]:
        assert ins[0] is not None
        return [torch.ceil(ins[0])]

    (y,) = with_proxy("Ceil", ceil)({}, [torch.tensor([-0.3, -0.7], requires_grad=True)])
    assert bool(torch.signbit(y).all())


# --- the search on hand-built models ----------------------------------------------------------


Case = tuple[onnx.ModelProto, dict[str, np.ndarray], set[str]]


def _case(nodes: list[onnx.NodeProto], feeds: dict[str, np.ndarray], weights: dict[str, np.ndarray]) -> Case:
    """A model whose inputs and weights are all free for the search."""
    return build(nodes, feeds, weights), feeds, {*feeds, *weights}


def _float_cases() -> dict[str, Case]:
    x, w = uniform(3, (3, 4)), uniform(4, (4, 4))
    big = np.full((4, 4), 30.0, F32)
    mm = node("MatMul", ["x", "w"], "a")
    mul = node("Mul", ["x", "w"], "a")
    return {
        "Log": _case([mm, node("Log", ["a"], "y")], {"x": x}, {"w": w}),
        "Sqrt": _case([node("Sub", ["x", "w"], "a"), node("Sqrt", ["a"], "y")], {"x": x}, {"w": w[:1]}),
        "Div": _case([node("Div", ["x", "w"], "y")], {"x": x}, {"w": np.zeros((1, 4), F32)}),
        "Pow": _case([node("Pow", ["x", "w"], "y")], {"x": x - 0.5}, {"w": np.full((3, 4), 80.5, F32)}),
        "Asin": _case([mul, node("Asin", ["a"], "y")], {"x": x}, {"w": big[:3]}),
        "Acosh": _case([node("Acosh", ["x"], "y")], {"x": x}, {}),
        "Exp": _case([mm, node("Exp", ["a"], "y")], {"x": x + 1}, {"w": big}),
        "Cast": _case([mul, node("Cast", ["a"], "y", to=TensorProto.INT8)], {"x": x}, {"w": big[:3] * 20}),
        "FloatMod": _case([node("Mod", ["x", "w"], "y", fmod=1)], {"x": x}, {"w": np.zeros((4,), F32)}),
    }


@pytest.mark.parametrize("case", list(_float_cases()))
def test_gradient_search_fixes_hand_built_models(case: str) -> None:
    model, inputs, free = _float_cases()[case]
    assert margin_hits(model, inputs), "the model must start out unsafe"
    found = find_values(model, inputs, free, seed=5, method="gradient", max_samples=0)
    assert found.outcome.found, found.outcome
    assert found.outcome.method == "gradient" and found.outcome.steps >= 1
    fixed, fixed_inputs = apply_values(model, inputs, found.values)
    assert margin_hits(fixed, fixed_inputs) == []
    outputs = run_reference(fixed, fixed_inputs)
    assert all(np.isfinite(v).all() for v in outputs.values() if v.dtype.kind == "f")


def _int_model(op: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    a = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    b = np.array([[0, 3, 0, -2]] * 3, dtype=np.int32)
    return build([node(op, ["a", "b"], "y")], {"a": a, "b": b}), {"a": a, "b": b}


@pytest.mark.parametrize("op", ["Div", "Mod"])
def test_integer_divisors_are_repaired_in_place(op: str) -> None:
    model, inputs = _int_model(op)
    found = find_values(model, inputs, {"a", "b"}, seed=0)
    assert found.outcome.found and found.outcome.repairs >= 1 and found.outcome.steps >= 1
    b = found.values["b"]
    assert (b != 0).all()
    keep = inputs["b"] != 0
    assert np.array_equal(b[keep], inputs["b"][keep]), "safe elements stay as they were"
    assert np.array_equal(found.values["a"], inputs["a"])
    run_reference(*apply_values(model, inputs, found.values))


def test_a_computed_integer_divisor_is_fixed_through_its_leaves() -> None:
    a = np.full((2, 3), 7, np.int64)
    b = np.array([[1, 2, 3], [3, 2, 1]], np.int64)
    m = build([node("Sub", ["b", "c"], "d"), node("Div", ["a", "d"], "y")], {"a": a, "b": b}, {"c": b.copy()})
    found = find_values(m, {"a": a, "b": b}, {"a", "b"}, seed=3)
    assert found.outcome.found, found.outcome
    assert (found.values["b"] != b).any()
    assert margin_hits(m, {"a": found.values["a"], "b": found.values["b"]}) == []


def test_bitshift_amounts_are_kept_below_the_width() -> None:
    x = np.arange(12, dtype=np.uint8).reshape(3, 4)
    s = np.array([1, 9, 12, 2], np.uint8)
    m = build([node("BitShift", ["x", "s"], "y", direction="LEFT")], {"x": x, "s": s})
    if "BitShift" not in registry():
        pytest.skip("BitShift is not in the operator registry yet")
    found = find_values(m, {"x": x, "s": s}, {"x", "s"}, seed=0)
    assert found.outcome.found and (found.values["s"] < 8).all()


# --- the margin check -------------------------------------------------------------------------


def test_margin_check_flags_operands_within_delta() -> None:
    delta = MARGIN[torch.float32]
    near = np.array([0.5, delta / 3, 2.0], F32)
    far = np.array([0.5, 3 * delta, 2.0], F32)
    for op in ("Log", "Sqrt", "Reciprocal"):
        m = build([node(op, ["x"], "y")], {"x": near})
        (hit,) = margin_hits(m, {"x": near})
        assert (hit.op_type, hit.elements, hit.outside) == (op, 1, 0)
        assert margin_hits(m, {"x": far}) == []
        assert is_unstable(m, {"x": near}) and not is_unstable(m, {"x": far})
    asin = build([node("Asin", ["x"], "y")], {"x": near})
    edge = np.array([0.0, 1 - delta / 2, -0.2], F32)
    assert [h.predicate for h in unstable_ops(asin, {"x": edge})] == ["|x| <= 1"]


def test_an_exact_closed_boundary_is_not_near_it() -> None:
    """Sqrt(0) and Asin(1) are exact in every backend (Relu's zeros, Sign's ones)."""
    x = np.array([-0.5, 0.0, 1.0], F32)
    m = build(
        [node("Relu", ["x"], "a"), node("Sqrt", ["a"], "b"), node("Sign", ["x"], "c"), node("Asin", ["c"], "y")],
        {"x": x},
    )
    assert margin_hits(m, {"x": x}) == []
    assert margin_hits(m, {"x": np.array([1e-5, 0.0, 1.0], F32)})[0].op_type == "Sqrt"


def test_margin_check_lists_every_unsafe_op_and_overflow() -> None:
    x = np.array([-1.0, 0.5], F32)
    m = build([node("Sqrt", ["x"], "a"), node("Exp", ["x"], "b"), node("Log", ["x"], "y")], {"x": x})
    assert [h.op_type for h in margin_hits(m, {"x": x})] == ["Sqrt", "Sqrt", "Log", "Log"]
    big = np.array([50.0, 1.0], F32)
    m2 = build([node("Mul", ["x", "x"], "a"), node("Mul", ["a", "a"], "b"), node("Mul", ["b", "b"], "y")], {"x": big})
    (hit,) = margin_hits(m2, {"x": big * 1e4})
    assert hit.predicate == "non-finite output"


def _near_jump(op: str, x: torch.Tensor, attrs: dict[str, object] | None = None) -> list[bool]:
    """Per element (per slice for ArgMax): is the operand inside the op's jump margin?"""
    (p,) = UNSAFE[op]
    f = _f(p, [x], attrs)
    near = p.within(f, p.margin(x.dtype)).reshape(-1).tolist()
    assert (p.margin_loss(f, p.margin(x.dtype)) > 0) == any(near)
    return near


def test_jump_predicates_are_positive_exactly_inside_the_margin() -> None:
    """Floor/Ceil jump at integers, Round at half-integers, Sign at 0, ArgMax at a tie; the
    margin is relative to max(1, |x|) and follows the dtype."""
    m16 = JUMP_MARGIN[torch.float16]
    h16 = torch.tensor([0.9995, 1.0, 2.5, 3.0 - 6 * m16, 100.0 + 0.5, -0.001], dtype=torch.float16)
    assert _near_jump("Floor", h16) == [True, True, False, False, False, True]
    assert _near_jump("Ceil", h16) == _near_jump("Floor", h16)
    assert _near_jump("Round", h16) == [False, False, True, False, True, False]
    assert _near_jump("Sign", h16) == [False, False, False, False, False, True]
    f32 = torch.tensor([0.9995, 1.0 + 2 * JUMP_MARGIN[torch.float32]])
    assert _near_jump("Floor", f32) == [False, False]
    ties = torch.tensor([[1.0, 0.99999, -2.0], [1.0, 0.5, 0.2], [0.7, 0.7, 0.1]])
    # An exact tie (duplicated values) breaks the same way everywhere; a near tie does not.
    assert _near_jump("ArgMax", ties, {"axis": 1}) == [True, False, False]
    assert _near_jump("ArgMin", ties, {"axis": 1}) == [False, False, False]
    cast = UNSAFE["Cast"][2]
    v = torch.tensor([1.00001, 1.5, -2.99999])
    assert cast.within(_f(cast, [v], {"to": TensorProto.INT32}), cast.margin(v.dtype)).tolist() == [True, False, True]


def test_a_float16_floor_is_near_its_jump_only_when_its_operand_is_computed() -> None:
    x = np.array([0.9995, 0.25], np.float16)
    direct = build([node("Floor", ["x"], "y")], {"x": x})
    assert margin_hits(direct, {"x": x}) == []
    # A computed operand (any arithmetic op) may round to 0.9995 in one backend, 1.0 in another.
    one = {"one": np.array([1.0], np.float16)}
    computed = build([node("Mul", ["x", "one"], "a"), node("Floor", ["a"], "y")], {"x": x}, one)
    hits = margin_hits(computed, {"x": x})
    assert [(h.op_type, h.elements) for h in hits] == [("Floor", 1)]
    assert margin_hits(computed, {"x": np.array([0.5, 0.25], np.float16)}) == []


def test_integer_overflow_of_a_product_is_flagged_and_repaired() -> None:
    ok = np.array([[2] * 16, [3] * 16], np.int32)
    big = np.array([[2] * 32, [-1] * 32], np.int32)
    m = build([node("ReduceProd", ["x"], "y", axes=[1], keepdims=1)], {"x": ok})
    assert margin_hits(m, {"x": ok}) == []
    (hit,) = margin_hits(m, {"x": big})
    assert (hit.predicate, hit.outside) == ("exact integer result fits its type", 1)
    assert margin_hits(m, {"x": big.astype(np.int64)}) == []
    found = find_values(m, {"x": big}, free={"x"}, seed=3)
    assert found.outcome.found and found.outcome.repairs > 0
    assert margin_hits(m, {"x": found.values["x"]}) == []
    assert abs(int(np.prod(found.values["x"].astype(np.int64), axis=1).max())) < 2**31


# --- no valid values ----------------------------------------------------------------------------


def test_no_valid_values_when_only_constants_reach_the_unsafe_op() -> None:
    x = uniform(0, (2, 2))
    m = build([node("Log", ["c0"], "a"), node("Add", ["a", "x"], "y")], {"x": x}, {"c0": np.full((2, 2), -1.0, F32)})
    t0 = time.perf_counter()
    found = find_values(m, {"x": x}, {"x"}, seed=0)
    assert not found.outcome.found and found.outcome.method is None
    assert found.outcome.reason is not None and "no free value" in found.outcome.reason
    assert time.perf_counter() - t0 < 1.0, "a proof of impossibility needs no budget"


def test_an_impossible_model_exhausts_its_budget_and_says_why() -> None:
    x = uniform(0, (2, 3))
    m = build([node("Sigmoid", ["x"], "a"), node("Acosh", ["a"], "y")], {"x": x})  # sigmoid < 1 <= acosh's domain
    found = find_values(m, {"x": x}, {"x"}, seed=0, max_steps=20, max_samples=5)
    assert not found.outcome.found
    assert found.outcome.steps == 20 and found.outcome.samples == 5
    assert found.outcome.reason == "gradient: step limit; sampling: sample limit"
    assert found.outcome.last_unsafe is not None and "Acosh" in found.outcome.last_unsafe


IMPOSSIBLE = GenConfig(nodes=2, ops=["Sigmoid", "Acosh"], value_steps=8, dtypes=[DType.float32])
"""Acosh needs operands >= 1, which a Sigmoid in front of it never gives: the generator
(generator.witness) never builds that composition."""


def test_the_same_seed_gives_the_same_case_at_any_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Budgets inside generation and the value search count steps, never seconds: under a
    clock that jumps ten seconds at every reading (a machine too loaded to do anything in
    time), every seed still gives the byte-identical case, and none is dropped."""
    cfg = GenConfig(nodes=10)
    quiet = [generate(seed, cfg) for seed in range(8)]
    ticks = iter(range(0, 10**9, 10))
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(ticks)))
    loaded = [generate(seed, cfg) for seed in range(8)]
    for a, b in zip(quiet, loaded, strict=True):
        assert a.model.SerializeToString() == b.model.SerializeToString()
        assert all(np.array_equal(a.inputs[k], b.inputs[k]) for k in a.inputs)


def test_infeasible_compositions_are_never_generated() -> None:
    for seed in range(12):
        case = generate(seed, IMPOSSIBLE)  # would need Acosh(Sigmoid(x)) >= 1
        producer = {o: n.op_type for n in case.model.graph.node for o in n.output}
        assert all(producer.get(n.input[0]) != "Sigmoid" for n in case.model.graph.node if n.op_type == "Acosh")
        assert case.values is not None and case.values.found


def test_a_campaign_grows_safe_values_and_records_what_they_cost(tmp_path: Path) -> None:
    campaign = Campaign(FuzzConfig(budget=4.0, seed=0, out=tmp_path, generator=GenConfig(nodes=8)))
    summary = campaign.run()
    assert summary.tests >= 5
    # No case is dropped for its values, and no reference output is NaN or Inf.
    assert "no_valid_values" not in summary.dropped and "nonfinite_reference" not in summary.dropped
    assert 0 < summary.time_s.values < summary.time_s.generation
    assert summary.value_work.get("repaired_insertions", 0) >= 1


# --- determinism --------------------------------------------------------------------------------


def test_same_seed_gives_identical_values_even_when_the_search_works_hard() -> None:
    model, inputs, free = _float_cases()["Exp"]
    a = find_values(model, inputs, free, seed=9)
    b = find_values(model, inputs, free, seed=9)
    assert a.outcome.steps == b.outcome.steps >= 1
    assert all(np.array_equal(a.values[k], b.values[k]) for k in a.values)
    impossible = build([node("Sigmoid", ["x"], "a"), node("Acosh", ["a"], "y")], {"x": inputs["x"]})
    c = find_values(impossible, inputs, {"x"}, seed=1, max_steps=5, max_samples=3)
    d = find_values(impossible, inputs, {"x"}, seed=1, max_steps=5, max_samples=3)
    assert np.array_equal(c.values["x"], d.values["x"])
    e = find_values(impossible, inputs, {"x"}, seed=2, max_steps=5, max_samples=3)
    assert not np.array_equal(c.values["x"], e.values["x"])


def _generate_or_drop(seed: int, cfg: GenConfig) -> Case | str:
    try:
        c = generate(seed, cfg)
    except NoValidValues as e:
        return str(e)
    return c.model, c.inputs, set()


def test_generated_cases_are_byte_identical_per_seed_with_values_searched() -> None:
    cfg = GenConfig(nodes=8)
    searched = 0
    for seed in range(10):
        a, b = _generate_or_drop(seed, cfg), _generate_or_drop(seed, cfg)
        if isinstance(a, str):
            assert a == b, "a seed is dropped every time or never"
            continue
        assert not isinstance(b, str)
        assert a[0].SerializeToString() == b[0].SerializeToString()
        assert a[1].keys() == b[1].keys()
        assert all(np.array_equal(a[1][k], b[1][k]) for k in a[1])
        assert margin_hits(a[0], a[1]) == []
        searched += any(n.op_type in UNSAFE for n in a[0].graph.node)
    assert searched >= 3


def test_a_broadcast_integer_difference_divisor_is_fixed_by_sign() -> None:
    """a - b over every pair of a broadcast: redrawing positions from one small set keeps
    hitting 0; one sign per leaf clears every pair at once."""
    a = np.arange(1, 9, dtype=np.int32).reshape(8, 1)
    b = np.arange(1, 9, dtype=np.int32).reshape(1, 8)
    x = np.full((8, 8), 5, np.int32)
    m = build([node("Sub", ["a", "b"], "d"), node("Mod", ["x", "d"], "y")], {"a": a, "b": b, "x": x})
    inputs = {"a": a, "b": b, "x": x}
    found = find_values(m, inputs, {"a", "b", "x"}, seed=1, max_steps=12)
    assert found.outcome.found, found.outcome
    assert margin_hits(*apply_values(m, inputs, found.values)) == []


def test_a_boolean_behind_a_divisor_is_redrawn_true() -> None:
    b = np.array([True, False, True, False])
    x = np.full(4, 3, np.int32)
    m = build([node("Cast", ["b"], "d", to=TensorProto.INT32), node("Div", ["x", "d"], "y")], {"x": x, "b": b})
    found = find_values(m, {"x": x, "b": b}, {"x", "b"}, seed=0)
    assert found.outcome.found, found.outcome
    assert found.values["b"].dtype == np.bool_ and found.values["b"].all()
    assert margin_hits(*apply_values(m, {"x": x, "b": b}, found.values)) == []


def test_integer_leaves_behind_a_reshape_and_cast_are_redrawn_where_unsafe() -> None:
    """Atanh(Cast(Reshape(x))) for an integer x: only 0 is safe, so each unsafe element must
    be found through the reshape and redrawn from a set holding 0."""
    x = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    shape = np.array([4, 3], np.int64)
    m = build(
        [node("Reshape", ["x", "s"], "r"), node("Cast", ["r"], "c", to=TensorProto.FLOAT), node("Atanh", ["c"], "y")],
        {"x": x},
        {"s": shape},
    )
    found = find_values(m, {"x": x}, {"x"}, seed=0)
    assert found.outcome.found, found.outcome
    assert (found.values["x"] == 0).all()
    assert margin_hits(*apply_values(m, {"x": x}, found.values)) == []
