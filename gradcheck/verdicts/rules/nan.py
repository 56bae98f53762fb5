"""nan: any NaN/Inf in a parameter's weights or gradient, or its series stopping as the loss
turns NaN (writers refuse or crash on non-finite tensors); overflow: a few gradient steps
non-finite under dynamic loss scaling, which the optimizer skips."""

from __future__ import annotations

import dataclasses

import numpy as np

from gradcheck.verdicts import hints
from gradcheck.verdicts.numeric import median
from gradcheck.verdicts.rules.base import BASE_SEVERITY, Finding, RunContext
from gradcheck.verdicts.signals import GradientSignal, Parameter

OVERFLOW_RUN = 3
"""Without a logged loss scale or weights to show the updates were skipped, non-finite
gradient steps are an overflow only when isolated: at most this many logged steps in a row
(a dynamic loss scale backs off by half at each overflow, so a stretch of them is short)."""
OVERFLOW_SHARE = 0.5
"""Non-finite gradient steps are a transient overflow only while they are at most half of the
logged steps: dynamic loss scaling halves the scale at each overflow and grows it back only
after many clean steps (GradScaler: 2,000), so a healthy run skips a small share of steps;
more than half skipped is no longer training."""


def find_nan(parameter: Parameter, context: RunContext) -> Finding | None:
    """Any NaN/Inf in the weights or gradient (a transient overflow apart: see
    :func:`transient_overflow`); or the series stop as the loss turns NaN."""
    step = parameter.first_bad_step
    if step is not None:
        if transient_overflow(parameter, context):
            return _overflow(parameter, context)
        return Finding(
            "nan",
            0.0,
            step,
            _nan_evidence(parameter, step),
            hints.nan_hint(context.loss_scale_tag is not None),
            {"first_nan_step": step},
        )
    return _stopped_at_nan_loss(parameter, context)


def transient_overflow(parameter: Parameter, context: RunContext) -> bool:
    """Non-finite gradients at isolated steps that training survived, as dynamic loss scaling
    (``torch.amp.GradScaler``, Keras ``LossScaleOptimizer``) leaves them: the optimizer skips
    those steps, so the weights stay finite, the loss stays finite, and the gradient is finite
    again at its last logged step (in a log still being written: or may be, within
    :data:`OVERFLOW_RUN` logged steps); at most :data:`OVERFLOW_SHARE` of the logged steps."""
    gradient, weight = parameter.gradient, parameter.weight
    if gradient is None or gradient.bad_steps.size == 0:
        return False
    if weight is not None and weight.bad_steps.size:
        return False  # the weights took a non-finite update: not skipped
    if context.loss_nan_step is not None:
        return False
    last = int(gradient.steps[-1]) if gradient.steps.size else None
    if last is None:
        return False
    if bool(np.isin(last, gradient.bad_steps)) and not _may_recover(gradient, context):
        return False  # non-finite to the end: it never recovered
    if gradient.bad_steps.size > OVERFLOW_SHARE * gradient.steps.size:
        return False
    shown_skipped = weight is not None or context.loss_scale_tag is not None
    return shown_skipped or _longest_bad_run(gradient.steps, gradient.bad_steps) <= OVERFLOW_RUN


def _may_recover(gradient: GradientSignal, context: RunContext) -> bool:
    """Whether gradients non-finite at the last logged step may still turn finite: only in a
    log still being written, and for :data:`OVERFLOW_RUN` logged steps at most (an overflow
    that dynamic loss scaling skips is over by then)."""
    if not context.open_end:
        return False
    bad = np.isin(gradient.steps, gradient.bad_steps)
    finite_at = np.flatnonzero(~bad)
    trailing = bad.size - (int(finite_at[-1]) + 1 if finite_at.size else 0)
    return trailing <= OVERFLOW_RUN


def _longest_bad_run(steps: np.ndarray, bad_steps: np.ndarray) -> int:
    """The most logged steps in a row that are non-finite."""
    bad = np.isin(steps, bad_steps).astype(np.int8)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], bad, [0]])))
    return int((edges[1::2] - edges[0::2]).max(initial=0))


