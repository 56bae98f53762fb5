"""static: weights that do not move (bit-identical, or below float noise) while the run's other
weights do; BatchNorm parameters get a note on their moving statistics."""

from __future__ import annotations

import heapq
from collections.abc import Mapping

import numpy as np

from gradcheck.tags.scalars import training_loss_rank
from gradcheck.verdicts import hints
from gradcheck.verdicts.numeric import nanmedian
from gradcheck.verdicts.rules.base import (
    BASE_SEVERITY,
    Excuse,
    Finding,
    RunContext,
    fmt,
    gradient_is_clear,
    severity,
)
from gradcheck.verdicts.rules.stopped import find_stopped
from gradcheck.verdicts.rules.vanishing import healthy_sibling
from gradcheck.verdicts.signals import ZERO_INITIALISED, Movement, Parameter


def find_static(parameter: Parameter, context: RunContext) -> Finding | Excuse | None:
    """Weights that do not move while the run's other weights do, or while their own gradient
    is clearly non-zero (an update that never comes: left out of the optimizer)."""
    move = context.movements.get(parameter.name)
    weight = parameter.weight
    if move is None or weight is None:
        return None
    moved = move.largest
    threshold = context.config.static_movement
    if not (move.bit_identical or moved < threshold):
        return find_stopped(parameter, context)  # moved: did it stop part-way?
    driven = parameter.gradient is not None and gradient_is_clear(parameter, context)
    sibling = _moving_sibling(parameter, context)
    if sibling is not None and not driven:
        return Excuse(
            "static",
            f"its weights did not move, but {sibling} of its layer did and "
            + _why_unmoved(parameter, context),
        )
    others_moved = _others_moved(parameter, context)
    alone = others_moved < context.config.others_moving
    trained = training_signal(parameter, context) if alone and not driven else ""
    if alone and not driven and not trained:
        return Excuse(
            "static",
            "its weights did not move, but neither did any other learned weight of the run "
            f"(up to {fmt(others_moved)}) and no clear gradient drives it: an evaluation log?",
        )
    steps = f"{weight.steps.size} logged steps ({int(weight.steps[0])}-{int(weight.steps[-1])})"
    if move.bit_identical:
        what = f"weights are bit-identical at all {steps}"
    else:
        what = f"weights moved at most {fmt(moved)} of their spread over {steps}"
    if others_moved >= context.config.others_moving:
        reference = f", while other weights moved up to {fmt(others_moved)}"
    else:
        reference = ", as every other weight of the run (is the optimizer step ever taken?)"
        reference += f"; not an evaluation log: {trained}" if trained else ""
    kind = hints.parameter_kind(parameter.name)
    evidence = f"{what} (threshold {fmt(threshold)}){reference}{_gradient_note(parameter, context)}"
    rounded = tiny_updates(parameter, context) and kind != "bn_moving"
    if not rounded and not (trained and kind == "other"):  # nothing moved: not one frozen layer
        evidence += _bn_note(parameter, kind, context)
    excess = threshold / max(moved, 1e-12)
    return Finding(
        "static",
        severity("static", excess) if not move.bit_identical else BASE_SEVERITY["static"] + 0.99,
        int(weight.steps[0]),
        evidence,
        hints.STATIC_FLOAT32.format(rate=fmt(_learning_rate(context) or 0.0))
        if rounded
        else _never_trained_hint(parameter)
        if trained
        else hints.static_hint(kind, _gradient_logging(parameter, context)),
        {"weight_movement": moved},
    )


MIN_TRAINING_STEPS = 3
"""A training loss (or a learning rate) logged at this many steps from the first to the last
logged weights says that training steps were taken between them: one value may be an initial
evaluation, two the ends of an evaluation pass, three or more are a series over time."""


