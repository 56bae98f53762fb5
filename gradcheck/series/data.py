"""``RunData``: what ``series/`` makes of a run's records (per-series arrays of per-step
statistics) and the verdicts take. Plain frozen dataclasses, no I/O; ``gradcheck.model``
re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gradcheck.events.records import Damage, FileInfo, HParamValue, Notice

if TYPE_CHECKING:  # annotations only: `gradcheck --version` / `--help` need no numpy
    import numpy as np


PERCENTILES: tuple[float, ...] = (1.0, 5.0, 25.0, 50.0, 75.0, 95.0, 99.0)
"""Percentiles kept per histogram and step."""

STAT_NAMES: tuple[str, ...] = (
    "count",
    "min",
    "max",
    "mean",
    "std",
    "l2_norm",
    "l2_error_bound",
    "nonfinite_share",
    "zero_share",
    *(f"p{int(p):02d}" for p in PERCENTILES),
    *(
        f"{share}{bound}"
        for share in ("exact_zero_share", "tanh_bound_share", "sigmoid_bound_share")
        for bound in ("", "_low", "_high")
    ),
)
"""The statistics kept per histogram and step: the columns of ``HistogramSeries.stats`` (and of
:func:`gradcheck.series.stats.histogram_stats_batch`'s matrix), in order. The last nine are
for activations (:mod:`gradcheck.series.stats`: shares near zero and near the bounds of tanh
and sigmoid outputs, each estimated from the buckets, with the bounds the buckets allow)."""

COLUMN = {name: i for i, name in enumerate(STAT_NAMES)}
_QUANTILE_COLUMNS = [COLUMN[c] for c in ("min", *(f"p{int(p):02d}" for p in PERCENTILES), "max")]
"""The positions of :meth:`HistogramSeries.quantile_grid`'s columns in ``stats``."""

SeriesKey = tuple[str, int]
"""``(tag, index)``: ``index`` tells apart series written under one tag at one step."""


@dataclass(frozen=True, eq=False)
class HistogramSeries:
    """One histogram series of a run: per-step statistics, in step order."""

    tag: str
    index: int
    encoding: str
    steps: np.ndarray  # int64 [n]
    wall_times: np.ndarray  # float64 [n]
    stats: np.ndarray  # float32 [n, len(STAT_NAMES)]
    fingerprints: np.ndarray  # uint64 [n]
    window: int = 1  # 1, or W when thinned (the first and worst rows of each W-step window)
    rows_read: int | None = None  # histograms behind the rows (None: ``len(self)``)

    def __len__(self) -> int:
        return int(self.steps.size)

    @property
    def histograms_read(self) -> int:
        """Histograms behind the series' rows: its length, more once thinned. Histograms a
        restart purged are not counted, except those a thinned window stood for (how many of
        a window's histograms a kept row stands for is not kept)."""
        return len(self) if self.rows_read is None else self.rows_read

    def column(self, name: str) -> np.ndarray:
        """One statistic over the steps, as float64 (see :data:`STAT_NAMES`)."""
        return self.stats[:, COLUMN[name]].astype("float64")

    def quantile_grid(self) -> np.ndarray:
        """``[n, 9]`` float64: min, p1, p5, p25, p50, p75, p95, p99, max per step."""
        return self.stats[:, _QUANTILE_COLUMNS].astype("float64")


@dataclass(frozen=True, eq=False)
class ScalarSeries:
    """One scalar tag of a run, in step order."""

    tag: str
    steps: np.ndarray  # int64 [n]
    values: np.ndarray  # float64 [n]

    def __len__(self) -> int:
        return int(self.steps.size)


@dataclass(frozen=True, eq=False)
class RunData:
    """Everything analysis needs from one run; series in order of first appearance."""

    run: str
    files: tuple[str, ...]
    file_infos: tuple[FileInfo, ...]
    damages: tuple[Damage, ...]
    notices: tuple[Notice, ...]
    histograms: Mapping[SeriesKey, HistogramSeries]
    scalars: Mapping[str, ScalarSeries]
    hparams: Mapping[str, HParamValue] = field(default_factory=dict)
    """The HParams plugin's hyperparameters (:class:`HParamsRecord`), merged in stream and
    file order (a later record's value wins); empty when the run logged none."""

    @property
    def steps(self) -> tuple[int, int] | None:
        """First and last step of any histogram or scalar, or None when there is none."""
        all_steps = [s.steps for s in self.histograms.values()]
        all_steps += [s.steps for s in self.scalars.values()]
        firsts = [int(steps[0]) for steps in all_steps if steps.size]
        lasts = [int(steps[-1]) for steps in all_steps if steps.size]
        return (min(firsts), max(lasts)) if firsts else None
