"""The likely cause of two runs' difference, in one sentence: ``gradcheck compare``'s summary.

Each rule looks for the signature of one mistake that makes a hand-written training step
differ from ``model.fit`` (or a refactored loop from its reference):

- a constant factor on every gradient from the first step: the loss reduction (a sum over the
  batch instead of a mean multiplies every gradient by the batch size);
- BatchNorm moving statistics that move in one run only: the step runs the model with
  ``training=False`` (or without the learning phase, as in the seed question);
- trainable weights that move in one run only: not in the optimizer's variable list,
  ``trainable=False``, or their gradients dropped;
- updates a constant factor apart for gradients of one size: the learning rate.

Every rule that fits is said, the strongest evidence first; without one, where the runs part.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gradcheck.compare.matching import without_model_scope
from gradcheck.model import Cause, ParameterComparison
from gradcheck.report.view import plural
from gradcheck.verdicts.numeric import median
from gradcheck.verdicts.registry import ENTRIES

NAMES_SHOWN = 3


def name_cause(
    parameters: Sequence[ParameterComparison], factor: float, common_steps: int
) -> tuple[str, Cause | None]:
    """The summary sentence(s) and the key of the first cause that fits (None: none fits)."""
    both = [p for p in parameters if p.presence == "both"]
    found: list[tuple[Cause, str]] = []
    for rule in (_gradient_factor, _batchnorm_statistics, _not_updated, _learning_rate):
        sentence = rule(both, factor)
        if sentence is not None:
            found.append(sentence)
    if found:
        return " ".join(text for _, text in found), found[0][0]
    parting = [p for p in both if p.first_divergent_step is not None]
    if parting:
        step = min(p.first_divergent_step for p in parting if p.first_divergent_step is not None)
        first = [p for p in parting if p.first_divergent_step == step]
        return (
            f"The runs part at step {step}: the gradient ratio B/A of "
            f"{_names(first)} leaves [1/{_factor(factor)}, {_factor(factor)}] there "
            f"({len(parting)} of {len(both)} parameters part in all).",
            "diverges_later",
        )
    if any(p.diverges for p in both):
        return f"{_count(both, 'diverges')} of {len(both)} parameters differ; no cause fits.", None
    band = f"[1/{_factor(factor)}, {_factor(factor)}]"
    steps = plural(common_steps, "common step")
    if not any(p.grad_norm_ratio_median is not None for p in both):
        return (
            f"The runs agree on what both logged (no gradient in both): over {steps} the "
            f"same weights move, their updates B/A within {band}.",
            None,
        )
    return (
        f"The runs agree: every gradient ratio B/A stays within {band} over {steps}, and "
        "the same weights move.",
        None,
    )


def _gradient_factor(
    both: Sequence[ParameterComparison], factor: float
) -> tuple[Cause, str] | None:
    """Every gradient ratio at the first common step out of band on one side, and alike.

    A factor on the loss multiplies every parameter's gradient exactly alike; two runs fed
    different batches at that step add minibatch noise of tens of percent per parameter, so
    ratios within the square root of ``factor`` of each other (2x at the default 4: half the
    band, on a log scale) count as one factor.
    """
    ratios = [p.grad_norm_ratio_first for p in both if p.grad_norm_ratio_first]
    if 2 * len(ratios) <= len(both) or _blew_up(both):
        return None  # most parameters' first ratio missing, or a run that blew up: no factor
    if not MIN_FACTOR <= median(ratios) <= MAX_FACTOR:
        return None  # no batch size or loss reduction makes a factor this large
    above = ratios and all(r > factor for r in ratios)
    below = ratios and all(r < 1 / factor for r in ratios)
    if not (above or below) or max(ratios) / min(ratios) > math.sqrt(factor):
        return None
    ratio = median(ratios)
    alike = f"all {len(ratios)} parameters alike" if len(ratios) > 1 else "its only one"
    if ratio > 1:
        size = _factor(ratio)
        text = (
            f"B's gradients are {size}x A's from the first step ({alike}): a loss summed "
            f"instead of averaged over a batch of {size}?"
        )
    else:
        size = _factor(1 / ratio)
        text = (
            f"A's gradients are {size}x B's from the first step ({alike}): A's loss summed "
            f"instead of averaged over a batch of {size}?"
        )
    return "gradient_factor", text


def _batchnorm_statistics(
    both: Sequence[ParameterComparison], factor: float
) -> tuple[Cause, str] | None:
    """BatchNorm moving statistics that move in one run and not in the other."""
    found = _moving_in_one_run([p for p in both if p.kind == "bn_moving"])
    if found is None:
        return None
    moving, still, names = found
    return "batchnorm_statistics", (
        f"BatchNorm moving statistics move in {moving} only ({_names(names)}): "
        f"{still}'s training step runs the model with training=False (or never sets "
        "the learning phase), so BatchNorm normalises with statistics it never "
        f"updates; call the model with training=True in {still}'s step?"
    )


def _not_updated(both: Sequence[ParameterComparison], factor: float) -> tuple[Cause, str] | None:
    """Weights (not BatchNorm statistics) that move in one run and not in the other."""
    found = _moving_in_one_run([p for p in both if p.kind != "bn_moving"])
    if found is None:
        return None
    moving, still, names = found
    one = len(names) == 1
    return "not_updated", (
        f"{plural(len(names), 'parameter')} {'moves' if one else 'move'} in {moving} "
        f"only ({_names(names)}): {still} never updates {'it' if one else 'them'}: left "
        "out of the optimizer's variable list, trainable=False, or "
        f"{'its gradient' if one else 'their gradients'} not applied?"
    )


def _moving_in_one_run(
    parameters: Sequence[ParameterComparison],
) -> tuple[str, str, list[ParameterComparison]] | None:
    """``(moving run, still run, parameters)`` for those whose weights move in A and not in
    B (or else in B and not in A); None when there are none."""
    for moving, still, pair in (("A", "B", (True, False)), ("B", "A", (False, True))):
        names = [p for p in parameters if (p.moves_a, p.moves_b) == pair]
        if names:
            return moving, still, names
    return None


def _blew_up(both: Sequence[ParameterComparison]) -> bool:
    """Whether either run's verdicts say it blew up: its ratios then measure the blow-up."""
    bad = {entry.name for entry in ENTRIES if entry.skews_ratios}
    return any(p.verdict_a in bad or p.verdict_b in bad for p in both)


