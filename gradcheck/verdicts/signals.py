"""Per-parameter signals over steps: what the verdict rules look at.

For each parameter (see :func:`gradcheck.verdicts.pairing.pair_parameters`) this gathers, from a
:class:`~gradcheck.model.RunData`, its gradient's L2 norm and per-element RMS per step and its
weights' norm, spread, quantile grid and fingerprints per step, plus the steps at which either
held NaN/Inf. Exact norms logged as scalars (``gradient_norm/<param>``, ``weight_norm/<param>``)
are preferred over bucket estimates; non-finite counts logged as scalars mark bad steps.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from gradcheck.model import HistogramSeries, RunData, SeriesKey
from gradcheck.series.stats import wasserstein_from_quantiles
from gradcheck.verdicts.numeric import median, nan_to_num, nanmax, nanmedian
from gradcheck.verdicts.pairing import ParameterTags

DENSE_SHARE = 0.999
"""A gradient with more than this share in its zero bucket is treated as all zero, not sparse."""


@dataclass(eq=False)
class GradientSignal:
    """A parameter's gradient over steps (NaN where non-finite or missing)."""

    tag: str
    steps: np.ndarray
    norm: np.ndarray  # L2 norm
    rms: np.ndarray  # per-element RMS of the non-zero part (sparse gradients), else of all
    bad_steps: np.ndarray  # steps at which the gradient held NaN/Inf
    exact: bool  # norms from sum_squares or an exact-norm scalar
    error_bound: float  # largest relative error bound of the norm estimates (0 when exact)
    count: float  # elements (NaN when unknown)
    steps_logged: int  # steps read over the whole run (more than ``steps`` once thinned)

    @property
    def per_element(self) -> bool:
        """Whether ``rms`` is a per-element RMS (the element count is known from a histogram);
        otherwise it is the norm itself (norms logged as scalars only)."""
        return bool(np.isfinite(self.count) and self.count > 0)

    @functools.cached_property
    def level(self) -> float:
        """Median per-element RMS over the logged steps (NaN when none is finite), computed
        once: the run context, two rules and the report each ask for it."""
        if not np.isfinite(self.rms).any():
            return float("nan")
        return nanmedian(self.rms)


@dataclass(eq=False)
class WeightSignal:
    """A parameter's weights over steps."""

    tag: str
    steps: np.ndarray
    norm: np.ndarray
    rms: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    quantiles: np.ndarray  # [n, 9]: min, p1 .. p99, max
    fingerprints: np.ndarray  # uint64; empty when the weights come from scalars only
    bad_steps: np.ndarray
    count: float
    steps_logged: int  # steps read over the whole run (more than ``steps`` once thinned)


@dataclass(eq=False)
class Parameter:
    """One parameter of the run with whatever signals were logged for it."""

    tags: ParameterTags
    gradient: GradientSignal | None
    weight: WeightSignal | None
    weight_also: tuple[WeightSignal, ...] = ()
    """Other writers' weight series of this variable (``tags.weight_also``): they confirm
    whether and how far the weights moved, on their own clock (Keras' callback logs epochs)."""

    @property
    def name(self) -> str:
        return self.tags.name

    @property
    def first_bad_step(self) -> int | None:
        """First step at which the weights or the gradient held NaN/Inf."""
        bad = [s.bad_steps for s in (self.gradient, self.weight) if s is not None]
        steps = np.concatenate(bad) if bad else np.empty(0)
        return int(steps.min()) if steps.size else None


def parameter_signals(data: RunData, tags: ParameterTags) -> Parameter:
    """The signals of one parameter of ``data``."""
    tags = decide_series(data, tags)
    also = tuple(
        signal
        for key in tags.weight_also
        if (signal := _weight_signal(data, ParameterTags(tags.name, tags.depth, weight=key)))
    )
    return Parameter(tags, _gradient_signal(data, tags), _weight_signal(data, tags), also)


