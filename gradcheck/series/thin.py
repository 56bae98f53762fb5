"""Thinning: memory flat in log size. A histogram series keeps at most :data:`MAX_ROWS` rows
(``2 * MAX_ROWS`` while streaming): the first and the worst row of each window of ``W`` steps
(``step // W`` equal), ``W`` the smallest power of two that fits; see :func:`_kept_rows`.
Scalars are kept complete. A restart inside a window of a thinned series also drops the older
rows of that window that were not kept (rows between its first and the restart step).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from gradcheck.model import COLUMN, HistogramSeries, Notice
from gradcheck.series import kernels

MAX_ROWS = 2048
"""Rows a histogram series keeps at most once built or merged, plus one (``2 * MAX_ROWS``
while streaming, plus the rows being settled: ``reduce.SETTLE_ROWS``): 180 KB a series at
88 bytes a row, whatever the log's length (the one: see :func:`_fits`). Longer series keep
the first and the worst row of each ``W``-step window (see :func:`_kept_rows`), and the run
gets one ``thinned`` notice."""


HistogramBlock = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Rows of one series appended together: steps, wall times, statistics, fingerprints."""


_L2 = COLUMN["l2_norm"]
_NONFINITE = COLUMN["nonfinite_share"]


def _window_starts(steps: np.ndarray, window: int) -> np.ndarray:
    """Whether each of the sorted ``steps`` is the first of its ``window``-step window."""
    windows = steps // window
    starts = np.empty(steps.size, dtype=bool)
    starts[:1] = True
    np.not_equal(windows[1:], windows[:-1], out=starts[1:])
    return starts


def _kept_rows(steps: np.ndarray, stats: np.ndarray, window: int) -> np.ndarray:
    """Positions of the rows kept of each ``window``-step window of the sorted ``steps``: its
    first row and its worst row (one row when they are the same).

    The first rows are the same steps in every series logged together, so series can still be
    compared step by step (the global norm, gradient to weight ratios). The worst row: the
    earliest with a non-finite value (so the NaN onset step stays exact), else the largest L2
    norm (so a one-step spike survives), ties to the earliest. Both are picked by one order
    over rows, so a window's picks are its sub-windows' picks' picks: thinning in stages, or
    parts thinned apart then merged, keep the same rows.
    """
    starts = _window_starts(steps, window)
    if not steps.size:
        return np.empty(0, dtype=np.int64)
    norms = stats[:, _L2]
    bad = ~(stats[:, _NONFINITE] == 0) | ~np.isfinite(norms)
    badness = np.where(bad, np.inf, norms)  # no NaN left: a non-finite norm is bad
    group = np.cumsum(starts) - 1  # each row's window, 0..windows-1
    worst = np.flatnonzero(badness == np.maximum.reduceat(badness, np.flatnonzero(starts))[group])
    first_worst = np.empty(worst.size, dtype=bool)
    first_worst[0] = True
    np.not_equal(group[worst[1:]], group[worst[:-1]], out=first_worst[1:])
    starts[worst[first_worst]] = True  # the earliest worst row of each window joins its first
    return np.flatnonzero(starts)


def thinned(block: HistogramBlock, window: int, limit: int) -> tuple[HistogramBlock, int]:
    """``block`` (steps rising) with at most ``limit`` rows: the first and the worst row of
    each window (:func:`_kept_rows`), the window doubled from ``window`` until they fit. Kept
    as is when ``window`` is 1 and the rows fit already.

    The window is the smallest of the ladder that fits: rows at a given window only grow as a
    stream goes on, so a window too small earlier stays too small, and thinning in stages or
    merging parts ends at the same window as thinning once."""
    steps = block[0]
    if window == 1 and steps.size <= limit:
        return block, window
    kept, window = _thinned_rows(steps, block[2], window, limit)
    steps, walls, stats, fingerprints = block
    return (steps[kept], walls[kept], stats[kept], fingerprints[kept]), window


def _thinned_rows(
    steps: np.ndarray, stats: np.ndarray, window: int, limit: int
) -> tuple[np.ndarray, int]:
    """The rows :func:`thinned` keeps, and its window: in C when the extension is there (a
    loop over the rows instead of a dozen numpy calls a window tried), else in numpy."""
    in_c = kernels.thinned_rows(steps, stats, _L2, _NONFINITE, window, limit)
    if in_c is not None:
        return in_c
    while True:
        if window > 1 and int(np.count_nonzero(_window_starts(steps, window))) <= limit:
            kept = _kept_rows(steps, stats, window)  # windows <= rows <= 2 * windows
            if _fits(steps[kept], window, limit):
                return kept, window
        window *= 2


def _fits(kept_steps: np.ndarray, window: int, limit: int) -> bool:
    """Whether rows kept at ``window`` fit ``limit``, the first window counting one row.

    A part of a stream (a later file, the second byte range of one) may start inside a
    window: alone it keeps that window's first row of its own as well as its worst, a row the
    whole stream does not keep (its first row there comes from the earlier part). Counted,
    that row could make the part choose a larger window than the whole stream needs, and
    thinned rows cannot come back at the merge. Not counting it keeps every part's window at
    most the whole's, so a merge ends at the same window as one reading; a series may then
    keep ``limit + 1`` rows."""
    first_window_has_two = (
        kept_steps.size > 1 and kept_steps[1] // window == kept_steps[0] // window
    )
    return kept_steps.size - int(first_window_has_two) <= limit


def thinning_notices(
    notices: Iterable[Notice], run: str, files: Sequence[str], series: Iterable[HistogramSeries]
) -> tuple[Notice, ...]:
    """``notices`` without any earlier ``thinned`` notice, then this run's, if it was thinned:
    one per run, recomputed on every merge so that it describes the merged series."""
    others = tuple(notice for notice in notices if notice.kind != "thinned")
    thinned = [s for s in series if s.window > 1]
    if not thinned:
        return others
    read = max(s.histograms_read for s in thinned)
    kept = max(len(s) for s in thinned)
    windows = sorted({s.window for s in thinned})
    window = f"{windows[0]}" if len(windows) == 1 else f"{windows[0]} to {windows[-1]}"
    message = (
        f"{len(thinned)} histogram series thinned to bound memory: up to {read:,} steps read"
        f" per series, at most {kept:,} kept: the first and the worst step of each window of"
        f" {window} steps (worst: its first NaN/Inf step, else its largest L2 norm); scalars are"
        " complete"
    )
    notice = Notice(run, files[0] if files else "", "thinned", None, None, message)
    return (*others, notice)


def rows_before(steps: np.ndarray, step: int) -> int:
    """How many of the rising ``steps`` come before ``step``: the rows a restart at ``step``
    leaves (the purge rule of streams, parts and merges alike)."""
    if not steps.size or step > steps[-1]:
        return int(steps.size)
    return int(np.searchsorted(steps, step, side="left"))
