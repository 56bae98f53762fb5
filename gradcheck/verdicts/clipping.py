"""The run's global gradient norm over time: is it clipped, and what clip norm would fit.

The global norm comes from a scalar when the run logged one (``gradient_norm/global`` from
gradcheck's helpers, ``train/grad_norm`` from the HF Trainer, ...), else it is formed as
``sqrt(sum of squared per-parameter gradient norms)`` at the steps where every parameter's
gradient was logged. A norm *pinned at a constant ceiling* (a share of steps within a small
tolerance of the maximum) is what clip-by-global-norm leaves behind when gradients are logged
after clipping.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from gradcheck.model import (
    GLOBAL_NORM_ROW,
    ClipInfo,
    ClipKind,
    HistogramSeries,
    RunData,
    ScalarSeries,
    StepSeries,
)
from gradcheck.tags.scalars import ScalarRole, scalar_roles
from gradcheck.verdicts.clip_advice import advice, guess_framework, noteworthy
from gradcheck.verdicts.config import Config
from gradcheck.verdicts.numeric import median, percentile
from gradcheck.verdicts.signals import GradientSignal, Parameter, common_steps

TREND_POINTS = 24
CHART_WINDOWS = 512
"""A chart's series longer than this many steps keeps, of each of this many windows, its
lowest and its highest point (1,024 points at most: a chart a few hundred pixels wide shows
no more, and every spike and dip is kept): a report of many parameters holds a few times
less (``bench/README.md``)."""
MIN_PINNED_SERIES = 2
"""Per-tensor and value clipping apply one ceiling to every parameter: two parameters pinned
at the same ceiling (or the run's only one) say so; a lone pinned series among several could
be a coincidence of that series."""
MIN_AT_CEILING = {True: 2, False: 5}
"""Steps at the ceiling that a pinned norm needs, exact or estimated: within the estimate's 2%
tolerance, two or three noisy steps of an unclipped norm land near its maximum by chance (the
zoo's deep sigmoid run: 3 of 20 steps within 1%); five chance near-ties are unlikely."""


@dataclass(eq=False)
class GlobalNorm:
    """A global gradient norm series and where it came from."""

    source: str
    steps: np.ndarray
    values: np.ndarray
    exact: bool


def global_norms(
    data: RunData, parameters: list[Parameter], roles: Mapping[str, ScalarRole] | None = None
) -> list[GlobalNorm]:
    """Every global norm series the run offers: logged scalars first, then the formed one
    (``roles``: the run's scalar roles, when the caller has them)."""
    roles = scalar_roles(data.scalars) if roles is None else roles
    found = [
        _from_scalar(s)
        for s in data.scalars.values()
        if (role := roles.get(s.tag)) is not None and role.kind == "global_grad_norm"
    ]
    found.sort(key=lambda g: (g.source != "scalar gradient_norm/global", g.source))
    formed = _formed(parameters)
    return [*found, formed] if formed is not None else found


def _from_scalar(series: ScalarSeries) -> GlobalNorm:
    return GlobalNorm(f"scalar {series.tag}", series.steps, series.values, exact=True)


def _formed(parameters: list[Parameter]) -> GlobalNorm | None:
    gradients = [p.gradient for p in parameters if p.gradient is not None]
    if not gradients:
        return None
    common = gradients[0].steps
    for gradient in gradients[1:]:
        common = common_steps(common, gradient.steps)[0]
    if common.size == 0:
        return None
    squares = np.zeros(common.size)
    for gradient in gradients:
        norms = gradient.norm[np.searchsorted(gradient.steps, common)]
        squares += norms * norms
    source = f"formed from {len(gradients)} gradient series"
    exact = all(g.exact for g in gradients)
    return GlobalNorm(source, common, np.sqrt(squares), exact)


def pinned_ceiling(values: np.ndarray, config: Config, exact: bool = True) -> float | None:
    """The ceiling a norm is pinned at, or None when it does not look clipped. A norm estimated
    from histogram buckets (``exact`` False) scatters around the ceiling by the estimate's
    error, so it gets the wider ``clip_pinned_tolerance_estimated``."""
    finite = values[np.isfinite(values) & (values > 0)]
    if finite.size < 3:
        return None
    ceiling = float(finite.max())
    tolerance = _tolerance(exact, config)
    at_ceiling = np.abs(finite - ceiling) <= tolerance * ceiling
    if at_ceiling.sum() >= MIN_AT_CEILING[exact] and at_ceiling.mean() >= config.clip_pinned_share:
        return ceiling
    return None


def clip_info(
    data: RunData,
    parameters: list[Parameter],
    norms: list[GlobalNorm],
    config: Config,
    healthy_before: int | None,
) -> ClipInfo | None:
    """Clipping summary of the first usable global norm: how the run clips (global norm, per
    tensor, by value, or not at all), how often, and where and how to clip (:mod:`clip_advice`)."""
    usable = [g for g in norms if np.isfinite(g.values).sum() >= 3]
    if not usable:
        return None
    main = usable[0]
    pinned = [
        (g, c) for g in usable if (c := pinned_ceiling(g.values, config, g.exact)) is not None
    ]
    finite = main.values[np.isfinite(main.values)]
    healthy_steps = main.steps[np.isfinite(main.values)]
    healthy = finite if healthy_before is None else finite[healthy_steps < healthy_before]
    suggested, rule = _suggestion(healthy, config, healthy_before)
    source = main.source
    if pinned and pinned[0][0] is not main:
        source += f"; pinned in the {pinned[0][0].source}"
    kind, clip_value, share = _kind(data, parameters, main, pinned, config)
    if kind in ("per_tensor_norm", "value") or (pinned and pinned[0][0] is main):
        # the norm was logged after a clip: its percentiles describe the clip, not the run
        suggested = None
        rule = "the logged norm is already clipped: log it before clipping for a suggestion"
    info = ClipInfo(
        source=source,
        steps=(int(main.steps[0]), int(main.steps[-1])),
        median=median(finite),
        p99=percentile(finite, 99),
        maximum=float(main.values.max()) if np.isfinite(main.values).all() else float("nan"),
        clipped=bool(pinned),
        ceiling=pinned[0][1] if pinned else None,
        suggested_clip_norm=suggested,
        rule=rule,
        trend=downsample(main.values),
        series=StepSeries(
            "global gradient L2 norm",
            main.steps,
            main.values,
            main.steps[~np.isfinite(main.values)],
        ),
        kind=kind,
        clip_value=clip_value,
        clipped_share=share,
        suggested_share=None if suggested is None else float(np.mean(healthy > suggested)),
        framework=guess_framework(data, parameters),
    )
    return dataclasses.replace(
        info, advice=advice(info, config), noteworthy=noteworthy(info, config)
    )


def _kind(
    data: RunData,
    parameters: list[Parameter],
    main: GlobalNorm,
    pinned: list[tuple[GlobalNorm, float]],
    config: Config,
) -> tuple[ClipKind | None, float | None, float | None]:
    """The kind of clipping, its ceiling, and the share of steps it acts on. Value and
    per-tensor clipping come first: each pins every clipped parameter's own numbers, and
    per-tensor clipping of every parameter pins the global norm too, while clipping the global
    norm leaves each parameter's share of it free."""
    gradients = [
        p.gradient for p in parameters if p.gradient is not None and p.name != GLOBAL_NORM_ROW
    ]
    histograms = [
        h for p in parameters if p.tags.gradient and (h := data.histograms.get(p.tags.gradient))
    ]
    value = _common_ceiling([_value_pin(h, config) for h in histograms], config)
    if value is not None:
        return "value", *value
    per_tensor = _common_ceiling([_norm_pin(g, config) for g in gradients], config)
    if per_tensor is not None:
        return "per_tensor_norm", *per_tensor
    if not pinned:
        return None, None, None
    where, ceiling = pinned[0]
    tolerance = _tolerance(where.exact, config)
    values = main.values[np.isfinite(main.values)]
    if where is main:  # logged after clipping: the steps held at the ceiling
        acted = np.abs(values - ceiling) <= tolerance * ceiling
    else:  # a pre-clip norm beside post-clip gradients: the steps above the ceiling
        acted = values > ceiling * (1 + tolerance)
    return "global_norm", ceiling, float(acted.mean())


Pin = tuple[float, np.ndarray, np.ndarray]
"""A series pinned at a ceiling: the ceiling, the series' steps, and which of them are at it."""


def _tolerance(exact: bool, config: Config) -> float:
    return config.clip_pinned_tolerance if exact else config.clip_pinned_tolerance_estimated


def _norm_pin(gradient: GradientSignal, config: Config) -> Pin | None:
    """A parameter's own gradient norm pinned at a ceiling (per-tensor clipping)."""
    ceiling = pinned_ceiling(gradient.norm, config, gradient.exact)
    if ceiling is None:
        return None
    at = np.abs(gradient.norm - ceiling) <= _tolerance(gradient.exact, config) * ceiling
    return ceiling, gradient.steps, at


def _value_pin(histogram: HistogramSeries, config: Config) -> Pin | None:
    """A gradient histogram whose largest magnitude sits at one value ±c at many steps (the
    exact min/max of the histogram, not its buckets): clipping by value."""
    magnitude = np.fmax(np.abs(histogram.column("min")), np.abs(histogram.column("max")))
    ceiling = pinned_ceiling(magnitude, config)
    if ceiling is None:
        return None
    return (
        ceiling,
        histogram.steps,
        np.abs(magnitude - ceiling) <= config.clip_pinned_tolerance * ceiling,
    )


def _common_ceiling(pins: list[Pin | None], config: Config) -> tuple[float, float] | None:
    """The ceiling that most pinned series share (at least ``MIN_PINNED_SERIES`` of them, or
    the only series), and the share of their steps at which any of them sits at it."""
    found = [pin for pin in pins if pin is not None]
    needed = min(MIN_PINNED_SERIES, len(pins))
    if not found or needed == 0:
        return None
    tolerance = config.clip_pinned_tolerance_estimated
    group = _largest_group(found, tolerance)
    if len(group) < needed:
        return None
    steps = np.unique(np.concatenate([pin[1] for pin in group]))
    acted = np.zeros(steps.size, dtype=bool)
    for _, pin_steps, at in group:
        acted[np.searchsorted(steps, pin_steps[at])] = True
    return median(np.array([pin[0] for pin in group])), float(acted.mean())


def _largest_group(pins: list[Pin], tolerance: float) -> list[Pin]:
    """The pins whose ceiling is within ``tolerance`` of one pin's, for the first pin (in
    ``pins``' order) that gathers the most. Each pin's count is two binary searches over the
    sorted ceilings (a scan of every other pin per pin made per-tensor clipping of 20,000
    parameters quadratic): ``other - ceiling`` rises with ``other`` (rounding is monotone), so
    the ceilings with ``abs(other - ceiling) <= tolerance * ceiling`` are one stretch of them."""
    ordered = sorted(pin[0] for pin in pins)
    best, most = pins[0], 0
    for pin in pins:
        ceiling, width = pin[0], tolerance * pin[0]
        low = bisect.bisect_left(ordered, -width, key=lambda other: other - ceiling)
        high = bisect.bisect_right(ordered, width, key=lambda other: other - ceiling)
        if high - low > most:
            best, most = pin, high - low
    return [other for other in pins if abs(other[0] - best[0]) <= tolerance * best[0]]


def steps_for_percentile(level: float) -> int:
    """The fewest values whose ``level``-th percentile is an estimate rather than their
    maximum: among n values, the top ``(1 - level/100) * n`` lie above it, at least one value
    when n >= 1 / (1 - level/100) (20 for the 95th). Fewer, and the "percentile" is an
    interpolation between the largest values of a handful of steps (the suggestion rested on
    4 logged steps before). At least 3."""
    share_above = 1.0 - level / 100.0
    if share_above <= 0:
        return 3
    return max(3, math.ceil(1.0 / share_above - 1e-9))


def _suggestion(
    healthy: np.ndarray, config: Config, healthy_before: int | None
) -> tuple[float | None, str]:
    level = config.clip_suggest_percentile
    window = "all steps" if healthy_before is None else f"the steps before {healthy_before}"
    needed = steps_for_percentile(level)
    if healthy.size < needed:
        return None, (
            f"too few healthy steps ({healthy.size}, {window}) to suggest a clip norm: a "
            f"{level:g}th percentile needs {needed}"
        )
    value = percentile(healthy, level)
    rounded = float(f"{value:.2g}")
    rule = (
        f"{level:g}th percentile of the global norm over {healthy.size} healthy steps "
        f"({window}), 2 significant digits"
    )
    return rounded, rule


def downsample(values: np.ndarray, points: int = TREND_POINTS) -> tuple[float, ...]:
    """At most ``points`` values for a sparkline: the largest of each bin, NaN if any is bad."""
    if values.size <= points:
        return tuple(values.tolist())
    starts = _bin_starts(values.size, points)
    bad = ~np.isfinite(values)
    largest = np.maximum.reduceat(np.where(bad, -np.inf, values), starts)
    return tuple(np.where(np.add.reduceat(bad, starts) > 0, np.nan, largest).tolist())


def _bin_starts(size: int, points: int) -> np.ndarray:
    """Where each of ``points`` bins of ``size`` values starts: ``np.array_split``'s bins (the
    first ``size % points`` hold one value more)."""
    each, extra = divmod(size, points)
    return np.arange(points) * each + np.minimum(np.arange(points), extra)


def chart_series(
    label: str, steps: np.ndarray, values: np.ndarray, nonfinite_steps: np.ndarray
) -> StepSeries:
    """``values`` over ``steps`` for a chart: whole up to ``2 * CHART_WINDOWS`` steps, else the
    lowest and highest finite point of each window (the first of equal ones; a window of NaN
    keeps its first step, so the line breaks there). Every non-finite step is kept in
    ``nonfinite_steps``. Vectorised over the windows (a loop over them was most of a
    ``gradcheck watch`` update: ``bench/README.md``)."""
    if values.size <= 2 * CHART_WINDOWS:
        return StepSeries(label, steps, values, nonfinite_steps)
    starts = _bin_starts(values.size, CHART_WINDOWS)
    window = np.repeat(np.arange(CHART_WINDOWS), np.diff(np.append(starts, values.size)))
    finite = np.isfinite(values)
    any_finite = np.logical_or.reduceat(finite, starts)

    def first_extreme(extreme: np.ufunc, fill: float) -> np.ndarray:
        masked = np.where(finite, values, fill)
        hits = np.flatnonzero(finite & (masked == extreme.reduceat(masked, starts)[window]))
        first = np.full(CHART_WINDOWS, -1)
        first[window[hits[::-1]]] = hits[::-1]  # assigned last to first: the first one stays
        return first

    lowest, highest = first_extreme(np.minimum, np.inf), first_extreme(np.maximum, -np.inf)
    earlier = np.where(any_finite, np.minimum(lowest, highest), starts)
    later = np.where(any_finite & (lowest != highest), np.maximum(lowest, highest), -1)
    index = np.stack([earlier, later], axis=1).ravel()
    index = index[index >= 0]
    return StepSeries(label, steps[index], values[index], nonfinite_steps)
