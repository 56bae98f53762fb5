"""The run as a whole, as the rules compare a parameter with it: :func:`run_context`.

Its largest gradient, the training loss (its course, where it turned non-finite), the loss
scale, the learning rate, the weights' movements and the clipping ceiling, measured once per
run (and again on the healthy steps before a blow-up, by :mod:`.passes`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from gradcheck.model import GLOBAL_NORM_ROW, RunData, ScalarSeries
from gradcheck.tags.scalars import scalar_role, training_loss_rank
from gradcheck.verdicts import hints, table
from gradcheck.verdicts.clipping import GlobalNorm, pinned_ceiling
from gradcheck.verdicts.config import Config
from gradcheck.verdicts.numeric import median
from gradcheck.verdicts.rules import RunContext, early_and_late, gradient_level, rms_early_and_late
from gradcheck.verdicts.rules.static import reference_movements
from gradcheck.verdicts.signals import Movement, Parameter


def run_context(
    data: RunData,
    parameters: list[Parameter],
    config: Config,
    norms: list[GlobalNorm],
    before_step: int | None = None,
    loss: ScalarSeries | None = None,
) -> RunContext:
    """Everything the rules compare a parameter with; with ``before_step``, the training loss
    is restricted to the steps before it, like the parameters (the healthy steps): a loss
    that stalls or soars after a blow-up says nothing about the gradients before it."""
    table.baselines(parameters, config)
    levels = {p.name: gradient_level(p) for p in parameters}
    finite_levels = {name: level for name, level in levels.items() if np.isfinite(level)}
    norm_levels = frozenset(
        p.name for p in parameters if p.gradient is not None and not p.gradient.per_element
    )
    # The largest per-element level; norms only where no parameter has a per-element one.
    rms_levels = {n: v for n, v in finite_levels.items() if n not in norm_levels}
    pool = rms_levels or finite_levels
    largest_name = max(pool, key=pool.__getitem__, default="")
    early_levels, decays = [], []
    for p in parameters:
        if p.gradient is not None:
            early, late, finite = rms_early_and_late(p.gradient, config)
            early_levels.append(early)
            if finite.size >= 6 and early > 0:
                decays.append(late / early)
    finite_early = [level for level in early_levels if math.isfinite(level)]
    loss = _loss_before(loss or training_loss(data), before_step)
    scale = loss_scale(data)
    rate = learning_rate(data)
    lr_steps, lr_values = _rate_series(rate)
    movements = table.movements(parameters)
    ceilings = [c for g in norms if (c := pinned_ceiling(g.values, config, g.exact)) is not None]
    return RunContext(
        config=config,
        parameter_count=len(parameters),
        largest_level=finite_levels.get(largest_name, float("nan")),
        largest_name=largest_name,
        largest_early_level=max(finite_early, default=float("nan")),
        typical_weight_rms=_typical_weight_rms(parameters, config),
        median_decay=median(decays) if decays else 1.0,
        loss_tag=loss.tag if loss is not None else None,
        loss_steps=loss.steps if loss is not None else np.empty(0, dtype=np.int64),
        loss_values=loss.values if loss is not None else np.empty(0),
        loss_ratio=_loss_ratio(loss, config),
        loss_nan_step=_first_nonfinite_step(loss),
        last_step=data.steps[1] if data.steps else None,
        movements=movements,
        reference_movements=reference_movements(movements),
        levels=levels,
        layer_levels=_layer_levels(finite_levels),
        clip_ceiling=ceilings[0] if ceilings else None,
        moving_stats_moved=_moving_stats_moved(movements, config),
        gradients_logged=sum(
            p.gradient is not None and p.name != GLOBAL_NORM_ROW for p in parameters
        ),
        gradients={p.name: p.gradient for p in parameters if p.gradient is not None},
        unpaired_gradients=sum(
            p.gradient is not None and p.weight is None and p.name != GLOBAL_NORM_ROW
            for p in parameters
        ),
        norm_levels=norm_levels,
        loss_scale_tag=scale.tag if scale is not None else None,
        loss_scale_drops=_drops(scale),
        lr_tag=rate.tag if rate is not None else None,
        lr_steps=lr_steps,
        lr_values=lr_values,
        steps_are_epochs=_steps_are_epochs(data, parameters),
        sgd_ratios=table.sgd_ratios(parameters, lr_steps, lr_values),
    )


def _rate_series(rate: ScalarSeries | None) -> tuple[np.ndarray, np.ndarray]:
    if rate is None:
        return np.empty(0, dtype=np.int64), np.empty(0)
    return rate.steps, rate.values


def _layer_levels(levels: Mapping[str, float]) -> dict[str, float]:
    layers: dict[str, float] = {}
    for name, level in levels.items():
        layer = hints.layer_of(name)
        layers[layer] = max(layers.get(layer, level), level)
    return layers


def training_loss(data: RunData) -> ScalarSeries | None:
    """The run's training loss scalar: a loss tag, training before validation, longest first."""
    candidates = [
        s
        for s in data.scalars.values()
        if (r := scalar_role(s.tag)) and r.kind == "loss" and len(s)
    ]
    if not candidates:
        return None
    return min(candidates, key=lambda s: (training_loss_rank(s.tag), -len(s)))


