"""exploding: a gradient norm far above its early baseline (sustained or spiking), gradients
dwarfing their weights, or weights blowing up when no gradient was logged. Never while clipping
holds the global norm."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcheck import hints
from gradcheck.clipping import pinned_ceiling
from gradcheck.config import Config
from gradcheck.rules.base import (
    Finding,
    RunContext,
    baseline_size,
    early_and_late,
    fmt,
    severity,
)
from gradcheck.signals import Parameter

NEAR_BASELINE = 2.0  # a rise starts after the last step within 2x of the baseline


@dataclass(frozen=True)
class Rise:
    """A rise of a series far above its early baseline."""

    baseline: float
    peak_ratio: float
    onset_step: int
    first_above_step: int
    last_above_step: int  # last step of the qualifying episode
    steps_above: int
    into_nonfinite: bool


def find_rise(
    values: np.ndarray, steps: np.ndarray, bad_steps: np.ndarray, config: Config
) -> Rise | None:
    """The first sustained rise (or spike) above ``explode_factor`` x the early baseline."""
    positive = np.where(values > 0, values, np.nan)
    finite = np.flatnonzero(np.isfinite(positive))
    if finite.size < 3:
        return None
    baseline = float(np.median(positive[finite[: baseline_size(finite.size, config)]]))
    ratio = positive / baseline
    above = np.nan_to_num(ratio, nan=0.0) >= config.explode_factor
    bad = np.isin(steps, bad_steps)
    last_finite = int(finite[-1])
    for start, end in _episodes(above):
        onset = _onset(ratio, start)
        if onset == 0 and not ratio[0] <= NEAR_BASELINE:
            continue  # high from the first step on: a decay towards the baseline, not a rise
        runs_into_bad = end < values.size and (bool(bad[end]) or end > last_finite)
        sustained = end - start >= config.explode_sustain_steps or runs_into_bad
        sustained |= end - 1 == last_finite and end - start >= 2
        spike = float(np.nanmax(ratio[start:end])) >= config.explode_spike_factor
        if sustained or spike:
            return Rise(
                baseline=baseline,
                peak_ratio=float(np.nanmax(ratio[start:])),
                onset_step=int(steps[onset]),
                first_above_step=int(steps[start]),
                last_above_step=int(steps[end - 1]),
                steps_above=int(above[start:].sum()),
                into_nonfinite=runs_into_bad,
            )
    return None


def _episodes(mask: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` index ranges where ``mask`` is True."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True))


def _onset(ratio: np.ndarray, first_above: int) -> int:
    """The index after the last step within 2x of the baseline before ``first_above``."""
    index = first_above
    while index > 0 and np.isfinite(ratio[index - 1]) and ratio[index - 1] > NEAR_BASELINE:
        index -= 1
    return index


def find_exploding(parameter: Parameter, context: RunContext) -> Finding | None:
    """Gradient norm far above its early baseline, gradients dwarfing weights, or weights
    blowing up when no gradient was logged. Not while clipping holds the global norm."""
    if context.clip_ceiling is not None:
        return None
    gradient = parameter.gradient
    if gradient is not None:
        return _gradient_rise(parameter, context) or _dwarfing(parameter, context)
    return _weight_growth(parameter, context)


def _gradient_rise(parameter: Parameter, context: RunContext) -> Finding | None:
    gradient = parameter.gradient
    assert gradient is not None
    rise = find_rise(gradient.norm, gradient.steps, gradient.bad_steps, context.config)
    if rise is None or pinned_ceiling(gradient.norm, context.config, gradient.exact) is not None:
        return None  # a per-parameter clip (Keras clipnorm) holds this norm
    peak_rms = float(np.nanmax(gradient.rms))
    if peak_rms < context.config.explode_level_factor * context.largest_early_level:
        return None  # a small gradient catching up with the others, not a blow-up
    if _loss_improved(context, rise):
        return None  # the loss fell while this gradient grew: a network waking up
    factor = context.config.explode_factor
    tail = " and then turned non-finite" if rise.into_nonfinite else ""
    evidence = (
        f"gradient L2 norm rose to {fmt(rise.peak_ratio)}x its early baseline "
        f"{fmt(rise.baseline)} (threshold {fmt(factor)}x), above it at {rise.steps_above} "
        f"logged steps from step {rise.first_above_step}{tail}; the rise began at step "
        f"{rise.onset_step}"
    )
    numbers = {
        "explode_onset_step": rise.onset_step,
        "grad_rise_factor": rise.peak_ratio,
        "grad_norm_baseline": rise.baseline,
    }
    excess = rise.peak_ratio / factor
    return Finding(
        "exploding",
        severity("exploding", excess),
        rise.onset_step,
        evidence,
        hints.EXPLODING_RISE,
        numbers,
    )


def _loss_improved(context: RunContext, rise: Rise) -> bool:
    """Whether the training loss was lower during the rise than before its onset."""
    steps, values = context.loss_steps, context.loss_values
    before = values[(steps <= rise.onset_step) & np.isfinite(values)]
    during = values[(steps >= rise.first_above_step) & (steps <= rise.last_above_step)]
    if before.size == 0 or during.size == 0 or not np.isfinite(during).all():
        return False
    return bool(np.median(during) < np.median(before))


def grad_to_weight(parameter: Parameter) -> tuple[np.ndarray, np.ndarray]:
    """Steps and gradient RMS / weight RMS at the steps both were logged."""
    gradient, weight = parameter.gradient, parameter.weight
    if gradient is None or weight is None:
        return np.empty(0, dtype=np.int64), np.empty(0)
    steps, in_gradient, in_weight = np.intersect1d(
        gradient.steps, weight.steps, return_indices=True
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = gradient.rms[in_gradient] / weight.rms[in_weight]
    return steps, ratio


def _dwarfing(parameter: Parameter, context: RunContext) -> Finding | None:
    steps, ratio = grad_to_weight(parameter)
    usable = np.isfinite(ratio)
    if usable.sum() < 2:
        return None
    second_half = ratio[usable][usable.sum() // 2 :]
    level = float(np.median(second_half))
    threshold = context.config.grad_to_weight_ratio
    if not level > threshold:
        return None
    first = int(steps[usable][np.argmax(ratio[usable] > threshold)])
    evidence = (
        f"gradient RMS is {fmt(level)}x the weight RMS (median over the second half of the "
        f"run; threshold {fmt(threshold)}x), first above it at step {first}"
    )
    return Finding(
        "exploding",
        severity("exploding", level / threshold),
        first,
        evidence,
        hints.EXPLODING_DWARF,
        {"grad_to_weight_ratio": level},
    )


def _weight_growth(parameter: Parameter, context: RunContext) -> Finding | None:
    weight = parameter.weight
    if weight is None or hints.parameter_kind(parameter.name) == "bn_moving":
        return None  # BatchNorm statistics follow the activations' scale: not learned weights
    early, _, finite = early_and_late(weight.rms, context.config)
    if finite.size < 3:
        return None
    reference = max(early, context.typical_weight_rms)
    scaled = weight.rms * (early / reference) if early > 0 else weight.rms
    rise = find_rise(scaled, weight.steps, weight.bad_steps, context.config)
    if rise is None:
        return None
    growth = float(np.nanmax(weight.rms)) / reference
    evidence = (
        f"weight RMS grew to {fmt(growth)}x its early value {fmt(early)} (threshold "
        f"{fmt(context.config.explode_factor)}x; no gradients logged), from step "
        f"{rise.first_above_step}; the growth began at step {rise.onset_step}"
    )
    return Finding(
        "exploding",
        severity("exploding", growth / context.config.explode_factor),
        rise.onset_step,
        evidence,
        hints.EXPLODING_WEIGHTS,
        {"explode_onset_step": rise.onset_step, "weight_growth_factor": growth},
    )
