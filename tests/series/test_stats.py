"""Statistics of hand-built histograms: exact fields, bucket estimates and their bounds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gradcheck import native
from gradcheck.model import COLUMN
from gradcheck.series import kernels
from gradcheck.series.stats import (
    FIELD_NAMES,
    QUANTILE_LEVELS,
    HistStats,
    histogram_stats,
    histogram_stats_batch,
    wasserstein_from_quantiles,
)
from tests.support.histograms import Buckets, tf2_buckets, torch_proto

NO_EXTENSION = "the C engine is not built, or GRADCHECK_NO_EXT=1"


def stats_of(buckets: Buckets) -> HistStats:
    return histogram_stats(buckets.left, buckets.right, buckets.counts, **buckets.fields())


def test_exact_fields_give_exact_moments_and_norm() -> None:
    values = np.random.default_rng(1).normal(0.5, 2.0, size=5000)
    stats = stats_of(torch_proto(values))
    assert stats.l2_norm_exact
    assert stats.l2_error_bound == 0.0
    assert stats.l2_norm == pytest.approx(np.linalg.norm(values), rel=1e-12)
    assert stats.mean == pytest.approx(values.mean(), rel=1e-12)
    assert stats.std == pytest.approx(values.std(), rel=1e-9)
    assert stats.rms == pytest.approx(np.sqrt(np.mean(values**2)), rel=1e-12)
    assert (stats.count, stats.min, stats.max) == (5000, values.min(), values.max())
    assert stats.nonfinite_share == 0.0 and not stats.has_nonfinite


def test_torch_percentiles_are_close_to_numpy() -> None:
    values = np.random.default_rng(2).normal(0.0, 1.0, size=20000)
    stats = stats_of(torch_proto(values))
    for percentile, estimate in stats.percentiles.items():
        # default torch buckets are 10% wide: the estimate is within one bucket
        assert estimate == pytest.approx(np.percentile(values, percentile), rel=0.1, abs=0.01)


def test_tf2_buckets_give_an_estimate_within_its_stated_bound() -> None:
    values = np.random.default_rng(3).normal(0.0, 0.05, size=(64, 32))
    buckets = tf2_buckets(values)
    stats = stats_of(buckets)
    true_norm = np.linalg.norm(values)
    assert not stats.l2_norm_exact
    assert 0 < stats.l2_error_bound < 0.5
    assert abs(stats.l2_norm - true_norm) <= stats.l2_error_bound * stats.l2_norm
    assert stats.l2_norm == pytest.approx(true_norm, rel=0.01)  # uniform-in-bucket is good
    assert stats.mean == pytest.approx(values.mean(), abs=0.05 * values.std())
    assert stats.std == pytest.approx(values.std(), rel=0.02)
    assert stats.min == values.min() and stats.max == values.max()
    assert stats.count == values.size


def test_hand_built_three_buckets() -> None:
    # values uniform in [-1, 0) x2, [0, 1) x3, [1, 2] x1
    stats = histogram_stats([-1.0, 0.0, 1.0], [0.0, 1.0, 2.0], [2, 3, 1])
    assert stats.count == 6
    assert stats.mean == pytest.approx((2 * -0.5 + 3 * 0.5 + 1 * 1.5) / 6)
    # E[x^2] of uniform on [a, b] is (a^2 + ab + b^2) / 3
    squares = 2 * (1 / 3) + 3 * (1 / 3) + 1 * (1 + 2 + 4) / 3
    assert stats.l2_norm == pytest.approx(np.sqrt(squares))
    low, high = np.sqrt(0 + 0 + 1 * 1), np.sqrt(2 * 1 + 3 * 1 + 1 * 4)
    assert stats.l2_error_bound == pytest.approx(
        max(high - stats.l2_norm, stats.l2_norm - low) / stats.l2_norm
    )
    assert stats.percentiles[50.0] == pytest.approx(1 / 3)  # rank 3 of 6: a third into [0, 1)
    assert stats.zero_share == pytest.approx(3 / 6)


@pytest.mark.parametrize("value", [0.0, 2.5, -7.0])
def test_constant_tensor_in_both_tf2_encodings(value: float) -> None:
    new = histogram_stats(np.full(30, value), np.full(30, value), [0] * 29 + [12])  # TB >= 2.8
    old = histogram_stats([value - 0.5], [value + 0.5], [12])  # TB <= 2.7: one unit bucket
    for stats in (new, old):
        assert stats.mean == value and stats.min == value and stats.max == value
        assert stats.std == 0.0
        assert stats.l2_norm == pytest.approx(abs(value) * np.sqrt(12))
        assert stats.l2_error_bound == 0.0
        assert stats.zero_share == (1.0 if value == 0 else 0.0)


def test_zero_initialised_bias_from_torch_is_all_zero_bucket() -> None:
    stats = stats_of(torch_proto(np.zeros(64)))
    assert stats.l2_norm == 0.0 and stats.zero_share == 1.0 and stats.std == 0.0


def test_embedding_like_sparse_gradient_has_zero_share() -> None:
    values = np.zeros(1000)
    values[:100] = np.random.default_rng(4).normal(size=100)
    assert stats_of(torch_proto(values)).zero_share == pytest.approx(0.9)


def test_torch_nan_tensor_reports_the_share_of_nonfinite_values() -> None:
    values = np.random.default_rng(5).normal(size=100)
    values[:25] = np.nan
    stats = stats_of(torch_proto(values))
    assert stats.nonfinite_share == pytest.approx(0.25)
    assert stats.has_nonfinite
    # the other numbers describe the finite part, from the buckets
    finite = values[25:]
    assert stats.min == pytest.approx(finite.min(), rel=0.1)
    assert stats.mean == pytest.approx(finite.mean(), abs=0.1 * finite.std())
    assert not stats.l2_norm_exact


def test_tf2_nan_tensor_is_flagged_with_unknown_share() -> None:
    buckets = tf2_buckets(np.array([1.0, np.nan, 2.0]))
    stats = stats_of(buckets)
    assert stats.has_nonfinite and np.isnan(stats.nonfinite_share)
    assert np.isnan(stats.l2_norm)


def test_tf2_inf_edges_are_nonfinite() -> None:
    stats = histogram_stats([-np.inf, 0.0], [0.0, np.inf], [0, 0])
    assert stats.has_nonfinite


def test_empty_histogram_has_no_numbers_and_no_nonfinite_flag() -> None:
    stats = histogram_stats([], [], [])
    assert stats.count == 0 and np.isnan(stats.l2_norm) and not stats.has_nonfinite


def test_mismatched_lengths_raise() -> None:
    with pytest.raises(ValueError, match="same length"):
        histogram_stats([0.0], [1.0, 2.0], [1])


def test_batch_with_padding_equals_one_by_one() -> None:
    rng = np.random.default_rng(6)
    histograms = [torch_proto(rng.normal(0, s, size=200)) for s in (0.01, 1.0, 30.0)]
    histograms.append(tf2_buckets(rng.normal(size=300), bucket_count=30))
    width = max(h.counts.size for h in histograms)

    def padded(array: np.ndarray, fill: float) -> np.ndarray:
        return np.concatenate([array, np.full(width - array.size, fill)])

    left = np.stack([padded(h.left, h.right[-1]) for h in histograms])
    right = np.stack([padded(h.right, h.right[-1]) for h in histograms])
    counts = np.stack([padded(h.counts, 0.0) for h in histograms])
    fields = np.array(
        [[np.nan if v is None else v for v in h.fields().values()] for h in histograms]
    )
    present = np.array([[v is not None for v in h.fields().values()] for h in histograms])
    assert list(histograms[0].fields()) == list(FIELD_NAMES)
    batch = histogram_stats_batch(left, right, counts, fields, present)
    for row, buckets in zip(batch, histograms, strict=True):
        one = stats_of(buckets)
        assert row[COLUMN["l2_norm"]] == pytest.approx(one.l2_norm, rel=1e-12)
        assert row[COLUMN["p50"]] == pytest.approx(one.percentiles[50.0], rel=1e-12)
        assert row[COLUMN["zero_share"]] == pytest.approx(one.zero_share)


def test_wasserstein_from_quantiles() -> None:
    grid = np.array([-3.0, -2.3, -1.6, -0.7, 0.0, 0.7, 1.6, 2.3, 3.0])
    assert wasserstein_from_quantiles(grid, grid) == 0.0
    assert wasserstein_from_quantiles(grid, grid + 0.25) == pytest.approx(0.25)
    assert grid.size == QUANTILE_LEVELS.size
    stacked = wasserstein_from_quantiles(np.stack([grid, grid]), np.stack([grid, grid * 2]))
    assert stacked[0] == 0.0 and stacked[1] > 0


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

finite_values = arrays(
    np.float64,
    st.integers(1, 400),
    # squares of values below ~1e-154 are subnormal: no float arithmetic keeps them exact
    elements=st.floats(-1e6, 1e6, allow_nan=False).filter(lambda v: v == 0 or abs(v) > 1e-100),
)


def _assert_within_range(stats: HistStats) -> None:
    tolerance = 1e-9 * max(1.0, abs(stats.min), abs(stats.max))
    assert stats.min - tolerance <= stats.mean <= stats.max + tolerance
    assert stats.std <= (stats.max - stats.min) / 2 + tolerance  # Popoviciu's inequality
    percentiles = list(stats.percentiles.values())
    assert all(stats.min <= p <= stats.max for p in percentiles)
    assert percentiles == sorted(percentiles)


@settings(max_examples=150, deadline=None)
@given(finite_values, st.integers(1, 40))
def test_tf2_moments_stay_within_min_and_max(values: np.ndarray, bucket_count: int) -> None:
    _assert_within_range(stats_of(tf2_buckets(values, bucket_count)))


@settings(max_examples=150, deadline=None)
@given(finite_values)
def test_torch_moments_stay_within_min_and_max(values: np.ndarray) -> None:
    _assert_within_range(stats_of(torch_proto(values)))


@settings(max_examples=150, deadline=None)
@given(finite_values, st.integers(1, 40))
def test_bucket_norm_bound_holds_for_any_values(values: np.ndarray, bucket_count: int) -> None:
    stats = stats_of(tf2_buckets(values, bucket_count))
    true_norm = float(np.linalg.norm(values))
    slack = 1e-9 * max(true_norm, 1.0)
    assert abs(stats.l2_norm - true_norm) <= stats.l2_error_bound * stats.l2_norm + slack


@settings(max_examples=150, deadline=None)
@given(finite_values, st.floats(1e-3, 1e3), st.booleans())
def test_norms_scale_with_the_values(values: np.ndarray, scale: float, negate: bool) -> None:
    factor = -scale if negate else scale
    for make in (tf2_buckets, torch_proto):
        base, scaled = stats_of(make(values)), stats_of(make(values * factor))
        if make is torch_proto:  # exact: the norm scales exactly
            assert scaled.l2_norm == pytest.approx(base.l2_norm * scale, rel=1e-9, abs=1e-300)
        else:  # equal-width buckets scale with the values: so does the estimate
            assert scaled.l2_norm == pytest.approx(base.l2_norm * scale, rel=1e-6, abs=1e-300)
            assert scaled.l2_error_bound == pytest.approx(base.l2_error_bound, abs=1e-6)


def test_finite_values_beyond_the_outermost_bucket_are_not_nonfinite() -> None:
    values = np.array([1.0, -2.0, 3e25])  # 3e25 is past PyTorch's last default bucket (1e20)
    buckets = torch_proto(values)
    assert buckets.counts.sum() == 2 and buckets.num == 3
    stats = stats_of(buckets)
    assert stats.nonfinite_share == 0.0 and not stats.has_nonfinite
    assert stats.l2_norm == pytest.approx(np.linalg.norm(values))  # exact fields still hold


grid_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0.0, -0.0, 1e-300, -1e308, 1e308, float("inf"), float("nan")]),
)


@pytest.mark.skipif(native.extension() is None, reason=NO_EXTENSION)
@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 30).flatmap(
        lambda n: st.tuples(
            arrays(np.float64, (n, QUANTILE_LEVELS.size), elements=grid_values),
            st.one_of(
                arrays(np.float64, (n, QUANTILE_LEVELS.size), elements=grid_values),
                arrays(np.float64, (QUANTILE_LEVELS.size,), elements=grid_values),
            ),
        )
    )
)
def test_wasserstein_in_c_is_numpys_bit_for_bit(grids: tuple[np.ndarray, np.ndarray]) -> None:
    """The C kernel (rows of grids against as many, or against one) gives numpy's sums of the
    same trapezoids in numpy's order: equal bits (NaN for NaN, the sign of a zero)."""
    grid_a, grid_b = grids
    widths = np.diff(QUANTILE_LEVELS)
    assert kernels.wasserstein(grid_a, grid_b, widths) is not None  # else both are numpy's
    in_c = wasserstein_from_quantiles(grid_a, grid_b)
    with pytest.MonkeyPatch.context() as patch, np.errstate(all="ignore"):
        patch.setenv("GRADCHECK_NO_EXT", "1")
        in_numpy = wasserstein_from_quantiles(grid_a, grid_b)
    assert in_c.shape == in_numpy.shape == (grid_a.shape[0],)
    same = (in_c.view(np.uint64) == in_numpy.view(np.uint64)) | (
        np.isnan(in_c) & np.isnan(in_numpy)
    )
    assert same.all(), (in_c, in_numpy)


