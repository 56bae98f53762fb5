"""Transient spikes of the training loss, and the parameters whose gradients led each one.

A spike (:class:`gradcheck.model.Spike`) is a logged loss at least ``spike_factor`` times the
median of the previous ``spike_window`` logged losses, standing out of their noise
(``spike_noise``), that comes back below ``spike_recovery`` times that median within
``spike_window`` logged steps: a loss that does not come back diverges, which the blow-up
verdicts judge (``diverging``, ``exploding``, ``nan``), and from the onset of the run's
blow-up on (the shared onset rule's, :mod:`gradcheck.verdicts.onset`) no spike is listed.
Its leaders are the parameters whose gradient norm, at the spike's step or the logged step
before it, rose most over their own median of the previous ``spike_window`` logged gradient
steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gradcheck.model import GLOBAL_NORM_ROW, ScalarSeries, Spike, StepSeries
from gradcheck.verdicts.clipping import chart_series
from gradcheck.verdicts.config import Config
from gradcheck.verdicts.numeric import median
from gradcheck.verdicts.signals import GradientSignal, Parameter

MAX_LEADERS = 5
"""Parameters named as a spike's leaders at most (the largest rises)."""
MIN_HISTORY = 3
"""Logged gradient steps before a step that its own median needs at least."""


@dataclass(eq=False)
class Episode:
    """A spike of the loss found in its finite values: positions in them, and its size."""

    start: int  # the first value at or above the threshold
    end: int  # the first value back below the recovery level
    baseline: float  # the median of the window before ``start``
    peak: float  # the largest value from ``start`` to ``end``


def loss_spikes(
    loss: ScalarSeries | None,
    parameters: Sequence[Parameter],
    config: Config,
    blow_up_step: int | None = None,
) -> tuple[Spike, ...]:
    """The training loss's transient spikes in step order, each with its leaders (empty
    without a loss, or for a loss that is not a positive quantity: a GAN's, a likelihood's).
    ``blow_up_step``: the onset of the run's blow-up (``diverging``'s, or the first ``nan`` or
    ``exploding`` onset or the loss's rise into it), from which on the loss is the blow-up's:
    a spike counts only when it came back before it."""
    if loss is None or not len(loss):
        return ()
    finite = np.isfinite(loss.values)
    steps, values = loss.steps[finite], loss.values[finite]
    if not values.size or (values < 0).any():
        return ()
    gradients = [
        (p.name, p.gradient)
        for p in parameters
        if p.gradient is not None and p.name != GLOBAL_NORM_ROW
    ]
    found = episodes(values, config)
    if blow_up_step is not None:
        found = [episode for episode in found if int(steps[episode.end]) < blow_up_step]
    return tuple(_spike(episode, steps, gradients, config) for episode in found)


def episodes(values: np.ndarray, config: Config) -> list[Episode]:
    """The spikes of a positive series (finite values in step order)."""
    window = config.spike_window
    found: list[Episode] = []
    at = window
    while at < values.size:
        before = values[at - window : at]
        baseline = median(before)
        high = baseline > 0 and values[at] >= config.spike_factor * baseline
        if not (high and _above_noise(values[at], before, baseline, config.spike_noise)):
            at += 1
            continue
        after = values[at + 1 : at + 1 + window]
        back = np.flatnonzero(after < config.spike_recovery * baseline)
        if not back.size:  # not back within the window (or the log ends first): no spike,
            # and nothing in its slow way back is one (its tail against the window it fills)
            later = np.flatnonzero(values[at + 1 :] < config.spike_recovery * baseline)
            at = at + 1 + int(later[0]) if later.size else values.size
            continue
        end = at + 1 + int(back[0])
        found.append(Episode(at, end, baseline, float(values[at:end].max())))
        at = end
    return found


ROBUST_SIGMA = 1.4826
"""A normal distribution's standard deviation over its median absolute deviation."""


def _above_noise(value: float, before: np.ndarray, baseline: float, cutoff: float) -> bool:
    """Whether ``value``'s log is at least ``cutoff`` robust standard deviations above the
    median log of ``before`` (the modified z-score; values clipped at 1e-6 of the baseline
    so that an exact zero has a log)."""
    logs = np.log(np.maximum(before, baseline * 1e-6))
    centre = median(logs)
    spread = ROBUST_SIGMA * median(np.abs(logs - centre))
    return bool(np.log(value) - centre >= cutoff * spread)


def _spike(
    episode: Episode,
    steps: np.ndarray,
    gradients: list[tuple[str, GradientSignal]],
    config: Config,
) -> Spike:
    step = int(steps[episode.start])
    before = int(steps[episode.start - 1])
    ratio = episode.peak / episode.baseline
    candidates = (step, before)
    rises = [
        (rise, at, name)
        for name, gradient in gradients
        if (found := _rise(gradient, candidates, config.spike_window)) is not None
        for rise, at in [found]
    ]
    if not rises:
        where = "" if gradients else " (the run logs none per parameter)"
        note = f"no gradient logged at step {step} or the logged step before ({before}){where}"
        return Spike(step, ratio, (), note=note)
    rises.sort(key=lambda item: (-item[0], item[2]))
    top, top_step, _ = rises[0]
    floor = max(config.spike_lead_rise, top / 2)
    leaders = tuple(name for rise, _, name in rises if rise >= floor)[:MAX_LEADERS]
    if not leaders:
        note = (
            f"no parameter's gradient norm rose to {config.spike_lead_rise:g}x its median at "
            f"step {step} or {before} (the largest rise: {top:.3g}x)"
        )
        return Spike(step, ratio, (), gradient_step=top_step, rise=top, note=note)
    return Spike(step, ratio, leaders, gradient_step=top_step, rise=top)


def _rise(
    gradient: GradientSignal, candidates: tuple[int, int], window: int
) -> tuple[float, int] | None:
    """The largest of the gradient norm's rises over its own median of the previous
    ``window`` logged steps, at the ``candidates`` steps it was logged at, and where."""
    best: tuple[float, int] | None = None
    for step in candidates:
        at = int(np.searchsorted(gradient.steps, step))
        if at >= gradient.steps.size or int(gradient.steps[at]) != step:
            continue
        history = gradient.norm[max(0, at - window) : at]
        history = history[np.isfinite(history)]
        value = float(gradient.norm[at])
        if history.size < MIN_HISTORY or not np.isfinite(value):
            continue
        level = median(history)
        if not level > 0:
            continue
        rise = value / level
        if best is None or rise > best[0]:
            best = (rise, step)
    return best


def loss_chart(loss: ScalarSeries | None) -> StepSeries | None:
    """The training loss at every logged step, for the HTML report's chart."""
    if loss is None or not len(loss):
        return None
    nonfinite = loss.steps[~np.isfinite(loss.values)]
    return chart_series(f"training loss ({loss.tag})", loss.steps, loss.values, nonfinite)
