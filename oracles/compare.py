"""Elementwise comparison of a backend's outputs with the reference's."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

import numpy as np
from pydantic import BaseModel

from oracles.tolerances import Tolerance, tolerance_for


class Mismatch(StrEnum):
    missing = "missing"
    shape = "shape"
    dtype = "dtype"
    nonfinite = "nonfinite"
    """NaN or Inf at positions where the reference has none, or the other way round."""
    values = "values"


class OutputDiff(BaseModel):
    name: str
    mismatch: Mismatch | None = None
    detail: str = ""
    max_abs: float = 0.0
    max_rel: float = 0.0
    bad_elements: int = 0
    first_bad_index: list[int] | None = None


class Comparison(BaseModel):
    outputs: list[OutputDiff]

    @property
    def ok(self) -> bool:
        return all(o.mismatch is None for o in self.outputs)

    @property
    def max_abs(self) -> float:
        return max((o.max_abs for o in self.outputs), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((o.max_rel for o in self.outputs), default=0.0)

    def summary(self) -> str:
        bad = [o for o in self.outputs if o.mismatch is not None]
        return "; ".join(f"{o.name}: {o.mismatch.value} {o.detail}".strip() for o in bad if o.mismatch)


def _errors(expected: np.ndarray, actual: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    e, a = expected.astype(np.float64), actual.astype(np.float64)
    finite = np.isfinite(e) & np.isfinite(a)
    abs_err = np.abs(np.where(finite, a, 0.0) - np.where(finite, e, 0.0))
    with np.errstate(over="ignore"):  # an error against an expected 0 is infinitely relative, and that is fine
        rel_err = np.where(finite, abs_err / np.maximum(np.abs(e), np.finfo(np.float64).tiny), 0.0)
    return abs_err, rel_err


def compare_output(name: str, expected: np.ndarray, actual: np.ndarray, tol: Tolerance) -> OutputDiff:
    if expected.shape != actual.shape:
        return OutputDiff(name=name, mismatch=Mismatch.shape, detail=f"expected {expected.shape}, got {actual.shape}")
    if expected.dtype != actual.dtype:
        return OutputDiff(name=name, mismatch=Mismatch.dtype, detail=f"expected {expected.dtype}, got {actual.dtype}")
    if expected.dtype.kind not in "fc":
        bad = expected != actual
        count = int(bad.sum())
        first = [int(i) for i in np.argwhere(bad)[0]] if count else None
        return OutputDiff(
            name=name,
            mismatch=Mismatch.values if count else None,
            bad_elements=count,
            first_bad_index=first,
            detail=f"{count} elements differ" if count else "",
        )
    abs_err, rel_err = _errors(expected, actual)
    diff = OutputDiff(name=name, max_abs=float(abs_err.max(initial=0.0)), max_rel=float(rel_err.max(initial=0.0)))
    # NaN must meet NaN, and +Inf must meet +Inf, element by element.
    nonfinite = (
        (np.isnan(expected) != np.isnan(actual))
        | (np.isinf(expected) & (expected != actual))
        | (np.isinf(actual) & (expected != actual))
    )
    if nonfinite.any():
        diff.mismatch, diff.bad_elements = Mismatch.nonfinite, int(nonfinite.sum())
        diff.first_bad_index = [int(i) for i in np.argwhere(nonfinite)[0]]
        diff.detail = f"{diff.bad_elements} elements non-finite on one side only"
        return diff
    bad = (abs_err > tol.atol) & (abs_err > tol.rtol * np.abs(expected.astype(np.float64)))
    if bad.any():
        diff.mismatch, diff.bad_elements = Mismatch.values, int(bad.sum())
        diff.first_bad_index = [int(i) for i in np.argwhere(bad)[0]]
        diff.detail = f"{diff.bad_elements}/{expected.size} elements beyond atol={tol.atol:g} rtol={tol.rtol:g}"
    return diff


def compare(
    expected: dict[str, np.ndarray],
    actual: dict[str, np.ndarray],
    overrides: dict[str, Tolerance] | None = None,
    per_output: Mapping[str, Tolerance] | None = None,
) -> Comparison:
    """`per_output` (by output name, from `ToleranceConfig.for_outputs`) beats `overrides` (by dtype)."""
    diffs = []
    for name, exp in expected.items():
        if name not in actual:
            diffs.append(OutputDiff(name=name, mismatch=Mismatch.missing, detail="output not produced"))
            continue
        tol = (per_output or {}).get(name) or tolerance_for(exp.dtype, overrides)
        diffs.append(compare_output(name, exp, actual[name], tol))
    return Comparison(outputs=diffs)
