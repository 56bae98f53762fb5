"""What every verdict rule shares: the finding, the run's context, severity and baselines.

Each finding carries its severity (``base`` of its kind plus up to 0.99 for how far beyond the
threshold it is, on a log scale), its first bad step, one sentence of evidence with the
measured numbers and the threshold they crossed, the hint, and numbers for the report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from gradcheck.model import Verdict
from gradcheck.verdicts.config import Config
from gradcheck.verdicts.numeric import median
from gradcheck.verdicts.registry import ENTRIES
from gradcheck.verdicts.signals import GradientSignal, Movement, Parameter, WeightSignal

BASE_SEVERITY: Mapping[str, float] = {entry.name: entry.severity for entry in ENTRIES}
"""Each verdict's base severity, as its registry entry declares it."""


@dataclass(frozen=True, eq=False)
class Finding:
    verdict: Verdict
    severity: float
    first_bad_step: int | None
    evidence: str
    hint: str
    numbers: Mapping[str, float | int | None] = field(default_factory=dict)
    until_step: int | None = None
    """Last step of the episode the finding describes (a rise above the exploding threshold)."""


@dataclass(frozen=True, eq=False)
class Excuse:
    """Why a rule did not fire although a signal crossed its threshold: shown in the
    parameter's notes (``--all``, JSON), because the user cannot see it otherwise."""

    verdict: Verdict
    reason: str


@dataclass(eq=False)
class RunContext:
    """What the rules need to know about the run as a whole."""

    config: Config
    parameter_count: int
    largest_level: float  # largest median gradient RMS of any parameter
    largest_name: str
    largest_early_level: float  # largest early-baseline gradient RMS of any parameter
    typical_weight_rms: float  # median early weight RMS over the run's parameters
    median_decay: float  # median late/early gradient ratio over the run's parameters
    loss_tag: str | None
    loss_steps: np.ndarray  # the training loss (empty without one)
    loss_values: np.ndarray
    loss_ratio: float | None  # late/early training loss (None when unusable)
    loss_nan_step: int | None
    last_step: int | None
    movements: Mapping[str, Movement]
    levels: Mapping[str, float]  # median gradient RMS per parameter (NaN without a gradient)
    layer_levels: Mapping[str, float]  # the largest level among each layer's parameters
    clip_ceiling: float | None  # the global norm is pinned here: clipping holds it
    reference_movements: tuple[tuple[str, float], ...] = ()
    """The two largest movements of the run's learned weights with their names, largest first
    (:func:`.static.reference_movements`): what a weight that did not move is compared with."""
    moving_stats_moved: Mapping[str, bool] = field(default_factory=dict)
    """BatchNorm layer -> whether its moving statistics moved (layers that logged them)."""
    gradients_logged: int = 0
    """How many of the run's parameters have a logged gradient."""
    gradients: Mapping[str, GradientSignal] = field(default_factory=dict)
    """Every parameter's gradient signal, by name."""
    unpaired_gradients: int = 0
    """Parameters of the run with a gradient but no weights (a tag convention gradcheck did not
    pair): a weight without a gradient may have one of them."""
    norm_levels: frozenset[str] = frozenset()
    """Parameters whose gradient level is a norm, not a per-element RMS: their element count is
    unknown (norms logged as scalars only). ``largest_level`` is of the other kind when the run
    has both."""
    loss_scale_tag: str | None = None
    loss_scale_drops: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    """Steps at which the logged dynamic loss scale (GradScaler) went down: skipped updates."""
    lr_tag: str | None = None
    lr_steps: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    lr_values: np.ndarray = field(default_factory=lambda: np.empty(0))
    """The logged learning rate (empty without one)."""
    steps_are_epochs: bool = False
    """The weights are logged at the steps of an ``epoch_*`` scalar (Keras' TensorBoard
    callback): a step is an epoch of many updates, not one update."""
    sgd_ratios: Mapping[str, float | None] = field(default_factory=dict)
    """:func:`.slow.sgd_ratio` of the parameters the table computed it for, by name (the
    others' is computed when asked for)."""
    blow_up_step: int | None = None
    """The run's earliest exploding onset or NaN step, when the rules judge the healthy steps
    before it (vanishing and static; None for the blow-up rules, and for a run without one)."""
    open_end: bool = False
    """The log is still being written (``gradcheck watch``): where a series ends now is not
    where the training stopped, so the rules that read a log's end as the training's end
    (series stopping as the loss turns NaN; gradients finite again after an overflow: for
    ``nan.OVERFLOW_RUN`` logged steps) wait."""


