"""One function per verdict: a parameter's signals and the run's context -> a finding or None.

Each finding carries its severity (``base`` of its kind plus up to 0.99 for how far beyond the
threshold it is, on a log scale), its first bad step, one sentence of evidence with the
measured numbers and the threshold they crossed, the hint, and numbers for the report.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from gradcheck import hints
from gradcheck.clipping import pinned_ceiling
from gradcheck.config import Config
from gradcheck.model import Verdict
from gradcheck.signals import Movement, Parameter

BASE_SEVERITY: Mapping[Verdict, float] = {
    "nan": 4.0,
    "exploding": 3.0,
    "vanishing": 2.0,
    "static": 1.0,
    "ok": 0.0,
}
NEAR_BASELINE = 2.0  # a rise starts after the last step within 2x of the baseline


@dataclass(frozen=True)
class Finding:
    verdict: Verdict
    severity: float
    first_bad_step: int | None
    evidence: str
    hint: str
    numbers: Mapping[str, float | int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class RunContext:
    """What the rules need to know about the run as a whole."""

    config: Config
    parameter_count: int
    largest_level: float  # largest median gradient RMS of any parameter
    largest_name: str
    largest_early_level: float  # largest early-baseline gradient RMS of any parameter
    typical_weight_rms: float  # median early weight RMS over the run's parameters
    median_decay: float  # median late/early gradient ratio over the run's parameters
    loss_tag: str | None
    loss_steps: np.ndarray  # the training loss (empty without one)
    loss_values: np.ndarray
    loss_ratio: float | None  # late/early training loss (None when unusable)
    loss_nan_step: int | None
    last_step: int | None
    movements: Mapping[str, Movement]
    levels: Mapping[str, float]  # median gradient RMS per parameter (NaN without a gradient)
    clip_ceiling: float | None  # the global norm is pinned here: clipping holds it
    moving_stats_moved: Mapping[str, bool] = field(default_factory=dict)
    """BatchNorm layer -> whether its moving statistics moved (layers that logged them)."""


def severity(verdict: Verdict, excess: float) -> float:
    """``base + min(0.99, log10(excess) / 10)``: excess is how many times past the threshold."""
    extra = 0.0 if not excess > 1 else min(0.99, math.log10(excess) / 10)
    return BASE_SEVERITY[verdict] + extra


def fmt(value: float) -> str:
    """A number for evidence: 3 significant digits, scientific when far from 1."""
    if value is None or not math.isfinite(value):
        return str(value)
    if value == 0 or 1e-3 <= abs(value) < 1e4:
        return f"{value:.3g}"
    return f"{value:.2e}"


def baseline_size(count: int, config: Config) -> int:
    """How many early finite values form the baseline: 10% of them, at least 3, at most 20."""
    return max(1, min(count, max(3, min(20, math.ceil(config.baseline_fraction * count)))))


def early_and_late(values: np.ndarray, config: Config) -> tuple[float, float, np.ndarray]:
    """Median of the first and of the last baseline-sized groups of finite values."""
    finite = np.flatnonzero(np.isfinite(values))
    if finite.size == 0:
        return float("nan"), float("nan"), finite
    size = baseline_size(finite.size, config)
    early = float(np.median(values[finite[:size]]))
    late = float(np.median(values[finite[-size:]]))
    return early, late, finite


# --------------------------------------------------------------------------------------------
# nan
# --------------------------------------------------------------------------------------------


def find_nan(parameter: Parameter, context: RunContext) -> Finding | None:
    """Any NaN/Inf in the weights or gradient; or the series stop as the loss turns NaN."""
    step = parameter.first_bad_step
    if step is not None:
        return Finding(
            "nan",
            0.0,
            step,
            _nan_evidence(parameter, step),
            hints.NAN_PLAIN,
            {"first_nan_step": step},
        )
    return _stopped_at_nan_loss(parameter, context)


def _nan_evidence(parameter: Parameter, step: int) -> str:
    parts = []
    for label, signal in (("gradient", parameter.gradient), ("weights", parameter.weight)):
        if signal is not None and signal.bad_steps.size:
            first, count = int(signal.bad_steps[0]), int(signal.bad_steps.size)
            total = int(signal.steps.size)
            parts.append(f"{label} non-finite from step {first} ({count} of {total} logged steps)")
    return "; ".join(parts) + f": NaN/Inf first at step {step}"


def _stopped_at_nan_loss(parameter: Parameter, context: RunContext) -> Finding | None:
    loss_step = context.loss_nan_step
    signals = [s for s in (parameter.gradient, parameter.weight) if s is not None]
    if loss_step is None or not signals:
        return None
    last = max(int(s.steps[-1]) for s in signals)
    intervals = [np.median(np.diff(s.steps)) for s in signals if s.steps.size > 1]
    interval = float(min(intervals)) if intervals else 1.0
    if last > loss_step or last < loss_step - 2 * max(interval, 1.0):
        return None
    evidence = (
        f"the loss ({context.loss_tag}) is NaN/Inf from step {loss_step} and this parameter's "
        f"series stop at step {last}: writers refuse or crash on non-finite tensors"
    )
    return Finding("nan", 0.0, loss_step, evidence, hints.NAN_PLAIN, {"first_nan_step": loss_step})


def rank_nan(findings: list[tuple[Parameter, Finding]]) -> list[tuple[Parameter, Finding]]:
    """NaN severities: the earliest first bad step ranks highest (where NaN started)."""
    steps = [f.first_bad_step for _, f in findings if f.first_bad_step is not None]
    if not steps:
        return findings
    first, last = min(steps), max(steps)
    ranked = []
    for parameter, finding in findings:
        step = finding.first_bad_step if finding.first_bad_step is not None else last
        earliness = 1.0 - (step - first) / (last - first + 1)
        value = BASE_SEVERITY["nan"] + 0.9 * earliness
        ranked.append((parameter, dataclasses.replace(finding, severity=value)))
    return ranked


# --------------------------------------------------------------------------------------------
# exploding
# --------------------------------------------------------------------------------------------


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
    if rise is None or pinned_ceiling(gradient.norm, context.config) is not None:
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


# --------------------------------------------------------------------------------------------
# vanishing
# --------------------------------------------------------------------------------------------


def gradient_level(parameter: Parameter) -> float:
    """Median per-element gradient RMS over the logged steps (NaN without a gradient)."""
    if parameter.gradient is None or not np.isfinite(parameter.gradient.rms).any():
        return float("nan")
    return float(np.nanmedian(parameter.gradient.rms))


def find_vanishing(parameter: Parameter, context: RunContext) -> Finding | None:
    """Gradient far below the run's largest, absolutely tiny, or decaying far past the loss."""
    gradient = parameter.gradient
    if gradient is None or not np.isfinite(gradient.rms).any():
        return None
    if _sibling_is_healthy(parameter, context):
        return None
    candidates = [
        f
        for f in (
            _vanishing_absolute(parameter, context),
            _vanishing_depth(parameter, context),
            _vanishing_decay(parameter, context),
        )
        if f is not None
    ]
    return max(candidates, key=lambda f: f.severity) if candidates else None


