"""Elementwise comparison of a backend's outputs with the reference's.

An element fails only beyond both bounds (Polygraphy's rule). Where other readings mark
the edges of what a backend may legitimately compute (float16 intermediates kept in
float32, float16 sums rounded at every step), an element anywhere between the reference
and those readings is within bounds: `envelope`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum

import numpy as np
from pydantic import BaseModel

from oracles.tolerances import Tolerance, tolerance_for

Edges = Sequence[np.ndarray]
"""Other readings of one output, each of its shape: the envelope spans them and the reference."""


class Mismatch(StrEnum):
    missing = "missing"
    shape = "shape"
    dtype = "dtype"
    nonfinite = "nonfinite"
    """NaN or Inf at positions where the reference has none, or the other way round."""
    values = "values"


class Sample(BaseModel):
    """One differing element, for a person to read: where, what was expected, what came
    (as text: NaN and Inf survive JSON, and every digit the dtype has is kept)."""

    index: list[int]
    expected: str
    actual: str


SAMPLES = 5
"""Differing elements kept per output (the first ones, in index order)."""
PRECISION_OF = {"float64": ("float32", 2.0**-24), "float32": ("float16", 2.0**-11)}
"""Output dtype -> the next narrower float type and its unit roundoff: a wrong float64 result
within a few roundings of float32 is a float64 op computed about as precisely as float32."""
PRECISION_UNITS = 16
"""How many of the narrower type's roundings, at the output's scale, a precision-scale error
stays within: onnxruntime's float64 windows and Shrink, computed in float32, were off by up
to 3e-8 and 6e-8 on values near 1 (0.5 and 1 roundings); semantic bugs are off by the
values' own size (2**24 roundings)."""


class OutputDiff(BaseModel):
    name: str
    mismatch: Mismatch | None = None
    detail: str = ""
    max_abs: float = 0.0
    max_rel: float = 0.0
    bad_elements: int = 0
    first_bad_index: list[int] | None = None
    samples: list[Sample] = []
    """The first differing elements, with their expected and actual values."""
    dtype: str = ""
    """The output's dtype, where `ulps` is measured."""
    ulps: float | None = None
    """A float output's element furthest past its bound: its error in units in the last
    place of the output's dtype, at the output's scale."""
    bound_ulps: float | None = None
    """The bound at that element, in the same units: how far past it the error went."""
    scale: float | None = None
    """The largest finite magnitude the reference gives the output."""

    def within_rounding_of(self) -> str | None:
        """The narrower float type whose rounding, at the output's scale, explains the
        error (PRECISION_OF); None for any other mismatch."""
        narrower = PRECISION_OF.get(self.dtype)
        if self.mismatch is not Mismatch.values or narrower is None or not self.scale:
            return None
        return narrower[0] if self.max_abs <= PRECISION_UNITS * narrower[1] * self.scale else None


def _samples(expected: np.ndarray, actual: np.ndarray, bad: np.ndarray) -> list[Sample]:
    found = []
    for at in np.argwhere(bad)[:SAMPLES]:
        where = tuple(at)
        found.append(
            Sample(index=[int(i) for i in at], expected=repr(expected[where].item()), actual=repr(actual[where].item()))
        )
    return found


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

    @property
    def precision_scale(self) -> str | None:
        """The narrower float type whose rounding explains every wrong output, when one
        does: a real defect that a maintainer reads as precision, not as a wrong result
        (a float64 window computed in float32). None when any wrong output is off further,
        not finite, or of another kind."""
        wrong = [o for o in self.outputs if o.mismatch is not None]
        within = {o.within_rounding_of() for o in wrong}
        return within.pop() if len(within) == 1 and None not in within else None

    def summary(self) -> str:
        bad = [o for o in self.outputs if o.mismatch is not None]
        return "; ".join(f"{o.name}: {o.mismatch.value} {o.detail}".strip() for o in bad if o.mismatch)


