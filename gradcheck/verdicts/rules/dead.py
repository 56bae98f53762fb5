"""dead: a layer's outputs almost all exactly zero, and staying so (ReLU units that stopped
firing), from its activation histogram (:mod:`gradcheck.verdicts.activations`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradcheck.verdicts import hints
from gradcheck.verdicts.rules.base import Finding, RunContext, severity
from gradcheck.verdicts.rules.shares import held_share, share_evidence

if TYPE_CHECKING:
    from gradcheck.verdicts.activations import Activation


def find_dead(activation: Activation, context: RunContext) -> Finding | None:
    """The share of exact zeros at or above ``dead_zero_share`` at every logged step of a
    stretch to the last, of at least ``activation_steps`` logged steps; the onset is where the
    zeros began to climb into it (:func:`.shares.held_share`)."""
    config = context.config
    found = held_share(activation.steps, activation.zero, config.dead_zero_share, config)
    if found is None:
        return None
    start, onset = found
    since = slice(start, None)
    evidence = share_evidence(
        "exactly zero",
        activation.steps[since],
        activation.zero[since],
        activation.zero_low[since],
        activation.zero_high[since],
        config.dead_zero_share,
        onset,
    )
    last = float(activation.zero[-1])
    return Finding(
        "dead",
        severity("dead", last / config.dead_zero_share),
        onset,
        evidence,
        hints.DEAD,
        {
            "dead_from_step": int(activation.steps[start]),
            "exact_zero_share_low": float(activation.zero_low[since].min()),
        },
    )
