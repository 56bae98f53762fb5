"""nan: any NaN/Inf in a parameter's weights or gradient, or its series stopping as the loss
turns NaN (writers refuse or crash on non-finite tensors)."""

from __future__ import annotations

import dataclasses

import numpy as np

from gradcheck import hints
from gradcheck.rules.base import BASE_SEVERITY, Finding, RunContext
from gradcheck.signals import Parameter
from gradcheck.stats import median


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
    intervals = [median(np.diff(s.steps)) for s in signals if s.steps.size > 1]
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
