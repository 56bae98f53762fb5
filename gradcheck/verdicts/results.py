"""One row of the report: a parameter's findings, numbers, trend and charts as a
``LayerResult``; and the ``(training loss)`` row of a run whose loss diverged."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from gradcheck.model import (
    GLOBAL_NORM_ROW,
    LOSS_ROW,
    VERDICTS,
    LayerResult,
    Reference,
    ScalarSeries,
    StepSeries,
    Verdict,
)
from gradcheck.verdicts.clipping import chart_series, downsample
from gradcheck.verdicts.config import Config
from gradcheck.verdicts.numeric import median, nanmedian
from gradcheck.verdicts.registry import OK
from gradcheck.verdicts.rules import Finding, RunContext, grad_to_weight, gradient_level
from gradcheck.verdicts.rules.nan import hint_after_blow_up
from gradcheck.verdicts.rules.slow import sgd_ratio
from gradcheck.verdicts.signals import Parameter, WeightSignal


def layer_result(
    parameter: Parameter,
    findings: list[Finding],
    notes: list[str],
    context: RunContext,
    charts: bool = True,
    rise: tuple[int | None, int | None] = (None, None),
) -> LayerResult:
    order = {verdict: i for i, verdict in enumerate(VERDICTS)}
    findings = sorted(findings, key=lambda f: order[f.verdict])
    flags: tuple[Verdict, ...] = tuple(dict.fromkeys(f.verdict for f in findings))
    numbers = _numbers(parameter, context)
    for finding in findings:
        numbers.update(finding.numbers)
    trend, trend_of = _trend(parameter)
    tags = parameter.tags
    return LayerResult(
        name=parameter.name,
        weight_tag=_display_tag(tags.weight) or tags.weight_norm,
        grad_tag=_display_tag(tags.gradient) or tags.grad_norm,
        verdict=flags[0] if flags else OK,
        flags=flags,
        severity=max((f.severity for f in findings), default=0.0),
        first_bad_step=_first_bad_step(findings),
        evidence="; also ".join(f"{f.verdict}: {f.evidence}" for f in findings),
        hint=_hint(findings, rise),
        depth=tags.depth,
        stats={key: _json_safe(value) for key, value in numbers.items()},
        trend=trend,
        trend_of=trend_of,
        onsets={
            f.verdict: f.first_bad_step
            for f in findings
            if f.first_bad_step is not None and f.verdict != OK
        },
        notes=tuple(notes),
        series=_series(parameter, trend_of) if charts else None,
        update_series=_update_series(parameter.weight) if charts else None,
        references=_references(numbers, context.config),
    )


def _display_tag(key: tuple[str, int] | None) -> str | None:
    if key is None:
        return None
    tag, index = key
    return tag if index == 0 else f"{tag}#{index}"


def _first_bad_step(findings: list[Finding]) -> int | None:
    """The verdict's first bad step: the first non-finite step for NaN (the onset of an
    explosion before it is in ``onsets``), else the most severe finding's."""
    return findings[0].first_bad_step if findings else None


def _hint(findings: list[Finding], rise: tuple[int | None, int | None] = (None, None)) -> str:
    """The hint of the flag that came first (the earliest first bad step; the most severe of
    equals); a NaN after a blow-up gets the blow-up's hint, not the one for log(0)
    (:func:`.rules.nan.hint_after_blow_up`: ``rise`` is the run's earliest exploding onset and
    the training loss's rise into the blow-up)."""
    if not findings:
        return ""
    after = hint_after_blow_up(findings, rise)
    if after is not None:
        return after
    first = min(findings, key=lambda f: (f.first_bad_step is None, f.first_bad_step or 0))
    return first.hint