def _errors(expected: np.ndarray, actual: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Absolute error, and relative error against the larger magnitude of the two (so an
    expected 0 gives 1, not 1e299), where both are finite; 0 elsewhere."""
    if expected.dtype.kind in "iu" and actual.dtype.kind in "iu":  # exact: 2**60 + 1 is not 2**60 in float64
        diff = np.abs(expected.astype(object) - actual.astype(object)).astype(np.float64)
        scale = np.maximum(np.abs(expected.astype(np.float64)), np.abs(actual.astype(np.float64)))
        return diff, np.divide(diff, scale, out=np.zeros_like(diff), where=scale > 0)
    e, a = expected.astype(np.float64), actual.astype(np.float64)
    finite = np.isfinite(e) & np.isfinite(a)
    abs_err = np.abs(np.where(finite, a, 0.0) - np.where(finite, e, 0.0))
    scale = np.maximum(np.abs(np.where(finite, e, 0.0)), np.abs(np.where(finite, a, 0.0)))
    rel_err = np.divide(abs_err, scale, out=np.zeros_like(abs_err), where=scale > 0)
    return abs_err, rel_err


def _finite_errors(
    expected: np.ndarray, actual: np.ndarray, tol: Tolerance
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """`_errors` and `beyond` (no edge) of a float output finite on both sides, from one
    difference; None when an element is not (an Inf or NaN on either side makes the
    difference non-finite). Most outputs are, and judging them is on every test's path."""
    e, a = expected.astype(np.float64, copy=False), actual.astype(np.float64, copy=False)
    with np.errstate(over="ignore", invalid="ignore"):
        abs_err = np.abs(a - e)
    if not np.isfinite(abs_err).all():
        return None
    magnitude = np.abs(e)
    scale = np.maximum(magnitude, np.abs(a))
    rel_err = np.divide(abs_err, scale, out=np.zeros_like(abs_err), where=scale > 0)
    return abs_err, rel_err, (abs_err > tol.atol) & (abs_err > tol.rtol * magnitude)


def nonfinite_mask(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """NaN must meet NaN, and +Inf must meet +Inf, element by element."""
    mask: np.ndarray = (
        (np.isnan(expected) != np.isnan(actual))
        | (np.isinf(expected) & (expected != actual))
        | (np.isinf(actual) & (expected != actual))
    )
    return mask


def beyond(expected: np.ndarray, actual: np.ndarray, tol: Tolerance, edge: Edges | None = None) -> np.ndarray:
    """Elements of a float output beyond both bounds. With `edge` (other readings of the
    same output), the distance is to the nearest point of the interval they span with it."""
    e, a = expected.astype(np.float64), actual.astype(np.float64)
    lo, hi = e, e
    for other in edge or ():
        lo, hi = np.fmin(lo, other.astype(np.float64)), np.fmax(hi, other.astype(np.float64))
    with np.errstate(invalid="ignore"):
        dist = np.maximum(np.maximum(lo - a, a - hi), 0.0)
        return np.nan_to_num((dist > tol.atol) & (dist > tol.rtol * np.abs(e))).astype(bool)


def bad_mask(expected: np.ndarray, actual: np.ndarray, tol: Tolerance, edge: Edges | None = None) -> np.ndarray:
    """Which elements of one output mismatch (same shape and dtype assumed)."""
    if expected.dtype.kind not in "fc":
        differ: np.ndarray = np.asarray(expected != actual)
        return differ
    bad: np.ndarray = nonfinite_mask(expected, actual) | beyond(expected, actual, tol, edge)
    return bad


def compare_output(
    name: str, expected: np.ndarray, actual: np.ndarray, tol: Tolerance, edge: Edges | None = None
) -> OutputDiff:
    if expected.shape != actual.shape:
        return OutputDiff(name=name, mismatch=Mismatch.shape, detail=f"expected {expected.shape}, got {actual.shape}")
    if expected.dtype != actual.dtype:
        return OutputDiff(name=name, mismatch=Mismatch.dtype, detail=f"expected {expected.dtype}, got {actual.dtype}")
    if expected.dtype.kind not in "fc":
        bad = expected != actual
        count = int(bad.sum())
        first = [int(i) for i in np.argwhere(bad)[0]] if count else None
        abs_err, rel_err = _errors(expected[bad], actual[bad])  # only where they differ: exact ints are slow
        return OutputDiff(
            name=name,
            mismatch=Mismatch.values if count else None,
            bad_elements=count,
            first_bad_index=first,
            detail=f"{count} elements differ" if count else "",
            max_abs=float(abs_err.max(initial=0.0)),
            max_rel=float(rel_err.max(initial=0.0)),
            samples=_samples(expected, actual, bad),
        )
    finite = _finite_errors(expected, actual, tol) if edge is None else None
    abs_err, rel_err = finite[:2] if finite is not None else _errors(expected, actual)
    diff = OutputDiff(name=name, max_abs=float(abs_err.max(initial=0.0)), max_rel=float(rel_err.max(initial=0.0)))
    nonfinite = nonfinite_mask(expected, actual) if finite is None else None
    if nonfinite is not None and nonfinite.any():
        diff.mismatch, diff.bad_elements = Mismatch.nonfinite, int(nonfinite.sum())
        diff.first_bad_index = [int(i) for i in np.argwhere(nonfinite)[0]]
        diff.samples = _samples(expected, actual, nonfinite)
        diff.detail = f"{diff.bad_elements} elements non-finite on one side only"
        return diff
    bad = finite[2] if finite is not None else beyond(expected, actual, tol, edge)
    if bad.any():
        diff.mismatch, diff.bad_elements = Mismatch.values, int(bad.sum())
        diff.first_bad_index = [int(i) for i in np.argwhere(bad)[0]]
        diff.samples = _samples(expected, actual, bad)
        bounds = "exact" if tol.atol == 0 and tol.rtol == 0 else f"atol={tol.atol:g} rtol={tol.rtol:g}"
        diff.detail = f"{diff.bad_elements}/{expected.size} elements beyond {bounds}"
        if expected.dtype.kind == "f":
            _in_ulps(diff, expected, abs_err, bad, tol)
    return diff


def _in_ulps(diff: OutputDiff, expected: np.ndarray, abs_err: np.ndarray, bad: np.ndarray, tol: Tolerance) -> None:
    """Fill `diff`'s error in units in the last place of the output's dtype at the output's
    scale (its largest finite reference magnitude), at the element furthest past its bound,
    with the bound there in the same units: what a precision-scale finding is read by
    (Comparison.precision_scale). At the scale, not at each element: near zero a float64
    ULP is subnormal, and a count there says nothing."""
    info = np.finfo(expected.dtype)
    magnitude = np.abs(expected.astype(np.float64))
    scale = float(magnitude[np.isfinite(magnitude)].max(initial=0.0))
    ulp = 2.0 ** (np.floor(np.log2(max(scale, float(info.smallest_normal)))) - info.nmant)
    errors, bounds = abs_err[bad], np.maximum(tol.atol, tol.rtol * magnitude[bad])
    diff.dtype, diff.scale = expected.dtype.name, scale
    # An error of 1e308 at a float32 scale is inf ULPs, and past every bound: no warning.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        worst = int(np.argmax(np.nan_to_num(errors / bounds, nan=0.0)))
        diff.ulps, diff.bound_ulps = float(errors[worst] / ulp), float(bounds[worst] / ulp)


def compare(
    expected: Mapping[str, np.ndarray],
    actual: Mapping[str, np.ndarray],
    overrides: dict[str, Tolerance] | None = None,
    per_output: Mapping[str, Tolerance] | None = None,
    envelope: Mapping[str, Edges] | None = None,
) -> Comparison:
    """`per_output` (by output name, from `ToleranceConfig.for_outputs`) beats `overrides` (by
    dtype); `envelope` gives, per output, the other edges of the legitimate interval."""
    diffs = []
    for name, exp in expected.items():
        if name not in actual:
            diffs.append(OutputDiff(name=name, mismatch=Mismatch.missing, detail="output not produced"))
            continue
        tol = (per_output or {}).get(name) or tolerance_for(exp.dtype, overrides)
        edges = [e for e in (envelope or {}).get(name, ()) if e.shape == exp.shape] if exp.dtype.kind == "f" else []
        diffs.append(compare_output(name, exp, actual[name], tol, edges or None))
    return Comparison(outputs=diffs)
