"""The onset of a change: where a series' blow-up (or a loss's divergence) began.

One rule, used by every verdict that dates a rise (``exploding``'s gradient and weight rises,
``diverging``'s training loss, the loss's rise into a NaN):

1. **The crossing**: the first logged step of the episode that crossed the verdict's threshold.
2. **The departure**: the first logged step of the stretch, up to the crossing, in which every
   value stays above the band of the level before it. The level at a step is that of the
   ``window`` logged values before the candidate step: their median or, where they follow a
   steady linear trend in steps (a ramp, as accumulated gradients or a learning-rate warm-up
   give; its slope more than :data:`TREND_SIGNIFICANCE` standard errors above zero), that trend
   extrapolated to the step. The band is :data:`NEAR_BASELINE` times the level, wider for a
   noisy series (``exp(NOISE_MARGIN x`` the spread of the window's logs around the level)). A
   ramp is therefore the level, not the start of the later blow-up; a rise that comes back
   into the band before the crossing is not the departure. The search walks back from the
   crossing and stops at the first value back within the band of its own level: a value of
   the climb whose window already holds the climb's first values (the level follows the
   climb) does not stop it.
3. **The climb into it**: from the departure back over the steps that climb, each at least
   :data:`RISE_STEP` times the one before, beyond the series' noise (``NOISE_MARGIN`` times
   the spread of its step-to-step log changes around their median) and above each of the
   ``window`` values before it (a climb sets new highs; a noisy step up does not): a smooth
   climb starts below the band. The onset is the first step above the climb's lowest value,
   or the first logged step when the series climbs from it (a learning rate too large from
   the start: nothing before it was normal).

The events of several series (the layers of one blow-up) get one onset: :func:`event_onsets`.

The band and the margins are those the exploding rule used before (2x the early level, 10% per
step, twice the noise); the trend test is the usual t-test of a least-squares slope: more
than 3 standard errors is a trend, not noise, at any number of steps a window holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gradcheck.verdicts.numeric import median, row_medians

NEAR_BASELINE = 2.0
"""A value within this factor of the level before it has not departed from it."""
RISE_STEP = 1.1
"""A step of a climb is at least this many times the one before it."""
NOISE_MARGIN = 2.0
"""... and beyond this many times the series' noise (on a log scale)."""
MIN_NOISE_CHANGES = 3
"""Step-to-step changes needed to measure the noise; with fewer, no climb is walked."""
TREND_SIGNIFICANCE = 3.0
"""A window's least-squares slope more than this many standard errors above zero is a trend."""
MIN_TREND_VALUES = 5
"""Values a window needs before a trend is fitted to it."""
MAD_TO_SIGMA = 1.4826
"""The median absolute deviation of a normal sample times this estimates its standard
deviation."""


@dataclass(eq=False)
class Level:
    """The level of a window of values before a candidate departure."""

    median: float
    intercept: float = 0.0
    slope: float = 0.0  # per step; 0 without a significant trend
    band: float = NEAR_BASELINE  # a value above ``band`` times the level has departed

    def at(self, steps: np.ndarray) -> np.ndarray:
        """The level at ``steps``: the median, or the trend where it is higher."""
        if self.slope <= 0:
            return np.full(steps.shape, self.median)
        return np.maximum(self.median, self.intercept + self.slope * steps)


def level_of(values: np.ndarray, steps: np.ndarray) -> Level:
    """The level of a window of positive finite ``values`` logged at ``steps``."""
    middle = median(values)
    slope = intercept = 0.0
    if values.size >= MIN_TREND_VALUES:
        slope, intercept = _trend(values, steps.astype(np.float64))
    level = Level(middle, intercept, slope)
    if values.size >= MIN_TREND_VALUES:
        residuals = np.log(values / level.at(steps))
        spread = MAD_TO_SIGMA * median(np.abs(residuals - median(residuals)))
        band = max(NEAR_BASELINE, math.exp(NOISE_MARGIN * spread))
        level = Level(middle, intercept, slope, band)
    return level


