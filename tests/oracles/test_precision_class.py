"""A wrong result within a few roundings of a narrower float type is its own class
(oracles.compare.Comparison.precision_scale), with its error in ULPs beside the bound."""

from __future__ import annotations

import numpy as np
import pytest

from oracles.compare import PRECISION_UNITS, compare


def _wrong(dtype: str, by: float, at: int = 7) -> tuple[np.ndarray, np.ndarray]:
    expected = np.linspace(0.5, 4.0, 64).astype(dtype)
    actual = expected.copy()
    actual[at] = actual[at] + np.asarray(by, dtype=dtype)
    return expected, actual


def test_an_error_is_counted_in_the_last_place_of_its_dtype_at_the_outputs_scale_beside_the_bound() -> None:
    """The output reaches 4.0, where one float32 ULP is 2**-21; float32's bound at an
    element below 1 is its atol, 1e-3 (about 2,097 of those ULPs). An element off by 3,000
    of its own ULPs (2**-24) is within it; one off by 30,000 (3,750 at the scale) is past it."""
    expected, actual = _wrong("float32", 0.0)
    value = float(expected[7])
    assert 0.5 <= value < 1.0 and float(expected.max()) == 4.0
    actual[7] = np.float32(value + 3_000 * 2.0**-24)
    out = compare({"y": expected}, {"y": actual}).outputs[0]
    assert out.mismatch is None and out.ulps is None  # within the bound: nothing to measure
    actual[7] = np.float32(value + 30_000 * 2.0**-24)
    out = compare({"y": expected}, {"y": actual}).outputs[0]
    assert out.ulps == pytest.approx(3_750, rel=1e-3)
    assert out.bound_ulps == pytest.approx(1e-3 / 2.0**-21, rel=1e-6)
    assert out.dtype == "float32" and out.scale == pytest.approx(4.0)


def test_an_error_beside_a_zero_is_counted_at_the_scale_not_in_subnormal_ulps() -> None:
    expected = np.array([0.0, 1.0, 2.0])
    out = compare({"y": expected}, {"y": expected + np.array([1e-5, 0.0, 0.0])}).outputs[0]
    assert out.ulps == pytest.approx(1e-5 / 2.0**-51) and out.bound_ulps == pytest.approx(1e-8 / 2.0**-51)


@pytest.mark.parametrize(
    ("dtype", "by", "within"),
    [
        ("float64", 2e-7, "float32"),  # a float64 op computed in float32: a few float32 roundings
        ("float64", 1e-3, None),  # far past float32's rounding at this scale
        ("float64", 0.5, None),  # a semantic bug: off by the values' own size
        ("float32", 2e-2, "float16"),
        ("float32", 1.0, None),
        ("float16", 5e-2, None),  # nothing narrower to be read against
    ],
)
def test_the_precision_class_is_the_narrower_type_whose_rounding_explains_the_error(
    dtype: str, by: float, within: str | None
) -> None:
    expected, actual = _wrong(dtype, by)
    comparison = compare({"y": expected}, {"y": actual})
    assert not comparison.ok
    assert comparison.precision_scale == within


def test_one_output_off_further_or_not_finite_leaves_the_case_a_wrong_result() -> None:
    near, near_actual = _wrong("float64", 2e-7)
    far, far_actual = _wrong("float64", 0.5)
    assert compare({"a": near, "b": far}, {"a": near_actual, "b": far_actual}).precision_scale is None
    nan = near_actual.copy()
    nan[3] = np.nan
    assert compare({"a": near}, {"a": nan}).precision_scale is None
    assert compare({"a": near, "b": near}, {"a": near_actual, "b": near_actual}).precision_scale == "float32"
    assert PRECISION_UNITS * 2.0**-24 * 4.0 > 2e-7  # the case above sits inside the class, not on its edge
