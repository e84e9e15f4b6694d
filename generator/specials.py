"""A share of cases carries +-Inf, NaN and -0.0 to ops whose result on them ONNX defines.

A grown graph rarely has an input whose every reader defines its result on special values
(5 of 300 generated cases), so the specials come in on an input of their own: a probe of
one to three ops reads it beside one of the graph's outputs, ends at an op that defines what
the specials give (generator.values.special), and is written as new graph outputs. What the
probe mixes with the graph (Max, Min, a comparison against a computed tensor) is where a
compiler fuses it with the rest. Where a grown input already qualifies, it takes the
specials itself.

The draw, the probe's ops and the values are functions of the seed alone, on a stream of
their own: with the share at 0, a case is byte for byte what it was without the feature.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import torch
from onnx import helper

from generator import onnx_checks
from generator.ops.base import schema_dtypes
from generator.values.interp import Program
from generator.values.special import SPECIALS, with_specials

SPECIAL_SALT = 0x5BEC
UNARY_PASSES = ("Abs", "Neg", "Relu")
"""Not the rounding ops: after a Max with a computed output, a value a few ulps from their
step would round either way, which no reference can call."""
EXACT_ONLY_PASSES = ("Exp", "Reciprocal")
"""IEEE arithmetic on the specials (exp(-inf) = 0, 1 / -0 = -inf, exp(nan) = nan) that
onnxruntime 1.31 and TVM 0.27 both follow, taken only while the probe's tensor is still its
own input's exact values: on a computed one, Exp near its overflow and Reciprocal near a
zero whose sign rounding decides would be either answer."""
BINARY_PASSES = ("Max", "Min", "Add", "Sub")
ADDITIVE = frozenset({"Add", "Sub"})
"""inf + finite is inf, nan + x is nan, -0 + x is x: defined; but after them a value can sit
next to zero, where Sign's answer is the rounding's."""
STOPS = ("IsInf", "IsNaN", "Equal", "Less", "Greater", "ArgMax", "ArgMin", "Tanh", "Sigmoid", "Sign")
NAN_UNSAFE = frozenset({"Relu", "Max", "Min", "ArgMax", "ArgMin", "Sign"})
"""Probe ops whose result on NaN ONNX leaves open, or builds compute either way."""

Allowed = Callable[[str, int, str], bool]
"""Whether an op runs at a dtype (numpy name) at an opset: the schema, and the builds' probe."""


def special_draw(seed: int, share: float) -> bool:
    """Whether the seed's case gets special values (the `share` of seeds)."""
    return share > 0 and random.Random(seed ^ SPECIAL_SALT).random() < share


