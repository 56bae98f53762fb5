"""Statistics of histograms: buckets (and the proto's exact fields) -> per-step numbers.

Pure functions. :func:`histogram_stats_batch` computes every statistic for a batch of
histograms at once (the reducer's hot path); :func:`histogram_stats` is the one-histogram
front door.

How each number is obtained:

- ``count``: the proto's ``num`` when present (it counts non-finite elements too), else the
  bucket total.
- ``mean``, ``std``, ``l2_norm``: exact from ``sum``/``sum_squares``/``num`` when the log has
  them (``HistogramProto`` from PyTorch, tensorboardX, TF1). From buckets alone (TF2 ``[k, 3]``
  tensors) values are taken as uniform within each bucket; ``l2_norm`` is then an estimate and
  ``l2_error_bound`` is a *relative* bound that holds whatever the values inside the buckets
  are: ``sum_squares`` lies between ``sum(count * min(x^2 over bucket))`` and
  ``sum(count * max(x^2 over bucket))``.
- percentiles: linear interpolation inside the bucket holding the rank, edges clipped to
  ``[min, max]`` (PyTorch's outer bucket limits reach ``1.8e308``).
- ``nonfinite_share``: share of NaN/Inf elements; ``0.0`` when there are none, ``NaN`` when
  the log shows non-finite values (NaN edges, NaN ``min``/``max``/``sum``) but not how many.
  Finite values beyond the outermost bucket (PyTorch's default bins stop at 1e20) are not
  counted in the buckets but leave ``sum`` finite: they are not taken for NaN.
- ``zero_share``: share of the bucket holding 0 (``lo <= 0 < hi``, or a zero-width bucket at 0).
  With PyTorch's default bins that bucket is ``[0, 1e-12)``: exact zeros.
- ``exact_zero_share``: share of values within :data:`ZERO_WIDTH` of 0 (a dead ReLU's exact
  zeros); ``tanh_bound_share``: share within :data:`BOUND_MARGIN` of the range (0.04) of -1 or
  1, for a histogram inside ``[-1, 1]`` (NaN otherwise); ``sigmoid_bound_share``: within 0.02
  of 0 or 1, for one inside ``[0, 1]``. Each from the buckets (:func:`region_shares`):
  buckets inside the region count whole, a bucket that straddles its edge counts less the
  values its outer part is estimated to hold (the density of the neighbouring bucket on that
  side, or its own when it has none: a bucket straddling zero is not all zeros). The
  ``*_low`` and ``*_high`` columns are what the buckets allow whatever the values inside
  them: the share of the buckets inside the region, and of those touching it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gradcheck.model import COLUMN, PERCENTILES, STAT_NAMES
from gradcheck.series import kernels

ACTIVATION_STATS = STAT_NAMES[-9:]
"""The activation statistics' columns (``exact_zero_share``, ``exact_zero_share_low``,
``exact_zero_share_high``, then the same for ``tanh_bound_share`` and ``sigmoid_bound_share``)."""

QUANTILE_LEVELS: np.ndarray = np.array([0.0, *(p / 100.0 for p in PERCENTILES), 1.0])
"""Levels of the quantile grid ``(min, p1 .. p99, max)`` used for distribution distances."""


@dataclass(eq=False)
class HistStats:
    """Statistics of one histogram (see the module docstring for how each is obtained)."""

    count: float
    min: float
    max: float
    mean: float
    std: float
    l2_norm: float
    l2_norm_exact: bool
    l2_error_bound: float  # relative: |true - l2_norm| <= l2_error_bound * l2_norm
    rms: float
    percentiles: dict[float, float]  # percentile (1, 5, 25, 50, 75, 95, 99) -> value
    nonfinite_share: float  # 0: none; NaN: present, share unknown
    zero_share: float
    exact_zero_share: float = float("nan")  # see the module docstring, as the next eight
    exact_zero_share_low: float = float("nan")
    exact_zero_share_high: float = float("nan")
    tanh_bound_share: float = float("nan")
    tanh_bound_share_low: float = float("nan")
    tanh_bound_share_high: float = float("nan")
    sigmoid_bound_share: float = float("nan")
    sigmoid_bound_share_low: float = float("nan")
    sigmoid_bound_share_high: float = float("nan")

    @property
    def has_nonfinite(self) -> bool:
        """Whether the histogram shows any NaN/Inf value."""
        return self.nonfinite_share != 0.0  # NaN (share unknown) counts


def histogram_stats(
    left: np.ndarray | Sequence[float],
    right: np.ndarray | Sequence[float],
    counts: np.ndarray | Sequence[float],
    *,
    min: float | None = None,  # noqa: A002 - the proto's field names
    max: float | None = None,  # noqa: A002
    num: float | None = None,
    sum: float | None = None,  # noqa: A002
    sum_squares: float | None = None,
) -> HistStats:
    """Statistics of one histogram given as bucket edges and counts (plus optional exact fields)."""
    left_arr, right_arr, counts_arr = _as_bucket_arrays(left, right, counts)
    fields = np.array([[_or_nan(v) for v in (min, max, num, sum, sum_squares)]])
    present = np.array([[v is not None for v in (min, max, num, sum, sum_squares)]])
    row = histogram_stats_batch(
        left_arr[None, :], right_arr[None, :], counts_arr[None, :], fields, present
    )[0]
    exact = bool(present[0, 3:].all() and present[0, 2] and np.isfinite(fields[0, 2:]).all())
    count = float(row[COLUMN["count"]])
    finite_count = float(counts_arr.sum())
    l2 = float(row[COLUMN["l2_norm"]])
    return HistStats(
        count=count,
        min=float(row[COLUMN["min"]]),
        max=float(row[COLUMN["max"]]),
        mean=float(row[COLUMN["mean"]]),
        std=float(row[COLUMN["std"]]),
        l2_norm=l2,
        l2_norm_exact=exact,
        l2_error_bound=float(row[COLUMN["l2_error_bound"]]),
        rms=float(l2 / np.sqrt(finite_count)) if finite_count > 0 else float("nan"),
        percentiles={p: float(row[COLUMN[f"p{int(p):02d}"]]) for p in PERCENTILES},
        nonfinite_share=float(row[COLUMN["nonfinite_share"]]),
        zero_share=float(row[COLUMN["zero_share"]]),
        **{name: float(row[COLUMN[name]]) for name in ACTIVATION_STATS},
    )


def _or_nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def _as_bucket_arrays(
    left: np.ndarray | Sequence[float],
    right: np.ndarray | Sequence[float],
    counts: np.ndarray | Sequence[float],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    left_arr = np.asarray(left, dtype=np.float64).ravel()
    right_arr = np.asarray(right, dtype=np.float64).ravel()
    counts_arr = np.asarray(counts, dtype=np.float64).ravel()
    if not left_arr.shape == right_arr.shape == counts_arr.shape:
        raise ValueError("left, right and counts must have the same length")
    if left_arr.size == 0:  # an empty tensor: one empty bucket keeps the shapes valid
        return np.zeros(1), np.zeros(1), np.zeros(1)
    return left_arr, right_arr, counts_arr


# --------------------------------------------------------------------------------------------
# The vectorised core
# --------------------------------------------------------------------------------------------

FIELD_NAMES: tuple[str, ...] = ("min", "max", "num", "sum", "sum_squares")
"""Columns of the ``fields``/``present`` matrices given to :func:`histogram_stats_batch`."""


def histogram_stats_batch(
    left: np.ndarray,
    right: np.ndarray,
    counts: np.ndarray,
    fields: np.ndarray,
    present: np.ndarray,
) -> np.ndarray:
    """Statistics of B histograms with k buckets each -> float64 matrix ``[B, len(STAT_NAMES)]``.

    ``left``, ``right``, ``counts``: ``[B, k]`` (pad shorter histograms with zero-count buckets
    whose edges repeat the last right edge). ``fields``: ``[B, 5]`` proto values in
    :data:`FIELD_NAMES` order (anything where absent); ``present``: ``[B, 5]`` booleans.
    """
    out = np.full((left.shape[0], len(STAT_NAMES)), np.nan)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        left, right = _collapse_constant_buckets(left, right, counts, present)
        total = counts.sum(axis=1)
        nonfinite_share = _nonfinite_share(left, right, counts, total, fields, present)
        lo, hi, vmin, vmax = _effective_edges(left, right, counts, fields, present)
        _moments_into(out, lo, hi, counts, total, fields, present)
        # rounding in sum_squares / num - mean^2 must not break Popoviciu's bound
        out[:, COLUMN["std"]] = np.minimum(out[:, COLUMN["std"]], (vmax - vmin) / 2)
        out[:, COLUMN["min"]] = vmin
        out[:, COLUMN["max"]] = vmax
        num_ok = present[:, 2] & np.isfinite(fields[:, 2])
        out[:, COLUMN["count"]] = np.where(num_ok, fields[:, 2], total)
        out[:, COLUMN["nonfinite_share"]] = nonfinite_share
        zero_bucket = ((lo <= 0) & (hi > 0)) | ((lo == 0) & (hi == 0))
        out[:, COLUMN["zero_share"]] = (counts * zero_bucket).sum(axis=1) / total
        first = COLUMN["p01"]
        out[:, first : first + len(PERCENTILES)] = _percentiles(lo, hi, counts, total, vmin, vmax)
        shares = COLUMN[ACTIVATION_STATS[0]]
        out[:, shares : shares + len(ACTIVATION_STATS)] = _activation_shares(
            lo, hi, counts, total, vmin, vmax
        )
        broken = ~np.isfinite(left).all(axis=1) & (present[:, 0] == 0)
        out[broken, COLUMN["mean"] :] = np.nan  # TF2 edges of a NaN/Inf tensor: nothing usable
        out[broken, COLUMN["nonfinite_share"]] = nonfinite_share[broken]
        out[total == 0, COLUMN["zero_share"]] = np.nan
    return out


ZERO_WIDTH = 1e-12
"""A value within this of 0 counts as an exact zero (the bucket ``[0, 1e-12)`` of TensorFlow's
and PyTorch's default bins holds exactly the zeros)."""
BOUND_MARGIN = 0.02
"""Near a bound: within this share of the output range of it (0.04 for tanh's ``[-1, 1]``,
0.02 for sigmoid's ``[0, 1]``), where either derivative is under 8% of its peak (tanh at 0.96:
``1 - 0.96^2 = 0.078`` of 1; sigmoid at 0.98: ``0.98 * 0.02 = 0.0196`` of 0.25)."""
_TANH_REGIONS = ((-1.0, -1.0 + 2 * BOUND_MARGIN), (1.0 - 2 * BOUND_MARGIN, 1.0))
_SIGMOID_REGIONS = ((0.0, BOUND_MARGIN), (1.0 - BOUND_MARGIN, 1.0))


def _activation_shares(
    lo: np.ndarray,
    hi: np.ndarray,
    counts: np.ndarray,
    total: np.ndarray,
    vmin: np.ndarray,
    vmax: np.ndarray,
) -> np.ndarray:
    """``[B, 9]``: the exact-zero share, its lower and upper bound, then the same for the
    tanh-bound and the sigmoid-bound share (NaN for histograms outside ``[-1, 1]`` /
    ``[0, 1]``)."""
    out = np.full((lo.shape[0], 9), np.nan)
    regions = (((-ZERO_WIDTH, ZERO_WIDTH),), _TANH_REGIONS, _SIGMOID_REGIONS)
    inside = (
        np.ones(lo.shape[0], dtype=bool),
        (vmin >= -1) & (vmax <= 1),
        (vmin >= 0) & (vmax <= 1),
    )
    for column, (pieces, within_range) in enumerate(zip(regions, inside, strict=True)):
        estimate, low, high = (np.zeros(lo.shape[0]) for _ in range(3))
        for start, end in pieces:
            shares = region_shares(lo, hi, counts, start, end)
            estimate += shares[0]
            low += shares[1]
            high += shares[2]
        for offset, value in enumerate((estimate, low, high)):
            out[:, 3 * column + offset] = np.where(within_range, value / total, np.nan)
    out[total == 0] = np.nan
    return out


def region_shares(
    lo: np.ndarray, hi: np.ndarray, counts: np.ndarray, start: float, end: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counts (per row of ``[B, k]`` clipped bucket edges) of the values in ``[start, end]``:
    the estimate, the buckets inside it (a lower bound) and those overlapping it (an upper
    bound).

    A bucket that straddles an edge of the region counts whole less what its part outside the
    region is estimated to hold: that part's width times the density (count over width) of
    the neighbouring bucket on that side, or of the bucket itself when that neighbour has no
    finite, non-negative density (none, zero width, odd counts)."""
    # a bucket holds [lo, hi): it touches the region where they overlap, or lies in it whole
    # when it has no width (a constant's bucket); one that only meets its edge does not
    point = (lo == hi) & (lo >= start) & (lo <= end)
    touches = (counts > 0) & (((lo < end) & (hi > start)) | point)
    inside = touches & (lo >= start) & (hi <= end)
    straddles = touches & ~inside
    width = hi - lo
    density = counts / width
    left = np.full_like(density, np.nan)
    left[:, 1:] = density[:, :-1]
    right = np.full_like(density, np.nan)
    right[:, :-1] = density[:, 1:]
    left = np.where(np.isfinite(left) & (left >= 0), left, density)
    right = np.where(np.isfinite(right) & (right >= 0), right, density)
    below, above = start - lo, hi - end
    outside = np.where(below > 0, left * below, 0.0) + np.where(above > 0, right * above, 0.0)
    kept = counts - np.minimum(counts, outside)
    estimate = np.where(inside, counts, np.where(straddles, kept, 0.0)).sum(axis=1)
    low = np.where(inside, counts, 0.0).sum(axis=1)
    high = np.where(touches, counts, 0.0).sum(axis=1)
    return estimate, low, high


def _collapse_constant_buckets(
    left: np.ndarray, right: np.ndarray, counts: np.ndarray, present: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Read TF <= 2.7's encoding of a constant tensor ``v`` (one bucket ``[v-0.5, v+0.5]``) as v.

    In a TF2 histogram of more than one bucket the maximum always lands in the last bucket, so
    counts in bucket 0 alone, with width exactly 1, can only be that one-bucket encoding.
    """
    only_first = (counts[:, 1:] == 0).all(axis=1) & (counts[:, 0] > 0)
    constant = only_first & ~present[:, 0] & (right[:, 0] - left[:, 0] == 1.0)
    if not constant.any():
        return left, right
    middle = (left[constant, 0] + right[constant, 0]) / 2
    left, right = left.copy(), right.copy()
    left[constant, 0] = middle
    right[constant, 0] = middle
    return left, right


def _nonfinite_share(
    left: np.ndarray,
    right: np.ndarray,
    counts: np.ndarray,
    total: np.ndarray,
    fields: np.ndarray,
    present: np.ndarray,
) -> np.ndarray:
    """0 when clean; when NaN/Inf show, the share of elements missing from the buckets, or NaN.

    A proto whose ``min``, ``max``, ``sum`` and ``sum_squares`` are all finite holds no NaN/Inf
    (either would propagate into ``sum``); elements missing from its buckets are then finite
    values beyond the writer's outermost bucket (|x| > 1e20 with PyTorch's default bins).
    """
    has_num = present[:, 2] & np.isfinite(fields[:, 2]) & (fields[:, 2] > 0)
    missing = np.where(has_num, fields[:, 2] - total, 0.0)
    num = np.where(has_num, fields[:, 2], 1.0)
    share = np.where(has_num & (missing > 0.5), missing / num, np.nan)
    field_bad = (present & ~np.isfinite(fields))[:, [0, 1, 3, 4]].any(axis=1)
    # ``left[0]`` is -inf when a proto has no ``min``: only NaN edges, or +-inf tensor edges, count.
    is_tensor = ~present[:, 0]
    edge_bad = np.isnan(left).any(axis=1) | np.isnan(right).any(axis=1)
    edge_bad |= is_tensor & (np.isinf(left).any(axis=1) | np.isinf(right).any(axis=1))
    return np.where(field_bad | edge_bad, share, 0.0)


def _effective_edges(
    left: np.ndarray,
    right: np.ndarray,
    counts: np.ndarray,
    fields: np.ndarray,
    present: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bucket edges clipped to the data's ``[min, max]``, and that min and max."""
    nonempty = counts > 0
    any_nonempty = nonempty.any(axis=1)
    first = nonempty.argmax(axis=1)
    last = counts.shape[1] - 1 - nonempty[:, ::-1].argmax(axis=1)
    rows = np.arange(counts.shape[0])
    bucket_min = np.where(any_nonempty, left[rows, first], np.nan)
    bucket_max = np.where(any_nonempty, right[rows, last], np.nan)
    # A proto without ``min`` has left[0] = -inf: its first bucket starts at its right edge.
    bucket_min = np.where(np.isneginf(bucket_min), right[rows, first], bucket_min)
    use_min = present[:, 0] & np.isfinite(fields[:, 0])
    use_max = present[:, 1] & np.isfinite(fields[:, 1])
    vmin = np.where(use_min, fields[:, 0], bucket_min)
    vmax = np.where(use_max, fields[:, 1], bucket_max)
    finite_min = np.where(np.isfinite(vmin), vmin, -np.inf)[:, None]
    finite_max = np.where(np.isfinite(vmax), vmax, np.inf)[:, None]
    lo = np.clip(left, finite_min, finite_max)
    hi = np.clip(right, finite_min, finite_max)
    lo = np.where(np.isneginf(lo), hi, lo)
    lo = np.minimum(lo, hi)
    empty_rows = ~any_nonempty
    vmin = np.where(empty_rows & ~use_min, np.nan, vmin)
    vmax = np.where(empty_rows & ~use_max, np.nan, vmax)
    return lo, hi, vmin, vmax


def _moments_into(
    out: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    counts: np.ndarray,
    total: np.ndarray,
    fields: np.ndarray,
    present: np.ndarray,
) -> None:
    """Mean, std, L2 norm and its relative error bound: exact from the proto, else from buckets."""
    exact = present[:, 2:].all(axis=1) & np.isfinite(fields[:, 2:]).all(axis=1)
    exact &= fields[:, 2] > 0
    num = np.where(exact, fields[:, 2], 1.0)
    mean = fields[:, 3] / num
    variance = fields[:, 4] / num - mean * mean
    l2 = np.sqrt(np.maximum(fields[:, 4], 0.0))
    bound = np.zeros(exact.shape)
    estimated = ~exact
    if estimated.any():
        rows = np.flatnonzero(estimated)
        moments = _bucket_moments(lo[rows], hi[rows], counts[rows], total[rows])
        mean[rows], variance[rows], l2[rows], bound[rows] = moments
    out[:, COLUMN["mean"]] = mean
    out[:, COLUMN["std"]] = np.sqrt(np.maximum(variance, 0.0))
    out[:, COLUMN["l2_norm"]] = l2
    out[:, COLUMN["l2_error_bound"]] = bound


def _bucket_moments(
    lo: np.ndarray, hi: np.ndarray, counts: np.ndarray, total: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean, variance, L2 norm (values uniform in each bucket) and the norm's relative bound.

    Empty buckets contribute nothing, whatever their edges.
    Uniform on ``[a, b]``: ``E[x^2] = mid^2 + width^2 / 12``.
    """
    # Per bucket, not only when some edge of the batch is NaN/Inf: an edge whose square
    # overflows must not reach a row through 0 * inf, whatever else is in its batch.
    lo = np.where(counts > 0, lo, 0.0)
    hi = np.where(counts > 0, hi, 0.0)
    middle = (lo + hi) * 0.5
    width_term = hi - lo
    width_term *= width_term
    width_term /= 12.0
    mean = np.einsum("ij,ij->i", counts, middle) / total
    deviation = middle - mean[:, None]
    variance = np.einsum("ij,ij->i", counts, deviation * deviation + width_term) / total
    squares = np.einsum("ij,ij->i", counts, middle * middle + width_term)
    lo_squared, hi_squared = lo * lo, hi * hi
    low = np.minimum(lo_squared, hi_squared)
    low[(lo <= 0) & (hi >= 0)] = 0.0
    squares_low = np.einsum("ij,ij->i", counts, low)
    squares_high = np.einsum("ij,ij->i", counts, np.maximum(lo_squared, hi_squared))
    l2 = np.sqrt(squares)
    relative = np.maximum(np.sqrt(squares_high) - l2, l2 - np.sqrt(squares_low)) / l2
    relative = np.where(squares_high == 0, 0.0, np.maximum(relative, 0.0))
    l2 = np.where(total > 0, l2, np.nan)
    return mean, variance, l2, relative


def _percentiles(
    lo: np.ndarray,
    hi: np.ndarray,
    counts: np.ndarray,
    total: np.ndarray,
    vmin: np.ndarray,
    vmax: np.ndarray,
) -> np.ndarray:
    """``[B, len(PERCENTILES)]`` by linear interpolation inside the bucket holding each rank.

    The bucket holding a level is the number of cumulative shares below it (what
    ``searchsorted(side="left")`` finds), counted for the whole batch at once and exactly, so
    that a histogram's statistics never depend on the other histograms of its batch.
    """
    batch, width = counts.shape
    share = np.cumsum(counts, axis=1) / np.where(total > 0, total, 1.0)[:, None]
    levels = np.array(PERCENTILES) / 100.0
    targets = np.tile(levels, batch)
    below_level = np.stack([(share < level).sum(axis=1) for level in levels], axis=1)
    rows = np.repeat(np.arange(batch), levels.size)
    bucket = np.clip(below_level.ravel(), 0, width - 1)
    inside = counts[rows, bucket]
    below = share[rows, bucket] - inside / np.repeat(np.where(total > 0, total, 1.0), levels.size)
    fraction = np.where(inside > 0, (targets - below) * total[rows] / inside, 0.0)
    low, high = lo[rows, bucket], hi[rows, bucket]
    result = (low + np.clip(fraction, 0.0, 1.0) * (high - low)).reshape(batch, levels.size)
    result = np.clip(result, vmin[:, None], vmax[:, None])
    result[total == 0] = np.nan
    return result


# --------------------------------------------------------------------------------------------
# Distances between distributions, from quantile grids
# --------------------------------------------------------------------------------------------


def wasserstein_from_quantiles(grid_a: np.ndarray, grid_b: np.ndarray) -> np.ndarray:
    """Wasserstein-1 distance between distributions given as quantile grids.

    ``grid_a``, ``grid_b``: ``[..., len(QUANTILE_LEVELS)]`` values at :data:`QUANTILE_LEVELS`
    (min, percentiles, max). W1 is the integral over ``u`` of ``|Q_a(u) - Q_b(u)|``; here the
    trapezoid rule on the grid, exact when both quantile functions are linear between grid
    points. Two identical grids give exactly 0.
    """
    grid_a, grid_b = np.asarray(grid_a, dtype=np.float64), np.asarray(grid_b, dtype=np.float64)
    in_c = kernels.wasserstein(grid_a, grid_b, _LEVEL_WIDTHS)
    if in_c is not None:
        return in_c
    difference = np.abs(grid_a - grid_b)
    return ((difference[..., 1:] + difference[..., :-1]) / 2 * _LEVEL_WIDTHS).sum(axis=-1)


_LEVEL_WIDTHS = np.diff(QUANTILE_LEVELS)
