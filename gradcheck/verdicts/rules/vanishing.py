"""vanishing: a gradient far below the run's largest (depth-relative), absolutely tiny, or
decaying by orders of magnitude further than the training loss."""

from __future__ import annotations

import numpy as np

from gradcheck.verdicts import hints
from gradcheck.verdicts.numeric import nan_to_num
from gradcheck.verdicts.registry import BLOW_UPS
from gradcheck.verdicts.rules.base import (
    Excuse,
    Finding,
    RunContext,
    comparable,
    fmt,
    gradient_level,
    rms_early_and_late,
    severity,
)
from gradcheck.verdicts.signals import Parameter


def find_vanishing(parameter: Parameter, context: RunContext) -> Finding | Excuse | None:
    """Gradient far below the run's largest, absolutely tiny, or decaying far past the loss."""
    gradient = parameter.gradient
    if gradient is None or not np.isfinite(gradient.rms).any():
        return None
    found = [
        f
        for f in (
            _vanishing_absolute(parameter, context),
            _vanishing_depth(parameter, context),
            _vanishing_decay(parameter, context),
        )
        if f is not None
    ]
    candidates = [f for f in found if isinstance(f, Finding)]
    if not candidates:
        return next(iter(found), None)
    sibling = healthy_sibling(parameter, context)
    if sibling is not None:
        return Excuse(
            "vanishing",
            f"its gradient is small, but {sibling} of its layer gets a healthy one: a bias "
            "before a normalisation gets about zero by design",
        )
    return max(candidates, key=lambda f: f.severity)


def healthy_sibling(parameter: Parameter, context: RunContext) -> str | None:
    """A weight of this bias's layer with a healthy gradient: a bias feeding a BatchNorm gets
    ~zero gradient by design (the normalisation removes it), which is not vanishing."""
    config = context.config
    for sibling in hints.sibling_weights(parameter.name):
        level = context.levels.get(sibling, float("nan"))
        floor = max(config.vanish_absolute, depth_threshold(context)[0] * context.largest_level)
        if level >= floor:
            return sibling
    return None


FOR_GOOD_SHARE = 0.9
"""A gradient below the threshold from a step to the end, with this share of all its steps
below the threshold in that final stretch, vanished from that step (a layer that dies part-way):
the few dips below it before are noise, not the onset."""


def _first_below(parameter: Parameter, threshold: float) -> int:
    """The first step below ``threshold``, or the first of the final stretch below it when
    nearly all the steps below it are in that stretch (:data:`FOR_GOOD_SHARE`)."""
    gradient = parameter.gradient
    assert gradient is not None
    below = nan_to_num(gradient.rms, nan=np.inf) < threshold
    if not below.any():
        return int(gradient.steps[0])
    first = int(np.argmax(below))
    above = np.flatnonzero(~below & np.isfinite(gradient.rms))
    if above.size and below[-1] and int(above[-1]) > first:
        final = int(above[-1]) + 1
        if below.size - final >= FOR_GOOD_SHARE * int(below.sum()):
            return int(gradient.steps[final])
    return int(gradient.steps[first])


def _where(parameter: Parameter, context: RunContext) -> hints.Position:
    return hints.position(parameter.tags.depth, context.parameter_count)


def layer_level(parameter: Parameter, context: RunContext) -> float:
    """The largest gradient level among the parameters of this one's layer (kernel, bias...):
    a layer's parameters vanish together, so they get one verdict. Not for a kernel (anything
    but a bias or beta) whose own level is below ``vanish_depth_ratio`` of its layer's: its
    inputs carry nothing back (dead units before it; the bias's gradient does not need them),
    so its own gradient vanished, whatever the bias's does. The bias keeps its layer's level:
    one before a normalisation gets about zero by design."""
    own = gradient_level(parameter)
    layer = context.layer_levels.get(hints.layer_of(parameter.name), own)
    if not np.isfinite(layer):
        return own
    is_bias = bool(hints.sibling_weights(parameter.name))
    if not is_bias and not own >= context.config.vanish_depth_ratio * layer:
        return own  # a kernel whose inputs are dead
    return max(own, layer)


def _layer_note(parameter: Parameter, level: float, context: RunContext) -> str:
    layer = layer_level(parameter, context)
    return "" if layer == level else f"; {fmt(layer)} for its layer's largest parameter"


def _vanishing_absolute(parameter: Parameter, context: RunContext) -> Finding | Excuse | None:
    assert parameter.gradient is not None
    early, _, _ = rms_early_and_late(parameter.gradient, context.config)
    level = gradient_level(parameter)
    threshold = context.config.vanish_absolute
    if not max(early, layer_level(parameter, context)) < threshold:
        return None
    learning = _still_learning(parameter, context)
    if learning:
        return Excuse(
            "vanishing",
            f"gradient RMS {fmt(level)} is below the absolute threshold {fmt(threshold)}, "
            f"but {learning}: a small loss scale that the optimizer normalises away",
        )
    evidence = (
        f"gradient RMS {fmt(level)} (median; {fmt(early)} early"
        f"{_layer_note(parameter, level, context)}) is below the absolute threshold "
        f"{fmt(threshold)} (SageMaker Debugger / DeepDiagnosis)"
    )
    excess = threshold / max(level, 1e-300)
    return Finding(
        "vanishing",
        severity("vanishing", excess),
        _first_below(parameter, threshold),
        evidence,
        hints.vanishing_hint("absolute", _where(parameter, context), parameter.name),
    )