def _sibling_is_healthy(parameter: Parameter, context: RunContext) -> bool:
    """A bias whose layer's weight gets a healthy gradient is not vanishing: a bias feeding a
    BatchNorm gets ~zero gradient by design (the normalisation removes it)."""
    config = context.config
    for sibling in hints.sibling_weights(parameter.name):
        level = context.levels.get(sibling, float("nan"))
        floor = max(config.vanish_absolute, depth_threshold(context)[0] * context.largest_level)
        if level >= floor:
            return True
    return False


def _first_below(parameter: Parameter, threshold: float) -> int:
    gradient = parameter.gradient
    assert gradient is not None
    below = np.nan_to_num(gradient.rms, nan=np.inf) < threshold
    return int(gradient.steps[np.argmax(below)]) if below.any() else int(gradient.steps[0])


def _where(parameter: Parameter, context: RunContext) -> hints.Position:
    return hints.position(parameter.tags.depth, context.parameter_count)


def _vanishing_absolute(parameter: Parameter, context: RunContext) -> Finding | None:
    assert parameter.gradient is not None
    early, _, _ = early_and_late(parameter.gradient.rms, context.config)
    level = gradient_level(parameter)
    threshold = context.config.vanish_absolute
    if not max(early, level) < threshold:
        return None
    evidence = (
        f"gradient RMS {fmt(level)} (median; {fmt(early)} early) is below the absolute "
        f"threshold {fmt(threshold)} (SageMaker Debugger / DeepDiagnosis)"
    )
    excess = threshold / max(level, 1e-300)
    return Finding(
        "vanishing",
        severity("vanishing", excess),
        _first_below(parameter, threshold),
        evidence,
        hints.vanishing_hint("absolute", _where(parameter, context)),
    )


def _vanishing_depth(parameter: Parameter, context: RunContext) -> Finding | None:
    level = gradient_level(parameter)
    largest = context.largest_level
    if context.largest_name == parameter.name or not largest > 0:
        return None
    ratio = level / largest
    threshold, stalled = depth_threshold(context)
    if not ratio < threshold:
        return None
    why = (
        f" while the loss stalled ({context.loss_tag} at {fmt(context.loss_ratio or 1.0)}x its "
        "early value)"
        if stalled
        else ""
    )
    evidence = (
        f"gradient RMS {fmt(level)} (median over steps) is {fmt(ratio)} of the largest in the "
        f"run ({context.largest_name}: {fmt(largest)}), below the {fmt(threshold)} threshold{why}"
    )
    return Finding(
        "vanishing",
        severity("vanishing", threshold / max(ratio, 1e-300)),
        _first_below(parameter, threshold * largest),
        evidence,
        hints.vanishing_hint("depth", _where(parameter, context)),
    )


