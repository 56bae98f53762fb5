"""saturated: a bounded layer's outputs (tanh, sigmoid) almost all at the bounds, where the
derivative is near zero, and staying so, from its activation histogram."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradcheck.verdicts import hints
from gradcheck.verdicts.rules.base import Excuse, Finding, RunContext
from gradcheck.verdicts.rules.shares import held_finding

if TYPE_CHECKING:
    from gradcheck.verdicts.activations import Activation

BOUNDS = {"tanh": "within 0.04 of -1 or 1", "sigmoid": "within 0.02 of 0 or 1"}


def find_saturated(activation: Activation, context: RunContext) -> Finding | Excuse | None:
    """For outputs inside tanh's or sigmoid's range, the share near its bounds at or above
    ``saturated_share`` at every logged step of a stretch to the last, of at least
    ``activation_steps`` logged steps (its onset: :func:`.shares.held_share`); the network's
    output layer is excused (its outputs near 0 and 1 are confident predictions)."""
    kind = activation.bound_kind
    if kind is None:
        return None
    config = context.config
    what = f"{BOUNDS[kind]} ({kind}-like outputs)"
    found = held_finding(
        "saturated", activation, "bound", config.saturated_share, what, hints.SATURATED, config
    )
    if found is None or not activation.output_layer:
        return found
    return Excuse(
        "saturated",
        f"its outputs stay near the bounds of [{'-1' if kind == 'tanh' else '0'}, 1], but "
        "it reads as the network's output layer (the last activation logged, or its name), "
        "whose outputs are bounded by design",
    )