def _measure(parameter: Parameter) -> str:
    """What a gradient's level is: a per-element RMS, or the norm itself when its element
    count is unknown (norms logged as scalars only)."""
    gradient = parameter.gradient
    return "gradient RMS" if gradient is not None and gradient.per_element else "gradient norm"


def _still_learning(parameter: Parameter, context: RunContext) -> str:
    """Why the training visibly progresses despite a tiny gradient (empty when it does not, or
    nothing tells): the loss falls and the weights move normally (each where logged)."""
    signs = []
    if context.loss_ratio is not None:
        if context.loss_ratio > context.config.loss_stalled_ratio:
            return ""
        signs.append(f"the loss fell to {fmt(context.loss_ratio)}x its early value")
    move = context.movements.get(parameter.name)
    if move is not None:
        if not move.step_update >= context.config.normal_update_ratio:
            return ""
        signs.append(f"the weights move {fmt(move.step_update)} of their spread per logged step")
    return " and ".join(signs)


def _vanishing_depth(parameter: Parameter, context: RunContext) -> Finding | Excuse | None:
    level = gradient_level(parameter)
    largest = context.largest_level
    if context.largest_name == parameter.name or not largest > 0:
        return None
    if not comparable(parameter, context):
        return None  # a norm and a per-element RMS: no common scale
    ratio = layer_level(parameter, context) / largest
    # Norms without element counts differ by the square root of the tensors' size ratio: only
    # the plain margin applies to them, not the stalled one.
    rms = parameter.name not in context.norm_levels
    embedding = hints.parameter_kind(parameter.name) == "embedding"
    threshold, stalled = depth_threshold(context, stalled_applies=rms and not embedding)
    if not ratio < threshold:
        return None
    if context.blow_up_step is not None:
        return Excuse(
            "vanishing",
            f"{_measure(parameter)} {fmt(level)} is {fmt(level / largest)} of the largest in the "
            f"run ({context.largest_name}: {fmt(largest)}), below {fmt(threshold)}, but the run "
            f"blew up from step {context.blow_up_step}: another gradient orders of magnitude "
            "larger says nothing about this one then",
        )
    why = f" while the loss {_loss_course(context)}" if stalled else ""
    evidence = (
        f"{_measure(parameter)} {fmt(level)} (median over steps"
        f"{_layer_note(parameter, level, context)})"
        f" is {fmt(level / largest)} of the largest in the run ({context.largest_name}: "
        f"{fmt(largest)}), below the {fmt(threshold)} threshold{why}"
    )
    return Finding(
        "vanishing",
        severity("vanishing", threshold / max(ratio, 1e-300)),
        _first_below(parameter, threshold * largest),
        evidence,
        hints.vanishing_hint("depth", _where(parameter, context), parameter.name),
    )


def _loss_course(context: RunContext) -> str:
    """``stalled (loss at 0.999x its early value)``, or ``rose (...)`` when it went up by more
    than the stalled margin allows a flat loss (a loss at 6e14x its start has not stalled)."""
    ratio = context.loss_ratio or 1.0
    went = "rose" if ratio > 1 / context.config.loss_stalled_ratio else "stalled"
    return f"{went} ({context.loss_tag} at {fmt(ratio)}x its early value)"


def depth_threshold(context: RunContext, stalled_applies: bool = True) -> tuple[float, bool]:
    """The depth ratio below which a gradient is vanishing, and whether the loss stalled.

    ``stalled_applies`` False keeps the plain ratio for an embedding table: each of its rows
    gets the gradient of the few tokens of the batch that use it, divided by the batch's mean,
    so its per-element gradient sits one to two orders below a dense layer's by construction
    (the held-out embedding-bag run: 6e-3 of the largest, healthy) and the stalled ratio's extra
    order of magnitude would call that vanishing."""
    config = context.config
    ratio = context.loss_ratio
    if stalled_applies and ratio is not None and ratio > config.loss_stalled_ratio:
        return config.vanish_depth_ratio_stalled, True
    return config.vanish_depth_ratio, False


def _vanishing_decay(parameter: Parameter, context: RunContext) -> Finding | None:
    assert parameter.gradient is not None
    config = context.config
    early, late, finite = rms_early_and_late(parameter.gradient, config)
    if finite.size < 6 or not early > 0:
        return None
    decay = late / early
    if context.loss_ratio is not None:
        went = "fell" if context.loss_ratio < 1 else "rose"
        reference = context.loss_ratio
        against = f"the loss {went} to {fmt(context.loss_ratio)}x its early value"
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
        hints.vanishing_hint("decay", _where(parameter, context), parameter.name),
        {"grad_decay_factor": decay},
    )


def without_vanishing(found: list[Finding], excused: list[str]) -> list[Finding]:
    """A parameter's findings without its vanishing one when its own gradient blew up (a
    finding of a blow-up verdict, nan or exploding): the level before the blow-up is no
    evidence of a gradient that vanished; the reason goes to ``excused``."""
    blown = next((f for f in found if f.verdict in BLOW_UPS), None)
    if blown is None or not any(f.verdict == "vanishing" for f in found):
        return found
    since = f" from step {blown.first_bad_step}" if blown.first_bad_step is not None else ""
    how = "turned NaN/Inf" if blown.verdict == "nan" else "exploded"
    excused.append(
        f"not vanishing: its own gradient {how}{since}: a small gradient before a blow-up "
        "is not a vanishing one"
    )
    return [f for f in found if f.verdict != "vanishing"]