def decide_series(data: RunData, tags: ParameterTags) -> ParameterTags:
    """``tags`` with, of several writers' series of one variable, the one that decides in
    ``gradient`` and ``weight`` (the others in ``*_also``): the one on the clock of the
    parameter's other signals (most steps in common with its exact-norm scalars and its other
    role's series: GradientLogger logs weights at its gradients' steps, Keras' callback at
    epochs), then the denser (more histograms read), then the first."""
    if not tags.weight_also and not tags.gradient_also:
        return tags
    exact = (tags.grad_norm, tags.weight_norm)
    scalars = [data.scalars[t].steps for t in exact if t is not None and t in data.scalars]
    gradient, gradient_also = _decided(
        data,
        tags.gradient,
        tags.gradient_also,
        [*scalars, *_steps_of(data, tags.weight, tags.weight_also)],
    )
    weight, weight_also = _decided(
        data, tags.weight, tags.weight_also, [*scalars, *_steps_of(data, gradient, ())]
    )
    return dataclasses.replace(
        tags, gradient=gradient, gradient_also=gradient_also, weight=weight, weight_also=weight_also
    )


def _steps_of(
    data: RunData, key: SeriesKey | None, also: tuple[SeriesKey, ...]
) -> list[np.ndarray]:
    keys = [k for k in (key, *also) if k is not None and k in data.histograms]
    return [data.histograms[k].steps for k in keys]


def _decided(
    data: RunData, key: SeriesKey | None, also: tuple[SeriesKey, ...], clock: list[np.ndarray]
) -> tuple[SeriesKey | None, tuple[SeriesKey, ...]]:
    """The deciding series of ``key`` and ``also`` on ``clock`` (see :func:`decide_series`)."""
    if key is None or not also:
        return key, also
    steps = np.concatenate(clock) if clock else np.empty(0, dtype=np.int64)

    def rank(candidate: SeriesKey) -> tuple[int, int]:
        series = data.histograms.get(candidate)
        if series is None:
            return 0, 0
        return int(np.isin(series.steps, steps).sum()), series.histograms_read

    ranked = sorted((key, *also), key=rank, reverse=True)  # stable: the first among equals
    return ranked[0], tuple(ranked[1:])


def _bad_from_scalar(data: RunData, tag: str | None) -> np.ndarray:
    """Steps at which a non-finite-count scalar is positive (or itself non-finite)."""
    if tag is None or tag not in data.scalars:
        return np.empty(0, dtype=np.int64)
    series = data.scalars[tag]
    return series.steps[~(series.values == 0)]


def _histogram_bad(series: HistogramSeries) -> np.ndarray:
    share = series.column("nonfinite_share")
    return series.steps[~(share == 0)]


def _gradient_signal(data: RunData, tags: ParameterTags) -> GradientSignal | None:
    histogram = data.histograms.get(tags.gradient) if tags.gradient else None
    scalar = data.scalars.get(tags.grad_norm) if tags.grad_norm else None
    if histogram is None and scalar is None:
        return None
    bad = [_bad_from_scalar(data, tags.grad_nonfinite)]
    count = float("nan")
    if histogram is not None:
        bad.append(_histogram_bad(histogram))
        counts = histogram.column("count")
        count = nanmedian(counts) if np.isfinite(counts).any() else count
    if scalar is not None:
        steps, norm = scalar.steps, scalar.values.copy()
        exact, bound, tag = True, 0.0, scalar.tag
        logged = int(steps.size)
        bad.append(steps[~np.isfinite(norm)])
        zero_share = _zero_share_at(histogram, steps)
    else:
        assert histogram is not None
        steps, norm = histogram.steps, histogram.column("l2_norm")
        bounds = histogram.column("l2_error_bound")
        bound, tag = nanmax(bounds, initial=0.0), histogram.tag
        exact = bound == 0.0
        zero_share = histogram.column("zero_share")
        logged = histogram.histograms_read
    bad_steps = _unique_steps(bad)
    unusable = ~np.isfinite(norm)
    if bad_steps.size:
        unusable |= np.isin(steps, bad_steps)
    norm[unusable] = np.nan
    rms = _sparse_rms(norm, count, zero_share)
    return GradientSignal(tag, steps, norm, rms, bad_steps, exact, bound, count, logged)


