"""Per-dtype comparison tolerances.

An element fails only when it exceeds both the absolute and the relative bound
(Polygraphy's rule), so tiny values are judged by atol and large ones by rtol.
Lower-precision floats get looser bounds; integers and bools must match exactly.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class Tolerance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    atol: float = Field(ge=0.0)
    rtol: float = Field(ge=0.0)


EXACT = Tolerance(atol=0.0, rtol=0.0)

DEFAULTS: dict[str, Tolerance] = {
    "float16": Tolerance(atol=1e-2, rtol=1e-2),
    "float32": Tolerance(atol=1e-3, rtol=1e-3),
    "float64": Tolerance(atol=1e-7, rtol=1e-7),
}


def tolerance_for(dtype: np.dtype, overrides: dict[str, Tolerance] | None = None) -> Tolerance:
    name = np.dtype(dtype).name
    if overrides and name in overrides:
        return overrides[name]
    return DEFAULTS.get(name, EXACT)
