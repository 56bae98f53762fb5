"""Histograms' buckets to rows of statistics and fingerprints, a batch at a time: the numpy
code that defines what the C kernel ``_scan.reduce`` computes (both engines' core,
:func:`reduce_by_width`; the tests compare the two).

Histograms are grouped by bucket count rounded up (:func:`_width_class`) so that each group is
one vectorised call to :func:`gradcheck.series.stats.histogram_stats_batch`; statistics are kept
as float32 (finite values beyond its range as +-float32 max), and each histogram gets a 64-bit
fingerprint (equal fingerprints: bit-identical histograms).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from gradcheck.model import STAT_NAMES, HistogramRecord
from gradcheck.series.stats import FIELD_NAMES, histogram_stats_batch

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def reduce_histograms(records: Sequence[HistogramRecord]) -> tuple[np.ndarray, np.ndarray]:
    """float32 statistics ``[B, len(STAT_NAMES)]`` and uint64 fingerprints ``[B]`` of records."""
    sizes = np.fromiter((r.counts.size for r in records), dtype=np.int64, count=len(records))

    def matrices(members: np.ndarray, width: int) -> BucketMatrices:
        group = [records[i] for i in members.tolist()]
        left, right, counts = _stacked(group, sizes[members], width)
        fields, present = _proto_fields(group)
        return left, right, counts, fields, present

    return reduce_by_width(sizes, matrices)


BucketMatrices = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""``left, right, counts`` ``[B, width]`` (zero-padded) and the proto ``fields, present``."""


def reduce_by_width(
    sizes: np.ndarray, matrices: Callable[[np.ndarray, int], BucketMatrices]
) -> tuple[np.ndarray, np.ndarray]:
    """Statistics and fingerprints of B histograms of ``sizes`` buckets, both engines' core.

    Histograms are grouped by bucket count rounded up (:func:`_width_class`) so that each group
    is one vectorised call; ``matrices(members, width)`` gives a group's zero-padded arrays.
    """
    widths = _width_class(sizes)
    rows = np.empty((sizes.size, len(STAT_NAMES)), dtype=np.float32)
    fingerprints = np.empty(sizes.size, dtype=np.uint64)
    for width in np.unique(widths).tolist():
        members = np.flatnonzero(widths == width)
        left, right, counts, fields, present = matrices(members, int(width))
        stats, group_fingerprints = _reduce_group(
            left, right, counts, fields, present, sizes[members]
        )
        rows[members] = _to_float32(stats)
        fingerprints[members] = group_fingerprints
    return rows, fingerprints


def _width_class(sizes: np.ndarray) -> np.ndarray:
    """Bucket counts up to 64 as they are (TF2 writes 30); wider ones (PyTorch's trimmed
    exponential bins vary per step) rounded up to an eighth of a power of two."""
    sizes = np.maximum(sizes, 1)
    step = np.left_shift(1, np.maximum(np.ceil(np.log2(sizes)).astype(np.int64) - 3, 0))
    return np.where(sizes <= 64, sizes, -(-sizes // step) * step)


def _stacked(
    records: list[HistogramRecord], sizes: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The records' buckets as zero-padded ``[B, width]`` matrices."""
    if bool((sizes == width).all()):  # the common case (TF2's 30 buckets): one C-level stack
        left = np.stack([r.left for r in records]).astype(np.float64, copy=False)
        right = np.stack([r.right for r in records]).astype(np.float64, copy=False)
        counts = np.stack([r.counts for r in records]).astype(np.float64, copy=False)
        return left, right, counts
    left, right, counts = (np.zeros((len(records), width)) for _ in range(3))
    for i, record in enumerate(records):
        size = record.counts.size
        left[i, :size] = record.left
        right[i, :size] = record.right
        counts[i, :size] = record.counts
    return left, right, counts


def _reduce_group(
    left: np.ndarray,
    right: np.ndarray,
    counts: np.ndarray,
    fields: np.ndarray,
    present: np.ndarray,
    sizes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Statistics (float64) and fingerprints of one width group's zero-padded matrices."""
    count, width = left.shape
    fingerprints = _fingerprints(left, right, counts, fields, sizes)
    if not bool((sizes == width).all()):
        padding = np.arange(width)[None, :] >= sizes[:, None]
        last_edge = right[np.arange(count), np.maximum(sizes - 1, 0)][:, None]
        left = np.where(padding, last_edge, left)
        right = np.where(padding, last_edge, right)
    return histogram_stats_batch(left, right, counts, fields, present), fingerprints


def _proto_fields(records: list[HistogramRecord]) -> tuple[np.ndarray, np.ndarray]:
    """The HistogramProto fields (:data:`FIELD_NAMES`) and whether each is present."""
    fields = np.zeros((len(records), len(FIELD_NAMES)))
    present = np.zeros((len(records), len(FIELD_NAMES)), dtype=bool)
    for i, record in enumerate(records):
        if record.encoding != "histo":
            continue
        values = (record.min, record.max, record.num, record.sum, record.sum_squares)
        if None in values:
            present[i] = [value is not None for value in values]
            fields[i] = [0.0 if value is None else value for value in values]
        else:
            present[i] = True
            fields[i] = values
    return fields, present


def _to_float32(stats: np.ndarray) -> np.ndarray:
    """float64 -> float32, finite values clipped to float32's range (only inf stays inf)."""
    finite = np.isfinite(stats)
    clipped = np.where(finite, np.clip(stats, -_FLOAT32_MAX, _FLOAT32_MAX), stats)
    return clipped.astype(np.float32)


_MIX = np.uint64(0x9E3779B97F4A7C15)


def _odd_weights(seed: int, width: int) -> np.ndarray:
    """``[4, width]`` odd pseudo-random uint64 (SplitMix64 of ``seed`` and the position): odd,
    so that a change in one element always changes the sum. Not ``np.random``, whose import
    (hashlib, secrets, bz2, lzma, ...) costs start-up time (``bench/README.md``)."""
    with np.errstate(over="ignore"):
        z = np.arange(1, 4 * width + 1, dtype=np.uint64) * _MIX + np.uint64(seed)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return (z | np.uint64(1)).reshape(4, width)


FINGERPRINT_WEIGHTS = _odd_weights(20240917, 8192)


def _fingerprints(
    left: np.ndarray,
    right: np.ndarray,
    counts: np.ndarray,
    fields: np.ndarray,
    sizes: np.ndarray,
) -> np.ndarray:
    """64-bit fingerprints of histograms (zero-padded): equal for bit-identical histograms."""
    width = left.shape[1]
    weights = (
        FINGERPRINT_WEIGHTS if width <= FINGERPRINT_WEIGHTS.shape[1] else _odd_weights(width, width)
    )
    total = np.zeros(left.shape[0], dtype=np.uint64)
    with np.errstate(over="ignore"):
        for row, values in enumerate((left, right, counts)):
            total += (_mixed(values) * weights[row, :width]).sum(axis=1, dtype=np.uint64)
        total += (_mixed(fields) * weights[3, : fields.shape[1]]).sum(axis=1, dtype=np.uint64)
        total += sizes.astype(np.uint64) * _MIX
    return total


def _mixed(values: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    with np.errstate(over="ignore"):
        mixed = bits * _MIX
    return mixed ^ (mixed >> np.uint64(29))