def test_wasserstein_takes_other_shapes_through_numpy() -> None:
    grid = np.linspace(-1.0, 1.0, QUANTILE_LEVELS.size)
    three = np.stack([grid, grid * 2, grid * 3])[:, None, :]  # [3, 1, 9]: not for the C kernel
    assert wasserstein_from_quantiles(three, grid).shape == (3, 1)
    strided = np.stack([grid, grid * 2], axis=1).T  # [2, 9], not C-contiguous
    assert not strided.flags.c_contiguous
    expected = wasserstein_from_quantiles(np.ascontiguousarray(strided), grid)
    assert np.array_equal(wasserstein_from_quantiles(strided, grid), expected)


def test_exact_zeros_in_a_bucket_of_their_own_are_counted_exactly() -> None:
    """Issue 35: TensorFlow's and PyTorch's default bins hold exact zeros in ``[0, 1e-12)``."""
    stats = histogram_stats([-1.0, 0.0, 1e-12, 0.5], [0.0, 1e-12, 0.5, 2.0], [10, 85, 3, 2])
    assert stats.exact_zero_share_low == pytest.approx(0.85)
    assert stats.exact_zero_share == pytest.approx(0.85, abs=1e-9)  # [-1, 0) reaches -1e-12
    assert stats.exact_zero_share_high == pytest.approx(0.95)  # ... and may hold only zeros


