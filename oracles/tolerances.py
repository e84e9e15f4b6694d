"""Comparison tolerances: per dtype, overridable per backend and per op type.

An element fails only when it exceeds both the absolute and the relative bound
(Polygraphy's rule), so tiny values are judged by atol and large ones by rtol.
Lower-precision floats get looser bounds; integers and bools must match exactly.

An output is judged at the bounds of the narrowest float type whose inexact arithmetic
reaches it (oracles.provenance), not of its own type: a float64 result of a float16
computation carries float16 rounding, and a float output that only casts, moves or selects
exact values must match exactly. Op-type overrides apply to the outputs that op feeds;
where several apply, the loosest wins, because each names a known source of legitimate
difference.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from oracles.provenance import output_cones


class Tolerance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    atol: float = Field(ge=0.0)
    rtol: float = Field(ge=0.0)

    def loosest(self, other: Tolerance) -> Tolerance:
        return Tolerance(atol=max(self.atol, other.atol), rtol=max(self.rtol, other.rtol))


EXACT = Tolerance(atol=0.0, rtol=0.0)

DEFAULTS: dict[str, Tolerance] = {
    "bfloat16": Tolerance(atol=5e-2, rtol=5e-2),
    "float16": Tolerance(atol=1e-2, rtol=1e-2),
    "float32": Tolerance(atol=1e-3, rtol=1e-3),
    "float64": Tolerance(atol=1e-8, rtol=1e-8),
}
"""float64's bound sits between what float64 algorithms legitimately differ by and what
float32 rounding costs. onnxruntime's float64 LayerNormalization over 3,936 elements
differs from torch's by 1.4e-9 relative: an order of summation, not a bug. Float32's
rounding error reaches 6e-8 (Shrink computing float64 in float32 was off by 2.6e-8): a
backend that computes a float64 op in float32 is wrong, and must be caught at that op, or
a reduced trigger keeps whatever consumer amplifies the error past a looser bound."""

FLOAT_ELEM_TYPES = frozenset(
    {onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE}
)

DtypeTolerances = dict[str, Tolerance]
"""dtype name -> bounds, e.g. {"float16": {atol: 0.05, rtol: 0.05}}."""


class ToleranceConfig(BaseModel):
    """The `tolerances:` section of fuzzbot.yml.

    The flat form `{float32: {atol, rtol}}` of older configs still reads as `dtypes`.
    """

    model_config = ConfigDict(extra="forbid")

    dtypes: DtypeTolerances = Field(default_factory=dict, description="overrides of the per-dtype defaults")
    backends: dict[str, DtypeTolerances] = Field(
        default_factory=dict, description="per backend name (onnxruntime, tvm, ...): dtype -> bounds"
    )
    ops: dict[str, DtypeTolerances] = Field(
        default_factory=dict, description="per ONNX op type: bounds for every output that op feeds"
    )

    @model_validator(mode="before")
    @classmethod
    def _flat_form(cls, data: Any) -> Any:
        if isinstance(data, dict) and data and not set(data) & {"dtypes", "backends", "ops"}:
            return {"dtypes": data}
        return data

    def base(self, dtype: str, backend: str | None) -> Tolerance:
        """Bounds for a dtype before op overrides: backend beats global beats default."""
        if backend is not None and dtype in self.backends.get(backend, {}):
            return self.backends[backend][dtype]
        if dtype in self.dtypes:
            return self.dtypes[dtype]
        return DEFAULTS.get(dtype, EXACT)

    def for_outputs(self, model: onnx.ModelProto | None, backend: str | None) -> dict[str, Tolerance]:
        """Bounds for each float graph output of `model` on `backend`, by provenance."""
        if model is None:
            return {}
        resolved: dict[str, Tolerance] = {}
        floats = {o.name for o in model.graph.output if o.type.tensor_type.elem_type in FLOAT_ELEM_TYPES}
        for name, cone in output_cones(model).items():
            dtype = cone.rounding_dtype
            if dtype is None and name not in floats:
                continue  # an integer or bool output: compare() holds it to exact equality
            tol = EXACT if dtype is None else self.base(dtype, backend)
            for op in sorted(cone.ops):
                override = self.ops.get(op, {})
                if dtype is not None and dtype in override:
                    tol = tol.loosest(override[dtype])
            resolved[name] = tol
        return resolved


def tolerance_for(dtype: np.dtype, overrides: dict[str, Tolerance] | None = None) -> Tolerance:
    name = np.dtype(dtype).name
    if overrides and name in overrides:
        return overrides[name]
    return DEFAULTS.get(name, EXACT)
