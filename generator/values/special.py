"""Special values (+-Inf, NaN, -0.0) where the spec defines what they give.

The value search keeps every tensor finite and off its edges, which is what comparing
values needs; so the IEEE values themselves never reach a compiler, and neither do the ops
whose results on them ONNX defines: IsInf and IsNaN (with their detect flags), comparisons
against an infinity, Where passing one through, a ReduceMax over -Inf. A compiler that
folds `x == x` to true, or rewrites `x < inf` to true, is wrong on exactly these inputs, and
so would be a reference that does the same.

A share of cases (`special_values`) gets them on one float graph input, only where every
path from that input ends, before anything else reads it, at an op that turns the specials
into ordinary values (STOPS: a comparison, IsInf, a squashing activation), or at a graph
output, going only through ops that pass them on as defined (PASSES: data movement, Abs,
Neg, Where's data). NaN is set only where every op on the way is NaN_SAFE: NaN's order
against numbers, and Max, Min, Relu and Clip on it, are left open by ONNX, and backends
differ. Subnormals are never set: flushing them to zero is a legitimate build setting.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx

DATA_MOVEMENT = frozenset(
    {
        "Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Concat", "Split",
        "Slice", "Gather", "GatherElements", "GatherND", "Expand", "Tile", "Compress",
        "ReverseSequence", "SpaceToDepth", "DepthToSpace", "Dropout",
    }
)  # fmt: skip
PASSES = DATA_MOVEMENT | frozenset({"Abs", "Neg", "Where", "Max", "Min", "Relu", "Floor", "Ceil", "Round"})
"""Ops whose results on +-Inf (and -0.0) are the IEEE values every backend gives, and which
pass them on: what reads their results must be checked in turn."""
STOPS = frozenset(
    {
        "IsInf", "IsNaN", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
        "Tanh", "Sigmoid", "Sign", "ArgMax", "ArgMin",
    }
)  # fmt: skip
"""Ops that turn +-Inf into ordinary values (a bool, +-1, an index) as the spec defines.
Softsign is not one: its formula x / (1 + |x|) is NaN at +-Inf, its limit is 1, and builds
take either."""
NAN_SAFE = DATA_MOVEMENT | frozenset({"Abs", "Neg", "Where", "IsInf", "IsNaN", "Equal", "Less", "Greater"})
"""Ops whose result on NaN is defined (a comparison with NaN is false, IsInf(NaN) is false,
data movement and sign changes keep it); LessOrEqual and GreaterOrEqual are decomposed by
some builds into Not(Greater) and Not(Less), which NaN tells apart, so they are left out."""
DATA_SLOTS: dict[str, tuple[int, ...]] = {
    "Where": (1, 2),
    "Gather": (0,),
    "GatherElements": (0,),
    "GatherND": (0,),
    "Reshape": (0,),
    "Expand": (0,),
    "Tile": (0,),
    "Slice": (0,),
    "Squeeze": (0,),
    "Unsqueeze": (0,),
    "Compress": (0,),
    "ReverseSequence": (0,),
    "Split": (0,),
    "Dropout": (0,),
}
"""The slots a special value may reach in ops that also take indices, shapes or conditions."""

SPECIALS = (np.inf, -np.inf, -0.0)
SPECIAL_SHARE = 0.25
"""Of the chosen input's elements, how many become special."""


def _consumers(model: onnx.ModelProto) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
    found: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in model.graph.node:
        for slot, name in enumerate(node.input):
            if name:
                found.setdefault(name, []).append((node, slot))
    return found


def _reaches(name: str, consumers: Mapping[str, list[tuple[onnx.NodeProto, int]]], nan: bool, seen: set[str]) -> bool:
    """Whether specials set on tensor `name` only ever meet ops that define their result."""
    if name in seen:
        return True
    seen.add(name)
    for node, slot in consumers.get(name, []):
        op = node.op_type if node.domain in ("", "ai.onnx") else ""
        if slot not in DATA_SLOTS.get(op, (slot,)) or (nan and op not in NAN_SAFE):
            return False
        if op in STOPS:
            continue
        if op not in PASSES or not all(_reaches(o, consumers, nan, seen) for o in node.output if o):
            return False
    return True


def with_specials(
    model: onnx.ModelProto, inputs: Mapping[str, np.ndarray], rng: np.random.Generator, candidates: list[str]
) -> tuple[str, dict[str, np.ndarray]] | None:
    """The inputs with special values set on the first of `candidates` (float graph inputs
    that hold data) whose every path meets only ops that define the result; NaN among them
    where every path is NaN-safe. None when no candidate qualifies."""
    consumers = _consumers(model)
    for name in candidates:
        value = inputs[name]
        if value.dtype.kind != "f" or value.size == 0 or not consumers.get(name):
            continue
        if not _reaches(name, consumers, nan=False, seen=set()):
            continue
        nan = _reaches(name, consumers, nan=True, seen=set())
        pool = np.array([*SPECIALS, *((np.nan,) if nan else ())], dtype=value.dtype)
        changed = value.copy()
        count = max(1, int(value.size * SPECIAL_SHARE))
        where = rng.choice(value.size, size=count, replace=False)
        changed.flat[where] = rng.choice(pool, size=count)
        changed.flat[where[0]] = rng.choice(pool[:2])  # an infinity, always
        return name, {**inputs, name: changed}
    return None


__all__ = ["NAN_SAFE", "PASSES", "STOPS", "with_specials"]
