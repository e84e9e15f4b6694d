"""Comparison tolerances: per dtype, overridable per backend and per op type.

An element fails only when it exceeds both the absolute and the relative bound
(Polygraphy's rule), so tiny values are judged by atol and large ones by rtol.
Lower-precision floats get looser bounds; integers and bools must match exactly.

An output is judged at the bounds of the least precise float type in its ancestor
cone, not of its own type: a float64 result of a float16 computation carries float16
rounding. Op-type overrides apply to the outputs that op feeds; where several apply,
the loosest wins, because each names a known source of legitimate difference.
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
    "float16": Tolerance(atol=1e-2, rtol=1e-2),
    "float32": Tolerance(atol=1e-3, rtol=1e-3),
    "float64": Tolerance(atol=1e-7, rtol=1e-7),
}

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
        for name, cone in output_cones(model).items():
            dtype = cone.lowest_float
            if dtype is None:
                continue  # nothing float in the cone: compare() holds the output to exact equality
            tol = self.base(dtype, backend)
            for op in sorted(cone.ops):
                override = self.ops.get(op, {})
                if dtype in override:
                    tol = tol.loosest(override[dtype])
            resolved[name] = tol
        return resolved


def tolerance_for(dtype: np.dtype, overrides: dict[str, Tolerance] | None = None) -> Tolerance:
    name = np.dtype(dtype).name
    if overrides and name in overrides:
        return overrides[name]
    return DEFAULTS.get(name, EXACT)
