"""Thresholds of the verdicts: one frozen options object, loadable from TOML.

Every default below says where it comes from. None was tuned to particular files: each is a
published rule of thumb, a property of float arithmetic, or an order-of-magnitude margin
chosen so that healthy training (gradients that shrink as the loss drops, a few early spikes,
a classifier's large last-layer gradient, small BatchNorm gradients) stays clear of it.

Configuration is read from ``--config FILE`` (a TOML file with the keys at top level or under
``[tool.gradcheck]``) or, without it, from ``[tool.gradcheck]`` in ``./pyproject.toml``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import stat
import sys
from dataclasses import dataclass, fields
from typing import Any

from gradcheck.errors import ConfigError
from gradcheck.events.storage import file_kind
from gradcheck.verdicts.registry import FINDINGS

FAIL_ON_CHOICES = (*FINDINGS, "any", "none")


@dataclass(frozen=True)
class Config:
    """Thresholds of the analysis (defaults documented field by field)."""

    # --- exploding -----------------------------------------------------------------------
    explode_factor: float = 100.0
    """Gradient norm this many times its early baseline, sustained, is exploding. Two orders of
    magnitude: healthy runs move within about one (warm-up, loss spikes, noise), and AUTOTRAINER
    flags a first/last-layer gradient ratio above 70 (its beta_3)."""
    explode_spike_factor: float = 1000.0
    """A single logged step this many times the baseline is exploding even if not sustained."""
    explode_level_factor: float = 10.0
    """... and only when the gradient's RMS also reaches 10x the largest RMS any parameter had
    early in the run: in a badly initialised deep network the first layers' gradients start
    orders of magnitude small and grow as training wakes them up, which is healthy. (A rise
    while the training loss falls is not exploding either.)"""
    explode_sustain_steps: int = 3
    """Consecutive logged steps above ``explode_factor`` that make a rise sustained (a rise that
    runs into NaN/Inf or into the end of the log counts as sustained)."""
    baseline_fraction: float = 0.1
    """The early baseline is the median of the first 10% of logged steps (at least 3, at most
    20): early enough to precede a blow-up, robust to one noisy step."""
    grad_to_weight_ratio: float = 1000.0
    """Gradient RMS this many times the weight RMS (median over the second half of the run)
    is exploding: with any sane learning rate such a gradient moves the weights far more than
    their own size. Three orders, because the gradient's scale depends on the loss reduction
    (sum vs mean) and Adam-style optimizers normalise it away."""
    weight_growth_factor: float = 100.0
    """For parameters without logged gradients: weight RMS this many times its early value (and
    the run's typical weight RMS) is exploding. Healthy weights grow a few times at most.
    Also, for every run: weights this many times their first logged value, to the end of the
    log, in more than ``weight_blow_up_share`` of the model (:mod:`.start_growth`)."""
    weight_blow_up_share: float = 0.5
    """The model's weights blew up from their start when more than half of those that started
    non-zero (at least two) grew ``weight_growth_factor`` x their first logged value and stayed
    there: Adam moves each element by about the learning rate a step, so a 100x growth of a
    standard-initialised matrix (RMS 0.02) takes 2,000 steps in one direction at lr 1e-3, and
    a learning rate orders of magnitude too high grows every matrix at once. The weights that
    legitimately grow by orders of magnitude (LayerScale at 1e-6, normalisation gains with
    their tiny early gradients) are a minority of a model; zero-initialised ones (biases,
    LoRA's B, ReZero's alpha) have no start to grow from and are not counted."""
    explode_veto_limit: float = 1e4
    """A training loss that falls during a rise may excuse it only while the rise stays below
    this many times the early baseline (two orders beyond ``explode_factor``): a network leaving
    a plateau or waking up from a small initialisation rises by one to three orders while its
    loss falls; a rise of four orders, to ten times the run's largest early gradient, is a
    blow-up whatever the loss does (the loss lags the gradients: it rises once the weights have
    been thrown off)."""

    # --- diverging -----------------------------------------------------------------------
    diverge_factor: float = 100.0
    """The training loss this many times its start (the median of the logged values before it
    left them), sustained as for ``explode_sustain_steps`` (or a single value
    ``explode_spike_factor`` times it), while it never comes back below its start: diverging.
    Two orders of magnitude, as for a gradient (``explode_factor``): a working run's loss
    falls from its start, and a loss spike that training recovers from comes back below it."""

    # --- vanishing -----------------------------------------------------------------------
    vanish_depth_ratio: float = 1e-3
    """Gradient RMS (median over steps) below this fraction of the run's largest layer is
    vanishing: AUTOTRAINER's beta_1 = 1e-3 for the first/last-layer gradient ratio. Per-element
    RMS (not the norm) so that tensor size does not matter; sparse gradients are measured on
    their non-zero part."""
    vanish_depth_ratio_stalled: float = 1e-2
    """While the training loss stalls (see ``loss_stalled_ratio``), two orders of magnitude
    below the largest layer already count: AUTOTRAINER only flags a vanishing gradient while
    training does not converge, and a stalled loss is the symptom the gap explains. Healthy
    runs in the calibration zoo keep every layer above 1e-2 of the largest."""
    loss_stalled_ratio: float = 0.9
    """The training loss has stalled when its late level is above 90% of its early level."""
    vanish_absolute: float = 1e-7
    """Gradient RMS below this, both early and typically, is vanishing: SageMaker Debugger's
    ``vanishing_gradient`` rule and DeepDiagnosis use mean |g| < 1e-7 (RMS >= mean |g|, so this
    is the stricter of the two)."""
    vanish_decay_factor: float = 1e-3
    """A gradient whose late level falls below this fraction of its early baseline is decaying
    by orders of magnitude ..."""
    vanish_decay_excess: float = 1e-2
    """... but only counts as vanishing when it fell this much further than the training loss
    (or, without a loss, than the run's median layer): a converging run's gradients shrink with
    its loss (cross-entropy gradients roughly in proportion), which is not vanishing."""

    # --- static --------------------------------------------------------------------------
    static_movement: float = 1e-6
    """Weights whose distribution moved less than this (Wasserstein-1 to the first logged step,
    relative to the weights' spread) over the whole run are static. Float32 resolves about
    1.2e-7 relative: an update below ~1e-6 of the weights' scale is lost to rounding."""
    others_moving: float = 1e-4
    """A weight is called static only while another weight of the run moved at least this much
    (100x the static threshold): a log where nothing moves is an evaluation, not a bug."""
    normal_update_ratio: float = 1e-4
    """Weights move normally when their median move between consecutive logged steps is at
    least this fraction of their spread: the low end of TheDeepChecker's band of healthy
    update/weight ratios (log10 in [-4, -1]). Tiny gradients that still move the weights this
    much (Adam normalises their scale away) and a falling loss are not vanishing."""

    # --- slow ----------------------------------------------------------------------------
    usual_update_ratio: float = 1e-3
    """The usual size of one update relative to the weights' scale: CS231n's rule of thumb
    (update/weight ratio about 1e-3; "if it is much lower the learning rate might be too
    low"), the middle of TheDeepChecker's healthy band (log10 in [-4, -1]). The report states
    each run's median against it; it decides nothing on its own."""
    slow_update_ratio: float = 1e-5
    """Weights that move (not static), but less than this fraction of their scale per optimizer
    step (median over the logged steps) are slow: an order of magnitude below the low end of
    TheDeepChecker's band (1e-4) and two below CS231n's 1e-3. The extra order is the margin
    the measure needs: the distance between weight distributions is a lower bound of the
    element-wise update (noise-driven updates that leave the distribution's shape unchanged
    barely show in it). SageMaker Debugger's WeightUpdateRatio rule flags only below 1e-8, the
    extreme: such weights are practically static. Where gradients and the learning rate are
    logged, the SGD estimate ``lr * ||g|| / ||w||`` must be below this too."""
    slow_total_movement: float = 1e-3
    """... and only while the weights moved less than this over the whole run (their largest
    distance from the first logged step, relative to their scale): less than one usual update
    (CS231n's 1e-3) in all. The per-step figure divides a distance by the steps between two
    logs, and noisy updates largely cancel in the distribution over many steps (a tutorial
    logging every 50 steps moved 0.2 of its spread in all, yet 5e-6 per step); weights that
    went that far are learning, whatever the per-step figure says."""
    slow_run_share: float = 0.5
    """The run-level line ("the whole model learns ... slower than usual") when more than this
    share of the run's kernels (weights with a spread of their own: not biases, not BatchNorm)
    is slow: a learning rate wrong for the whole model, not one frozen group."""

    # --- clipping --------------------------------------------------------------------------
    clip_pinned_tolerance: float = 1e-3
    """Steps within 0.1% of the maximum global norm are at the ceiling. ``clip_grad_norm_`` and
    ``tf.clip_by_global_norm`` rescale to the ceiling up to float rounding (~1e-6), while an
    unclipped norm rarely repeats its maximum to 0.1%."""
    clip_pinned_tolerance_estimated: float = 0.02
    """... within 2% when the norm is estimated from histogram buckets (TF2's 30 equal-width
    buckets, no exact sum of squares): such estimates of a norm clipped to 0.2 were measured
    between 0.2012 and 0.2045 (held-out run tf_loop_clip_global_norm_active_healthy), so 0.1%
    would miss a clipped run; a minibatch norm that is not clipped varies by well over 2%."""
    clip_pinned_share: float = 0.1
    """The global norm looks clipped when at least this share of steps sits at the ceiling."""
    clip_suggest_percentile: float = 95.0
    """Suggested clip norm: this percentile of the global norm over the healthy steps (before
    any exploding onset or NaN), so that only the top 5% of healthy steps would be clipped."""
    clip_most_steps_share: float = 0.5
    """A ceiling that clips more than half the steps is too low: clipping is meant to catch
    the rare spike (Pascanu et al. 2013 clip the norm only when it exceeds its usual level);
    when most steps are clipped, nearly every update is rescaled to the ceiling, so the
    optimizer takes steps of a fixed size and the clip acts as a smaller learning rate in
    disguise."""

    # --- dead and saturated (activation histograms) -----------------------------------------
    dead_zero_share: float = 0.9
    """A layer's outputs are dead when the share of them that is exactly zero (within 1e-12)
    stays at or above 0.9. A layer-level share, because that is what a histogram holds: it
    pools every unit and every example of the batch, so it cannot tell a unit that is always
    zero (dead) from one that is zero for most inputs (sparse but alive), nor which units are
    which. The tools that see units judge them one by one and then count: AUTOTRAINER (Zhang et
    al., ICSE 2021) and DeepDiagnosis (Wardat et al., ICSE 2022) flag at a share of 0.7,
    SageMaker Debugger's DeadRelu rule calls a unit dead when active under 1% of the time and a
    layer when over 50% of its units are. Pooled, a healthy ReLU layer is 40-60% zeros (half
    the pre-activations are negative) and sparse ones reach 70-80%, so a pooled 0.7 or 0.5
    would flag healthy layers. A pooled 0.9 guarantees (Markov's inequality over the units'
    own shares) that at least two thirds of the units are zero on at least 70% of the inputs,
    AUTOTRAINER's per-unit threshold over most of the layer: a layer that passes almost no
    signal forward and almost no gradient back. A histogram can tell exact
    zeros from small values only where its buckets do: TensorFlow's and PyTorch's default
    bins have a bucket ``[0, 1e-12)``; TF2's 30 even buckets put zeros with the values up to a
    thirtieth of the range, so there the share is an estimate (the evidence gives its bounds)."""
    saturated_share: float = 0.9
    """A bounded layer's outputs (tanh's ``[-1, 1]``, sigmoid's ``[0, 1]``, told from the
    histogram's range) are saturated when the share of them within 2% of the range of a
    bound (``|x| >= 0.96`` for tanh; ``x <= 0.02`` or ``x >= 0.98`` for sigmoid: where either
    derivative is under 8% of its peak) stays at or above 0.9: the same layer-level share as
    ``dead_zero_share``, for the same reasons (SageMaker Debugger's SaturatedActivation rule
    judges units by their inputs and flags a layer at 50% of them; a histogram of outputs
    cannot see units). The network's output layer is not judged: a softmax or sigmoid output
    near 0 and 1 is a confident prediction, bounded by design."""
    activation_steps: int = 3
    """``stays``: the share is at or above its threshold at every logged step from the onset to
    the last one, and at no fewer than 3 logged steps (one batch's histogram at one step can be
    an odd batch; a layer that recovers was not dead)."""

    # --- loss spikes -------------------------------------------------------------------------
    spike_factor: float = 3.0
    """A logged training loss at least 3 times the median of the previous ``spike_window``
    logged losses is a spike (issue 35's definition, after the loss spikes of large-model
    training that users ask about: a healthy minibatch loss varies by tens of percent around
    its running median, a spike by multiples)."""
    spike_recovery: float = 1.5
    """... when the loss comes back below 1.5 times that median within ``spike_window`` logged
    steps: a loss that does not come back diverges (diverging, exploding, NaN), it is no
    spike, and neither is any from the onset of the run's blow-up on (diverging, or the first
    nan or exploding onset)."""
    spike_noise: float = 5.0
    """... and only when it stands out of the loss's own noise: its log at least 5 robust
    standard deviations (1.4826 times the median absolute deviation of the window's logs, the
    modified z-score of Iglewicz and Hoaglin, 1993) above the window's median log. Five, not
    their 3.5 for one sample: a log is judged at every step, and for noise that is normal in
    the log, 3.5 deviations are passed once in ~4,300 steps, 5 once in ~3.5 million. A
    minibatch loss late in training is noisier still: a classifier at batch 8 near zero loss
    jumps 3-8x its running median when a batch holds one hard example (a held-out run: four
    such steps in 1,500 passed 3.5 deviations, none 5), and the corpus'
    ``Dipeshtamboli__tensorboard-logs/only_funcs`` logs uniform noise as its loss (3.2-3.6x its
    median three times in 100 steps). A spike of a smooth loss is tens of deviations (the
    corpus' Keras run at 0.26 +- 0.001 that jumps to 1.5 for one epoch)."""
    spike_window: int = 20
    """The median is over the previous 20 logged losses (a spike needs that many before it),
    and a spike must recover within the next 20."""
    spike_lead_rise: float = 2.0
    """A spike is led by the parameters whose gradient norm, at the spike's step or the logged
    step before, rose to at least twice its own median over the previous ``spike_window``
    logged steps, and to at least half the largest such rise (the leaders, most first)."""

    # --- compare ---------------------------------------------------------------------------
    compare_factor: float = 4.0
    """``gradcheck compare``: two runs' gradient norms for one parameter at one step diverge
    when their ratio leaves [1/4, 4] (and updates per step likewise). A minibatch gradient's
    norm varies from batch to batch by its sampling noise, typically tens of percent and within
    about 2x for batches of a few dozen examples, so two correct loops fed different batches or
    seeds stay inside 4x: two doublings, a factor 2 of headroom over that noise. The mistakes
    compare looks for lie beyond it: a loss summed instead of averaged multiplies every gradient
    by the batch size (8 or more in practice), and a learning-rate slip is usually an order of
    magnitude."""

    # --- options the command line can also take ------------------------------------------
    grad_pattern: str | None = None
    """Default for ``--grad-pattern`` (a regex with a ``(?P<name>...)`` group)."""
    weight_pattern: str | None = None
    """Default for ``--weight-pattern``."""
    fail_on: str | None = None
    """Default for ``--fail-on`` (comma list of nan, exploding, diverging, vanishing, dead,
    saturated, static, slow, overflow; any; none)."""

    def __post_init__(self) -> None:
        _check_ranges(self)
        if self.fail_on is not None:
            unknown = {v.strip() for v in self.fail_on.split(",")} - set(FAIL_ON_CHOICES)
            if unknown:
                raise ConfigError(
                    f"fail_on: unknown value(s) {', '.join(sorted(unknown))}; "
                    f"choose from {', '.join(FAIL_ON_CHOICES)}"
                )


@dataclass(frozen=True, eq=False)
class Range:
    """The values a threshold may take: finite, above ``low``, at most ``high`` (or below it
    when ``high_open``). Outside, a check would be off (``inf``, NaN) or flag everything."""

    low: float
    high: float = math.inf
    high_open: bool = True

    def __contains__(self, value: float) -> bool:
        if not math.isfinite(value) or not value > self.low:
            return False
        return value < self.high if self.high_open else value <= self.high

    def __str__(self) -> str:
        if self.high == math.inf:
            return f"a finite number above {self.low:g}"
        closing = ")" if self.high_open else "]"
        return f"a number in ({self.low:g}, {self.high:g}{closing}"


_FACTOR = Range(1.0)  # a multiple of a baseline: at or below 1, every parameter would be flagged
_POSITIVE = Range(0.0)
_FRACTION = Range(0.0, 1.0, high_open=False)
_BELOW_ONE = Range(0.0, 1.0)
RANGES: dict[str, Range] = {
    "explode_factor": _FACTOR,
    "explode_spike_factor": _FACTOR,
    "explode_level_factor": _FACTOR,
    "explode_sustain_steps": Range(0.0),
    "baseline_fraction": _FRACTION,
    "grad_to_weight_ratio": _POSITIVE,
    "weight_growth_factor": _FACTOR,
    "weight_blow_up_share": _BELOW_ONE,
    "explode_veto_limit": _FACTOR,
    "diverge_factor": _FACTOR,
    "vanish_depth_ratio": _FRACTION,
    "vanish_depth_ratio_stalled": _FRACTION,
    "loss_stalled_ratio": _FRACTION,
    "vanish_absolute": _POSITIVE,
    "vanish_decay_factor": _BELOW_ONE,
    "vanish_decay_excess": _FRACTION,
    "static_movement": _POSITIVE,
    "others_moving": _POSITIVE,
    "normal_update_ratio": _POSITIVE,
    "usual_update_ratio": _BELOW_ONE,
    "slow_update_ratio": _BELOW_ONE,
    "slow_total_movement": _POSITIVE,
    "slow_run_share": _BELOW_ONE,
    "clip_pinned_tolerance": _BELOW_ONE,
    "clip_pinned_tolerance_estimated": _BELOW_ONE,
    "clip_pinned_share": _FRACTION,
    "clip_suggest_percentile": Range(0.0, 100.0, high_open=False),
    "clip_most_steps_share": _FRACTION,
    "compare_factor": _FACTOR,
    "dead_zero_share": _FRACTION,
    "saturated_share": _FRACTION,
    "activation_steps": Range(0.0),
    "spike_factor": _FACTOR,
    "spike_recovery": _FACTOR,
    "spike_noise": _POSITIVE,
    "spike_window": Range(0.0),
    "spike_lead_rise": _FACTOR,
}
"""The allowed values of every numeric threshold (the docs generate theirs from it)."""
_PATTERN_KEYS = ("grad_pattern", "weight_pattern", "fail_on")


def _check_ranges(config: Config) -> None:
    for name, allowed in RANGES.items():
        value = getattr(config, name)
        if value not in allowed:
            raise ConfigError(f"{name} must be {allowed}, got {value!r}")


DEFAULT_CONFIG = Config()


def config_from_mapping(values: dict[str, Any], source: str) -> Config:
    """A Config from TOML keys (dashes or underscores), ConfigError on unknown keys or types,
    or on a threshold out of its range (:data:`RANGES`)."""
    known = {field.name: field for field in fields(Config)}
    changes: dict[str, Any] = {}
    for raw_key, value in values.items():
        key = raw_key.replace("-", "_")
        if key not in known:
            raise ConfigError(
                f"{source}: unknown setting {raw_key!r}; known settings: {', '.join(sorted(known))}"
            )
        changes[key] = _typed(key, value, getattr(DEFAULT_CONFIG, key), source)
    try:
        return dataclasses.replace(DEFAULT_CONFIG, **changes)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None


def _typed(key: str, value: Any, default: Any, source: str) -> Any:
    if key in _PATTERN_KEYS:
        if key == "fail_on" and isinstance(value, list):
            value = ",".join(str(v) for v in value)
        if not isinstance(value, str):
            raise ConfigError(f"{source}: {key} must be a string, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{source}: {key} must be a number, got {value!r}")
    if isinstance(default, int) and not isinstance(default, bool):
        if value != int(value):
            raise ConfigError(f"{source}: {key} must be a whole number, got {value!r}")
        return int(value)
    return float(value)


def load_config(path: str | None = None, *, cwd: str | None = None) -> Config:
    """Thresholds from ``path`` (``--config``), else ``[tool.gradcheck]`` of ./pyproject.toml."""
    if path is not None:
        document = _parsed_toml(_read_bytes(path), path)
        if "tool" not in document:  # a gradcheck-only file: settings at top level
            return config_from_mapping(document, path)
        return _from_tool_section(document, path)
    pyproject = os.path.join(cwd or os.getcwd(), "pyproject.toml")
    if not os.path.isfile(pyproject):
        return DEFAULT_CONFIG
    data = _read_bytes(pyproject)
    if b"gradcheck" not in data:  # no [tool.gradcheck] table can be in it: not parsed at all
        return DEFAULT_CONFIG  # (most projects' pyproject.toml: tomllib costs start-up time)
    return _from_tool_section(_parsed_toml(data, pyproject), pyproject)


def _from_tool_section(document: dict[str, Any], path: str) -> Config:
    """Settings under ``[tool.gradcheck]``; defaults when the file has no such table."""
    tool = document.get("tool", {})
    section = tool.get("gradcheck") if isinstance(tool, dict) else None
    if section is None:
        return DEFAULT_CONFIG
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.gradcheck] must be a table")
    return config_from_mapping(section, f"{path} [tool.gradcheck]")


MAX_CONFIG_BYTES = 1 << 20
"""A configuration file larger than 1 MiB is refused: a real one is a few hundred bytes, and
``--config /dev/zero`` must not fill memory."""


def _read_bytes(path: str) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_CONFIG_BYTES`, else ConfigError.

    Opened without blocking, then checked: a FIFO or a device is refused before any read
    (opening a FIFO for reading would wait for a writer; a device may never end).
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from exc
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"config file {path} is {file_kind(mode)}, not a regular file")
        with open(descriptor, "rb", closefd=False) as stream:
            data = stream.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from exc
    finally:
        os.close(descriptor)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {path} is larger than {MAX_CONFIG_BYTES} bytes (1 MiB)")
    return data


def _parsed_toml(data: bytes, path: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    except RecursionError:  # arrays or tables nested thousands deep
        raise ConfigError(f"config file {path} is not valid TOML: nested too deeply") from None
