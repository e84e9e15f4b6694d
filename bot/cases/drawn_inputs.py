"""Inputs for a model handed over without them (`fuzzbot check` and `fuzzbot run` on a bare
.onnx): data drawn as the generator draws it, and every operand that is not data (a
Tile's repeats, a Reshape's shape, Gather's indices: bot.cases.shape_sites) set to a value
valid for the model, as a generated model's are. Where fuzzbot cannot tell such a value,
or cannot draw the element type at all, it says so in one line (`CannotDraw`) and the user
is asked for the inputs: a model that every build refuses for its inputs is no finding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from bot.cases.index_values import INDEX_VALUES
from bot.cases.operand_flow import assign_back, fitted, operand_like
from bot.cases.shape_alternatives import candidates
from bot.cases.shape_sites import Site, SiteRef, consistent, constants, find_sites, producers, static_shapes
from bot.errors import UserError
from generator.dtypes import DType
from generator.emit import draw_values

SHAPE_SALT = 0x5A4E
"""Seeds the draws of non-data operands apart from the data's, so a model's data values are
those the same seed always gave, whatever its shape operands take."""


class CannotDraw(UserError):
    """No valid value can be drawn for a graph input; the message names it and why."""


@dataclass(frozen=True)
class Drawn:
    inputs: dict[str, np.ndarray]
    fixed: dict[str, str]
    """Inputs that are not data, with what they feed (`Tile repeats`): part of the model's
    validity, so the value search never moves them and the reference must accept them."""


def draw_inputs(model: onnx.ModelProto, seed: int) -> Drawn:
    """Values for every graph input without an initializer."""
    rng = np.random.default_rng(seed)
    initialized = {i.name for i in model.graph.initializer}
    inputs = {v.name: _data_values(rng, v) for v in model.graph.input if v.name not in initialized}
    sites = find_sites(model, set(inputs))
    fixed = _fill_sites(model, inputs, sites, np.random.default_rng([seed, SHAPE_SALT]))
    return Drawn(inputs, fixed)


def _data_values(rng: np.random.Generator, v: onnx.ValueInfoProto) -> np.ndarray:
    """The generator's draw for its own element types, a like one for the other plain
    numeric types; a refusal for a dynamic shape or a type fuzzbot cannot draw."""
    if not v.type.HasField("tensor_type"):
        raise CannotDraw(f"fuzzbot does not yet draw non-tensor inputs (input {v.name!r})")
    t = v.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
    if any(d < 0 for d in dims):
        raise CannotDraw(f"input {v.name!r} has a dynamic shape, so fuzzbot cannot tell its size")
    try:  # bfloat16 is the generator's only inside a graph: no build's binding takes it as input
        if t.elem_type != TensorProto.BFLOAT16:
            return draw_values(rng, dims, DType.from_onnx(t.elem_type))
    except ValueError:
        pass
    kind = _numpy_dtype(t.elem_type)
    if kind is None or kind.kind not in "fiub":
        name = TensorProto.DataType.Name(t.elem_type) if t.elem_type else "untyped"
        raise CannotDraw(f"fuzzbot does not yet draw or judge {name} tensors (input {v.name!r})")
    if kind.kind == "f":
        return rng.uniform(-1.0, 1.0, size=dims).astype(kind)
    if kind.kind == "b":
        return rng.random(size=dims) < 0.5
    return rng.integers(0 if kind.kind == "u" else -8, 9, size=dims).astype(kind)


def _numpy_dtype(elem_type: int) -> np.dtype[Any] | None:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        return None


def _fill_sites(
    model: onnx.ModelProto, inputs: dict[str, np.ndarray], sites: list[SiteRef], rng: np.random.Generator
) -> dict[str, str]:
    """Each input that fills a shape-like slot gets the value its first such slot needs,
    node by node in graph order, with the shapes re-inferred once earlier values are known.
    An input that reaches a slot only through ops no value can be traced back through gets
    a small positive guess, which the reference then accepts or not."""
    fixed: dict[str, str] = {}
    chosen: dict[str, np.ndarray] = {}
    known = constants(model)
    made_by = producers(model)
    shapes, shaped_with = static_shapes(model, {}), -1
    for ref in sites:
        pending = [name for name in ref.sources if name not in fixed]
        if not pending:
            continue
        if len(chosen) != shaped_with:
            shapes, shaped_with = static_shapes(model, chosen), len(chosen)
        site = _site(ref, inputs, shapes, {**known, **chosen}, rng)
        trace = Trace(model, made_by, inputs, shapes, known)
        found = _choose(site, ref, trace, chosen) if site is not None else None
        if found is None and ref.direct:
            raise CannotDraw(f"fuzzbot cannot tell a valid value for input {ref.operand!r}, the {ref.what}")
        for name in pending:
            chosen[name] = found[name] if found and name in found else _small_positive(rng, inputs[name])
            fixed[name] = ref.what
    inputs.update(chosen)
    return fixed


@dataclass(frozen=True)
class Trace:
    """What tracing an operand's value back to the drawn inputs needs."""

    model: onnx.ModelProto
    producers: dict[str, onnx.NodeProto]
    inputs: dict[str, np.ndarray]
    shapes: dict[str, list[int]]
    constants: dict[str, np.ndarray]


def _site(
    ref: SiteRef,
    inputs: dict[str, np.ndarray],
    shapes: dict[str, list[int]],
    values: dict[str, np.ndarray],
    rng: np.random.Generator,
) -> Site | None:
    """The slot with its operand's dims and type: a drawn input's own, else the inferred
    dims of the tensor built from them (None when they are not static)."""
    if ref.direct:
        like = inputs[ref.operand]
        return Site(ref.node, ref.slot, ref.role, list(like.shape), like.dtype, shapes, values, rng)
    dims = shapes.get(ref.operand)
    if dims is None:
        return None
    dtype = np.dtype(np.float32 if ref.role in ("scales", "roi") else np.int64)
    return Site(ref.node, ref.slot, ref.role, dims, dtype, shapes, values, rng)


def _choose(site: Site, ref: SiteRef, trace: Trace, chosen: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """The first candidate value that can be traced back to the drawn inputs and that
    strict shape inference finds consistent; else the first that can be traced back."""
    index = INDEX_VALUES.get(site.node.op_type) if site.role == "indices" else None
    options = candidates(site, index)
    first: dict[str, np.ndarray] | None = None
    for option in options:
        value = fitted(option, operand_like(site))
        back = None if value is None else _traced(ref, value, trace)
        if back is None:
            continue
        if first is None:
            first = back
        if len(options) == 1 or consistent(trace.model, {**chosen, **back}):
            return back
    return first


def _traced(ref: SiteRef, value: np.ndarray, trace: Trace) -> dict[str, np.ndarray] | None:
    """The drawn inputs' values that give the operand `value`, each in its own dtype."""
    back = assign_back(ref.operand, value, trace.producers, set(ref.sources), trace.shapes, trace.constants)
    if back is None:
        return None
    out: dict[str, np.ndarray] = {}
    for name, v in back.items():
        if (fit := fitted(v, trace.inputs[name])) is None:
            return None
        out[name] = fit
    return out


def _small_positive(rng: np.random.Generator, like: np.ndarray) -> np.ndarray:
    """A count or dim built by other ops from this input: small and positive is the one guess
    with a chance; the reference then says whether the model takes it."""
    if like.dtype.kind in "iu":
        return rng.integers(1, 4, size=like.shape).astype(like.dtype)
    return like