def _trend(values: np.ndarray, steps: np.ndarray) -> tuple[float, float]:
    """Slope and intercept of the least-squares line through the window, when the slope is
    significantly positive (else zeros)."""
    centred = steps - steps.mean()
    spread = float((centred * centred).sum())
    if not spread > 0:
        return 0.0, 0.0
    slope = float((centred * (values - values.mean())).sum()) / spread
    intercept = float(values.mean()) - slope * float(steps.mean())
    residuals = values - (intercept + slope * steps)
    dof = values.size - 2
    error = math.sqrt(float((residuals * residuals).sum()) / dof / spread)
    if slope > 0 and slope > TREND_SIGNIFICANCE * error:
        return slope, intercept
    return 0.0, 0.0


def departure(
    values: np.ndarray, steps: np.ndarray, crossing: int, window: int, early: float
) -> int:
    """Position (in ``values``: positive and finite, in step order) of the first value of the
    sustained departure that reaches ``crossing`` (rule 2 of the module docstring): the
    latest stretch of values, before the crossing, that each start a stretch up to it above
    the band of the level before them (the crossing itself when none does). A value with
    fewer than ``window`` values before it is held against ``early`` (the early baseline,
    within 2x), as the exploding rule's threshold is."""
    if crossing < 1:
        return crossing
    # necessary (the level is at least the window's median, the band at least 2x), for all
    # at once: only these few are tried one by one
    before = np.empty(crossing + 1)
    before[: min(window, crossing + 1)] = early
    if crossing >= window:
        views = np.lib.stride_tricks.sliding_window_view(values[:crossing], window)
        before[window:] = row_medians(views)
    ahead_min = np.minimum.accumulate(values[: crossing + 1][::-1])[::-1]
    possible = ahead_min > NEAR_BASELINE * before
    found = None
    for k in range(crossing, 0, -1):
        departs = bool(possible[k]) and _departs(values, steps, k, crossing, window, early)
        if departs:
            found = k
        elif found is not None and (
            values[k] <= NEAR_BASELINE * before[k] or _in_band(values, steps, k, window, early)
        ):
            break  # back at its level: the stretch before it is another episode
    return crossing if found is None else found


def _in_band(values: np.ndarray, steps: np.ndarray, k: int, window: int, early: float) -> bool:
    """Whether the value at ``k`` is within the band of the median of the values before it
    (not of their trend: a window that holds the first values of an exponential climb has a
    steep linear trend that would take the climb for its level). A value above it that does
    not start a departure (a later value of the climb dips below the band of a level that
    already holds the climb's first values) is part of the same climb: the search goes on
    past it."""
    before = slice(k - window, k)
    level = Level(early) if k < window else level_of(values[before], steps[before])
    return bool(values[k] <= level.band * level.median)


def _departs(
    values: np.ndarray, steps: np.ndarray, k: int, crossing: int, window: int, early: float
) -> bool:
    """Whether every value from ``k`` to ``crossing`` is above the band of the level before
    ``k``."""
    before = slice(k - window, k)
    level = Level(early) if k < window else level_of(values[before], steps[before])
    ahead = values[k : crossing + 1]
    return bool((ahead > level.band * level.at(steps[k : crossing + 1])).all())


def climb_start(values: np.ndarray, index: int, window: int) -> int:
    """The first position of the climb that reaches ``index`` (rule 3 of the module
    docstring), in positive finite ``values``; ``index`` itself without enough values before
    it to measure the noise."""
    logs = np.log(values[: index + 1])
    changes = np.diff(logs[:index])  # before the departure
    if changes.size < MIN_NOISE_CHANGES:
        return index
    centre = median(changes)
    noise = median(np.abs(changes - centre))
    least = max(math.log(RISE_STEP), NOISE_MARGIN * noise)
    start = index
    while index > 0 and logs[index] - logs[index - 1] >= least and _new_high(values, index, window):
        index -= 1
    if index == 0:
        return 0  # climbing from the first logged value: unstable from the start
    return min(index + 1, start)  # the first value above the climb's lowest


def _new_high(values: np.ndarray, index: int, window: int) -> bool:
    """Whether the value at ``index`` is above each of the ``window`` values before it: a
    climb sets new highs, a noisy step up within the earlier range does not."""
    return bool(values[index] > values[max(0, index - window) : index].max())


def onset_position(
    values: np.ndarray, steps: np.ndarray, crossing: int, window: int, early: float
) -> int:
    """Where the episode crossing at ``crossing`` began: the climb into its departure."""
    return climb_start(values, departure(values, steps, crossing, window, early), window)
