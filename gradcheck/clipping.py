"""The run's global gradient norm over time: is it clipped, and what clip norm would fit.

The global norm comes from a scalar when the run logged one (``gradient_norm/global`` from
gradcheck's helpers, ``train/grad_norm`` from the HF Trainer, ...), else it is formed as
``sqrt(sum of squared per-parameter gradient norms)`` at the steps where every parameter's
gradient was logged. A norm *pinned at a constant ceiling* (a share of steps within a small
tolerance of the maximum) is what clip-by-global-norm leaves behind when gradients are logged
after clipping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcheck.config import Config
from gradcheck.model import ClipInfo, StepSeries
from gradcheck.series import RunData, ScalarSeries
from gradcheck.signals import Parameter, common_steps
from gradcheck.stats import median, percentile
from gradcheck.tags import scalar_roles

TREND_POINTS = 24
CHART_WINDOWS = 512
"""A chart's series longer than this many steps keeps, of each of this many windows, its
lowest and its highest point (1,024 points at most: a chart a few hundred pixels wide shows
no more, and every spike and dip is kept); a report of 200 parameters then holds ~7 MB of
series, not ~26 MB (measured, pickled)."""
MIN_AT_CEILING = {True: 2, False: 5}
"""Steps at the ceiling that a pinned norm needs, exact or estimated: within the estimate's 2%
tolerance, two or three noisy steps of an unclipped norm land near its maximum by chance (the
zoo's deep sigmoid run: 3 of 20 steps within 1%); five chance near-ties are unlikely."""


@dataclass(frozen=True, eq=False)
class GlobalNorm:
    """A global gradient norm series and where it came from."""

    source: str
    steps: np.ndarray
    values: np.ndarray
    exact: bool


def global_norms(data: RunData, parameters: list[Parameter]) -> list[GlobalNorm]:
    """Every global norm series the run offers: logged scalars first, then the formed one."""
    roles = scalar_roles(data.scalars)
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
    tolerance = config.clip_pinned_tolerance if exact else config.clip_pinned_tolerance_estimated
    at_ceiling = np.abs(finite - ceiling) <= tolerance * ceiling
    if at_ceiling.sum() >= MIN_AT_CEILING[exact] and at_ceiling.mean() >= config.clip_pinned_share:
        return ceiling
    return None


def clip_info(
    norms: list[GlobalNorm], config: Config, healthy_before: int | None
) -> ClipInfo | None:
    """Clipping summary of the first usable global norm; pinned if any of them is pinned."""
    usable = [g for g in norms if np.isfinite(g.values).sum() >= 3]
    if not usable:
        return None
    main = usable[0]
    pinned = [
        (g, c) for g in usable if (c := pinned_ceiling(g.values, config, g.exact)) is not None
    ]
    finite = main.values[np.isfinite(main.values)]
    healthy = main.values[np.isfinite(main.values)]
    healthy_steps = main.steps[np.isfinite(main.values)]
    if healthy_before is not None:
        healthy = healthy[healthy_steps < healthy_before]
    suggested, rule = _suggestion(healthy, config, healthy_before)
    source = main.source
    if pinned and pinned[0][0] is not main:
        source += f"; pinned in the {pinned[0][0].source}"
    return ClipInfo(
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
    )


def _suggestion(
    healthy: np.ndarray, config: Config, healthy_before: int | None
) -> tuple[float | None, str]:
    level = config.clip_suggest_percentile
    window = "all steps" if healthy_before is None else f"the steps before {healthy_before}"
    if healthy.size < 3:
        return None, f"too few healthy steps ({window}) to suggest a clip norm"
    value = percentile(healthy, level)
    rounded = float(f"{value:.2g}")
    rule = (
        f"{level:g}th percentile of the global norm over {healthy.size} healthy steps "
        f"({window}), 2 significant digits: only the largest {100 - level:g}% of healthy "
        "steps would be clipped"
    )
    return rounded, rule


def downsample(values: np.ndarray, points: int = TREND_POINTS) -> tuple[float, ...]:
    """At most ``points`` values for a sparkline: the largest of each bin, NaN if any is bad."""
    if values.size <= points:
        return tuple(values.tolist())
    # np.array_split's bins: the first ``size % points`` hold one value more.
    size, extra = divmod(values.size, points)
    starts = np.arange(points) * size + np.minimum(np.arange(points), extra)
    bad = ~np.isfinite(values)
    largest = np.maximum.reduceat(np.where(bad, -np.inf, values), starts)
    return tuple(np.where(np.add.reduceat(bad, starts) > 0, np.nan, largest).tolist())


def chart_series(
    label: str, steps: np.ndarray, values: np.ndarray, nonfinite_steps: np.ndarray
) -> StepSeries:
    """``values`` over ``steps`` for a chart: whole up to ``2 * CHART_WINDOWS`` steps, else the
    lowest and highest finite point of each window (a window of NaN keeps its first step, so
    the line breaks there). Every non-finite step is kept in ``nonfinite_steps``."""
    if values.size <= 2 * CHART_WINDOWS:
        return StepSeries(label, steps, values, nonfinite_steps)
    windows = np.array_split(np.arange(values.size), CHART_WINDOWS)
    keep: list[int] = []
    for window in windows:
        part = values[window]
        finite = np.isfinite(part)
        if not finite.any():
            keep.append(int(window[0]))
            continue
        masked = np.where(finite, part, np.nan)
        keep += sorted({int(window[np.nanargmin(masked)]), int(window[np.nanargmax(masked)])})
    index = np.array(keep)
    return StepSeries(label, steps[index], values[index], nonfinite_steps)
