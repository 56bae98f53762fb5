"""diverging: the training loss rose by orders of magnitude over its start and never came back.

A run-level verdict, on the ``(training loss)`` row: the loss is the run's, not a parameter's.
The start is the loss's level before it left it (the median of the logged values before the
departure, :mod:`gradcheck.verdicts.onset`), not its first 10%: a loss that jumps at the first
update (the HF Trainer at a learning rate of 5: 0.69, then 15, 78, 118) has its start in the
one value before the jump. Diverging when, from a departure, the loss reaches ``diverge_factor``
times the start (sustained, or one value ``explode_spike_factor`` times it) and no later value
is back below the start: a spike that training recovers from comes back below it (and is a
transient spike, not this). Clipping does not prevent it: it bounds each update's length, not
whether its direction helps; the evidence says so when the run was clipped.

Also here: the loss's rise into a blow-up found in the gradients (:func:`loss_blow_up`), which
marks where the healthy steps end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcheck.model import RunData, ScalarSeries
from gradcheck.verdicts import hints
from gradcheck.verdicts.clipping import GlobalNorm
from gradcheck.verdicts.config import Config
from gradcheck.verdicts.numeric import median, row_medians
from gradcheck.verdicts.onset import MIN_TREND_VALUES, NEAR_BASELINE, onset_position
from gradcheck.verdicts.rules.base import Finding, baseline_size, fmt, severity
from gradcheck.verdicts.rules.exploding import Rise, rises

HF_TRAINER_CLIP = 1.0
"""``TrainingArguments.max_grad_norm``'s default: the HF Trainer clips the global norm to it
after logging the norm (``train/grad_norm`` is the norm before clipping)."""


@dataclass(eq=False)
class Divergence:
    """A training loss that rose far above its start and stayed above it."""

    start: float  # the loss's level before it left it
    onset_step: int
    first_above_step: int  # the first logged step at ``diverge_factor`` x the start
    steps_above: int
    peak: float
    peak_step: int
    last: float
    last_step: int

    @property
    def rise(self) -> float:
        return self.peak / self.start


def positive_loss(loss: ScalarSeries | None) -> tuple[np.ndarray, np.ndarray] | None:
    """Steps and finite values of a loss that is a positive quantity (None for one that goes
    negative, a GAN's or a log-likelihood's, whose ratios mean nothing, or for no loss)."""
    if loss is None or not len(loss):
        return None
    finite = np.isfinite(loss.values)
    steps, values = loss.steps[finite], loss.values[finite]
    if not values.size or not (values > 0).all():
        return None
    return steps, values


def divergence(loss: ScalarSeries | None, config: Config) -> Divergence | None:
    """The training loss's divergence (see the module docstring), or None."""
    found = positive_loss(loss)
    if found is None or found[1].size < 3:
        return None
    steps, values = found
    window = max(MIN_TREND_VALUES, baseline_size(values.size, config))
    starts = _starts(values, window)
    ahead_min = np.minimum.accumulate(values[::-1])[::-1]
    ahead_max = np.maximum.accumulate(values[::-1])[::-1]
    factor = config.diverge_factor
    candidates = np.flatnonzero(
        (values[1:] > NEAR_BASELINE * starts[1:])
        & (ahead_min[1:] > starts[1:])
        & (ahead_max[1:] >= factor * starts[1:])
    )
    for k in (candidates + 1).tolist():
        start = float(starts[k])
        crossing = _sustained_crossing(values, k, start, config)
        if crossing is None:
            continue
        onset = onset_position(values, steps, crossing, window, start)
        peak = k + int(np.argmax(values[k:]))
        return Divergence(
            start=start,
            onset_step=int(steps[onset]),
            first_above_step=int(steps[crossing]),
            steps_above=int((values[k:] >= factor * start).sum()),
            peak=float(values[peak]),
            peak_step=int(steps[peak]),
            last=float(values[-1]),
            last_step=int(steps[-1]),
        )
    return None


def _starts(values: np.ndarray, window: int) -> np.ndarray:
    """``starts[k]``: the median of the (up to ``window``) values before ``k`` (NaN at 0)."""
    starts = np.full(values.size, np.nan)
    for k in range(1, min(window, values.size)):
        starts[k] = median(values[:k])
    if values.size > window:
        views = np.lib.stride_tricks.sliding_window_view(values[:-1], window)
        starts[window:] = row_medians(views)
    return starts


