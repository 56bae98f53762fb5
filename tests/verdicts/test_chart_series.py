"""``clipping.chart_series`` (vectorised over its windows) keeps exactly the points of its
definition: of each of ``CHART_WINDOWS`` windows (``np.array_split``'s), the first lowest and
the first highest finite point in step order, or the window's first point when none is finite.
"""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.verdicts.clipping import CHART_WINDOWS, chart_series


def kept_by_definition(values: np.ndarray) -> np.ndarray:
    """The definition, one window at a time (the code before it was vectorised)."""
    keep: list[int] = []
    for window in np.array_split(np.arange(values.size), CHART_WINDOWS):
        part = values[window]
        finite = np.isfinite(part)
        if not finite.any():
            keep.append(int(window[0]))
            continue
        masked = np.where(finite, part, np.nan)
        keep += sorted({int(window[np.nanargmin(masked)]), int(window[np.nanargmax(masked)])})
    return np.array(keep)


@pytest.mark.parametrize("seed", range(40))
def test_chart_series_keeps_the_defined_points(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(2 * CHART_WINDOWS + 1, 8 * CHART_WINDOWS))
    values = rng.normal(size=size) * 10.0 ** float(rng.integers(-30, 30))
    if seed % 3 == 0:
        values = np.round(values / values.std(), 0)  # many equal values: the first one counts
    if seed % 4 == 0:
        values[rng.integers(0, size, size=size // 5)] = rng.choice([np.nan, np.inf, -np.inf])
    if seed % 5 == 0:
        values[size // 3 : size // 2] = np.nan  # whole windows without a finite value
    if seed % 7 == 0:
        values = np.where(rng.random(size) < 0.5, 0.0, -0.0)  # equal, not identical
    if seed % 2:
        values = values.astype(np.float32)
    steps = np.arange(size, dtype=np.int64) * 2 + 5
    series = chart_series("norm", steps, values, steps[:0])
    expected = kept_by_definition(values)
    assert np.array_equal(series.steps, steps[expected])
    assert np.array_equal(series.values, values[expected], equal_nan=True)
    assert series.values.dtype == values.dtype


def test_a_short_series_is_kept_whole() -> None:
    values = np.arange(2 * CHART_WINDOWS, dtype=np.float64)
    series = chart_series("norm", np.arange(values.size), values, np.empty(0, np.int64))
    assert series.values is values