MAX_FACTOR = 1e5
MIN_FACTOR = 1 / MAX_FACTOR
"""A constant gradient factor from the first step is read as a loss reduction or batch size
only up to this (batches beyond 10^5 examples are rare; larger factors are a blow-up)."""


def _learning_rate(both: Sequence[ParameterComparison], factor: float) -> tuple[Cause, str] | None:
    """Updates per unit of gradient a factor apart while the gradients start alike (never
    after a blow-up: the updates then measure it, not the learning rate)."""
    if _blew_up(both):
        return None
    firsts = [p.grad_norm_ratio_first for p in both if p.grad_norm_ratio_first]
    steps = [p.step_size_ratio_median for p in both if p.step_size_ratio_median]
    if not firsts or not steps or not 1 / factor <= median(firsts) <= factor:
        return None
    ratio = median(steps)
    if 1 / factor <= ratio <= factor:
        return None
    relation = f"{_factor(ratio)}x" if ratio > 1 else f"1/{_factor(1 / ratio)} of"
    return "learning_rate", (
        f"B's weights move {relation} A's per step for gradients of the same size (median of "
        f"{plural(len(steps), 'parameter')}): B's learning rate {relation} A's?"
    )


def _names(parameters: Sequence[ParameterComparison]) -> str:
    shown = ", ".join(without_model_scope(p.name) for p in parameters[:NAMES_SHOWN])
    more = len(parameters) - NAMES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def _factor(value: float) -> str:
    """``32`` for a factor of 10 or more, else two significant digits (``4.5``)."""
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def _count(parameters: Sequence[ParameterComparison], attribute: str) -> int:
    return sum(bool(getattr(p, attribute)) for p in parameters)
