"""The statistics kernels of ``series/`` that have a C copy, and the choice between the two.

Each function here runs the C extension's kernel (``gradcheck.native``) and returns its result,
or None where the extension is not there (not built, or ``GRADCHECK_NO_EXT=1``) or does not
take the arguments: the caller's numpy code is then the twin, which defines the result (the
tests compare both). So ``series/`` reaches C here only, and never through the reading engine.
"""

from __future__ import annotations

import numpy as np

from gradcheck.native import extension


def wasserstein(grid_a: np.ndarray, grid_b: np.ndarray, widths: np.ndarray) -> np.ndarray | None:
    """``stats.wasserstein_from_quantiles`` of float64 grids in C, for the shapes movement
    passes (rows of a weight's grids against as many, or against one row): its sum of a row's
    eight trapezoids is written for nine levels."""
    scan = extension()
    if scan is None or not _grids_for_c(grid_a, grid_b, widths.size + 1):
        return None
    distances = np.empty(grid_a.shape[0])
    scan.wasserstein(grid_a, grid_b, widths, distances)
    return distances


def _grids_for_c(grid_a: np.ndarray, grid_b: np.ndarray, levels: int) -> bool:
    return (
        levels == 9
        and grid_a.ndim == 2
        and grid_a.shape[1] == levels
        and grid_b.shape in (grid_a.shape, (levels,))
        and grid_a.flags.c_contiguous
        and grid_b.flags.c_contiguous
    )


def thinned_rows(
    steps: np.ndarray, stats: np.ndarray, l2: int, nonfinite: int, window: int, limit: int
) -> tuple[np.ndarray, int] | None:
    """``thin._thinned_rows`` in C: the rows kept and the window (a loop over the rows
    instead of a dozen numpy calls a window tried)."""
    scan = extension()
    if scan is None:
        return None
    kept = np.empty(steps.size, dtype=np.int64)
    count, window = scan.thin(
        np.ascontiguousarray(steps, dtype=np.int64),
        np.ascontiguousarray(stats, dtype=np.float32),
        l2, nonfinite, window, limit, kept,
    )  # fmt: skip
    return kept[:count], window
