"""Hand-built histograms the way real writers bucket values (no TensorFlow or torch needed).

``tf2_buckets`` follows ``tensorboard.plugins.histogram.summary_v2`` (TensorBoard >= 2.8):
``k`` equal-width buckets from min to max, the maximum in the last bucket, a constant tensor as
``k`` zero-width buckets. ``torch_proto`` follows ``torch.utils.tensorboard.summary
.make_histogram`` with the default ``bins='tensorflow'`` limits: exponential buckets around 0,
trimmed to the support plus one empty bucket on the left, exact ``min/max/num/sum/sum_squares``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Buckets:
    """Buckets plus the proto's optional exact fields, as a reader record would carry them."""

    left: np.ndarray
    right: np.ndarray
    counts: np.ndarray
    min: float | None = None
    max: float | None = None
    num: float | None = None
    sum: float | None = None
    sum_squares: float | None = None

    def fields(self) -> dict[str, float | None]:
        return {
            "min": self.min,
            "max": self.max,
            "num": self.num,
            "sum": self.sum,
            "sum_squares": self.sum_squares,
        }


def tf2_buckets(values: np.ndarray, bucket_count: int = 30) -> Buckets:
    """A TF2 ``[k, 3]`` histogram tensor of ``values``: edges and counts, no exact fields."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size == 0:
        zeros = np.zeros(bucket_count)
        return Buckets(zeros, zeros, zeros)
    low, high = float(values.min()), float(values.max())
    if not (np.isfinite(low) and np.isfinite(high)):
        nan = np.full(bucket_count, np.nan)
        return Buckets(nan, nan, np.zeros(bucket_count))
    if low == high:
        edges = np.full(bucket_count + 1, low)
        counts = np.zeros(bucket_count)
        counts[-1] = values.size
        return Buckets(edges[:-1], edges[1:], counts)
    edges = np.linspace(low, high, bucket_count + 1)
    width = (high - low) / bucket_count
    index = np.clip(np.floor((values - low) / width).astype(int), 0, bucket_count - 1)
    counts = np.bincount(index, minlength=bucket_count).astype(np.float64)
    return Buckets(edges[:-1], edges[1:], counts)


def _torch_default_limits() -> np.ndarray:
    value, positive = 1e-12, []
    while value < 1e20:
        positive.append(value)
        value *= 1.1
    return np.array([-v for v in reversed(positive)] + [0.0] + positive)


TORCH_LIMITS = _torch_default_limits()


def torch_proto(values: np.ndarray) -> Buckets:
    """A PyTorch ``SummaryWriter.add_histogram`` HistogramProto of ``values`` (default bins)."""
    values = np.asarray(values, dtype=np.float64).ravel()
    counts, limits = np.histogram(values[np.isfinite(values)], bins=TORCH_LIMITS)
    cumulative = np.cumsum(np.greater(counts, 0))
    start, end = np.searchsorted(cumulative, [0, cumulative[-1] - 1], side="right")
    start, end = int(start), int(end) + 1
    counts = counts[start - 1 : end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start : end + 1]
    with np.errstate(invalid="ignore"):  # inf - inf in sum and dot: NaN, as the writer gets
        total, squares = float(values.sum()), float(values.dot(values))
    minimum = float(values.min())
    right = limits.astype(np.float64)
    left = np.concatenate([[minimum], right[:-1]])
    return Buckets(
        left=left,
        right=right,
        counts=counts.astype(np.float64),
        min=minimum,
        max=float(values.max()),
        num=float(values.size),
        sum=total,
        sum_squares=squares,
    )