def test_a_bucket_straddling_zero_is_not_all_zeros() -> None:
    """TF2's even buckets put a ReLU layer's zeros with its small values: the share is
    estimated from the next bucket's density, between the bounds the buckets allow."""
    rng = np.random.default_rng(0)
    values = np.concatenate([np.zeros(930), np.abs(rng.normal(size=70))])
    edges = np.linspace(0.0, values.max(), 31)
    counts, _ = np.histogram(values, edges)
    stats = histogram_stats(edges[:-1], edges[1:], counts)
    assert stats.exact_zero_share_low == 0.0
    assert stats.exact_zero_share_high == pytest.approx(counts[0] / 1000)
    assert stats.exact_zero_share == pytest.approx(0.93, abs=0.01)


def test_shares_near_the_bounds_of_tanh_and_sigmoid_outputs() -> None:
    rng = np.random.default_rng(1)
    saturated = np.tanh(rng.normal(size=2000) * 20)
    edges = np.linspace(saturated.min(), saturated.max(), 31)
    counts, _ = np.histogram(saturated, edges)
    stats = histogram_stats(edges[:-1], edges[1:], counts)
    assert stats.tanh_bound_share == pytest.approx(np.mean(np.abs(saturated) >= 0.96), abs=0.02)
    assert stats.tanh_bound_share_low <= stats.tanh_bound_share <= stats.tanh_bound_share_high
    assert np.isnan(stats.sigmoid_bound_share)  # values below 0: not a sigmoid's
    unbounded = histogram_stats([-3.0, 0.0], [0.0, 3.0], [5, 5])
    assert np.isnan(unbounded.tanh_bound_share) and np.isnan(unbounded.sigmoid_bound_share)
