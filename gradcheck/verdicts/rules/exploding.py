"""exploding: a gradient norm far above its early baseline (sustained or spiking), gradients
dwarfing their weights, or weights blowing up when no gradient was logged. Never while clipping
holds the global norm."""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from gradcheck.verdicts import hints
from gradcheck.verdicts.clipping import pinned_ceiling
from gradcheck.verdicts.config import Config
from gradcheck.verdicts.numeric import median, nan_to_num, nanmedian
from gradcheck.verdicts.onset import (
    MIN_NOISE_CHANGES,
    MIN_TREND_VALUES,
    NEAR_BASELINE,
    level_of,
    onset_position,
)
from gradcheck.verdicts.rules.base import (
    Excuse,
    Finding,
    RunContext,
    baseline_size,
    fmt,
    rms_early_and_late,
    severity,
)
from gradcheck.verdicts.signals import GradientSignal, Parameter, common_steps


@dataclass(eq=False)
class Rise:
    """A rise of a series far above its early baseline."""

    baseline: float
    peak_ratio: float
    onset_step: int  # first step of the climb that leads to the episode (:mod:`.onset`)
    departure_step: int  # first step of that climb above 2x the baseline
    first_above_step: int
    last_above_step: int  # last step of the qualifying episode
    steps_above: int
    into_nonfinite: bool  # the next logged value is NaN/Inf
    into_zero: bool  # the series is exactly zero from the next logged value on

    @property
    def ending(self) -> str:
        """How the episode ended, for evidence (empty when the series came back down)."""
        if self.into_nonfinite:
            return " and then turned non-finite"
        if self.into_zero:
            return " and then collapsed to exactly zero (dead units: nothing flows back)"
        return ""


def find_rise(
    values: np.ndarray, steps: np.ndarray, bad_steps: np.ndarray, config: Config
) -> Rise | None:
    """The first sustained rise (or spike) above ``explode_factor`` x the early baseline.

    A rise that runs into NaN/Inf, or into a gradient that is exactly zero from then on (the
    blow-up killed the units), counts as sustained. Zero is not non-finite: it only leaves
    the log-scale arithmetic (baseline, ratios) because it has no logarithm.
    """
    return next(rises(values, steps, bad_steps, config), None)


def rises(
    values: np.ndarray, steps: np.ndarray, bad_steps: np.ndarray, config: Config
) -> Iterator[Rise]:
    """Every sustained rise (or spike) above ``explode_factor`` x the early baseline, in step
    order (see :func:`find_rise`)."""
    positive = np.where(values > 0, values, np.nan)
    finite = np.isfinite(positive).nonzero()[0]  # np.flatnonzero of a 1-d array, no dispatch
    if finite.size < 3:
        return
    baseline = median(positive[finite[: baseline_size(finite.size, config)]])
    ratio = positive / baseline
    above = nan_to_num(ratio, nan=0.0) >= config.explode_factor
    if not above.any():  # the usual case: no episode at all
        return
    for start, end in _episodes(above):
        departure = _departure(ratio, start)
        if departure == 0 and not ratio[0] <= NEAR_BASELINE:
            continue  # high from the first step on: a decay towards the baseline, not a rise
        into_nonfinite, into_zero = _after_episode(values, steps, bad_steps, end, int(finite[-1]))
        runs_out = into_nonfinite or into_zero
        sustained = end - start >= config.explode_sustain_steps or runs_out
        sustained |= end - 1 == int(finite[-1]) and end - start >= 2
        spike = float(np.nanmax(ratio[start:end])) >= config.explode_spike_factor
        if sustained or spike:
            yield Rise(
                baseline=baseline,
                peak_ratio=float(np.nanmax(ratio[start:])),
                onset_step=int(steps[rise_onset(positive, steps, start, baseline, config)]),
                departure_step=int(steps[departure]),
                first_above_step=int(steps[start]),
                last_above_step=int(steps[end - 1]),
                steps_above=int(above[start:].sum()),
                into_nonfinite=into_nonfinite,
                into_zero=into_zero,
            )


