"""The stretch in which a layer's share (dead, saturated) holds, and the onset of its rise into
it by the shared onset rule, on hand-made shares."""

from __future__ import annotations

import numpy as np

from gradcheck.verdicts.config import DEFAULT_CONFIG
from gradcheck.verdicts.rules.shares import held_share

STEPS = np.arange(0, 600, 10)


def healthy_zeros(seed: int = 0) -> np.ndarray:
    """A healthy ReLU layer: about half its outputs zero, a few percent of noise."""
    return np.clip(np.random.default_rng(seed).normal(0.5, 0.02, STEPS.size), 0, 1)


def test_a_layer_that_dies_at_one_step_has_its_onset_there() -> None:
    share = healthy_zeros()
    share[30:] = 0.99
    assert held_share(STEPS, share, 0.9, DEFAULT_CONFIG) == (30, 300)


def test_a_layer_that_dies_over_a_few_steps_has_its_onset_where_its_zeros_began_to_climb() -> None:
    share = healthy_zeros()
    share[30:35] = (0.62, 0.74, 0.83, 0.88, 0.93)  # the share left: 0.5 to 0.07 by factors
    share[35:] = 0.97
    start, onset = held_share(STEPS, share, 0.9, DEFAULT_CONFIG) or (None, None)
    assert (start, onset) == (34, 300)  # at or above 0.9 from step 340; dying from step 300


def test_a_layer_dead_from_the_start_and_one_that_recovers() -> None:
    assert held_share(STEPS, np.full(STEPS.size, 0.95), 0.9, DEFAULT_CONFIG) == (0, 0)
    share = healthy_zeros()
    share[20:40] = 0.99  # dead for a while, then firing again: not dead
    assert held_share(STEPS, share, 0.9, DEFAULT_CONFIG) is None
    share = healthy_zeros()
    share[-2:] = 0.99  # two logged steps are not enough (activation_steps: 3)
    assert held_share(STEPS, share, 0.9, DEFAULT_CONFIG) is None
    share[-3:] = 0.99
    assert held_share(STEPS, share, 0.9, DEFAULT_CONFIG) == (STEPS.size - 3, 570)


def test_an_unmeasured_share_breaks_the_stretch() -> None:
    share = np.full(STEPS.size, 0.95)
    share[10] = np.nan  # no histogram values at that step
    assert held_share(STEPS, share, 0.9, DEFAULT_CONFIG) == (11, 110)
