"""numpy, exactly, for the small arrays the verdicts take: ``median``, ``nanmedian``,
``nanmax``, ``nan_to_num``, ``percentile`` and ``row_medians`` give ``float(np.median(...))``
and the like bit for bit (``tests/verdicts/test_fast_numpy.py`` checks each against numpy),
without numpy's dispatch (analysis takes ~1,000 medians a run, several calls a parameter) and
without the ``numpy.ma`` import that ``np.median``, ``np.nanmedian`` and ``np.percentile`` pay
at start-up. Use numpy itself anywhere else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def median(values: np.ndarray | Sequence[float]) -> float:
    """``float(np.median(values))`` (NaN if any value is NaN or there is none), bit for bit
    but for the sign of a zero result (see ``sorted_median``), at a fraction of its cost on the
    small arrays analysis takes ~17 medians of per parameter (one sort, no dispatch; up to
    ``SMALL`` values by Python's own sort)."""
    if type(values) is np.ndarray and values.dtype is _FLOAT64 and values.size <= SMALL:
        found = _small_median(values.ravel().tolist())
        if found is not None:
            return found
    return sorted_median(values)


def sorted_median(values: np.ndarray | Sequence[float]) -> float:
    """``median`` by numpy's sort, for any input: ``float(np.median(values))`` bit for bit, but
    a zero result keeps its sign (``np.median([-0.0])`` is ``0.0``, this ``-0.0``)."""
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


SMALL = 32
"""Up to this many values, a median sorts a Python list, not a numpy array (faster on a few
values: ``bench/README.md``)."""
_FLOAT64 = np.dtype(np.float64)


def _small_median(values: list[float]) -> float | None:
    """``median`` of a few float64 values, or None where numpy's sort itself must decide: a
    NaN among them (or +inf and -inf, whose sum is NaN too), none at all, or a zero in the
    middle (numpy's sort may put -0.0 and 0.0 in either order; Python's keeps theirs)."""
    total = sum(values)
    if not values or total != total:
        return None
    values.sort()
    middle = len(values) // 2
    low, high = values[middle - 1 + len(values) % 2], values[middle]
    if low == 0 or high == 0:
        return None
    return high if len(values) % 2 else (low + high) / 2


def sorted_row_medians(values: np.ndarray) -> np.ndarray:
    """:func:`sorted_median` of each row of a 2-D array of finite values (its arithmetic row by
    row: a zero result keeps its sign)."""
    return _middles(np.sort(values, axis=1), -0.0)


def row_medians(values: np.ndarray) -> np.ndarray:
    """``np.median(values, axis=1)`` of a 2-D float64 array, bit for bit (a row holding a NaN
    gives NaN; a zero sum of the middle values is ``0.0``, as numpy's mean makes it), without
    the ``numpy.ma`` import that ``np.median`` pays on its first call (~10 ms of start-up:
    ``bench/README.md``). Sorted rows where numpy partitions them: the same middle values."""
    ordered = np.sort(values, axis=1)
    if ordered.shape[1] == 0:
        return np.full(ordered.shape[0], np.nan)
    with np.errstate(over="ignore", invalid="ignore"):  # +-inf in a row, as numpy's
        found = _middles(ordered, 0.0)
    found[np.isnan(ordered[:, -1])] = np.nan  # NaN sorts last
    return found


def _middles(ordered: np.ndarray, start: float) -> np.ndarray:
    """The middle of each sorted row, or the mean of its two middle values, summed from
    ``start`` before the halving: numpy's mean sums from ``0.0`` (a -0.0 sum becomes 0.0);
    ``-0.0`` changes no sum."""
    middle = ordered.shape[1] // 2
    if ordered.shape[1] % 2:
        return ordered[:, middle] + start
    return (ordered[:, middle - 1] + ordered[:, middle] + start) / 2


def nanmedian(values: np.ndarray) -> float:
    """``float(np.nanmedian(values))`` (NaN when every value is NaN, without its warning),
    without ``np.nanmedian``'s overhead and its import of ``numpy.ma`` (start-up time)."""
    return median(values[~np.isnan(values)])


def nanmax(values: np.ndarray, initial: float | None = None) -> float:
    """``float(np.nanmax(values[, initial=initial]))`` of a float array: the ``np.fmax.reduce``
    that ``np.nanmax`` itself runs on an ndarray, without its dispatch (most of its time on a
    few values) and its warning when every value is NaN (the result is NaN then, as its)."""
    if initial is None:
        return float(np.fmax.reduce(values, axis=None))
    return float(np.fmax.reduce(values, axis=None, initial=initial))


def nan_to_num(values: np.ndarray, nan: float) -> np.ndarray:
    """``np.nan_to_num(values, nan=nan)`` of a float array, bit for bit (NaN -> ``nan``, +-inf
    -> the dtype's largest finite magnitude), without its dispatch and its ``isposinf`` and
    ``isneginf`` calls (most of a call's time; two or three calls a parameter)."""
    largest = np.finfo(values.dtype).max
    result = np.minimum(np.maximum(values, -largest), largest)  # +-inf to +-largest; NaN stays
    result[np.isnan(result)] = nan
    return result


def percentile(values: np.ndarray, q: float) -> float:
    """``float(np.percentile(values, q))`` (linear interpolation), bit for bit, for finite
    values: numpy's own arithmetic (its ``_lerp``) without its dispatch, and without the
    ``np.unique`` inside that imports ``numpy.ma`` (start-up time)."""
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