def _sustained_crossing(values: np.ndarray, k: int, start: float, config: Config) -> int | None:
    """The first value from ``k`` of a sustained stretch at ``diverge_factor`` x ``start``
    (``explode_sustain_steps`` values, or to the end of the log with at least 2, or one value
    ``explode_spike_factor`` x ``start``)."""
    above = values[k:] >= config.diverge_factor * start
    spike = values[k:] >= config.explode_spike_factor * start
    padded = np.concatenate([[False], above, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    for first, end in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
        to_end = end == above.size and end - first >= 2
        if end - first >= config.explode_sustain_steps or to_end or spike[first:end].any():
            return k + first
    return None


def find_diverging(
    loss: ScalarSeries | None,
    norms: list[GlobalNorm],
    clip_ceiling: float | None,
    trainer_clips: bool,
    config: Config,
) -> Finding | None:
    """The ``(training loss)`` row's finding: the loss's divergence with the gradient norm's
    range and the clipping that did not prevent it."""
    found = divergence(loss, config)
    if found is None:
        return None
    assert loss is not None
    factor = config.diverge_factor
    parts = [
        f"the training loss ({loss.tag}) rose from {fmt(found.start)} (its level before step "
        f"{found.onset_step}) to {fmt(found.peak)} at step {found.peak_step}, "
        f"{fmt(found.rise)}x (threshold {fmt(factor)}x), at or above the threshold at "
        f"{found.steps_above} logged steps from step {found.first_above_step}, and never came "
        f"back below its start (last {fmt(found.last)} at step {found.last_step}, "
        f"{fmt(found.last / found.start)}x)"
    ]
    parts += _gradient_range(norms, found)
    parts += _clipping(norms, clip_ceiling, trainer_clips, found)
    numbers = {
        "diverge_onset_step": found.onset_step,
        "loss_start": found.start,
        "loss_peak": found.peak,
        "loss_rise_factor": found.rise,
        "loss_last": found.last,
    }
    return Finding(
        "diverging",
        severity("diverging", found.rise / factor),
        found.onset_step,
        "; ".join(parts),
        hints.DIVERGING,
        numbers,
    )


def _gradient_range(norms: list[GlobalNorm], found: Divergence) -> list[str]:
    """How far the global gradient norm moved meanwhile (empty without one)."""
    if not norms:
        return []
    norm = norms[0]
    values = norm.values[(norm.steps >= found.onset_step) & np.isfinite(norm.values)]
    values = values[values > 0]
    if values.size < 2:
        return []
    middle = median(values)
    name = norm.source.removeprefix("scalar ")
    return [
        f"the global gradient norm ({name}) stayed within {fmt(float(values.max()) / middle)}x "
        f"of its median {fmt(middle)} from then on ({fmt(float(values.min()))} to "
        f"{fmt(float(values.max()))})"
    ]


def _clipping(
    norms: list[GlobalNorm], ceiling: float | None, trainer_clips: bool, found: Divergence
) -> list[str]:
    """What clipping did, when the run was clipped: held the norm, not the loss."""
    rose = f"the loss still rose {fmt(found.rise)}x: lower the learning rate"
    if ceiling is not None:
        return [f"clipping held the gradient norm at {fmt(ceiling)}; {rose}"]
    if not trainer_clips or not norms:
        return []
    values = norms[0].values[norms[0].steps >= found.onset_step]
    above = float(np.mean(values[np.isfinite(values)] > HF_TRAINER_CLIP)) if values.size else 0
    if not above > 0.5:
        return []
    return [
        f"the HF Trainer clips the global norm to max_grad_norm ({HF_TRAINER_CLIP:.1f} unless "
        f"set) after logging it, and the logged norm was above {HF_TRAINER_CLIP:.1f} at "
        f"{above:.0%} of the steps from then on: clipping held the gradient norm at "
        f"{HF_TRAINER_CLIP:.1f}; {rose}"
    ]


def trainer_clips(data: RunData) -> bool:
    """Whether the run was written by the HF Trainer (its ``trainer_state.json``, or the tags
    its TensorBoard callback writes), which clips the global norm by default."""
    if any((info.writer or "").startswith("transformers") for info in data.file_infos):
        return True
    return {"train/grad_norm", "train/loss"} <= set(data.scalars)


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
