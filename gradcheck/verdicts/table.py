"""A run's parameters as one table: a statistic of every parameter at once.

The per-parameter functions of :mod:`.signals` define each signal and statistic
(``parameter_signals``, ``movement``); here the histogram series logged at the same steps (the
usual case: every histogram of a step written together) are stacked into parameters x steps
arrays, and each is computed over the whole table in a few numpy calls instead of a few dozen
per parameter on arrays of a few steps: the same operations in the same order, so the same
numbers bit for bit (``tests/verdicts/test_table.py`` checks each against its definition on
real runs). What the table does not hold takes the per-parameter path: a series with steps of
its own still forms a table (of one), but a parameter with exact norms or non-finite counts
logged as scalars, several writers' series of one variable, or a step without quantiles (for
the movement) is computed alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

import numpy as np

from gradcheck.model import HistogramSeries, RunData, SeriesKey
from gradcheck.series.data import _QUANTILE_COLUMNS, COLUMN
from gradcheck.series.stats import wasserstein_from_quantiles
from gradcheck.verdicts.config import Config
from gradcheck.verdicts.numeric import nan_to_num, nanmedian, sorted_row_medians
from gradcheck.verdicts.pairing import ParameterTags
from gradcheck.verdicts.rules.base import baseline_size, keep_rms_early_and_late
from gradcheck.verdicts.rules.stopped import keep_stopped_index, stopped_from
from gradcheck.verdicts.signals import (
    DENSE_SHARE,
    GradientSignal,
    Movement,
    Parameter,
    WeightSignal,
    _gradient_signal,
    _weight_signal,
    confirmed,
    movement,
    parameter_signals,
    run_weight_spread,
    weight_scale,
)

_NO_STEPS = np.empty(0, dtype=np.int64)
_Row = TypeVar("_Row")


def signals(data: RunData, tags: Sequence[ParameterTags]) -> list[Parameter]:
    """``[parameter_signals(data, t) for t in tags]``: the gradients and weights that only
    histograms describe computed together, table by table (a parameter with other writers'
    series of its variable is not: ``parameter_signals`` confirms one by the others)."""
    alone = [not (t.weight_also or t.gradient_also) for t in tags]
    gradients = {
        i: key
        for i, t in enumerate(tags)
        if alone[i] and (key := _histogram_only(data, t.gradient, t.grad_norm, t.grad_nonfinite))
    }
    weights = {
        i: key
        for i, t in enumerate(tags)
        if alone[i] and (key := _histogram_only(data, t.weight, t.weight_norm, t.weight_nonfinite))
    }
    made_gradients = dict(
        zip(gradients, _by_table(data, gradients, _gradient_signals), strict=True)
    )
    made_weights = dict(zip(weights, _by_table(data, weights, _weight_signals), strict=True))
    return [
        _one_writers(data, t, made_gradients.get(i), made_weights.get(i))
        if alone[i]
        else parameter_signals(data, t)
        for i, t in enumerate(tags)
    ]


def _one_writers(
    data: RunData,
    tags: ParameterTags,
    gradient: GradientSignal | None,
    weight: WeightSignal | None,
) -> Parameter:
    """The parameter of one writer's series: its signals the table's where it made them."""
    return Parameter(
        tags,
        gradient if gradient is not None else _gradient_signal(data, tags),
        weight if weight is not None else _weight_signal(data, tags),
        (),
    )


def _histogram_only(
    data: RunData, key: SeriesKey | None, norm: str | None, nonfinite: str | None
) -> SeriesKey | None:
    """``key`` where its histogram series alone describes a signal (read, no exact norm and no
    non-finite count logged as scalars), else None."""
    if key is None or key not in data.histograms or not len(data.histograms[key]):
        return None
    if (norm is not None and norm in data.scalars) or (
        nonfinite is not None and nonfinite in data.scalars
    ):
        return None
    return key


class _Table:
    """Histogram series logged at the same steps, stacked: ``column(name)`` is a statistic
    over parameters x steps (float64, a copy: ``HistogramSeries.column`` of each, stacked)."""

    def __init__(self, series: list[HistogramSeries]) -> None:
        self.series = series
        self.steps = series[0].steps
        self.stats = np.stack([s.stats for s in series]).astype("float64")

    def column(self, name: str) -> np.ndarray:
        return np.ascontiguousarray(self.stats[:, :, COLUMN[name]])

    def quantile_grids(self) -> np.ndarray:
        """``HistogramSeries.quantile_grid`` of each: parameters x steps x 9, float64 (a copy)."""
        return self.stats[:, :, _QUANTILE_COLUMNS]

    def bad(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """Steps at which each series held NaN/Inf (``signals._histogram_bad``), and the mask."""
        bad = ~(self.column("nonfinite_share") == 0)
        if not bad.any():
            return bad, [_NO_STEPS] * len(self.series)
        return bad, [self.steps[row].astype(np.int64) for row in bad]

    def counts(self, require_finite: bool) -> list[float]:
        """Each series' median element count (NaN where it has none; with ``require_finite``,
        also where none of its counts is finite, as ``_gradient_signal`` asks)."""
        counts = self.column("count")
        found = _row_nanmedians(counts)
        if require_finite:
            finite = np.isfinite(counts).any(axis=1)
            return [c if ok else float("nan") for c, ok in zip(found, finite.tolist(), strict=True)]
        return found


def _tables(data: RunData, keys: Mapping[int, SeriesKey]) -> Iterator[tuple[_Table, list[int]]]:
    """The series of ``keys`` stacked by their steps, one table at a time (of a bounded size:
    :func:`_slices`): each table and the keys of its rows."""
    groups: dict[bytes, list[int]] = {}
    for i, key in keys.items():
        groups.setdefault(data.histograms[key].steps.tobytes(), []).append(i)
    for group in groups.values():
        width = data.histograms[keys[group[0]]].stats.size  # steps x statistics
        for rows in _slices(group, width):
            yield _Table([data.histograms[keys[i]] for i in rows]), rows


_BUDGET = 1 << 18
"""Values in one stacked array at most (2 MB of float64): the series of many parameters
logged at many steps are stacked a slice of rows at a time, so that judging a run holds little
more memory than its series."""


def _slices(rows: list[_Row], width: int) -> Iterator[list[_Row]]:
    """``rows`` in slices of at most :data:`_BUDGET` values, ``width`` values a row."""
    size = max(1, _BUDGET // max(width, 1))
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def _by_table(
    data: RunData, keys: Mapping[int, SeriesKey], made: Callable[[_Table], list[_Row]]
) -> list[_Row]:
    """``made`` of each table of ``keys``' series (one per row), in the order of ``keys``."""
    found: dict[int, _Row] = {}
    for table, rows in _tables(data, keys):
        found.update(zip(rows, made(table), strict=True))
    return [found[i] for i in keys]


