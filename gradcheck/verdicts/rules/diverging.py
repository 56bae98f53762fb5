"""The training loss over time: where its blow-up began.

A run that blows up shows it first in the training loss when the loss is logged at every step
and the gradients only now and then (or not at all): the loss's rise by orders of magnitude
above its early level (the exploding rule's :func:`~.exploding.rises` on the loss) marks where
the healthy steps end.
"""

from __future__ import annotations

import numpy as np

from gradcheck.model import ScalarSeries
from gradcheck.verdicts.config import Config
from gradcheck.verdicts.rules.exploding import Rise, rises


def loss_blow_up(loss: ScalarSeries | None, before: int, config: Config) -> Rise | None:
    """The rise of the training loss (``explode_factor`` x its early level, sustained or a
    spike) that runs into a blow-up found at step ``before`` (a NaN, an exploding onset): it
    began before that step and the loss did not come back below the threshold until then (or
    it turned non-finite). None for a loss that is not a positive quantity (a GAN's, a
    log-likelihood's) or that rose only after ``before``."""
    if loss is None or not len(loss):
        return None
    finite = np.isfinite(loss.values)
    if (loss.values[finite] < 0).any():
        return None
    earlier = loss.steps[finite & (loss.steps < before)]
    if not earlier.size:
        return None
    bad = loss.steps[~finite]
    for rise in rises(loss.values, loss.steps, bad, config):
        if rise.onset_step >= before:
            break
        if rise.into_nonfinite or rise.last_above_step >= int(earlier[-1]):
            return rise
    return None