def severity(verdict: Verdict, excess: float) -> float:
    """``base + min(0.99, log10(excess) / 10)``: excess is how many times past the threshold."""
    extra = 0.0 if not excess > 1 else min(0.99, math.log10(excess) / 10)
    return BASE_SEVERITY[verdict] + extra


def fmt(value: float) -> str:
    """A number for evidence: 3 significant digits, scientific when far from 1."""
    if value is None or not math.isfinite(value):
        return str(value)
    if value == 0 or 1e-3 <= abs(value) < 1e4:
        return f"{value:.3g}"
    return f"{value:.2e}"


def baseline_size(count: int, config: Config) -> int:
    """How many early finite values form the baseline: 10% of them, at least 3, at most 20."""
    return max(1, min(count, max(3, min(20, math.ceil(config.baseline_fraction * count)))))


def early_and_late(values: np.ndarray, config: Config) -> tuple[float, float, np.ndarray]:
    """Median of the first and of the last baseline-sized groups of finite values."""
    finite = np.isfinite(values).nonzero()[0]  # np.flatnonzero of a 1-d array, no dispatch
    if finite.size == 0:
        return float("nan"), float("nan"), finite
    size = baseline_size(finite.size, config)
    if finite.size == values.size:  # every value finite (the usual case): views, no copies
        return median(values[:size]), median(values[-size:]), finite
    early = median(values[finite[:size]])
    late = median(values[finite[-size:]])
    return early, late, finite


def rms_early_and_late(
    signal: GradientSignal | WeightSignal, config: Config
) -> tuple[float, float, np.ndarray]:
    """``early_and_late(signal.rms, config)``, computed once per signal and config: the run
    context and two vanishing rules ask for a gradient's, the context and the exploding rule
    for a weight's (kept on the signal, as ``functools.cached_property`` keeps a value)."""
    memo = signal.__dict__.get("_rms_early_and_late")
    if memo is None or memo[0] is not config:
        return keep_rms_early_and_late(signal, config, early_and_late(signal.rms, config))
    return memo[1]


def keep_rms_early_and_late(
    signal: GradientSignal | WeightSignal, config: Config, found: tuple[float, float, np.ndarray]
) -> tuple[float, float, np.ndarray]:
    """Keep ``found`` as ``signal``'s :func:`rms_early_and_late` under ``config`` (the table
    computes it for a run's signals at once: :func:`gradcheck.verdicts.table.baselines`)."""
    signal.__dict__["_rms_early_and_late"] = (config, found)
    return found


def comparable(parameter: Parameter, context: RunContext) -> bool:
    """Whether this parameter's gradient level can be compared with ``context.largest_level``:
    both per-element RMS, or both norms (a norm grows with the square root of the tensor's
    size, so a norm and an RMS are not comparable)."""
    own_is_norm = parameter.name in context.norm_levels
    largest_is_norm = context.largest_name in context.norm_levels
    return own_is_norm == largest_is_norm


def gradient_is_clear(parameter: Parameter, context: RunContext) -> bool:
    """Whether the parameter's gradient is clearly non-zero: above the absolute vanishing
    threshold and, where comparable, above the depth ratio of the run's largest. A bias that
    feeds a BatchNorm gets zero up to rounding; a parameter left out of the optimizer gets a
    gradient like any other."""
    level = gradient_level(parameter)
    if not level >= context.config.vanish_absolute:
        return False
    if comparable(parameter, context) and context.largest_level > 0:
        return level >= context.config.vanish_depth_ratio * context.largest_level
    return True


def gradient_level(parameter: Parameter) -> float:
    """Median per-element gradient RMS over the logged steps (NaN without a gradient)."""
    return float("nan") if parameter.gradient is None else parameter.gradient.level