def _gradient_signals(table: _Table) -> list[GradientSignal]:
    """``_gradient_signal`` of each histogram-only gradient series of ``table``."""
    bad, bad_steps = table.bad()
    counts = table.counts(require_finite=True)
    norm = table.column("l2_norm")
    bounds = np.fmax.reduce(table.column("l2_error_bound"), axis=1, initial=0.0).tolist()
    zero_share = table.column("zero_share")
    norm[~np.isfinite(norm) | bad] = np.nan
    rms = _sparse_rms(norm, counts, zero_share)
    return [
        GradientSignal(
            series.tag,
            series.steps,
            norm[at],
            rms[at],
            bad_steps[at],
            bounds[at] == 0.0,
            bounds[at],
            counts[at],
            series.histograms_read,
        )
        for at, series in enumerate(table.series)
    ]


def _sparse_rms(norm: np.ndarray, counts: list[float], zero_share: np.ndarray) -> np.ndarray:
    """``signals._sparse_rms`` of each row (its own count)."""
    count = np.array(counts)
    usable = np.isfinite(count) & (count > 0)
    rms = norm.copy()
    if usable.any():
        share = nan_to_num(zero_share[usable], nan=0.0)
        nonzero = np.where(share < DENSE_SHARE, 1.0 - share, 1.0)
        rms[usable] = norm[usable] / np.sqrt(count[usable, None] * nonzero)
    return rms


def _weight_signals(table: _Table) -> list[WeightSignal]:
    """``_weight_signal`` of each histogram-only weight series of ``table``."""
    _, bad_steps = table.bad()
    counts = table.counts(require_finite=False)
    norm = table.column("l2_norm")
    mean, std = table.column("mean"), table.column("std")
    quantiles = table.quantile_grids()
    return [
        WeightSignal(
            tag=series.tag,
            steps=series.steps,
            norm=norm[at],
            rms=norm[at] / np.sqrt(count) if count > 0 else norm[at],
            mean=mean[at],
            std=std[at],
            quantiles=quantiles[at],
            fingerprints=series.fingerprints,
            bad_steps=bad_steps[at],
            count=count,
            steps_logged=series.histograms_read,
        )
        for at, (series, count) in enumerate(zip(table.series, counts, strict=True))
    ]


def movements(parameters: Sequence[Parameter]) -> dict[str, Movement]:
    """Every parameter's weight movement (:func:`.signals.movement`, confirmed by other
    writers' series of its weights), by name; parameters without one are left out."""
    spread = run_weight_spread(list(parameters))
    weighted = [(p, weight) for p in parameters if (weight := p.weight) is not None]
    own = table_movements([weight for _, weight in weighted], spread)
    found = {}
    for (p, _), moved in zip(weighted, own, strict=True):
        others = [m for w in p.weight_also if (m := movement(w, spread)) is not None]
        if (m := confirmed(moved, others)) is not None:
            found[p.name] = m
    return found


