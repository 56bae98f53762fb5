"""Weights that blew up from their initial scale before the early baseline could see it.

Every baseline of the rules is the median of the first 10% (at least 3) logged values: with
sparse logging (the HF Trainer logs every 500 steps by default) a blow-up between the first and
the second logged step is already inside it, and nothing rises above it afterwards. The first
logged weights are the initialisation (or the pretrained start), though, and how far weights can
move from it is bounded by the optimizer: Adam moves each element by about the learning rate per
step (exactly ``lr * sign(g)`` at its first step), SGD by ``lr * g``. A standard-initialised
matrix (RMS ``1/sqrt(fan_in)``, or GPT-2's 0.02) grows 100x only when the updates are 100x its
initial scale: with Adam at a usual 1e-3, ``99 * 0.02 / 1e-3`` = 2,000 steps all in one
direction. Over some 300 runs (the corpus, the sample and test runs, the zoo and the held-out
runs) no healthy weight that started non-zero grew more than 33x (a CNN's bias under SGD with
momentum; a GPT-2's matrices 26x at Adam's lr 0.05, a GAN's recovery network 24x), and no run
that had not blown up otherwise had more than one weight past 100x. The HF Trainer at lr 5
grows every matrix 500-2,500x in its first 5 steps.

Parameters that legitimately grow by orders of magnitude from their start start at zero or
near it: zero-initialised biases, LoRA's B, ReZero's alpha, a zero-initialised last layer (no
scale to grow from: left out), LayerScale at 1e-6 (CaiT, ConvNeXt), a normalisation gain. They
are few among a model's weights, so the blow-up is judged over the model: more than
``weight_blow_up_share`` of the weights that started non-zero (at least two) grew
``weight_growth_factor`` x their first logged value and stayed there to the end of the log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from gradcheck.verdicts import hints
from gradcheck.verdicts.config import Config
from gradcheck.verdicts.onset import MIN_TREND_VALUES, onset_position
from gradcheck.verdicts.rules.base import baseline_size
from gradcheck.verdicts.signals import Parameter, WeightSignal

MIN_GROWN = 2
"""A blow-up of the model's weights needs at least this many of them grown: one weight alone
may be a tiny-initialised one waking up."""
MIN_VALUES_ABOVE = 2
"""... each at or above the factor at this many logged steps at least (a value at the end of
the log alone is no sustained state)."""


@dataclass(eq=False)
class StartGrowth:
    """A weight that grew far above its first logged scale and stayed there."""

    first: float  # the first logged RMS (or norm, for norms logged as scalars)
    first_step: int
    crossing_step: int  # the first logged step of the stretch at or above the factor
    onset_step: int  # where the growth began (:mod:`.onset`)
    before_onset_step: int  # the logged step before it: the growth began after it
    steps_above: int
    peak: float  # the largest value over the first
    last: float  # the last value over the first


@dataclass(eq=False)
class StartGrowths:
    """The run's weights that grew far from their start, and how many could."""

    grown: Mapping[str, StartGrowth] = field(default_factory=dict)
    started: int = 0  # weights with a positive finite first value (not BatchNorm statistics)
    share: float = 0.5

    @property
    def model_wide(self) -> bool:
        """Whether enough of the model's weights grew to call it a blow-up."""
        count = len(self.grown)
        return count >= MIN_GROWN and count > self.share * self.started


NONE = StartGrowths()


def start_growths(parameters: Sequence[Parameter], config: Config) -> StartGrowths:
    """Every parameter's growth from its first logged weights (see the module docstring)."""
    grown = {}
    started = 0
    for parameter in parameters:
        weight = parameter.weight
        if weight is None or hints.parameter_kind(parameter.name) == "bn_moving":
            continue  # BatchNorm statistics follow the activations' scale: not learned weights
        values = weight.rms[np.isfinite(weight.rms)]
        if values.size < 2 or not values[0] > 0:
            continue
        started += 1
        found = start_growth(weight, config)
        if found is not None:
            grown[parameter.name] = found
    return StartGrowths(grown, started, config.weight_blow_up_share)


def start_growth(weight: WeightSignal, config: Config) -> StartGrowth | None:
    """The growth of ``weight`` to ``weight_growth_factor`` x its first logged value, held
    from a logged step to the end of the log (None without one)."""
    finite = np.isfinite(weight.rms)
    values, steps = weight.rms[finite], weight.steps[finite]
    first = float(values[0])
    ratio = values / first
    factor = config.weight_growth_factor
    held = np.minimum.accumulate(ratio[::-1])[::-1] >= factor  # from here to the end
    crossings = np.flatnonzero(held[1:]) + 1
    if not crossings.size or values.size - int(crossings[0]) < MIN_VALUES_ABOVE:
        return None
    crossing = int(crossings[0])
    window = max(MIN_TREND_VALUES, baseline_size(values.size, config))
    onset = onset_position(values, steps, crossing, window, first)
    return StartGrowth(
        first=first,
        first_step=int(steps[0]),
        crossing_step=int(steps[crossing]),
        onset_step=int(steps[onset]),
        before_onset_step=int(steps[max(onset - 1, 0)]),
        steps_above=values.size - crossing,
        peak=float(ratio.max()),
        last=float(ratio[-1]),
    )
