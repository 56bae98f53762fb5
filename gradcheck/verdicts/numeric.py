"""numpy, exactly, for the small arrays the verdicts take: ``median``, ``nanmedian``,
``nan_to_num`` and ``percentile`` give ``float(np.median(...))`` and the like bit for bit
(``tests/test_fast_numpy.py`` checks each against numpy), without numpy's per-call dispatch
(analysis takes ~1,000 medians a run, several calls a parameter) and without the ``numpy.ma``
import that ``np.nanmedian`` and ``np.percentile`` pay at start-up. Use numpy itself anywhere
else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def median(values: np.ndarray | Sequence[float]) -> float:
    """``float(np.median(values))``, bit for bit (NaN if any value is NaN or there is none),
    at a fraction of its cost on the small arrays analysis takes ~1000 medians of per run
    (one sort, no dispatch)."""
    ordered = np.sort(np.asarray(values), axis=None)
    size = ordered.size
    if size == 0 or np.isnan(ordered[-1]):  # NaN sorts last
        return float("nan")
    middle = size // 2
    if size % 2:
        return float(ordered[middle])
    if ordered.dtype == np.float64:  # the same IEEE sum, but an overflow to inf is silent
        return (float(ordered[middle - 1]) + float(ordered[middle])) / 2
    with np.errstate(over="ignore"):
        return float((ordered[middle - 1] + ordered[middle]) / 2)


def nanmedian(values: np.ndarray) -> float:
    """``float(np.nanmedian(values))`` (NaN when every value is NaN, without its warning),
    without ``np.nanmedian``'s overhead and its import of ``numpy.ma`` (~8 ms of start-up)."""
    return median(values[~np.isnan(values)])


def nan_to_num(values: np.ndarray, nan: float) -> np.ndarray:
    """``np.nan_to_num(values, nan=nan)`` of a float array, bit for bit (NaN -> ``nan``, +-inf
    -> the dtype's largest finite magnitude), without its dispatch and its ``isposinf`` and
    ``isneginf`` calls (~40 us of a call's ~44 us; two or three calls a parameter)."""
    largest = np.finfo(values.dtype).max
    result = np.clip(values, -largest, largest)  # +-inf to +-largest; NaN stays NaN
    result[np.isnan(result)] = nan
    return result


def percentile(values: np.ndarray, q: float) -> float:
    """``float(np.percentile(values, q))`` (linear interpolation), bit for bit, for finite
    values: numpy's own arithmetic (its ``_lerp``) without its dispatch, and without the
    ``np.unique`` inside that imports ``numpy.ma`` (~15 ms of start-up)."""
    ordered = np.sort(np.asarray(values, dtype=np.float64), axis=None)
    size = ordered.size
    if size == 0:
        raise IndexError("percentile of no values")
    virtual = (size - 1) * (q / 100)
    if virtual >= size - 1:
        return float(ordered[-1])
    if virtual < 0:
        return float(ordered[0])
    below = math.floor(virtual)
    low, high = float(ordered[below]), float(ordered[below + 1])
    gamma = virtual - below
    difference = high - low
    if gamma >= 0.5:
        return high - difference * (1 - gamma)
    return low + difference * gamma
