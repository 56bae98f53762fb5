"""dead: a layer's outputs almost all exactly zero, and staying so (ReLU units that stopped
firing), from its activation histogram (:mod:`gradcheck.verdicts.activations`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradcheck.verdicts import hints
from gradcheck.verdicts.rules.base import Finding, RunContext
from gradcheck.verdicts.rules.shares import held_finding

if TYPE_CHECKING:
    from gradcheck.verdicts.activations import Activation


def find_dead(activation: Activation, context: RunContext) -> Finding | None:
    """The share of exact zeros at or above ``dead_zero_share`` at every logged step of a
    stretch to the last, of at least ``activation_steps`` logged steps; the onset is where the
    zeros began to climb into it (:func:`.shares.held_share`)."""
    config = context.config
    return held_finding(
        "dead", activation, "zero", config.dead_zero_share, "exactly zero", hints.DEAD, config
    )