def _overflow(parameter: Parameter, context: RunContext) -> Finding:
    gradient = parameter.gradient
    assert gradient is not None
    bad = gradient.bad_steps
    shown = ", ".join(str(int(s)) for s in bad[:5]) + (", ..." if bad.size > 5 else "")
    evidence = (
        f"gradient non-finite at {bad.size} of {gradient.steps.size} logged steps ({shown}), "
        "finite again at the last logged step"
    )
    evidence += "; the weights stayed finite" if parameter.weight is not None else ""
    drops = context.loss_scale_drops
    if context.loss_scale_tag is not None:
        evidence += (
            f"; the loss scale ({context.loss_scale_tag}) went down at {drops.size} logged "
            "steps" + (f" from step {int(drops[0])}" if drops.size else "")
        )
    evidence += ": overflow that dynamic loss scaling skips, not a divergence"
    return Finding(
        "overflow",
        BASE_SEVERITY["overflow"] + min(0.49, bad.size / max(gradient.steps.size, 1)),
        int(bad[0]),
        evidence,
        hints.OVERFLOW,
        {"overflow_steps": int(bad.size)},
    )


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
    if loss_step is None or not signals or context.open_end:
        return None  # a log still being written: its series stop at its newest step anyway
    last = max(int(s.steps[-1]) for s in signals)
    intervals = [median(np.diff(s.steps)) for s in signals if s.steps.size > 1]
    interval = float(min(intervals)) if intervals else 1.0
    if last > loss_step or last < loss_step - 2 * max(interval, 1.0):
        return None
    evidence = (
        f"the loss ({context.loss_tag}) is NaN/Inf from step {loss_step} and this parameter's "
        f"series stop at step {last}: writers refuse or crash on non-finite tensors"
    )
    return Finding(
        "nan",
        0.0,
        loss_step,
        evidence,
        hints.nan_hint(context.loss_scale_tag is not None),
        {"first_nan_step": loss_step, "nan_inferred_from_loss": 1},
    )


def rank_nan(
    findings: list[tuple[Parameter, Finding]], exploded: frozenset[str] = frozenset()
) -> list[tuple[Parameter, Finding]]:
    """NaN severities: a parameter with non-finite values of its own, or whose gradients
    exploded (``exploded``), ranks above one whose NaN is only inferred from the loss; within
    each, the earliest first bad step ranks highest (where NaN started)."""
    steps = [f.first_bad_step for _, f in findings if f.first_bad_step is not None]
    if not steps:
        return findings
    first, last = min(steps), max(steps)
    ranked = []
    for parameter, finding in findings:
        step = finding.first_bad_step if finding.first_bad_step is not None else last
        earliness = 1.0 - (step - first) / (last - first + 1)
        direct = parameter.first_bad_step is not None or parameter.name in exploded
        value = BASE_SEVERITY["nan"] + 0.5 * direct + 0.45 * earliness
        ranked.append((parameter, dataclasses.replace(finding, severity=value)))
    return ranked


def rank_nan_findings(parameters: list[Parameter], findings: dict[str, list[Finding]]) -> None:
    """Each NaN finding of the run (``findings`` by parameter name) ranked by :func:`rank_nan`,
    in place: a parameter whose gradient exploded counts as a direct NaN."""
    nan = [(p, f) for p in parameters for f in findings[p.name] if f.verdict == "nan"]
    exploded = frozenset(
        name for name, found in findings.items() if any(f.verdict == "exploding" for f in found)
    )
    for parameter, ranked in rank_nan(nan, exploded):
        findings[parameter.name] = [
            ranked if f.verdict == "nan" else f for f in findings[parameter.name]
        ]


def hint_after_blow_up(findings: list[Finding], rise: tuple[int | None, int | None]) -> str | None:
    """A NaN's hint when something blew up before it: after the onset of this parameter's
    exploding gradient or of the run's earliest (``rise[0]``), the blow-up's; after the
    training loss's rise into the blow-up (``rise[1]``), the loss's; else None (the NaN's own,
    for log(0))."""
    nan = next((f for f in findings if f.verdict == "nan"), None)
    if nan is None:
        return None
    own = [f.first_bad_step for f in findings if f.verdict == "exploding"]
    if any(_before(step, nan) for step in (*own, rise[0])):
        return hints.NAN_AFTER_RISE
    if _before(rise[1], nan):
        return hints.NAN_AFTER_LOSS_RISE
    return None


def _before(step: int | None, finding: Finding) -> bool:
    return step is not None and finding.first_bad_step is not None and step < finding.first_bad_step