def baselines(parameters: Sequence[Parameter], config: Config) -> None:
    """Each gradient's level (``GradientSignal.level``) and each signal's early and late
    baseline (:func:`.rules.base.rms_early_and_late`), for the signals of one length whose
    values are all finite at once, kept where the signals keep them; the others are found
    when first asked for."""
    groups: dict[int, list[GradientSignal | WeightSignal]] = {}
    for p in parameters:
        for signal in (p.gradient, p.weight):
            if signal is not None and signal.rms.size:
                groups.setdefault(signal.rms.size, []).append(signal)
    for length, group in groups.items():
        for signals in _slices(group, length):
            _keep_baselines(signals, length, config)


def _keep_baselines(
    signals: list[GradientSignal | WeightSignal], length: int, config: Config
) -> None:
    """:func:`baselines` of signals of ``length`` values."""
    rms = np.stack([s.rms for s in signals])
    finite = np.isfinite(rms).all(axis=1).tolist()
    size = baseline_size(length, config)
    early = sorted_row_medians(rms[:, :size]).tolist()
    late = sorted_row_medians(rms[:, -size:]).tolist()
    gradients = [i for i, signal in enumerate(signals) if isinstance(signal, GradientSignal)]
    levels = dict(zip(gradients, sorted_row_medians(rms[gradients]).tolist(), strict=True))
    every = np.arange(length)  # np.isfinite(rms).nonzero()[0] of each row
    every.flags.writeable = False
    for i, signal in enumerate(signals):
        if not finite[i]:
            continue
        keep_rms_early_and_late(signal, config, (early[i], late[i], every))
        if i in levels:  # a gradient's: its functools.cached_property
            signal.__dict__["level"] = levels[i]


def sgd_ratios(
    parameters: Sequence[Parameter], lr_steps: np.ndarray, lr_values: np.ndarray
) -> dict[str, float | None]:
    """:func:`.rules.slow.sgd_ratio` (the median ``lr * ||g|| / ||w||``) of the parameters
    whose gradient and weights were logged at the same steps, where every ratio is finite, by
    name; the others' is computed when asked for."""
    if not lr_steps.size or not lr_values.size:
        return {}
    groups: dict[bytes, list[tuple[str, GradientSignal, WeightSignal]]] = {}
    for p in parameters:
        gradient, weight = p.gradient, p.weight
        if gradient is not None and weight is not None and gradient.steps.size:
            key = gradient.steps.tobytes()
            if key == weight.steps.tobytes():
                groups.setdefault(key, []).append((p.name, gradient, weight))
    found: dict[str, float | None] = {}
    for rows in groups.values():
        for group in _slices(rows, rows[0][1].steps.size):
            found.update(_sgd_ratios(group, lr_steps, lr_values))
    return found


def _sgd_ratios(
    group: list[tuple[str, GradientSignal, WeightSignal]],
    lr_steps: np.ndarray,
    lr_values: np.ndarray,
) -> dict[str, float | None]:
    """:func:`sgd_ratios` of parameters whose gradients and weights share their steps."""
    found: dict[str, float | None] = {}
    steps = group[0][1].steps
    position = np.maximum(np.searchsorted(lr_steps, steps, side="right") - 1, 0)
    gradients = np.stack([gradient.norm for _, gradient, _ in group])
    weights = np.stack([weight.norm for _, _, weight in group])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = lr_values[position] * gradients / weights
    finite = np.isfinite(ratio).all(axis=1).tolist()
    medians = sorted_row_medians(ratio).tolist()
    for (name, _, _), ok, middle in zip(group, finite, medians, strict=True):
        if ok:
            found[name] = middle
    return found


def table_movements(weights: Sequence[WeightSignal], spread: float) -> list[Movement | None]:
    """``[movement(w, spread) for w in weights]``, the weights logged at the same steps with
    every step usable computed together."""
    found: list[Movement | None] = [None] * len(weights)
    groups: dict[bytes, list[int]] = {}
    for i, weight in enumerate(weights):
        steps = weight.steps.size
        if steps >= 2 and weight.fingerprints.size == steps:
            groups.setdefault(weight.steps.tobytes(), []).append(i)
    alone = set(range(len(weights)))
    slices = (
        rows
        for group in groups.values()
        for rows in _slices(group, weights[group[0]].quantiles.size)
    )
    for rows in slices:
        stacked = _Weights([weights[i] for i in rows])
        _keep_stops(stacked)
        usable = np.isfinite(stacked.grids).all(axis=(1, 2))
        if not usable.all():  # a step without quantiles: those parameters alone
            rows = [i for i, ok in zip(rows, usable.tolist(), strict=True) if ok]
            stacked = stacked.only(usable)
        if not rows:
            continue
        for i, moved in zip(rows, _moved(stacked, spread), strict=True):
            found[i] = moved
            alone.discard(i)
    for i in alone:
        found[i] = movement(weights[i], spread)
    return found


