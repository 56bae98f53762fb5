"""static from a step on: weights that moved, then stopped part-way while training went on (a
learning-rate schedule that reached 0, a parameter frozen part-way).

The whole-run view (:mod:`.static`) judges weights that never moved; this one judges the
run's last window: weights bit-identical at every logged step from some step to the end, for
at least :data:`STOP_MIN_STEPS` logged steps and :data:`STOP_MIN_SHARE` of the weights'
logged steps, after moving more than ``static_movement`` before it, while the run still
trained (its gradient clearly non-zero there, or a training loss or learning rate logged
there). Bit-identical, not "small": a learning rate that decays towards 0 (a cosine
schedule, a linear decay to its end) moves the weights less and less but keeps changing them
until its last steps, where float32 rounding may leave a few identical; a stop that lasts a
tenth of the run is no schedule's tail.
"""

from __future__ import annotations

import math

import numpy as np

from gradcheck.verdicts import hints
from gradcheck.verdicts.numeric import median
from gradcheck.verdicts.rules.base import (
    BASE_SEVERITY,
    Finding,
    RunContext,
    fmt,
    gradient_is_clear,
)
from gradcheck.verdicts.signals import Parameter, WeightSignal

STOP_MIN_STEPS = 5
"""Logged steps the weights must stay bit-identical to the end: fewer can be the last steps of
a schedule decaying to about zero, where float32 rounds the updates away."""
STOP_MIN_SHARE = 0.1
"""... and this share of the weights' logged steps: a cosine schedule to 0 updates by less than
float32 resolves (about 1e-7 of a weight; 1e-4 of the usual 1e-3 update) only over its last
~1% of steps; a stop over a tenth of the run is not that."""
MIN_TRAINING_STEPS = 3
"""Training-loss (or learning-rate) values logged in the stopped window that say training went
on there (as :data:`.static.MIN_TRAINING_STEPS`)."""


def stopped_index(weight: WeightSignal) -> int | None:
    """Index of the first logged step of the weights' final bit-identical stretch (histograms
    equal, and exact norms where logged), when it is long enough (:data:`STOP_MIN_STEPS`,
    :data:`STOP_MIN_SHARE`) and the weights changed before it; None otherwise."""
    if "_stopped_index" in weight.__dict__:  # the table's (gradcheck.verdicts.table)
        return weight.__dict__["_stopped_index"]
    count = weight.steps.size
    if weight.fingerprints.size != count or count < 2:
        return None
    finite = np.isfinite(weight.quantiles).all(axis=1)
    last_fingerprint, last_norm = weight.fingerprints[-1], weight.norm[-1]
    same = (weight.fingerprints == last_fingerprint) & finite
    same &= (weight.norm == last_norm) | (np.isnan(weight.norm) & np.isnan(last_norm))
    differs = np.flatnonzero(~same)
    if differs.size == 0:
        return None  # identical throughout: the whole-run view's
    return stopped_from(int(differs[-1]) + 1, count)


def stopped_from(first: int, count: int) -> int | None:
    """``first`` (the step after the weights' last change, of ``count`` logged) when the
    stretch from it to the end is long enough to say they stopped."""
    if count - first < max(STOP_MIN_STEPS, math.ceil(STOP_MIN_SHARE * count)):
        return None
    return first


def keep_stopped_index(weight: WeightSignal, first: int | None) -> None:
    """Keep ``first`` as ``weight``'s :func:`stopped_index` (the table computes it for a run's
    weights at once)."""
    weight.__dict__["_stopped_index"] = first


def find_stopped(parameter: Parameter, context: RunContext) -> Finding | None:
    """Weights that moved, then stayed bit-identical from a step to the end of the run while
    it trained (see the module docstring)."""
    weight, move = parameter.weight, context.movements.get(parameter.name)
    if weight is None or move is None or move.largest < context.config.static_movement:
        return None
    if hints.parameter_kind(parameter.name) == "bn_moving":
        return None  # they follow the activations, and stop in inference mode by design
    first = stopped_index(weight)
    if first is None:
        return None
    stop, end = int(weight.steps[first]), int(weight.steps[-1])
    driven = _gradient_during(parameter, context, stop)
    if driven is None:
        return None  # its gradient faded too: the vanishing rule's, not a stopped optimizer
    trained = driven or _trained_during(context, stop, end)
    if not trained:
        return None  # nothing says training went on: an evaluation after training?
    logged = weight.steps.size - first
    evidence = (
        f"weights are bit-identical at the last {logged} logged steps ({stop}-{end}) after "
        f"moving up to {fmt(move.largest)} of their spread before step {stop} (window: at "
        f"least {STOP_MIN_STEPS} logged steps and {STOP_MIN_SHARE:.0%} of them)"
        f"{driven}{_learning_rate_note(context, stop, end)}"
    )
    share = logged / weight.steps.size
    return Finding(
        "static",
        BASE_SEVERITY["static"] + 0.5 * share,
        stop,
        evidence,
        hints.STATIC_STOPPED,
        {"weight_movement": move.largest, "stopped_step": stop},
    )


def _gradient_during(parameter: Parameter, context: RunContext, stop: int) -> str | None:
    """The gradient from ``stop`` on, in words ("" without one logged there); None when it
    is not clearly non-zero there (no gradient, no update: not the optimizer's doing)."""
    gradient = parameter.gradient
    if gradient is None:
        return ""
    after = gradient.norm[(gradient.steps >= stop) & np.isfinite(gradient.norm)]
    before = gradient.norm[(gradient.steps < stop) & np.isfinite(gradient.norm)]
    if after.size == 0:
        return ""
    level = median(after)
    if not (level > 0 and gradient_is_clear(parameter, context)):
        return None
    earlier = f", {fmt(median(before))} before" if before.size else ""
    return (
        f"; its gradient did not stop (median L2 norm {fmt(level)} from step {stop}{earlier}): "
        "the optimizer no longer updates it"
    )


def _trained_during(context: RunContext, stop: int, end: int) -> str:
    """What says the run trained from ``stop`` to ``end`` without a gradient logged: the
    training loss or the learning rate logged at :data:`MIN_TRAINING_STEPS` steps there."""
    for what, tag, steps in (
        ("the training loss", context.loss_tag, context.loss_steps),
        ("the learning rate", context.lr_tag, context.lr_steps),
    ):
        inside = int(np.count_nonzero((steps >= stop) & (steps <= end)))
        if tag is not None and inside >= MIN_TRAINING_STEPS:
            return f"; {what} ({tag}) is logged at {inside} steps there: training went on"
    return ""


def _learning_rate_note(context: RunContext, stop: int, end: int) -> str:
    """What the logged learning rate says of the stop: 0 from a step (the schedule reached
    it), or not 0 (the parameter was frozen or left its optimizer group); nothing unlogged."""
    if context.lr_tag is None or not context.lr_values.size:
        return "; learning rate not logged: a schedule that reached 0?"
    steps, values = context.lr_steps, context.lr_values
    inside = (steps >= stop) & (steps <= end) & np.isfinite(values)
    if not inside.any():
        return ""
    if (values[inside] == 0).all():
        nonzero = np.flatnonzero(values != 0)
        zero_from = int(steps[nonzero[-1] + 1]) if nonzero.size else int(steps[0])
        return f"; the learning rate ({context.lr_tag}) is 0 from step {zero_from}"
    return (
        f"; the learning rate ({context.lr_tag}) is not 0 there (median "
        f"{fmt(median(values[inside]))}): frozen, or left out of the optimizer, part-way?"
    )
