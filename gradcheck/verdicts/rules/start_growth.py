"""exploding from the start: each weight of a model whose weights blew up between the first
and second logged step (:mod:`gradcheck.verdicts.start_growth`), with the global gradient norm
and the training loss from that start as evidence."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gradcheck.verdicts import hints
from gradcheck.verdicts.clipping import GlobalNorm
from gradcheck.verdicts.numeric import median
from gradcheck.verdicts.rules.base import Finding, RunContext, fmt, severity
from gradcheck.verdicts.signals import Parameter
from gradcheck.verdicts.start_growth import StartGrowths, start_growths


def start_growth_findings(
    parameters: Sequence[Parameter], context: RunContext, norms: Sequence[GlobalNorm]
) -> dict[str, Finding]:
    """``exploding`` for each weight of a model whose weights blew up from their start
    (:mod:`..start_growth`): found in a run where no rule saw a rise, because the blow-up came
    before the second logged step and its baseline already holds it. Empty otherwise."""
    growths = start_growths(parameters, context.config)
    if not growths.model_wide:
        return {}
    config = context.config
    context_parts = _global_norm_from_start(norms, growths) + _loss_from_start(context, growths)
    findings = {}
    factor = fmt(config.weight_growth_factor)
    for name, growth in growths.grown.items():
        evidence = (
            f"weights grew to {fmt(growth.peak)}x their first logged scale {fmt(growth.first)} "
            f"(step {growth.first_step}) and stayed at or above {factor}x from step "
            f"{growth.crossing_step} to the end of the log ({growth.steps_above} logged steps, "
            f"last {fmt(growth.last)}x), as did {len(growths.grown)} of the run's "
            f"{growths.started} weights that started non-zero (threshold {factor}x in more than "
            f"{config.weight_blow_up_share:.0%} of them: updates orders of magnitude larger than "
            f"the initial weights); the growth began after step {growth.before_onset_step} "
            f"(by step {growth.onset_step})"
        )
        findings[name] = Finding(
            "exploding",
            severity("exploding", growth.peak / config.weight_growth_factor),
            growth.onset_step,
            "; ".join([evidence, *context_parts]),
            hints.EXPLODING_FROM_START,
            {"explode_onset_step": growth.onset_step, "weight_start_growth_factor": growth.peak},
        )
    return findings


def _global_norm_from_start(norms: Sequence[GlobalNorm], growths: StartGrowths) -> list[str]:
    """How the global gradient norm logged from the weights' start moved (empty without one)."""
    start = min(growth.first_step for growth in growths.grown.values())
    crossing = min(growth.crossing_step for growth in growths.grown.values())
    for norm in norms:
        usable = np.isfinite(norm.values) & (norm.values > 0)
        steps, values = norm.steps[usable], norm.values[usable]
        after = values[steps >= crossing]
        if not steps.size or steps[0] > start or not after.size:
            continue
        name = norm.source.removeprefix("scalar ")
        return [
            f"the global gradient norm ({name}) went from {fmt(float(values[0]))} at step "
            f"{int(steps[0])} to a median {fmt(median(after))} from step {crossing} on "
            f"({fmt(median(after) / float(values[0]))}x)"
        ]
    return []


def _loss_from_start(context: RunContext, growths: StartGrowths) -> list[str]:
    """How the training loss moved from the weights' start: from its value there to its
    median after the growth, or, when it was first logged only after the growth began, that
    value alone (no level before the blow-up to measure a rise from; empty without a loss)."""
    start = min(growth.first_step for growth in growths.grown.values())
    crossing = min(growth.crossing_step for growth in growths.grown.values())
    usable = np.isfinite(context.loss_values)
    steps, values = context.loss_steps[usable], context.loss_values[usable]
    if not steps.size:
        return []
    first, first_step = float(values[0]), int(steps[0])
    name = f"the training loss ({context.loss_tag})"
    after = values[steps >= crossing]
    if first_step <= start and after.size and first > 0:
        return [
            f"{name} went from {fmt(first)} at step {first_step} to a median "
            f"{fmt(median(after))} from step {crossing} on ({fmt(median(after) / first)}x)"
        ]
    if first_step <= start:
        return []
    return [
        f"{name} was first logged at step {first_step}, after the weights' start, at "
        f"{fmt(first)}: no level before the blow-up to measure its rise from"
    ]
