"""static: weights that do not move (bit-identical, or below float noise) while the run's other
weights do; BatchNorm parameters get a note on their moving statistics."""

from __future__ import annotations

import numpy as np

from gradcheck import hints
from gradcheck.rules.base import BASE_SEVERITY, Finding, RunContext, fmt, severity
from gradcheck.signals import Parameter
from gradcheck.stats import nanmedian


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
        f"{fmt(others_moved)}{_gradient_note(parameter, context)}"
        f"{_bn_note(parameter, kind, context)}"
    )
    excess = threshold / max(moved, 1e-12)
    return Finding(
        "static",
        severity("static", excess) if not move.bit_identical else BASE_SEVERITY["static"] + 0.99,
        int(weight.steps[0]),
        evidence,
        hints.static_hint(kind, _gradient_logging(parameter, context)),
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