class _Probe:
    """The probe's nodes, named under a prefix no generated name starts with."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []

    def op(self, op_type: str, inputs: Sequence[str], **attrs: int) -> str:
        out = f"special{len(self.nodes)}"
        node = helper.make_node(op_type, list(inputs), [out], name=f"n_{out}_{op_type}")
        node.attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())
        self.nodes.append(node)
        return out


def _chain(rng: random.Random, probe: _Probe, source: str, other: str, rank: int, ok: Callable[[str], bool]) -> bool:
    """One to three ops from `source` (beside the graph's `other`); whether NaN is defined all along."""
    nan_safe, current, exact, added = True, source, True, False
    for _ in range(rng.randint(0, 2)):
        passes = [o for o in (*UNARY_PASSES, *BINARY_PASSES, *(EXACT_ONLY_PASSES if exact else ())) if ok(o)]
        if not passes:
            break
        op = rng.choice(passes)
        pair = [current, other] if rng.random() < 0.5 else [other, current]
        current = probe.op(op, pair if op in BINARY_PASSES else [current])
        nan_safe = nan_safe and op not in NAN_UNSAFE
        exact, added = exact and op not in BINARY_PASSES, added or op in ADDITIVE
    stops = [o for o in STOPS if ok(o) and not (added and o == "Sign")]
    if not stops:
        return nan_safe
    op = rng.choice(stops)
    if op == "IsInf":
        probe.op(op, [current], detect_negative=rng.randint(0, 1), detect_positive=rng.randint(0, 1))
    elif op in ("Equal", "Less", "Greater"):
        probe.op(op, [current, rng.choice([current, other])])
    elif op in ("ArgMax", "ArgMin"):
        attrs = {
            "axis": rng.randrange(-rank, rank),
            "keepdims": rng.randint(0, 1),
            "select_last_index": rng.randint(0, 1),
        }
        probe.op(op, [current], **attrs)
    else:
        probe.op(op, [current])
    return nan_safe and op not in NAN_UNSAFE


def _probed(
    model: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    values: Mapping[str, np.ndarray],
    seed: int,
    allowed: Allowed,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]] | None:
    """The model with a probe beside one float graph output, or None when it has none."""
    rng = random.Random(seed ^ SPECIAL_SALT ^ 1)
    outs = [o for o in model.graph.output if o.name in values and values[o.name].dtype.kind == "f"]
    outs = [o for o in outs if values[o.name].ndim >= 1 and values[o.name].size]
    if not outs:
        return None
    other = rng.choice(outs)
    like = values[other.name]
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    dtype = like.dtype.name

    def ok(op: str) -> bool:
        return allowed(op, opset, dtype)

    probe = _Probe()
    nan_safe = _chain(rng, probe, "special_in", other.name, like.ndim, ok)
    if not probe.nodes:  # nothing the schema and the builds allow at this dtype
        return None
    draws = np.random.default_rng([seed, SPECIAL_SALT])
    pool = np.array([*SPECIALS, *((np.nan,) if nan_safe else ())], dtype=like.dtype)
    data = draws.uniform(-1.0, 1.0, size=like.shape).astype(like.dtype)
    where = draws.choice(data.size, size=max(1, data.size // 4), replace=False)
    data.flat[where] = draws.choice(pool, size=where.size)
    data.flat[where[0]] = draws.choice(pool[:2])  # an infinity, always
    extended = onnx.ModelProto()
    extended.CopyFrom(model)
    g = extended.graph
    declared = onnx.ValueInfoProto()
    declared.CopyFrom(other)
    declared.name = "special_in"
    g.input.append(declared)
    g.node.extend(probe.nodes)
    g.output.append(helper.make_value_info(probe.nodes[-1].output[0], onnx.TypeProto()))
    try:
        inferred = onnx_checks.infer_shapes(extended, strict_mode=True)
        onnx_checks.check_model(inferred, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
        return None
    found = {o.name: o for o in inferred.graph.value_info}
    del g.output[-1]
    g.output.append(found.get(probe.nodes[-1].output[0]) or inferred.graph.output[-1])
    return extended, {**inputs, "special_in": data}


def with_special_values(
    model: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    values: Callable[[], Mapping[str, np.ndarray]],
    seed: int,
    allowed: Allowed,
    data: Sequence[str],
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]] | None:
    """The case with special values: on a grown input (`data`, in order) whose every reader
    defines the result, else on a probe's own input; None when neither can be placed.
    `values` computes the graph's outputs, asked for only when a probe is needed."""
    natural = with_specials(model, inputs, np.random.default_rng([seed, SPECIAL_SALT]), list(data))
    if natural is not None:
        return model, natural[1]
    return _probed(model, inputs, values(), seed, allowed)


def graph_outputs(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The model's outputs by the generator's own interpreter (what a probe sits beside)."""
    program = Program(model, inputs, free=())
    env = program.env({})
    with torch.no_grad():
        for _ in program.walk(env, every=True):
            pass
    return {o.name: env[o.name].numpy() for o in model.graph.output if o.name in env}


def schema_allowed(op: str, opset: int, dtype: str) -> bool:
    """The schema's side of `Allowed`: the op exists at `opset` and takes `dtype` first."""
    try:
        return dtype in {d.value for d in schema_dtypes(op, opset, 0)}
    except onnx.defs.SchemaError:
        return False


__all__ = ["SPECIAL_SALT", "graph_outputs", "schema_allowed", "special_draw", "with_special_values"]