def training_signal(parameter: Parameter, context: RunContext) -> str:
    """What says the run trained while this parameter's weights were logged (empty when
    nothing does): a training loss, else an optimizer's learning rate, logged at
    :data:`MIN_TRAINING_STEPS` steps or more from its first to its last logged weights. An
    evaluation log has neither; a held-out loss (``val_loss``, ``eval/loss``) is not one."""
    weight = parameter.weight
    assert weight is not None
    first, last = int(weight.steps[0]), int(weight.steps[-1])
    loss_tag = (
        context.loss_tag if context.loss_tag and not training_loss_rank(context.loss_tag) else None
    )
    for what, tag, steps in (
        ("the training loss", loss_tag, context.loss_steps),
        ("the learning rate", context.lr_tag, context.lr_steps),
    ):
        if tag is None:
            continue
        inside = int(np.searchsorted(steps, last, "right") - np.searchsorted(steps, first, "left"))
        if inside >= MIN_TRAINING_STEPS:
            found = f"{what} ({tag}) is logged at {inside} steps from step {first} to {last}"
            if tag == loss_tag and context.loss_ratio is not None:
                found += f" (its late level {fmt(context.loss_ratio)}x its early one)"
            return found
    return ""


def _never_trained_hint(parameter: Parameter) -> str:
    """Nothing moved while the run trained: without a gradient logged, the optimizer step is
    the suspect; with one logged (not clearly non-zero, or the run would be judged as driven),
    the gradient that does not reach the weights is."""
    return hints.STATIC_NEVER_TRAINED if parameter.gradient is None else hints.VANISHING_ZERO


def _why_unmoved(parameter: Parameter, context: RunContext) -> str:
    """Why a parameter whose layer's weights move did not: a bias before a normalisation gets
    no gradient by design, where its layer's weights get a healthy one; where theirs is small
    too, the gradient vanished on its way back (the vanishing rule's verdict), and no
    normalisation need be there."""
    if parameter.gradient is None:
        return "no gradient was logged for it: a bias before a normalisation gets none by design"
    if healthy_sibling(parameter, context) is not None:
        return "its own gradient is about zero: a bias before a normalisation gets none by design"
    return (
        "its own gradient is about zero, as is its layer's: a vanishing gradient, not an "
        "update that never comes"
    )


def _moving_sibling(parameter: Parameter, context: RunContext) -> str | None:
    """A weight of the same layer that moved: a bias that stays put beside it is not a frozen
    layer when its own gradient is about zero (a bias feeding a BatchNorm gets none, so plain
    SGD never moves it)."""
    threshold = context.config.static_movement
    for sibling in hints.sibling_weights(parameter.name):
        move = context.movements.get(sibling)
        if move is not None and move.largest >= threshold:
            return sibling
    return None


def _others_moved(parameter: Parameter, context: RunContext) -> float:
    """How far the run's other learned weights moved (see :func:`reference_movements`)."""
    for name, moved in context.reference_movements:
        if name != parameter.name:
            return moved
    return 0.0


def reference_movements(movements: Mapping[str, Movement]) -> tuple[tuple[str, float], ...]:
    """The two largest movements of the run's learned weights, largest first, with their names:
    the largest other than any one parameter's is among them (found once a run, not once a
    parameter: a scan per parameter made 20,000 parameters quadratic). BatchNorm moving
    statistics (they follow the activations, not the optimizer) and zero-initialised tensors
    (their movement has no scale of their own) are no reference."""
    found = [
        (name, m.largest)
        for name, m in movements.items()
        if hints.parameter_kind(name) != "bn_moving" and m.scale_source != ZERO_INITIALISED
    ]
    return tuple(heapq.nlargest(2, found, key=lambda item: item[1]))


FLOAT32_RESOLUTION = float(np.finfo(np.float32).eps)
"""A float32 weight changes only when its update exceeds about this fraction of its size."""


def _gradient_logging(parameter: Parameter, context: RunContext) -> hints.GradientLogging:
    """Whether this parameter's gradient was logged, only other parameters', or none."""
    if parameter.gradient is not None:
        return "logged"
    return "not_for_this" if context.gradients_logged > 0 else "not_in_run"


