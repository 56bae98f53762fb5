"""The analysis' small-array shortcuts agree with the numpy functions they replace, bit for bit
(they exist for speed only: ``np.median``'s dispatch and ``np.nanmedian``'s ``numpy.ma``
import cost more than the medians themselves on the arrays verdicts take them of)."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gradcheck.verdicts.clipping import downsample
from gradcheck.verdicts.numeric import (
    median,
    nan_to_num,
    nanmax,
    nanmedian,
    percentile,
    row_medians,
    sorted_median,
    sorted_row_medians,
)
from gradcheck.verdicts.signals import common_steps

FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
VALUES = arrays(np.float64, st.integers(0, 60), elements=FLOATS)


def same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == b


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_median_is_np_median(values: np.ndarray) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # empty input
        expected = float(np.median(values))
    assert same(median(values), expected)
    assert same(median(values.tolist()), expected)


def same_bits(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or np.float64(a).tobytes() == np.float64(b).tobytes()


TIES = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, 1e-300, np.inf, -np.inf, np.nan])


@settings(max_examples=500, deadline=None)
@given(arrays(np.float64, st.integers(1, 70), elements=TIES | FLOATS))
def test_median_of_small_arrays_is_the_sorted_median_bit_for_bit(values: np.ndarray) -> None:
    """The Python-sort shortcut below ``numeric.SMALL`` values and numpy's sort above it give
    the same bits, signed zeros and ties included; and np.median's value (its zeros' signs
    may differ: ``np.median([-0.0])`` is ``0.0``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = float(np.median(values))
    assert same_bits(median(values), sorted_median(values))
    assert same_bits(median(values.reshape(1, -1)), sorted_median(values))
    assert same(median(values), expected)


@settings(max_examples=500, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(0, 6), st.integers(1, 40)),
        elements=TIES | FLOATS,
    )
)
def test_row_medians_are_np_median_by_rows_bit_for_bit(values: np.ndarray) -> None:
    """Signed zeros, infinities (their sum NaN) and NaN rows included."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.median(values, axis=1)
    found = row_medians(values)
    assert found.shape == expected.shape
    assert all(same_bits(a, b) for a, b in zip(found.tolist(), expected.tolist(), strict=True))


@settings(max_examples=300, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(0, 6), st.integers(1, 40)),
        elements=st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5]) | st.floats(-1e300, 1e300),
    )
)
def test_sorted_row_medians_are_the_sorted_median_of_each_row_bit_for_bit(
    values: np.ndarray,
) -> None:
    """Finite values, signed zeros kept (the table's baselines and movements take them)."""
    found = sorted_row_medians(values).tolist()
    assert len(found) == values.shape[0]
    assert all(same_bits(a, sorted_median(row)) for a, row in zip(found, values, strict=True))


def test_row_medians_of_empty_rows_are_nan() -> None:
    assert np.isnan(row_medians(np.empty((3, 0)))).all()
    assert row_medians(np.empty((0, 5))).shape == (0,)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_nanmedian_is_np_nanmedian(values: np.ndarray) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all NaN or empty
        expected = float(np.nanmedian(values)) if values.size else float("nan")
    assert same(nanmedian(values), expected)


def test_median_of_integers_and_float32() -> None:
    assert median(np.array([3, 1, 2, 10])) == float(np.median([3, 1, 2, 10])) == 2.5
    halves = np.array([0.1, 0.7, 0.3, 0.9], dtype=np.float32)
    assert median(halves) == float(np.median(halves))


FINITE = st.floats(
    allow_nan=False, allow_infinity=False, width=64, min_value=-1e300, max_value=1e300
)


@settings(max_examples=500, deadline=None)
@given(
    arrays(np.float64, st.integers(1, 60), elements=FINITE),
    st.one_of(st.sampled_from([0, 1, 50, 90, 95, 99, 99.9, 100]), st.floats(0, 100)),
)
def test_percentile_is_np_percentile(values: np.ndarray, q: float) -> None:
    assert percentile(values, q) == float(np.percentile(values, q))


def _reference_downsample(values: np.ndarray, points: int) -> tuple[float, ...]:
    """The sparkline rule spelled out: largest of each ``np.array_split`` bin, NaN if any bad."""
    if values.size <= points:
        return tuple(float(v) for v in values)
    bins = np.array_split(values, points)
    return tuple(float("nan") if not np.isfinite(b).all() else float(b.max()) for b in bins)


@settings(max_examples=300, deadline=None)
@given(arrays(np.float64, st.integers(0, 200), elements=FLOATS), st.integers(1, 50))
def test_downsample_is_array_split_max(values: np.ndarray, points: int) -> None:
    got = downsample(values, points)
    expected = _reference_downsample(values, points)
    assert len(got) == len(expected)
    assert all(same(a, b) for a, b in zip(got, expected, strict=True))


STEPS = st.sets(st.integers(-5, 300), max_size=60).map(lambda s: np.array(sorted(s), np.int64))


@settings(max_examples=300, deadline=None)
@given(STEPS, STEPS)
def test_common_steps_is_intersect1d(a: np.ndarray, b: np.ndarray) -> None:
    steps, in_a, in_b = common_steps(a, b)
    expected = np.intersect1d(a, b, assume_unique=True, return_indices=True)
    for got, want in zip((steps, in_a, in_b), expected, strict=True):
        assert np.array_equal(got, want)
    same_steps, in_a, in_b = common_steps(a, a.copy())
    assert np.array_equal(same_steps, a) and np.array_equal(in_a, np.arange(a.size))


@settings(max_examples=300, deadline=None)
@given(
    VALUES | arrays(np.float32, st.integers(0, 30), elements=st.floats(width=32)),
    st.sampled_from([0.0, -0.0, np.inf, -1.5]),
)
def test_nan_to_num_is_np_nan_to_num(values: np.ndarray, nan: float) -> None:
    expected = np.nan_to_num(values, nan=nan)
    got = nan_to_num(values, nan=nan)
    assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()
    assert got is not values  # a copy, as numpy's (the input is left as it was)


@settings(max_examples=300, deadline=None)
@given(arrays(np.float64, st.integers(0, 40), elements=TIES | FLOATS))
def test_nanmax_is_np_nanmax_bit_for_bit(values: np.ndarray) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # every value NaN
        assert same_bits(nanmax(values, initial=0.0), float(np.nanmax(values, initial=0.0)))
        if values.size:
            assert same_bits(nanmax(values), float(np.nanmax(values)))
