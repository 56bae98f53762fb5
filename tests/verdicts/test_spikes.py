"""Loss spikes (issue 35) on hand-made losses and on the corpus of other projects' logs: a
spike stands 3x above the running median and out of the loss's noise, and comes back."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.model import ScalarSeries
from gradcheck.pipeline import analyze
from gradcheck.verdicts.config import DEFAULT_CONFIG
from gradcheck.verdicts.spikes import episodes, loss_spikes
from tests.support.paths import CORPUS_RUNS as CORPUS


def smooth_loss(steps: int = 200, seed: int = 0) -> np.ndarray:
    """A falling loss with 5% minibatch noise."""
    rng = np.random.default_rng(seed)
    return (0.2 + 2.0 * np.exp(-np.arange(steps) / 30)) * rng.lognormal(0, 0.05, steps)


def test_a_spike_that_comes_back_is_found_at_its_first_step() -> None:
    values = smooth_loss()
    values[120:124] *= (6.0, 4.0, 2.5, 2.0)
    (found,) = episodes(values, DEFAULT_CONFIG)
    assert found.start == 120 and found.end == 124
    assert found.peak / found.baseline == pytest.approx(6.0, rel=0.15)


def test_a_loss_that_does_not_come_back_is_no_spike() -> None:
    values = smooth_loss()
    values[120:] *= 10.0  # diverged for good (a blow-up, judged by nan/exploding)
    assert episodes(values, DEFAULT_CONFIG) == []
    values = smooth_loss()
    values[190:] *= 10.0  # the log ends before the 20 steps a recovery may take: not said
    assert episodes(values, DEFAULT_CONFIG) == []


def test_noise_that_reaches_3x_its_median_is_no_spike() -> None:
    """A loss that is noise (uniform in [0, 1]) reaches 3x its running median now and then."""
    values = np.random.default_rng(1).uniform(0.01, 1.0, 400)
    ratios = [values[i] / np.median(values[i - 20 : i]) for i in range(20, 400)]
    assert max(ratios) > 3  # the bare 3x rule would list it
    assert episodes(values, DEFAULT_CONFIG) == []


def test_a_negative_loss_has_no_spikes() -> None:
    values = smooth_loss() - 1.0  # a log-likelihood, a GAN's loss: no ratio means anything
    loss = ScalarSeries("loss", np.arange(values.size), values)
    assert loss_spikes(loss, [], DEFAULT_CONFIG) == ()


def test_without_gradients_a_spike_says_so() -> None:
    values = smooth_loss()
    values[150] *= 8
    (spike,) = loss_spikes(ScalarSeries("loss", np.arange(200), values), [], DEFAULT_CONFIG)
    assert spike.step == 150 and spike.led_by == ()
    assert spike.note == (
        "no gradient logged at step 150 or the logged step before (149) "
        "(the run logs none per parameter)"
    )


@pytest.mark.skipif(not CORPUS.is_dir(), reason="no ../shared/corpus")
def test_corpus_spikes() -> None:
    """A Keras run whose epoch loss jumps from 0.26 to 1.5 for one epoch has a spike; a demo
    that logs uniform noise as its loss has none."""
    keras = CORPUS / "lyhue1991__eat_tensorflow2_in_30_days/data/keras_model/20200315-093920/train"
    (run,) = analyze([str(keras)], jobs=1).runs
    assert [(s.step, round(s.loss_ratio, 1), s.led_by) for s in run.spikes] == [(57, 5.8, ())]
    noise = CORPUS / "Dipeshtamboli__tensorboard-logs/only_funcs"
    (run,) = analyze([str(noise)], jobs=1).runs
    assert run.spikes == ()