def _gradient_note(parameter: Parameter, context: RunContext) -> str:
    """A static parameter that still gets gradients is not updated by the optimizer, unless
    its gradient is too small for an SGD-style update (learning rate <= 1) to change a float32
    weight at all: then it stays for the gradient's sake (vanishing), not the optimizer's. One
    without a gradient in a run that logs gradients gets none at all (frozen)."""
    gradient = parameter.gradient
    frozen = _gradient_logging(parameter, context) == "not_for_this"
    if frozen and hints.parameter_kind(parameter.name) != "bn_moving":
        if context.unpaired_gradients:
            return (
                f"; no gradient is paired with it, and {context.unpaired_gradients} gradient "
                "series have no weights: if one is its gradient, pair them with --grad-pattern "
                "/ --weight-pattern"
            )
        return (
            f"; no gradient was logged for it ({context.gradients_logged} other parameters have "
            "one): frozen (requires_grad=False, trainable=False) or not connected to the loss"
        )
    if gradient is None or not np.isfinite(gradient.norm).any():
        return ""
    median = nanmedian(gradient.norm)
    if not median > 0:
        return "; its gradient is zero"
    grad_rms = gradient.level
    weight = parameter.weight
    weight_rms = nanmedian(weight.rms) if weight is not None else float("nan")
    rate = _learning_rate(context)
    if rate is not None and rate * grad_rms < FLOAT32_RESOLUTION * weight_rms:
        return (
            f"; its updates (learning rate {fmt(rate)} from {context.lr_tag} x gradient RMS "
            f"{fmt(grad_rms)} = {fmt(rate * grad_rms)}) are below float32 resolution of its "
            f"weights (RMS {fmt(weight_rms)}): they round away, the learning rate is far too small"
        )
    if rate is not None and tiny_updates(parameter, context):
        update = rate * grad_rms
        scale = context.movements[parameter.name].scale
        return (
            f"; its updates (learning rate {fmt(rate)} from {context.lr_tag} x gradient RMS "
            f"{fmt(grad_rms)} = {fmt(update)}) are {fmt(update / scale)} of its scale per step: "
            "too small to move it, the learning rate is far too small"
        )
    if grad_rms < FLOAT32_RESOLUTION * weight_rms:
        return (
            f"; its gradient (RMS {fmt(grad_rms)}) is below float32 resolution of its weights "
            f"(RMS {fmt(weight_rms)}): updates proportional to it round away (vanishing "
            "gradient, or a learning rate far too small)"
        )
    return (
        f"; its gradient is not zero (median L2 norm {fmt(median)}), so the optimizer does not "
        "update it (left out of the optimizer, or a zero learning rate)"
    )


def _learning_rate(context: RunContext) -> float | None:
    """The run's median logged learning rate (None when not logged)."""
    finite = context.lr_values[np.isfinite(context.lr_values)]
    return nanmedian(finite) if finite.size else None


def below_resolution(parameter: Parameter, context: RunContext) -> bool:
    """Whether a logged learning rate times the parameter's gradient is below float32
    resolution of its weights: SGD updates round away (plain SGD; momentum adds at most 10x)."""
    rate = _learning_rate(context)
    gradient, weight = parameter.gradient, parameter.weight
    if rate is None or gradient is None or weight is None or not np.isfinite(weight.rms).any():
        return False
    return bool(rate * gradient.level < FLOAT32_RESOLUTION * nanmedian(weight.rms))


def tiny_updates(parameter: Parameter, context: RunContext) -> bool:
    """Whether a logged learning rate times the gradient is below float32 resolution of the
    weights, or below ``slow_update_ratio`` of their scale (a zero-initialised bias): SGD
    updates that cannot move the weights measurably."""
    rate = _learning_rate(context)
    move = context.movements.get(parameter.name)
    if rate is None or parameter.gradient is None or move is None:
        return False
    small = rate * parameter.gradient.level < context.config.slow_update_ratio * move.scale
    return small or below_resolution(parameter, context)


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