def _numbers(parameter: Parameter, context: RunContext) -> dict[str, float | int | None]:
    numbers: dict[str, float | int | None] = {}
    gradient, weight = parameter.gradient, parameter.weight
    if gradient is not None:
        norm = gradient.norm[np.isfinite(gradient.norm)]
        level = gradient_level(parameter)
        numbers.update(
            grad_norm_first=float(norm[0]) if norm.size else None,
            grad_norm_median=median(norm) if norm.size else None,
            grad_norm_last=float(norm[-1]) if norm.size else None,
            grad_norm_max=float(norm.max()) if norm.size else None,
            grad_rms_median=level,
            grad_ratio_to_largest=level / context.largest_level
            if context.largest_level > 0 and parameter.name != GLOBAL_NORM_ROW
            else None,
            grad_norm_exact=int(gradient.exact),
            grad_norm_error_bound=gradient.error_bound,
            grad_steps=gradient.steps_logged,
        )
        _, ratio = grad_to_weight(parameter)
        if np.isfinite(ratio).any():
            numbers["grad_to_weight_ratio"] = nanmedian(ratio)
    if weight is not None:
        norm = weight.norm[np.isfinite(weight.norm)]
        numbers.update(
            weight_norm_first=float(norm[0]) if norm.size else None,
            weight_norm_last=float(norm[-1]) if norm.size else None,
            weight_steps=weight.steps_logged,
        )
        move = context.movements.get(parameter.name)
        if move is not None:
            numbers.update(
                weight_movement=move.from_first,
                weight_norm_change=move.norm_change,
                weight_update_median=move.step_update,
                weight_bit_identical=int(move.bit_identical),
                update_ratio_median=move.update_ratio,
            )
        sgd = sgd_ratio(parameter, context)
        if sgd is not None:
            numbers["update_ratio_sgd_median"] = sgd
    return numbers


def _trend(parameter: Parameter) -> tuple[tuple[float, ...], str]:
    if parameter.gradient is not None:
        return downsample(parameter.gradient.norm), "gradient L2 norm"
    if parameter.weight is not None:
        return downsample(parameter.weight.norm), "weight L2 norm"
    return (), ""


def _series(parameter: Parameter, label: str) -> StepSeries | None:
    """The ``_trend`` quantity at every step (the arrays themselves: no copy)."""
    signal = parameter.gradient if parameter.gradient is not None else parameter.weight
    if signal is None:
        return None
    return chart_series(label, signal.steps, signal.norm, signal.bad_steps)


def _update_series(weight: WeightSignal | None) -> StepSeries | None:
    """``|norm_t - norm_t-1| / norm_t-1`` of the weights: how much each step changed them (a
    lower bound of the update's size relative to the weights, ``||w_t - w_t-1|| / ||w_t-1||``)."""
    if weight is None or weight.steps.size < 2:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        change = np.abs(weight.norm[1:] - weight.norm[:-1]) / np.abs(weight.norm[:-1])
    label = "weight norm change per step (relative)"
    return chart_series(label, weight.steps[1:], change, weight.bad_steps)


def _references(numbers: Mapping[str, float | int | None], config: Config) -> tuple[Reference, ...]:
    """The exploding rule's early baseline and threshold, when it measured them."""
    baseline = numbers.get("grad_norm_baseline")
    if baseline is None or not math.isfinite(baseline):
        return ()
    factor = config.explode_factor
    return (
        Reference("early baseline", float(baseline)),
        Reference(f"threshold ({factor:g}x the baseline)", float(baseline) * factor),
    )


def _json_safe(value: float | int | None) -> float | int | None:
    if value is None or isinstance(value, int):
        return value
    value = float(value)
    return value if math.isfinite(value) else None


def loss_row(found: Finding, loss: ScalarSeries, depth: int, charts: bool = True) -> LayerResult:
    """The ``(training loss)`` row of a run whose training loss the ``loss`` rules found
    (``diverging``)."""
    label = f"training loss ({loss.tag})"
    return LayerResult(
        name=LOSS_ROW,
        weight_tag=None,
        grad_tag=None,
        verdict=found.verdict,
        flags=(found.verdict,),
        severity=found.severity,
        first_bad_step=found.first_bad_step,
        evidence=f"{found.verdict}: {found.evidence}",
        hint=found.hint,
        depth=depth,
        stats={key: _json_safe(value) for key, value in found.numbers.items()},
        trend=downsample(loss.values),
        trend_of=label,
        onsets={found.verdict: found.first_bad_step} if found.first_bad_step is not None else {},
        series=chart_series(label, loss.steps, loss.values, np.empty(0, dtype=np.int64))
        if charts
        else None,
    )