class _Weights:
    """Weights logged at the same steps, stacked: their quantile grids (parameters x steps x
    9), fingerprints and norms (parameters x steps)."""

    def __init__(self, weights: list[WeightSignal]) -> None:
        self.weights = weights
        self.grids = np.stack([w.quantiles for w in weights])
        self.prints = np.stack([w.fingerprints for w in weights])
        self.norms = np.stack([w.norm for w in weights])

    def only(self, rows: np.ndarray) -> _Weights:
        """The weights of the rows ``rows`` (a mask) is true of."""
        kept = _Weights.__new__(_Weights)
        kept.weights = [w for w, keep in zip(self.weights, rows.tolist(), strict=True) if keep]
        kept.grids, kept.prints, kept.norms = self.grids[rows], self.prints[rows], self.norms[rows]
        return kept

    def same_as(self, step: int) -> np.ndarray:
        """Parameters x steps: the histogram and the norm bit for bit those of ``step`` (a
        NaN norm the same as a NaN)."""
        prints, norms = self.prints, self.norms
        norm = norms[:, step, None]
        return (prints == prints[:, step, None]) & (
            (norms == norm) | (np.isnan(norms) & np.isnan(norm))
        )


def _moved(stacked: _Weights, spread: float) -> list[Movement]:
    """``movement`` of weights sharing their steps, every step usable, the first step theirs."""
    weights, grids, norms = stacked.weights, stacked.grids, stacked.norms
    count, steps, levels = grids.shape
    identical = np.all(stacked.same_as(0), axis=1)
    scales = [weight_scale(w, spread, 0) for w in weights]
    rows = grids.reshape(count * steps, levels)
    firsts = np.repeat(grids[:, 0, :], steps, axis=0)
    from_first = wasserstein_from_quantiles(rows, firsts).reshape(count, steps).max(axis=1)
    later = np.ascontiguousarray(grids[:, 1:, :]).reshape(-1, levels)
    earlier = np.ascontiguousarray(grids[:, :-1, :]).reshape(-1, levels)
    updates = wasserstein_from_quantiles(later, earlier).reshape(count, steps - 1)
    gap = (weights[0].steps[1:] - weights[0].steps[:-1]).astype(np.float64)
    step_update = sorted_row_medians(updates)
    update_ratio = sorted_row_medians(updates / np.maximum(gap, 1.0))
    norm_change = np.abs(norms - norms[:, :1]).max(axis=1)
    lowest = np.abs(grids[:, :, 0] - grids[:, :1, 0]).max(axis=1)
    highest = np.abs(grids[:, :, -1] - grids[:, :1, -1]).max(axis=1)
    found = []
    for i, (weight, (scale, source)) in enumerate(zip(weights, scales, strict=True)):
        if identical[i]:
            found.append(Movement(True, 0.0, 0.0, 0.0, scale, source))
            continue
        norm_scale = max(abs(float(norms[i, 0])), scale * np.sqrt(max(weight.count, 1.0)))
        found.append(
            Movement(
                bit_identical=False,
                from_first=float(from_first[i] / scale),
                norm_change=float(norm_change[i] / norm_scale),
                step_update=float(step_update[i]) / scale,
                scale=scale,
                scale_source=source,
                extremes_change=float(max(lowest[i], highest[i]) / scale),
                update_ratio=float(update_ratio[i]) / scale,
            )
        )
    return found


def _keep_stops(stacked: _Weights) -> None:
    """:func:`.rules.stopped.stopped_index` of weights sharing their steps, kept on each for
    the rule."""
    count = stacked.grids.shape[1]
    same = stacked.same_as(-1) & np.isfinite(stacked.grids).all(axis=2)
    moved = (~same).any(axis=1).tolist()
    firsts = (count - np.argmax(~same[:, ::-1], axis=1)).tolist()  # after the last change
    for weight, changed, first in zip(stacked.weights, moved, firsts, strict=True):
        keep_stopped_index(weight, stopped_from(first, count) if changed else None)


def _row_nanmedians(values: np.ndarray) -> list[float]:
    """``[numeric.nanmedian(row) for row in values]``: rows of finite values at once (numpy
    sorts each row as it sorts one array), the others (a NaN, an infinity) one by one."""
    found = sorted_row_medians(values).tolist()
    for i in np.flatnonzero(~np.isfinite(values).all(axis=1)).tolist():
        found[i] = nanmedian(values[i])
    return found
