"""The comparator on the types the proof of ``portable fix`` now feeds: strings exactly, float8 and
float4 within one unit in the last place, 4-bit integers exactly."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from portable.runners.comparator import comparable, compare_arrays, compare_outputs
from portable.runners.tolerances import DEFAULT_TOLERANCES, ToleranceTable

LOW = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn"]


@pytest.mark.parametrize("name", LOW)
def test_low_precision_tolerance_is_one_ulp_of_the_type(name: str) -> None:
    info, tol = ml_dtypes.finfo(getattr(ml_dtypes, name)), DEFAULT_TOLERANCES[name]
    assert tol.rtol == float(info.eps) and tol.atol == float(info.smallest_subnormal)


def _values(name: str) -> np.ndarray:
    """Every finite positive value of the type, ascending (from all its bit patterns)."""
    dtype = np.dtype(getattr(ml_dtypes, name))
    values = np.arange(16 if "float4" in name else 256, dtype=np.uint8).view(dtype).astype(np.float64)
    return np.unique(values[np.isfinite(values) & (values > 0)]).astype(dtype)


@pytest.mark.parametrize("name", LOW)
def test_a_neighbouring_value_passes_and_two_steps_apart_fail(name: str) -> None:
    """One step passes everywhere; two steps fail from 8 times the smallest normal value up (nearer
    zero, the absolute allowance of one subnormal step can cover two)."""
    values, tol = _values(name), ToleranceTable().for_output("y", name)
    assert compare_arrays(values[1:], values[:-1], tol).passed
    far = values[:-2].astype(np.float64) >= 8 * float(ml_dtypes.finfo(values.dtype).smallest_normal)
    if far.any():  # float4's largest value is 6: below 8
        assert compare_arrays(values[2:][far], values[:-2][far], tol).beyond == int(far.sum())
    assert compare_arrays(values[2:], values[:-2], tol).beyond > 0


def test_strings_compare_exactly_and_count_the_elements_that_differ() -> None:
    expected = np.array([["monday", "b"], ["c", "d"]], dtype=object)
    same = compare_outputs(("fixed", [expected.copy()]), ("original", [expected]), ["y"], ["string"], 1,
                           ToleranceTable())
    assert same.passed and same.outputs[0].stats.histogram[0] == 4 and same.outputs[0].warning is None
    changed = expected.copy()
    changed[0, 0] = "Monday"
    stats = compare_arrays(changed, expected, ToleranceTable().for_output("y", "string"))
    assert not stats.passed and stats.beyond == 1 and stats.to_dict()["max_abs"] is None
    assert not compare_arrays(expected[:, :1], expected, ToleranceTable().for_output("y", "string")).passed


def test_int4_outputs_compare_exactly() -> None:
    expected = np.array([-8, 0, 7], dtype=ml_dtypes.int4)
    tol = ToleranceTable().for_output("y", "int4")
    assert compare_arrays(expected.copy(), expected, tol).passed
    assert not compare_arrays(np.array([-8, 1, 7], dtype=ml_dtypes.int4), expected, tol).passed


@pytest.mark.parametrize(("dtype", "wide"), [(ml_dtypes.float8_e4m3fnuz, np.float32), (ml_dtypes.bfloat16, np.float32),
                                             (ml_dtypes.int4, np.int8), (ml_dtypes.uint2, np.uint8), (np.int64, np.int64)])
def test_comparable_widens_exactly(dtype, wide) -> None:
    array = np.array([1, 2, 3], dtype=np.float32).astype(dtype)
    widened = comparable(array)
    assert widened.dtype == wide and widened.tolist() == [1, 2, 3]
    nan = comparable(np.array([np.nan], dtype=np.float32).astype(ml_dtypes.float8_e4m3fnuz))
    assert np.isnan(nan).all()  # what numpy's isnan cannot ask of the float8 array itself