def loss_scale(data: RunData) -> ScalarSeries | None:
    """The dynamic loss scale of mixed-precision training, when logged."""
    for series in data.scalars.values():
        role = scalar_role(series.tag)
        if role is not None and role.kind == "loss_scale" and len(series):
            return series
    return None


def _steps_are_epochs(data: RunData, parameters: list[Parameter]) -> bool:
    """Whether the weights were logged at the steps of an ``epoch_*`` scalar (Keras'
    ``TensorBoard`` callback numbers its histograms and ``epoch_loss`` by epoch)."""
    epochs = [s.steps for s in data.scalars.values() if s.tag.startswith("epoch_") and len(s)]
    weights = [p.weight.steps for p in parameters if p.weight is not None and p.weight.steps.size]
    return bool(epochs and weights) and all(
        any(np.array_equal(steps, epoch) for epoch in epochs) for steps in weights
    )


def learning_rate(data: RunData) -> ScalarSeries | None:
    """The optimizer's learning rate, when logged (the longest such series: Lightning logs one
    per parameter group, ``lr-SGD/pg1``, ``lr-SGD/pg2``)."""
    rates = [
        s
        for s in data.scalars.values()
        if (r := scalar_role(s.tag)) and r.kind == "learning_rate" and len(s)
    ]
    return max(rates, key=len, default=None)


def _drops(series: ScalarSeries | None) -> np.ndarray:
    """Steps at which ``series`` went down."""
    if series is None or len(series) < 2:
        return np.empty(0, dtype=np.int64)
    return series.steps[1:][np.diff(series.values) < 0]


def _loss_before(loss: ScalarSeries | None, step: int | None) -> ScalarSeries | None:
    """The loss at the steps before ``step`` (all of it when None)."""
    if loss is None or step is None:
        return loss
    keep = loss.steps < step
    return ScalarSeries(loss.tag, loss.steps[keep], loss.values[keep])


def _first_nonfinite_step(series: ScalarSeries | None) -> int | None:
    if series is None:
        return None
    bad = ~np.isfinite(series.values)
    return int(series.steps[np.argmax(bad)]) if bad.any() else None


def _loss_ratio(loss: ScalarSeries | None, config: Config) -> float | None:
    """Late / early training loss, when the loss is positive (a ratio means something)."""
    if loss is None:
        return None
    values = loss.values[np.isfinite(loss.values)]
    if values.size < 6 or (values < 0).any():
        return None  # not a positive quantity (a GAN's or a likelihood's): no ratio
    early, late, _ = early_and_late(values, config)
    return late / early if early > 0 else None


def _typical_weight_rms(parameters: list[Parameter], config: Config) -> float:
    levels = []
    for p in parameters:
        if p.weight is not None:
            early, _, _ = rms_early_and_late(p.weight, config)
            if early > 0:
                levels.append(early)
    return median(levels) if levels else 0.0


def _moving_stats_moved(movements: Mapping[str, Movement], config: Config) -> dict[str, bool]:
    moved: dict[str, bool] = {}
    for name, m in movements.items():
        if hints.parameter_kind(name) == "bn_moving":
            layer = hints.layer_of(name)
            did = not m.bit_identical and m.largest >= config.static_movement
            moved[layer] = moved.get(layer, False) or did
    return moved
