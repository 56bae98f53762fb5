"""slow: weights that move, but orders of magnitude less per update than healthy training's
(a learning rate far too small, a scheduler decayed to about zero, a group frozen by mistake).

Static weights are static, not slow; BatchNorm moving statistics follow the activations, not
the optimizer, and a tensor without a scale of its own (zero-initialised) has no relative
update: neither is judged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from gradcheck.verdicts import hints
from gradcheck.verdicts.numeric import median
from gradcheck.verdicts.rules.base import (
    BASE_SEVERITY,
    Excuse,
    Finding,
    RunContext,
    fmt,
    gradient_is_clear,
    gradient_level,
    severity,
)
from gradcheck.verdicts.signals import ZERO_INITIALISED, Parameter, sgd_update_ratio

if TYPE_CHECKING:
    from gradcheck.model import LayerResult

SLOW = (
    "Weights move, but far less per update than in healthy training (about 1e-3 of their scale "
    "per update): a learning rate too small, a scheduler that decayed it to about zero, or a "
    "parameter group given a tiny learning rate (or frozen) by mistake. Raise the learning rate "
    "(a learning-rate range test finds one) and check the optimizer's parameter groups."
)


def sgd_ratio(parameter: Parameter, context: RunContext) -> float | None:
    """Median ``lr * ||g|| / ||w||`` over the steps with all three logged (None otherwise)."""
    if parameter.name in context.sgd_ratios:  # the table's (gradcheck.verdicts.table)
        return context.sgd_ratios[parameter.name]
    if parameter.gradient is None or parameter.weight is None or not context.lr_values.size:
        return None
    ratio = sgd_update_ratio(
        parameter.gradient, parameter.weight, context.lr_steps, context.lr_values
    )
    return median(ratio) if ratio.size else None


def judged(parameter: Parameter, context: RunContext) -> bool:
    """Whether the parameter's update size is judged: weights with a measured movement that are
    not static, not BatchNorm moving statistics, and have a scale of their own."""
    move = context.movements.get(parameter.name)
    if move is None or move.bit_identical or move.largest < context.config.static_movement:
        return False  # no movement measured, or static (static wins)
    if hints.parameter_kind(parameter.name) == "bn_moving":
        return False
    return move.scale_source != ZERO_INITIALISED and np.isfinite(move.update_ratio)


def find_slow(parameter: Parameter, context: RunContext) -> Finding | Excuse | None:
    """Weights that move less than ``slow_update_ratio`` of their scale per optimizer step and
    less than ``slow_total_movement`` in all, and (where gradients and the learning rate are
    logged) whose SGD estimate is as small."""
    if not judged(parameter, context):
        return None
    move = context.movements[parameter.name]
    threshold = context.config.slow_update_ratio
    if not (move.update_ratio < threshold and move.largest < context.config.slow_total_movement):
        return None
    if parameter.gradient is not None and not gradient_is_clear(parameter, context):
        return Excuse(
            "slow",
            f"its weights moved {fmt(move.update_ratio)} of their scale per step, below "
            f"{fmt(threshold)}, but its gradient is small too (RMS "
            f"{fmt(gradient_level(parameter))}): the gradient, not the learning rate, holds "
            "them back",
        )
    sgd = sgd_ratio(parameter, context)
    if sgd is not None and not sgd < threshold:
        return Excuse(
            "slow",
            f"its weights moved {fmt(move.update_ratio)} of their scale per step, below "
            f"{fmt(threshold)}, but the SGD estimate lr*|g|/|w| is {fmt(sgd)} (the distance "
            "between weight distributions is a lower bound of the update)",
        )
    usual = context.config.usual_update_ratio
    estimate = f"; SGD estimate lr*|g|/|w| {fmt(sgd)} ({context.lr_tag})" if sgd is not None else ""
    bound = f"distribution distance, a lower bound of the update{_epochs(context)}"
    evidence = (
        f"weights moved a median {fmt(move.update_ratio)} of their {_scale_word(move.scale_source)}"
        f" per {_step(context)} ({bound}; "
        f"{fmt(move.largest)} over the whole run){estimate}: "
        f"below the {fmt(threshold)} threshold, {_less_than(usual, move.update_ratio)} "
        f"the usual ~{fmt(usual)} (CS231n)"
    )
    ceiling = BASE_SEVERITY["static"] - 0.01  # slow never outranks static
    return Finding(
        "slow",
        min(ceiling, severity("slow", threshold / max(move.update_ratio, 1e-300))),
        None,
        evidence,
        SLOW,
    )


def _scale_word(source: str) -> str:
    return "magnitude" if source == "own magnitude" else "spread"


def _step(context: RunContext) -> str:
    return "epoch" if context.steps_are_epochs else "optimizer step"


def _epochs(context: RunContext) -> str:
    return "; the log's steps are epochs: less per update still" if context.steps_are_epochs else ""


def _less_than(usual: float, ratio: float) -> str:
    """``about 1,000x less than``, or where the median step moved nothing the log resolves
    (the weights' distribution equal at most consecutive logged steps) ``far less than``."""
    if not ratio > 0:
        return "far less than"
    return f"about {orders(usual / ratio)} less than"


def orders(factor: float) -> str:
    """``1,000x``: a factor rounded to a power of ten (at least 1x; a factor that is not
    finite, from a ratio of zero, reads as at least 1x too: callers say more where they can)."""
    power = max(0, round(float(np.log10(factor)))) if factor > 0 and math.isfinite(factor) else 0
    return f"{10**power:,}x"


def is_kernel(name: str) -> bool:
    """A weight matrix or kernel (or embedding table): not a bias, not a BatchNorm parameter."""
    return hints.parameter_kind(name) in ("other", "embedding") and not hints.sibling_weights(name)


def run_updates(
    parameters: list[Parameter], context: RunContext, slow: set[str]
) -> tuple[str, str | None]:
    """The run's kernels' update size in words, and the run-level line when most are slow
    (``slow``: the names flagged slow)."""
    ratios = {
        p.name: context.movements[p.name].update_ratio
        for p in parameters
        if is_kernel(p.name) and judged(p, context)
    }
    if not ratios:
        return "", None
    typical = median(list(ratios.values()))
    slowest = min(ratios, key=ratios.__getitem__)
    usual = context.config.usual_update_ratio
    summary = (
        f"Kernels moved a median {short(typical)} of their scale per "
        f"{'epoch' if context.steps_are_epochs else 'update'} (a lower bound; usual: "
        f"~{short(usual)}"
        f"{' per update' if context.steps_are_epochs else ''})"
    )
    if len(ratios) > 1:
        summary += f"; slowest {slowest} {short(ratios[slowest])}"
    share = sum(name in slow for name in ratios) / len(ratios)
    if not share > context.config.slow_run_share:
        return summary, None
    slower = f"about {orders(usual / typical)}" if typical > 0 else "far"
    note = (
        f"the whole model learns {slower} slower than usual: "
        f"{sum(name in slow for name in ratios)} of {len(ratios)} kernels move below "
        f"{short(context.config.slow_update_ratio)} of their scale per "
        f"{'epoch' if context.steps_are_epochs else 'update'} (median "
        f"{short(typical)}, usual ~{short(usual)}): learning rate too small, or decayed to zero "
        "by a scheduler?"
    )
    return summary, note


def short(value: float) -> str:
    """``2e-3``: one significant digit, scientific (``0.5`` and ``3`` plainly)."""
    if not np.isfinite(value) or value == 0:
        return f"{value:g}"
    if 0.1 <= abs(value) < 100:
        return f"{value:.2g}"
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def without_slow(found: list[Finding], excused: list[str]) -> list[Finding]:
    """A parameter's findings without its slow one when another finding explains the small
    updates (a vanishing gradient, a NaN, a blow-up): the reason goes to ``excused``."""
    others = [f.verdict for f in found if f.verdict != "slow"]
    if not others or len(others) == len(found):
        return found
    excused.append(f"not slow: its weights move little per update, which {others[0]} explains")
    return [f for f in found if f.verdict != "slow"]


def slow_names(layers: Sequence[LayerResult]) -> set[str]:
    """The rows flagged slow (for :func:`run_updates`)."""
    return {layer.name for layer in layers if "slow" in layer.flags}