def _episodes(mask: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` index ranges where ``mask`` is True."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True))


def _departure(ratio: np.ndarray, first_above: int) -> int:
    """The index after the last step within 2x of the baseline before ``first_above``."""
    index = first_above
    while index > 0 and np.isfinite(ratio[index - 1]) and ratio[index - 1] > NEAR_BASELINE:
        index -= 1
    return index


def rise_onset(
    positive: np.ndarray, steps: np.ndarray, crossing: int, baseline: float, config: Config
) -> int:
    """Index of the onset of the episode first above the threshold at ``crossing``
    (:func:`.onset.onset_position`), over the positive finite values up to it (a NaN or an
    exact zero is no level: a gradient skipped by loss scaling, units killed by the blow-up)."""
    usable = np.isfinite(positive[: crossing + 1]).nonzero()[0]
    window = max(MIN_TREND_VALUES, baseline_size(int(np.isfinite(positive).sum()), config))
    found = onset_position(positive[usable], steps[usable], usable.size - 1, window, baseline)
    return int(usable[found])


def _after_episode(
    values: np.ndarray, steps: np.ndarray, bad_steps: np.ndarray, end: int, last_positive: int
) -> tuple[bool, bool]:
    """Whether the series turned non-finite right after an episode ending at ``end``, or
    collapsed to exactly zero for good (no positive value after it)."""
    if end >= values.size:
        return False, False
    bad = bool(np.isin(steps[end], bad_steps))
    gone = end > last_positive  # no positive finite value from ``end`` on
    nonfinite = bad or (gone and not np.isfinite(values[end]))
    zero = not bad and gone and bool(values[end] == 0)
    return nonfinite, zero


def find_exploding(parameter: Parameter, context: RunContext) -> Finding | Excuse | None:
    """Gradient norm far above its early baseline, gradients dwarfing weights, or weights
    blowing up when no gradient was logged. Not while clipping holds the global norm."""
    if parameter.gradient is not None:
        rise = _gradient_rise(parameter, context)
        if isinstance(rise, Finding) or context.clip_ceiling is not None:
            return rise
        return _dwarfing(parameter, context) or rise
    if context.clip_ceiling is not None:
        return None
    return _weight_growth(parameter, context)


def _gradient_rise(parameter: Parameter, context: RunContext) -> Finding | Excuse | None:
    gradient = parameter.gradient
    assert gradient is not None
    rise = find_rise(gradient.norm, gradient.steps, gradient.bad_steps, context.config)
    if rise is None:
        return None
    seen = f"gradient L2 norm rose to {fmt(rise.peak_ratio)}x its early baseline"
    if context.clip_ceiling is not None:
        return Excuse(
            "exploding",
            f"{seen}, but clipping holds the global norm at {fmt(context.clip_ceiling)}",
        )
    ceiling = pinned_ceiling(gradient.norm, context.config, gradient.exact)
    if ceiling is not None:  # a per-parameter clip (Keras clipnorm) holds this norm
        return Excuse("exploding", f"{seen}, but it is pinned at {fmt(ceiling)} (clipped)")
    peak_rms = float(np.nanmax(gradient.rms))
    others, against = _others_level(parameter, context, rise)
    level = context.config.explode_level_factor * others
    if peak_rms < level:
        return Excuse(
            "exploding",
            f"{seen}, but it peaked at {fmt(peak_rms)}, below {fmt(level)} "
            f"({fmt(context.config.explode_level_factor)}x {against}): a small gradient "
            "catching up with the others",
        )
    loss_fell = _loss_improved(context, rise)
    limit = context.config.explode_veto_limit
    if loss_fell and rise.peak_ratio < limit:
        return Excuse(
            "exploding",
            f"{seen} (threshold {fmt(context.config.explode_factor)}x) while the loss "
            f"({context.loss_tag}) fell: below {fmt(limit)}x a falling loss excuses a rise "
            "(a network leaving a plateau)",
        )
    factor = context.config.explode_factor
    evidence = (
        f"{seen} {fmt(rise.baseline)} (threshold {fmt(factor)}x), above it at "
        f"{rise.steps_above} logged steps from step {rise.first_above_step}{rise.ending}; "
        f"the rise began at step {rise.onset_step}"
    )
    if loss_fell:
        evidence += (
            f" (the training loss, {context.loss_tag}, still fell meanwhile: beyond "
            f"{fmt(limit)}x a rise is exploding whatever the loss does)"
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
        hints.exploding_rise_hint(parameter.name),
        numbers,
        until_step=rise.last_above_step,
    )


def _others_level(parameter: Parameter, context: RunContext, rise: Rise) -> tuple[float, str]:
    """What a rising gradient is compared with to tell a blow-up from a small gradient catching
    up with the others: the run's largest early gradient, or the largest of the other gradients
    (of the same kind, see :func:`.base.comparable`) during the rise (the median
    over its steps) when that is lower. A gradient that ends far above both caught up with
    nothing: the others converged (a branch diverging while the loss falls), or rose with it
    (every layer exploding together) and then the early level is the lower one."""
    own = parameter.gradient
    assert own is not None
    early = context.largest_early_level
    window = (rise.first_above_step, rise.last_above_step, own.per_element)
    others = [
        level for level, name in _largest_levels_during(context, window) if name != parameter.name
    ]
    if others and others[0] < early:
        return others[0], "the largest other gradient during the rise"
    return early, "the run's largest early gradient"


def _largest_levels_during(
    context: RunContext, window: tuple[int, int, bool]
) -> tuple[tuple[float, str], ...]:
    """The two largest gradient levels (median RMS over the steps ``window`` spans) among the
    gradients of its kind (per element or not), with their names: found once per window and
    run (the rises of one blow-up share theirs), not once per rising parameter, which made a
    blow-up of every parameter quadratic in their number. Kept on the context, as
    ``functools.cached_property`` keeps a value."""
    memo: dict[tuple[int, int, bool], tuple[tuple[float, str], ...]]
    memo = context.__dict__.setdefault("_largest_levels_during", {})
    found = memo.get(window)
    if found is None:
        first, last, per_element = window
        levels = []
        for name, other in context.gradients.items():
            if other.per_element != per_element:
                continue
            values = other.rms[(other.steps >= first) & (other.steps <= last)]
            if np.isfinite(values).any():
                levels.append((nanmedian(values), name))
        found = memo[window] = tuple(heapq.nlargest(2, levels, key=lambda item: item[0]))
    return found


def align_event_onsets(
    findings: Mapping[str, list[Finding]],
    gradients: Mapping[str, GradientSignal],
    config: Config,
) -> dict[str, list[Finding]]:
    """The gradient rises of one blow-up (episodes that overlap in time, from onset to the
    last step above the threshold) get one onset, the earliest of them: the same error flows
    back through every layer, and a noisier gradient (a bias's: the error summed over the
    batch) stands out of its noise later. A parameter keeps its own later onset only when its
    own series says so: every value it logged from the earliest onset to its own lies within
    the band of its level before (:func:`.onset.level_of`), and there are more than
    :data:`SAME_EVENT_STEPS` of them (a few steps apart is within what an onset can tell from
    a noisy series: one event, one onset)."""
    rises = sorted(
        (f.first_bad_step, name, f)
        for name, found in findings.items()
        if (f := _gradient_rise_of(found)) is not None
        and f.first_bad_step is not None
        and f.until_step is not None
    )
    aligned = dict(findings)
    for event in _overlapping(rises):
        onset, leader, _ = event[0]
        for own, name, rise in event[1:]:
            if own > onset and not _departed_later(gradients.get(name), onset, own, config):
                aligned[name] = [
                    _follow(f, name, leader, onset) if f is rise else f for f in findings[name]
                ]
    return aligned


def _overlapping(
    rises: list[tuple[int, str, Finding]],
) -> list[list[tuple[int, str, Finding]]]:
    """``rises`` (by onset) in groups whose episodes overlap, each in onset order."""
    events: list[list[tuple[int, str, Finding]]] = []
    end = -1
    for rise in rises:
        last = rise[2].until_step
        assert last is not None
        if events and rise[0] <= end:
            events[-1].append(rise)
            end = max(end, last)
        else:
            events.append([rise])
            end = last
    return events


SAME_EVENT_STEPS = 3
"""Rises of one blow-up whose onsets are at most this many of a parameter's logged steps apart
share the earliest: the tolerance an onset is held to (issue 30: within 3 logged steps of the
exact onset)."""


def _departed_later(gradient: GradientSignal | None, onset: int, own: int, config: Config) -> bool:
    """Whether ``gradient`` stayed within the band of its level (the early baseline's number
    of values before ``onset``) at every step it logged from ``onset`` to ``own``, more than
    :data:`SAME_EVENT_STEPS` of them."""
    if gradient is None:
        return False
    usable = np.isfinite(gradient.norm) & (gradient.norm > 0)
    values, steps = gradient.norm[usable], gradient.steps[usable]
    window = baseline_size(values.size, config)
    before = (steps < onset).nonzero()[0][-window:]
    between = (steps >= onset) & (steps < own)
    if before.size < MIN_NOISE_CHANGES or int(between.sum()) <= SAME_EVENT_STEPS:
        return False  # nothing to say otherwise with, or too close to tell apart
    level = level_of(values[before], steps[before])
    return bool((values[between] <= level.band * level.at(steps[between])).all())


def _gradient_rise_of(found: list[Finding]) -> Finding | None:
    """The exploding finding of a gradient rise among ``found`` (None without one)."""
    return next((f for f in found if "grad_rise_factor" in f.numbers), None)


def _follow(finding: Finding, name: str, leader: str, onset: int) -> Finding:
    where = "in the same layer" if leader in hints.sibling_weights(name) else "in the same blow-up"
    evidence = f"{finding.evidence} ({leader}, {where}, from step {onset})"
    numbers = {**finding.numbers, "explode_onset_step": onset}
    return dataclasses.replace(finding, first_bad_step=onset, evidence=evidence, numbers=numbers)


def _loss_improved(context: RunContext, rise: Rise) -> bool:
    """Whether the training loss was lower during the rise than up to the step it left 2x of
    its baseline (the departure, not the earlier onset of the climb: the verdict is unchanged
    by where the climb is found to begin)."""
    steps, values = context.loss_steps, context.loss_values
    before = values[(steps <= rise.departure_step) & np.isfinite(values)]
    during = values[(steps >= rise.first_above_step) & (steps <= rise.last_above_step)]
    if before.size == 0 or during.size == 0 or not np.isfinite(during).all():
        return False
    return median(during) < median(before)


def grad_to_weight(parameter: Parameter) -> tuple[np.ndarray, np.ndarray]:
    """Steps and gradient RMS / weight RMS at the steps both were logged; computed once per
    parameter (the rule and the report both ask; kept on the parameter, as
    ``functools.cached_property`` keeps a value: not to be written to)."""
    memo: tuple[np.ndarray, np.ndarray] | None = parameter.__dict__.get("_grad_to_weight")
    if memo is not None:
        return memo
    gradient, weight = parameter.gradient, parameter.weight
    if gradient is None or weight is None:
        return np.empty(0, dtype=np.int64), np.empty(0)
    steps, in_gradient, in_weight = common_steps(gradient.steps, weight.steps)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = gradient.rms[in_gradient] / weight.rms[in_weight]
    parameter.__dict__["_grad_to_weight"] = steps, ratio
    return steps, ratio


def _dwarfing(parameter: Parameter, context: RunContext) -> Finding | None:
    steps, ratio = grad_to_weight(parameter)
    usable = np.isfinite(ratio)
    if usable.sum() < 2:
        return None
    second_half = ratio[usable][usable.sum() // 2 :]
    level = median(second_half)
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
    early, _, finite = rms_early_and_late(weight, context.config)
    if finite.size < 3:
        return None
    # Judged against the larger of its own early scale and the run's typical weight: a weight
    # that grows away from (near) zero, as a zero-initialised bias does, is not exploding
    # until it dwarfs the weights around it. Values below the reference are lifted to it, so
    # that the rise's baseline is the reference itself.
    reference = max(early, context.typical_weight_rms)
    if not reference > 0:
        return None  # zero from the start and nothing to compare with
    factor = context.config.weight_growth_factor
    config = dataclasses.replace(
        context.config,
        explode_factor=factor,
        explode_spike_factor=max(factor, context.config.explode_spike_factor),
    )
    lifted = np.where(weight.rms < reference, reference, weight.rms)
    rise = find_rise(lifted, weight.steps, weight.bad_steps, config)
    if rise is None:
        return None
    growth = float(weight.rms[finite].max()) / reference  # >= the rise's ratio: lifted >= it
    against = (
        f"its early value {fmt(early)}"
        if reference == early
        else f"the run's typical weight RMS {fmt(reference)} (its own early value {fmt(early)} is "
        "smaller)"
    )
    evidence = (
        f"weight RMS grew to {fmt(growth)}x {against} (threshold {fmt(factor)}x; no gradients "
        f"logged), from step {rise.first_above_step}; the growth began at step {rise.onset_step}"
    )
    return Finding(
        "exploding",
        severity("exploding", growth / factor),
        rise.onset_step,
        evidence,
        hints.EXPLODING_WEIGHTS,
        {"explode_onset_step": rise.onset_step, "weight_growth_factor": growth},
    )


def first_rise(findings: Mapping[str, list[Finding]]) -> int | None:
    """The earliest exploding onset of the run (None without one)."""
    steps = [
        f.first_bad_step
        for found in findings.values()
        for f in found
        if f.verdict == "exploding" and f.first_bad_step is not None
    ]
    return min(steps) if steps else None
