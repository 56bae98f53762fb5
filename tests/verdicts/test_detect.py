"""Verdicts on hand-built runs: one scenario per rule, with the numbers and steps asserted."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import numpy as np
import pytest

from gradcheck.model import LOSS_ROW, Damage, Notice
from gradcheck.series.reduce import reduce_records
from gradcheck.verdicts import hints
from gradcheck.verdicts.clipping import downsample, pinned_ceiling
from gradcheck.verdicts.config import DEFAULT_CONFIG, Config
from gradcheck.verdicts.detect import analyze_run
from gradcheck.verdicts.rules.slow import SLOW
from tests.support.scenarios import (
    RUN,
    STEPS,
    Values,
    analyze,
    constant,
    frozen,
    gaussian,
    healthy_mlp,
    layer,
    records,
    until,
    walking,
)


def test_healthy_run_has_no_flag_and_every_parameter_is_reported() -> None:
    report = analyze(healthy_mlp(), scalars={"loss": lambda s: 2.0 / (1 + s)})
    assert [result.verdict for result in report.layers] == ["ok"] * 3
    assert report.counts == {
        "nan": 0, "exploding": 0, "diverging": 0, "vanishing": 0, "dead": 0, "saturated": 0,
        "static": 0, "slow": 0, "overflow": 0, "ok": 3,
    }  # fmt: skip
    fc0 = layer(report, "fc0.weight")
    assert (fc0.weight_tag, fc0.grad_tag, fc0.depth) == ("fc0.weight", "fc0.weight/grad", 0)
    assert fc0.stats["grad_norm_median"] == pytest.approx(0.02 * 16, rel=0.1)  # sqrt(256) * 0.02
    assert fc0.stats["grad_ratio_to_largest"] == pytest.approx(0.4, rel=0.1)
    assert fc0.stats["grad_norm_exact"] == 1
    assert fc0.trend_of == "gradient L2 norm" and len(fc0.trend) == 24
    assert report.clipping is not None and not report.clipping.clipped
    assert report.clipping.source == "formed from 3 gradient series"
    assert report.steps == (0, STEPS - 1)


def test_stats_are_json_safe() -> None:
    series = healthy_mlp()
    series["fc1.weight/grad"] = lambda s: np.full(256, np.nan) if s == 30 else gaussian(0.03)(s)
    report = analyze(series)
    for result in report.layers:
        assert all(v is None or math.isfinite(v) for v in result.stats.values())
        json.dumps(result.stats, allow_nan=False)  # plain numbers: no NaN, inf or numpy types
    poisoned = layer(report, "fc1.weight")  # the NaN step is there, and left out of the stats
    # one NaN gradient step that the weights survived (finite after it): a skipped update
    assert (poisoned.verdict, poisoned.first_bad_step) == ("overflow", 30)
    assert poisoned.stats["overflow_steps"] == 1 and poisoned.stats["grad_steps"] == 40
    assert poisoned.stats["grad_norm_max"] == pytest.approx(0.03 * 16, rel=0.15)


# --------------------------------------------------------------------------------------------
# nan
# --------------------------------------------------------------------------------------------


def test_nan_in_a_gradient_gives_nan_at_its_first_step_and_ranks_first() -> None:
    series = healthy_mlp()

    def poisoned(step: int) -> np.ndarray:
        values = gaussian(0.03, seed=21)(step)
        if step >= 27:
            values[:64] = np.nan
        return values

    series["fc1.weight/grad"] = poisoned
    report = analyze(series)
    first = report.layers[0]
    assert (first.name, first.verdict, first.first_bad_step) == ("fc1.weight", "nan", 27)
    assert "step 27" in first.evidence and "13 of 40 logged steps" in first.evidence
    assert first.severity > 4.0 and first.hint
    assert report.counts["nan"] == 1


def test_tf2_nan_histogram_with_nan_edges_is_nan() -> None:
    series = {
        "dense/kernel:0": walking(seed=3),
        "Gradients_dense/kernel:0": lambda s: np.array([np.nan]) if s >= 5 else gaussian(0.1)(s),
        "out/kernel:0": walking(seed=4),
    }
    report = analyze(series, encoding="tensor")
    dense = layer(report, "dense/kernel")
    assert dense.verdict == "nan" and dense.first_bad_step == 5
    assert dense.grad_tag == "Gradients_dense/kernel:0"


def test_series_that_stop_when_the_loss_turns_nan_are_nan() -> None:
    series = {tag: until(12, values) for tag, values in healthy_mlp().items()}
    loss = {"train/loss": lambda s: 1.0 if s < 12 else float("nan") if s == 12 else None}
    report = analyze(series, scalars=loss)
    assert [result.verdict for result in report.layers] == ["nan"] * 3
    assert {result.first_bad_step for result in report.layers} == {12}
    assert "train/loss" in report.layers[0].evidence


def test_a_nan_loss_with_finite_histograms_afterwards_is_not_nan() -> None:
    loss = {"loss": lambda s: float("nan") if s == 12 else 1.0}
    report = analyze(healthy_mlp(), scalars=loss)
    assert report.counts["nan"] == 0
    assert report.counts["ok"] == len(report.layers) == 3


def test_nonfinite_count_scalar_marks_nan() -> None:
    scalars = {"gradient_nonfinite/fc2.weight": lambda s: 3.0 if s >= 30 else 0.0}
    report = analyze(healthy_mlp(), scalars=scalars)
    result = layer(report, "fc2.weight")
    assert result.verdict == "nan" and result.first_bad_step == 30


# --------------------------------------------------------------------------------------------
# exploding
# --------------------------------------------------------------------------------------------


def rising(start: int, factor: float = 10.0, base: float = 0.05) -> Callable[[int], float]:
    return lambda s: base * (factor ** max(0, s - start + 1) if s >= start else 1.0)


def test_rising_gradient_is_exploding_from_the_onset_of_the_rise() -> None:
    series = healthy_mlp()
    series["fc1.weight/grad"] = gaussian(rising(20, factor=4.0), seed=21)
    report = analyze(series)
    result = report.layers[0]
    assert (result.name, result.verdict) == ("fc1.weight", "exploding")
    assert result.first_bad_step == 20  # 4x at 20, 16x at 21, 64x at 22, 256x at 23
    assert result.stats["explode_onset_step"] == 20
    assert "threshold 100x" in result.evidence and "from step 23" in result.evidence
    assert 3.0 < result.severity < 4.0


def test_explosion_into_nan_reports_the_nan_step_with_the_onset_beside_it() -> None:
    series = healthy_mlp()
    blowing = gaussian(rising(15, factor=30.0), seed=21)
    series["fc1.weight/grad"] = lambda s: (
        np.full(256, np.inf) * blowing(s) if s >= 19 else blowing(s)
    )
    result = layer(analyze(series), "fc1.weight")
    assert result.flags == ("nan", "exploding")
    assert result.first_bad_step == 19 and result.stats["first_nan_step"] == 19
    assert result.onsets == {"nan": 19, "exploding": 15}
    assert "rose" in result.evidence and "blew up" in result.hint


def test_a_few_early_spikes_are_not_exploding() -> None:
    series = healthy_mlp()
    series["fc1.weight/grad"] = gaussian(lambda s: 0.03 * (50 if s in (3, 8) else 1), seed=21)
    assert layer(analyze(series), "fc1.weight").verdict == "ok"


def test_one_spike_of_three_orders_is_exploding() -> None:
    series = healthy_mlp()
    series["fc1.weight/grad"] = gaussian(lambda s: 0.03 * (2000 if s == 25 else 1), seed=21)
    result = layer(analyze(series), "fc1.weight")
    assert result.verdict == "exploding" and result.first_bad_step == 25


def test_gradients_held_at_a_clipping_ceiling_are_not_exploding() -> None:
    """Gradients logged after clip-by-global-norm(1.0): a 100x rise that clipping holds."""
    norm = lambda s: 0.005 if s < 10 else 1.0  # noqa: E731
    series = {"w": walking(seed=5), "w/grad": lambda s: np.full(100, norm(s) / 10.0)}
    series |= {"v": walking(seed=6), "v/grad": lambda s: np.full(100, 0.001)}
    report = analyze(series, config=Config(explode_sustain_steps=3))
    assert report.counts["exploding"] == 0
    clip = report.clipping
    assert clip is not None and clip.clipped
    assert clip.ceiling == pytest.approx(math.hypot(1.0, 0.01), rel=1e-9)
    # the norm logged after the clip describes the clip: no clip norm is suggested from it
    assert clip.suggested_clip_norm is None and "already clipped" in clip.rule


def test_weights_only_blowing_up_is_exploding() -> None:
    series = {
        "dense/kernel_0": gaussian(lambda s: 0.1 * (3.0 ** max(0, s - 19)), seed=7),
        "dense_1/kernel_0": walking(seed=8),
    }
    result = layer(analyze(series), "dense/kernel")
    assert result.verdict == "exploding" and result.first_bad_step == 20
    assert "no gradients logged" in result.evidence


def test_gradients_dwarfing_their_weights_are_exploding() -> None:
    series = {"w": walking(scale=1e-3, seed=9), "w/grad": gaussian(5.0, seed=10)}
    series |= {"v": walking(seed=11), "v/grad": gaussian(5.0, seed=12)}
    result = layer(analyze(series), "w")
    assert result.verdict == "exploding"
    assert result.stats["grad_to_weight_ratio"] == pytest.approx(5000, rel=0.2)


# --------------------------------------------------------------------------------------------
# vanishing
# --------------------------------------------------------------------------------------------


def test_first_layer_far_below_the_largest_is_vanishing() -> None:
    series = healthy_mlp()
    series["fc0.weight/grad"] = gaussian(1e-6, seed=20)
    series["fc1.weight/grad"] = gaussian(2e-5, seed=21)
    report = analyze(series)
    assert [r.name for r in report.layers[:2]] == ["fc0.weight", "fc1.weight"]  # deepest worst
    fc0 = report.layers[0]
    assert fc0.verdict == "vanishing" and fc0.first_bad_step == 0
    assert fc0.stats["grad_ratio_to_largest"] == pytest.approx(2e-5, rel=0.1)
    assert "fc2.weight" in fc0.evidence and "0.001 threshold" in fc0.evidence
    assert "saturating activations" in fc0.hint
    assert layer(report, "fc2.weight").verdict == "ok"


def test_absolutely_tiny_gradients_are_vanishing_everywhere() -> None:
    series = {
        name: gaussian(1e-9, seed=i) if name.endswith("grad") else frozen(seed=i)
        for i, (name, f) in enumerate(healthy_mlp().items())
    }
    report = analyze(series)
    assert report.counts["vanishing"] == 3
    assert "below the absolute threshold 1.00e-07" in report.layers[0].evidence


def test_tiny_gradients_that_still_move_the_weights_are_not_vanishing() -> None:
    """Adam with a loss scaled down by 1e-5: tiny gradients, weights moving, loss falling."""
    series = {
        name: gaussian(1e-9, seed=i) if name.endswith("grad") else f
        for i, (name, f) in enumerate(healthy_mlp().items())
    }
    report = analyze(series, scalars={"loss": lambda step: 2.0 * 0.95**step})
    assert report.counts["vanishing"] == 0
    note = layer(report, "fc0.weight").notes[0]
    assert note.startswith("not vanishing: gradient RMS") and "the loss fell" in note
    assert "the weights move" in note
    # the same tiny gradients while the loss stalls are vanishing
    stalled = analyze(series, scalars={"loss": lambda step: 2.0})
    assert stalled.counts["vanishing"] == 3


def test_decay_by_orders_of_magnitude_while_the_loss_stalls_is_vanishing() -> None:
    series = healthy_mlp()
    series["fc0.weight/grad"] = gaussian(lambda s: 0.02 * 10 ** (-s / 8), seed=20)
    stalled = analyze(series, scalars={"loss": lambda s: 1.0 + 0.01 * math.sin(s)})
    result = layer(stalled, "fc0.weight")
    assert result.verdict == "vanishing" and "decayed" in result.evidence
    assert result.stats["grad_decay_factor"] < 1e-3
    converging = analyze(series, scalars={"loss": lambda s: 10 ** (-s / 8)})
    assert layer(converging, "fc0.weight").verdict == "ok"


def test_bias_feeding_a_batchnorm_is_not_vanishing() -> None:
    series = healthy_mlp()
    series["fc0.bias"] = walking(seed=30, size=64)
    series["fc0.bias/grad"] = gaussian(1e-10, size=64, seed=31)
    assert layer(analyze(series), "fc0.bias").verdict == "ok"


# --------------------------------------------------------------------------------------------
# static
# --------------------------------------------------------------------------------------------


def test_bit_identical_weights_while_others_move_are_static() -> None:
    series = healthy_mlp()
    series["fc0.weight"] = frozen()
    report = analyze(series)
    result = layer(report, "fc0.weight")
    assert result.verdict == "static" and result.first_bad_step == 0
    assert "bit-identical at all 40 logged steps" in result.evidence
    assert "gradient is not zero" in result.evidence and "frozen on purpose?" in result.evidence
    assert result.stats["weight_bit_identical"] == 1


def test_nothing_moving_is_not_static() -> None:
    series = {name: frozen(seed=i) for i, name in enumerate(("a", "b", "c"))}
    assert analyze(series).counts["static"] == 0


def test_movement_below_float_noise_is_static() -> None:
    series = healthy_mlp()
    series["fc0.weight"] = walking(speed=1e-9, seed=12)
    result = layer(analyze(series), "fc0.weight")
    assert result.verdict == "static" and "moved at most" in result.evidence


@pytest.mark.parametrize(
    ("moving_stats", "note"),
    [(walking(seed=40, size=64), "do move"), (frozen(seed=41, size=64), "static too")],
)
def test_batchnorm_gamma_beta_notes_its_moving_statistics(moving_stats: Values, note: str) -> None:
    series = {
        "dense/kernel/histogram": walking(seed=42),
        "bn/gamma/histogram": constant(1.0),
        "bn/beta/histogram": constant(0.0),
        "bn/moving_mean/histogram": moving_stats,
        "out/kernel/histogram": walking(seed=43),
    }
    report = analyze(series, steps=8)
    gamma = layer(report, "bn/gamma")
    assert gamma.verdict == "static" and note in gamma.evidence
    assert "BatchNorm gamma/beta" in gamma.hint
    assert layer(report, "bn/beta").verdict == "static"


def test_zero_bias_is_measured_against_the_runs_spread() -> None:
    series = {"w": walking(seed=50), "b": lambda s: np.full(16, 1e-3 * s)}
    report = analyze(series)
    assert layer(report, "b").verdict == "ok"
    assert layer(report, "b").stats["weight_movement"] == pytest.approx(0.039 / 0.1, rel=0.1)


# --------------------------------------------------------------------------------------------
# pairing, scalars, warnings
# --------------------------------------------------------------------------------------------


def test_exact_norm_scalars_are_preferred_over_bucket_estimates() -> None:
    series = {"weights/fc.weight": walking(seed=60), "gradients/fc.weight": gaussian(0.1, seed=61)}
    series |= {"weights/out.weight": walking(seed=62), "gradients/out.weight": gaussian(0.1)}
    scalars = {"gradient_norm/fc.weight": lambda s: 1.5, "gradient_norm/global": lambda s: 2.0}
    report = analyze(series, encoding="tensor", scalars=scalars)
    result = layer(report, "fc.weight")
    assert result.stats["grad_norm_median"] == 1.5 and result.stats["grad_norm_exact"] == 1
    assert layer(report, "out.weight").stats["grad_norm_exact"] == 0
    assert report.clipping is not None and report.clipping.source == "scalar gradient_norm/global"


def test_warnings_name_the_file_and_what_happened() -> None:
    data = reduce_records(
        [
            *records(healthy_mlp(), steps=3),
            Damage(RUN, "runs/hand/events.out.tfevents.1", 80, "incomplete_tail", 9, "cut at 80"),
            Notice(RUN, "runs/hand/events.out.tfevents.1", "restart", "x", 2, "steps go back"),
        ]
    )
    report = analyze_run(data)
    assert report.warnings == (
        "events.out.tfevents.1: cut at 80",
        "events.out.tfevents.1: steps go back",
    )


# --------------------------------------------------------------------------------------------
# hints and clipping helpers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("batch_normalization/gamma", "bn_affine"),
        ("mlp/frozen_bn/beta", "bn_affine"),
        ("bn1.weight", "bn_affine"),
        ("layer1.0.bn2.bias", "bn_affine"),
        ("batch_normalization/moving_variance", "bn_moving"),
        ("bn1.running_mean", "bn_moving"),
        ("fc1.weight", "other"),
        ("encoder.norm1.weight", "other"),  # LayerNorm is not BatchNorm
    ],
)
def test_parameter_kind(name: str, kind: str) -> None:
    assert hints.parameter_kind(name) == kind


def test_sibling_weights_of_biases() -> None:
    assert hints.sibling_weights("dense/bias") == (
        "dense/kernel",
        "dense/weight",
        "dense/weights",
        "dense/w",
    )
    assert hints.sibling_weights("bias#2")[0] == "kernel#2"
    assert hints.sibling_weights("bn/beta") == ("bn/gamma",)
    assert hints.sibling_weights("fc1.weight") == () and hints.sibling_weights("mybias") == ()


@pytest.mark.parametrize(
    ("name", "recurrent"),
    [
        ("rnn.weight_hh_l0", True),
        ("encoder.weight_ih_l1_reverse", True),
        ("lstm/lstm_cell/recurrent_kernel", True),
        ("gru/gru_cell/kernel", True),
        ("simple_rnn/simple_rnn_cell/bias", True),
        ("dense/kernel", False),
        ("conv1.weight", False),
        ("group_norm.weight", False),
    ],
)
def test_recurrent_layers_are_known_by_name(name: str, recurrent: bool) -> None:
    assert hints.is_recurrent(name) == recurrent


def test_recurrent_hints_recommend_clipping_and_init_never_relu() -> None:
    plain = hints.vanishing_hint("depth", "early", "rnn.weight_hh_l0")
    gated = hints.vanishing_hint("depth", "early", "lstm/lstm_cell/recurrent_kernel")
    exploding = hints.exploding_rise_hint("rnn.weight_hh_l0")
    for hint in (plain, gated, exploding, hints.vanishing_hint("absolute", "late", "gru.bias")):
        assert "ReLU" not in hint and "orthogonal" in hint
    assert "gated layer (LSTM or GRU)" in plain and "gated layer" not in gated
    assert "clip the global gradient norm" in exploding
    assert "ReLU" in hints.vanishing_hint("depth", "early", "dense/kernel")
    assert hints.exploding_rise_hint("dense/kernel") == hints.EXPLODING_RISE


@pytest.mark.parametrize(
    ("depth", "count", "where"),
    [(0, 9, "early"), (4, 9, "middle"), (8, 9, "late"), (0, 2, "early"), (1, 2, "late")],
)
def test_position_in_depth(depth: int, count: int, where: str) -> None:
    assert hints.position(depth, count) == where


def test_pinned_ceiling_needs_a_share_of_steps_at_the_maximum() -> None:
    unclipped = np.array([0.5, 0.9, 1.0, 0.7, 0.95, 0.6, 0.8, 0.99, 0.85, 0.75])
    assert pinned_ceiling(unclipped, DEFAULT_CONFIG) is None
    clipped = np.array([0.5, 1.0, 1.0000004, 0.7, 1.0, 0.6, 1.0000002, 0.4, 0.9, 0.3])
    assert pinned_ceiling(clipped, DEFAULT_CONFIG) == pytest.approx(1.0000004)
    assert pinned_ceiling(np.array([1.0, 1.0]), DEFAULT_CONFIG) is None  # too few steps


def test_downsampled_trend_keeps_peaks_and_nan() -> None:
    values = np.ones(100)
    values[10] = 50.0
    values[90] = np.nan
    trend = downsample(values, points=10)
    assert len(trend) == 10 and trend[1] == 50.0 and math.isnan(trend[9])
    assert downsample(np.array([1.0, 2.0])) == (1.0, 2.0)


def test_a_hundredfold_depth_gap_is_vanishing_only_while_the_loss_stalls() -> None:
    series = healthy_mlp()
    series["fc0.weight/grad"] = gaussian(2e-4, seed=20)  # 4e-3 of fc2's gradient
    learning = analyze(series, scalars={"loss": lambda s: 2.0 / (1 + s)})
    assert layer(learning, "fc0.weight").verdict == "ok"
    stalled = analyze(series, scalars={"loss": lambda s: 1.38 + 0.01 * math.cos(s)})
    result = layer(stalled, "fc0.weight")
    assert result.verdict == "vanishing"
    assert "0.01 threshold while the loss stalled" in result.evidence


def test_chart_series_keeps_every_window_extreme_and_every_nonfinite_step() -> None:
    from gradcheck.verdicts.clipping import CHART_WINDOWS, chart_series

    steps = np.arange(10_000, dtype=np.int64)
    values = np.sin(steps / 50.0) + 2.0
    values[7_777] = 1e6  # a one-step spike
    values[9_000:9_100] = np.nan
    bad = steps[~np.isfinite(values)]
    series = chart_series("norm", steps, values, bad)
    assert series.steps.size <= 2 * CHART_WINDOWS
    assert np.all(np.diff(series.steps) > 0)
    assert 7_777 in series.steps and np.nanmax(series.values) == 1e6
    assert np.nanmin(series.values) == pytest.approx(values[np.isfinite(values)].min())
    assert np.isnan(series.values).any()  # the NaN stretch breaks the line
    assert np.array_equal(series.nonfinite_steps, np.arange(9_000, 9_100))
    short = chart_series("norm", steps[:100], values[:100], bad[:0])
    assert np.array_equal(short.steps, steps[:100])  # a short series is kept whole


# --------------------------------------------------------------------------------------------
# slow
# --------------------------------------------------------------------------------------------


def growing(rate: float, seed: int = 5, size: int = 4096) -> Values:
    """Weights whose every element grows by ``rate`` of itself per step: the distribution
    widens by that much, a move of about 0.8 * rate of its spread per step."""
    start = np.random.default_rng(seed).normal(0.0, 0.1, size=size)
    return lambda step: start * (1 + rate * step)


def creeping_and_walking(rate: float) -> dict[str, Values]:
    return {
        "fc0.weight": growing(rate),
        "fc0.weight/grad": gaussian(0.02, seed=3),
        "fc1.weight": walking(seed=11),
        "fc1.weight/grad": gaussian(0.03, seed=4),
    }


def test_weights_creeping_orders_below_the_usual_update_are_slow() -> None:
    report = analyze(creeping_and_walking(3e-6))
    creeping = layer(report, "fc0.weight")
    assert creeping.flags == ("slow",) and creeping.first_bad_step is None
    assert creeping.stats["update_ratio_median"] < 1e-5  # a lower bound of 0.8 * 3e-6
    assert "below the 1.00e-05 threshold" in creeping.evidence
    assert creeping.hint == SLOW
    assert layer(report, "fc1.weight").verdict == "ok"
    assert report.updates.endswith("; slowest fc0.weight 1e-7")
    assert not [note for note in report.notes if "whole model" in note]  # 1 of 2 kernels


def test_weights_moving_the_usual_amount_are_not_slow() -> None:
    report = analyze(creeping_and_walking(1e-3))
    assert layer(report, "fc0.weight").verdict == "ok"
    assert layer(report, "fc0.weight").stats["update_ratio_median"] == pytest.approx(8e-4, rel=0.2)


def test_a_large_sgd_estimate_excuses_a_small_distribution_distance() -> None:
    # lr 1: lr * |g| / |w| is ~5e-2 per step, so the tiny distance is the lower bound's doing
    report = analyze(creeping_and_walking(3e-6), scalars={"lr-SGD": lambda step: 1.0})
    creeping = layer(report, "fc0.weight")
    assert creeping.verdict == "ok"
    assert creeping.stats["update_ratio_sgd_median"] == pytest.approx(0.05, rel=0.1)
    assert any(note.startswith("not slow:") and "SGD estimate" in note for note in creeping.notes)
    slow = layer(analyze(creeping_and_walking(3e-6), scalars={"lr": lambda s: 1e-4}), "fc0.weight")
    assert slow.verdict == "slow" and "SGD estimate lr*|g|/|w| 5.05e-06 (lr)" in slow.evidence


def test_most_kernels_slow_give_the_run_line_and_moving_statistics_never_are_slow() -> None:
    series = {
        "fc0.weight": growing(3e-6, seed=5),
        "fc1.weight": growing(3e-6, seed=6),
        "bn.running_mean": growing(3e-6, seed=7),
        "fc2.weight": walking(seed=12),
    }
    report = analyze(series)
    assert [layer(report, f"fc{i}.weight").verdict for i in range(3)] == ["slow", "slow", "ok"]
    assert layer(report, "bn.running_mean").verdict == "ok"
    (line,) = [note for note in report.notes if "whole model" in note]
    assert line.startswith("the whole model learns about") and "2 of 3 kernels" in line


def test_a_slow_kernel_with_a_tiny_gradient_is_the_gradient_s_doing_not_slow() -> None:
    series = creeping_and_walking(3e-6)
    series["fc0.weight/grad"] = gaussian(1e-6, seed=3)  # far below fc1's 0.03
    creeping = layer(analyze(series), "fc0.weight")
    assert "slow" not in creeping.flags
    assert any("not slow" in note for note in creeping.notes)


def test_a_loss_that_diverges_has_no_spike_from_its_onset_on() -> None:
    """A loss that jumps 200x for 5 steps and then stays at 1.3x its start is ``diverging``
    (never back below its start) though it comes back below 1.5x its running median within
    20 steps: from the divergence's onset on the loss is the blow-up's, not a spike; a spike
    that came back before it is still listed."""

    def loss(step: int) -> float:
        noise = 1.0 + 0.01 * math.sin(step)
        if step == 30:
            return 6.0 * noise  # a transient spike, back at once
        if 50 <= step < 55:
            return 200.0 * noise
        return (1.3 if step >= 55 else 1.0) * noise

    report = analyze(healthy_mlp(), steps=80, scalars={"loss": loss})
    row = layer(report, LOSS_ROW)
    assert row.verdict == "diverging" and row.first_bad_step == 50
    assert [(spike.step, round(spike.loss_ratio)) for spike in report.spikes] == [(30, 6)]


def test_spikes_after_a_blow_up_began_are_the_blow_up_s() -> None:
    """From the first exploding onset on the loss's jumps are the explosion's (its rows say
    so), not transient spikes; a spike that came back before it is listed."""
    series = healthy_mlp()
    series["fc2.weight/grad"] = gaussian(rising(60, factor=4.0), seed=22)

    def loss(step: int) -> float:
        noise = 1.0 + 0.01 * math.sin(step)
        return (8.0 if step in (30, 70) else 1.0) * noise

    report = analyze(series, steps=80, scalars={"loss": loss})
    assert layer(report, "fc2.weight").verdict == "exploding"
    assert layer(report, "fc2.weight").first_bad_step == 60
    assert [spike.step for spike in report.spikes] == [30]