def depth_threshold(context: RunContext) -> tuple[float, bool]:
    """The depth ratio below which a gradient is vanishing, and whether the loss stalled."""
    config = context.config
    ratio = context.loss_ratio
    if ratio is not None and ratio > config.loss_stalled_ratio:
        return config.vanish_depth_ratio_stalled, True
    return config.vanish_depth_ratio, False


def _vanishing_decay(parameter: Parameter, context: RunContext) -> Finding | None:
    assert parameter.gradient is not None
    config = context.config
    early, late, finite = early_and_late(parameter.gradient.rms, config)
    if finite.size < 6 or not early > 0:
        return None
    decay = late / early
    if context.loss_ratio is not None:
        reference, against = context.loss_ratio, f"the loss fell to {fmt(context.loss_ratio)}x"
    else:
        reference, against = (
            context.median_decay,
            f"the run's median layer to {fmt(context.median_decay)}x",
        )
    limit = min(config.vanish_decay_factor, config.vanish_decay_excess * reference)
    if not decay < limit:
        return None
    evidence = (
        f"gradient RMS decayed to {fmt(decay)}x its early baseline {fmt(early)} while {against} "
        f"(threshold {fmt(config.vanish_decay_factor)}x, and {fmt(config.vanish_decay_excess)}x "
        "past the reference)"
    )
    return Finding(
        "vanishing",
        severity("vanishing", limit / max(decay, 1e-300)),
        _first_below(parameter, early * config.vanish_decay_factor),
        evidence,
        hints.vanishing_hint("decay", _where(parameter, context)),
        {"grad_decay_factor": decay},
    )


# --------------------------------------------------------------------------------------------
# static
# --------------------------------------------------------------------------------------------


def find_static(parameter: Parameter, context: RunContext) -> Finding | None:
    """Weights that do not move while the run's other weights do."""
    move = context.movements.get(parameter.name)
    weight = parameter.weight
    if move is None or weight is None:
        return None
    moved = move.largest
    threshold = context.config.static_movement
    if not (move.bit_identical or moved < threshold):
        return None
    if _sibling_moved(parameter, context):
        return None
    others = [m for name, m in context.movements.items() if name != parameter.name]
    others_moved = max((m.largest for m in others), default=0.0)
    if others_moved < context.config.others_moving:
        return None
    steps = f"{weight.steps.size} logged steps ({int(weight.steps[0])}-{int(weight.steps[-1])})"
    if move.bit_identical:
        what = f"weights are bit-identical at all {steps}"
    else:
        what = f"weights moved at most {fmt(moved)} of their spread over {steps}"
    kind = hints.parameter_kind(parameter.name)
    evidence = (
        f"{what} (threshold {fmt(threshold)}), while other weights moved up to "
        f"{fmt(others_moved)}{_gradient_note(parameter)}{_bn_note(parameter, kind, context)}"
    )
    excess = threshold / max(moved, 1e-12)
    return Finding(
        "static",
        severity("static", excess) if not move.bit_identical else BASE_SEVERITY["static"] + 0.99,
        int(weight.steps[0]),
        evidence,
        hints.static_hint(kind, parameter.gradient is not None),
        {"weight_movement": moved},
    )


def _sibling_moved(parameter: Parameter, context: RunContext) -> bool:
    """A bias that stays put while its layer's weight moves is not a frozen layer: a bias
    feeding a BatchNorm gets ~zero gradient by design, so plain SGD never moves it."""
    threshold = context.config.static_movement
    for sibling in hints.sibling_weights(parameter.name):
        move = context.movements.get(sibling)
        if move is not None and move.largest >= threshold:
            return True
    return False


def _gradient_note(parameter: Parameter) -> str:
    """A static parameter that still gets gradients is not updated by the optimizer."""
    gradient = parameter.gradient
    if gradient is None or not np.isfinite(gradient.norm).any():
        return ""
    median = float(np.nanmedian(gradient.norm))
    if not median > 0:
        return "; its gradient is zero"
    return (
        f"; its gradient is not zero (median L2 norm {fmt(median)}), so the optimizer does not "
        "update it (left out of the optimizer, or a zero learning rate)"
    )


def _bn_note(parameter: Parameter, kind: hints.ParameterKind, context: RunContext) -> str:
    if kind == "bn_moving":
        return "; BatchNorm moving statistics: the layer runs in inference mode, frozen on purpose?"
    if kind != "bn_affine":
        return "; frozen on purpose?"
    layer = hints.layer_of(parameter.name)
    moving = context.moving_stats_moved.get(layer)
    if moving is None:
        return "; BatchNorm gamma/beta, frozen on purpose?"
    if moving:
        return (
            "; its BatchNorm moving statistics do move (training mode): gamma/beta are not "
            "updated by the optimizer, frozen on purpose?"
        )
    return "; its BatchNorm moving statistics are static too: the layer is frozen, on purpose?"