def _unique_steps(arrays: list[np.ndarray]) -> np.ndarray:
    """The distinct steps of ``arrays``, sorted, as int64: ``np.unique`` by sort and mask
    (``np.unique`` imports ``numpy.ma`` on first use, at a cost in start-up)."""
    if not any(array.size for array in arrays):  # the usual case: no bad step at all
        return np.empty(0, dtype=np.int64)
    steps = np.sort(np.concatenate(arrays)).astype(np.int64)
    first = np.ones(steps.size, dtype=bool)
    np.not_equal(steps[1:], steps[:-1], out=first[1:])
    return steps[first]


def common_steps(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The steps in both ``a`` and ``b`` (each rising strictly) and their positions in each:
    ``np.intersect1d(a, b, assume_unique=True, return_indices=True)``, with no sort at all in
    the usual case of weights and gradients logged at the same steps."""
    if a.size == b.size and bool((a == b).all()):
        at = np.arange(a.size)
        return a, at, at
    steps, in_a, in_b = np.intersect1d(a, b, assume_unique=True, return_indices=True)
    return steps, in_a, in_b


def _zero_share_at(histogram: HistogramSeries | None, steps: np.ndarray) -> np.ndarray:
    """The histogram's zero share at ``steps`` (nearest earlier histogram), 0 without one."""
    if histogram is None or not len(histogram):
        return np.zeros(steps.size)
    position = np.maximum(np.searchsorted(histogram.steps, steps, side="right") - 1, 0)
    return histogram.column("zero_share")[position]


def _sparse_rms(norm: np.ndarray, count: float, zero_share: np.ndarray) -> np.ndarray:
    """Per-element RMS over the non-zero part: an embedding's few non-zero rows set its size."""
    if not np.isfinite(count) or count <= 0:
        return norm.copy()
    share = nan_to_num(zero_share, nan=0.0)
    nonzero = np.where(share < DENSE_SHARE, 1.0 - share, 1.0)
    return norm / np.sqrt(count * nonzero)


def _weight_signal(data: RunData, tags: ParameterTags) -> WeightSignal | None:
    histogram = data.histograms.get(tags.weight) if tags.weight else None
    scalar = data.scalars.get(tags.weight_norm) if tags.weight_norm else None
    bad = [_bad_from_scalar(data, tags.weight_nonfinite)]
    if histogram is not None:
        bad.append(_histogram_bad(histogram))
        bad_steps = _unique_steps(bad)
        count = nanmedian(histogram.column("count")) if len(histogram) else float("nan")
        norm = histogram.column("l2_norm")
        if scalar is not None:  # exact values beat the buckets' estimate
            _, at, exact_at = common_steps(histogram.steps, scalar.steps)
            exact = scalar.values[exact_at]
            finite = np.isfinite(exact)
            norm[at[finite]] = exact[finite]
        return WeightSignal(
            tag=histogram.tag,
            steps=histogram.steps,
            norm=norm,
            rms=norm / np.sqrt(count) if count > 0 else norm,
            mean=histogram.column("mean"),
            std=histogram.column("std"),
            quantiles=histogram.quantile_grid(),
            fingerprints=histogram.fingerprints,
            bad_steps=bad_steps,
            count=count,
            steps_logged=histogram.histograms_read,
        )
    if scalar is None:
        return None
    bad.append(scalar.steps[~np.isfinite(scalar.values)])
    nan = np.full(scalar.steps.size, np.nan)
    return WeightSignal(
        tag=scalar.tag,
        steps=scalar.steps,
        norm=scalar.values,
        rms=scalar.values,
        mean=nan,
        std=nan,
        quantiles=np.full((scalar.steps.size, 9), np.nan),
        fingerprints=np.empty(0, dtype=np.uint64),
        bad_steps=_unique_steps(bad),
        count=float("nan"),
        steps_logged=int(scalar.steps.size),
    )


# --------------------------------------------------------------------------------------------
# Weight movement
# --------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Movement:
    """How far a parameter's weights moved (relative to their spread)."""

    bit_identical: bool  # every logged histogram equal to the first, bit for bit
    from_first: float  # largest Wasserstein-1 distance to the first logged step / scale
    norm_change: float  # largest |norm_t - norm_0| / norm scale
    step_update: float  # median Wasserstein-1 distance between consecutive steps / scale
    scale: float  # the spread used
    scale_source: str  # "own spread", "own magnitude", "the run's typical weight spread"
    extremes_change: float = 0.0  # largest move of the minimum or maximum / scale
    update_ratio: float = 0.0
    """Median over consecutive logged steps of their Wasserstein-1 distance divided by the
    number of steps between them, / scale: the move per optimizer step (per epoch where the
    writer counts epochs, as Keras' TensorBoard callback does). A lower bound of the element-wise
    update: weights that trade places leave the distribution as it was."""

    @property
    def largest(self) -> float:
        """The largest of the movement measures: how far the weights went at all."""
        return max(self.from_first, self.norm_change, self.extremes_change)


ZERO_INITIALISED = "the run's typical weight spread"
"""The scale source of a tensor that starts at zero: its movement is measured against the run's
typical weight spread, having no spread or magnitude of its own."""


def weight_scale(weight: WeightSignal, run_spread: float, first: int = 0) -> tuple[float, str]:
    """The spread movement is measured against, and where it came from.

    The weights' own standard deviation at the first logged step; for a constant-initialised
    tensor (a zero bias, a BatchNorm gamma of ones) its magnitude, or for a zero tensor the
    run's typical weight spread: relative movement of a zero-initialised bias is undefined.
    """
    std0, mean0 = float(weight.std[first]), float(abs(weight.mean[first]))
    tiny = 1e-12
    if math.isfinite(std0) and std0 > tiny * max(1.0, mean0):
        return std0, "own spread"
    if math.isfinite(mean0) and mean0 > tiny:
        return mean0, "own magnitude"
    return run_spread, ZERO_INITIALISED


def movement(weight: WeightSignal, run_spread: float) -> Movement | None:
    """Movement of a weight histogram series over the run; None with fewer than 2 usable steps."""
    if weight.fingerprints.size == 0:
        return None
    usable = np.isfinite(weight.quantiles).all(axis=1)
    count = int(usable.sum())
    if count < 2:
        return None
    every = count == usable.size  # the usual case: the arrays as they are, not copies

    def used(values: np.ndarray) -> np.ndarray:
        return values if every else values[usable]

    first = 0 if every else int(usable.argmax())
    identical = bool((used(weight.fingerprints) == weight.fingerprints[first]).all())
    if identical:  # and the exact norm, where one was logged: buckets miss a change inside them
        norms, norm = used(weight.norm), weight.norm[first]
        identical = bool(((norms == norm) | (np.isnan(norms) & np.isnan(norm))).all())
    scale, source = weight_scale(weight, run_spread, first)
    if identical:
        return Movement(True, 0.0, 0.0, 0.0, scale, source)
    grids = weight.quantiles[usable]  # a copy in C order even when every step is usable: the
    # distances' sums run in that order (numpy's and the C kernel's, see _grids_for_c)
    from_first = wasserstein_from_quantiles(grids, grids[0])
    updates = wasserstein_from_quantiles(grids[1:], grids[:-1])
    steps = used(weight.steps)
    gaps = (steps[1:] - steps[:-1]).astype(np.float64)  # np.diff's subtraction, no dispatch
    norms = used(weight.norm)
    norm_scale = max(abs(float(norms[0])), scale * np.sqrt(max(weight.count, 1.0)))
    extremes = max(  # of the minimum and of the maximum
        np.abs(grids[:, 0] - grids[0, 0]).max(), np.abs(grids[:, -1] - grids[0, -1]).max()
    )
    return Movement(
        bit_identical=False,
        from_first=float(from_first.max() / scale),
        norm_change=float(np.abs(norms - norms[0]).max() / norm_scale),
        step_update=median(updates) / scale,
        scale=scale,
        scale_source=source,
        extremes_change=float(extremes / scale),
        update_ratio=median(updates / np.maximum(gaps, 1.0)) / scale,
    )


def confirmed(own: Movement | None, others: list[Movement]) -> Movement | None:
    """``own`` (the deciding series' movement) confirmed by other writers' series of the same
    variable: bit-identical only when every series is, and as far as the farthest went, each
    distance measured against ``own``'s scale (another writer's first step may come later, when
    a zero-initialised bias already has a tiny spread of its own); the per-step figures stay
    ``own``'s (the others may count epochs)."""
    if own is None or not others:
        return own
    moved = [(m, m.scale / own.scale if own.scale > 0 else 1.0) for m in others]
    return dataclasses.replace(
        own,
        bit_identical=own.bit_identical and all(m.bit_identical for m in others),
        from_first=max(own.from_first, *(m.from_first * ratio for m, ratio in moved)),
        norm_change=max(own.norm_change, *(m.norm_change * ratio for m, ratio in moved)),
        extremes_change=max(
            own.extremes_change, *(m.extremes_change * ratio for m, ratio in moved)
        ),
    )


def sgd_update_ratio(
    gradient: GradientSignal, weight: WeightSignal, lr_steps: np.ndarray, lr_values: np.ndarray
) -> np.ndarray:
    """``lr * ||g|| / ||w||`` at the steps both the gradient and the weights were logged (the
    learning rate last logged at or before each, else its first value): the relative size of a
    plain SGD update, the number CS231n's rule of thumb (about 1e-3) is stated in. Momentum
    makes the real update up to 1/(1 - momentum) larger; Adam normalises the gradient away."""
    steps, in_gradient, in_weight = common_steps(gradient.steps, weight.steps)
    if not steps.size or not lr_steps.size:
        return np.empty(0)
    position = np.maximum(np.searchsorted(lr_steps, steps, side="right") - 1, 0)
    norm = weight.norm[in_weight]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = lr_values[position] * gradient.norm[in_gradient] / norm
    return ratio[np.isfinite(ratio)]


def run_weight_spread(parameters: list[Parameter]) -> float:
    """Median first-step spread of the run's weights that have one (1.0 when none has)."""
    spreads = [
        float(p.weight.std[np.isfinite(p.weight.std)][0])
        for p in parameters
        if p.weight is not None and np.isfinite(p.weight.std).any()
    ]
    positive = [s for s in spreads if s > 0]
    return median(positive) if positive else 1.0


def before(parameter: Parameter, step: int | None) -> Parameter:
    """``parameter`` restricted to the steps before ``step`` (all of it when None)."""
    if step is None:
        return parameter
    return Parameter(
        parameter.tags,
        _signal_before(parameter.gradient, step),
        _signal_before(parameter.weight, step),
        (),  # other writers' series count other steps (epochs): they cannot be cut here
    )


_Signal = TypeVar("_Signal", GradientSignal, WeightSignal)


def _signal_before(signal: _Signal | None, step: int) -> _Signal | None:
    """``signal`` cut to the steps before ``step``: every per-step array by the step mask,
    ``bad_steps`` (step numbers) by value; arrays of another length (empty fingerprints of a
    scalars-only weight) stay as they are."""
    if signal is None:
        return None
    keep = signal.steps < step
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(signal):
        value = getattr(signal, field.name)
        if field.name == "bad_steps":
            changes[field.name] = value[value < step]
        elif isinstance(value, np.ndarray) and value.shape[:1] == keep.shape:
            changes[field.name] = value[keep]
    return dataclasses.replace(signal, **changes)
