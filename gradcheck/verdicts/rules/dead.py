"""dead: a layer's outputs almost all exactly zero, and staying so (ReLU units that stopped
firing), from its activation histogram (:mod:`gradcheck.verdicts.activations`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gradcheck.verdicts import hints
from gradcheck.verdicts.rules.base import Finding, RunContext, severity
from gradcheck.verdicts.rules.shares import share_evidence

if TYPE_CHECKING:
    from gradcheck.verdicts.activations import Activation


def find_dead(activation: Activation, context: RunContext) -> Finding | None:
    """The share of exact zeros at or above ``dead_zero_share`` at every logged step from the
    onset to the last, for at least ``activation_steps`` logged steps."""
    from gradcheck.verdicts.activations import stays_from

    config = context.config
    holds = np.nan_to_num(activation.zero, nan=0.0) >= config.dead_zero_share
    onset = stays_from(activation.steps, holds, config.activation_steps)
    if onset is None:
        return None
    since = activation.steps >= onset
    evidence = share_evidence(
        "exactly zero",
        activation.steps[since],
        activation.zero[since],
        activation.zero_low[since],
        activation.zero_high[since],
        config.dead_zero_share,
    )
    last = float(activation.zero[-1])
    return Finding(
        "dead",
        severity("dead", last / config.dead_zero_share),
        onset,
        evidence,
        hints.DEAD,
        {"dead_from_step": onset, "exact_zero_share_low": float(activation.zero_low[since].min())},
    )
