"""Regressions found by the held-out runs of ``scripts/make_heldout.py``, one scenario per bug,
built in memory like ``tests/verdicts/test_detect.py`` (the held-out run each one comes from is
named)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gradcheck.pipeline import analyze as run_analyze
from gradcheck.verdicts import hints
from tests.support.paths import TEST_DATA
from tests.support.scenarios import (
    Values,
    analyze,
    constant,
    frozen,
    gaussian,
    healthy_mlp,
    layer,
    walking,
)


def test_after_a_blow_up_the_loss_of_the_healthy_steps_judges_vanishing() -> None:
    """torch_warmup_too_aggressive_explodes: the loss falls to ~0 and the gradients with it,
    then a blow-up kills every unit (zero gradients, the loss stuck at chance). Vanishing is
    judged on the steps before the blow-up, so the loss must be too: it fell there, it did not
    rise 4x."""

    def scale(step: int, base: float) -> float:
        if step < 20:
            return base * 10 ** (-step / 4)  # shrinking with the loss
        return base * 10 ** (3 * (step - 19)) if step < 24 else 0.0  # blow-up, then dead

    series: dict[str, Values] = {}
    for i, base in enumerate((0.02, 0.03, 0.05)):
        series[f"fc{i}.weight"] = walking(seed=10 + i)
        series[f"fc{i}.weight/grad"] = gaussian(lambda s, b=base: scale(s, b), seed=20 + i)
    loss = lambda s: 1.6 * 10 ** (-s / 4) if s < 20 else 1.6  # noqa: E731
    report = analyze(series, scalars={"loss": loss})
    assert sorted(result.name for result in report.layers) == [f"fc{i}.weight" for i in range(3)]
    for result in report.layers:
        assert "exploding" in result.flags, result.evidence
        assert "vanishing" not in result.flags, result.evidence


def clipped_gradients(names: list[str], ceiling: float, steps: int = 40) -> dict[str, Values]:
    """Gradients rescaled at every step so that their global norm is ``ceiling``, as
    ``tf.clip_by_global_norm`` leaves them when the natural norm is above it."""
    rng = np.random.default_rng(7)
    raw = {name: [rng.normal(0, 1 + (i + s % 5) / 4, 256) for s in range(steps)] for i, name in
           enumerate(names)}  # fmt: skip
    totals = [math.sqrt(sum(float(np.sum(raw[n][s] ** 2)) for n in names)) for s in range(steps)]
    return {f"{n}/grad": (lambda s, n=n: raw[n][s] * ceiling / totals[s]) for n in names}


def test_a_norm_clipped_by_global_norm_is_pinned_when_estimated_from_tf2_buckets() -> None:
    """tf_loop_clip_global_norm_active_healthy: post-clip gradients logged as TF2 30-bucket
    histograms give a global norm that scatters around the clip norm by the estimate's error
    (0.1% tolerance missed it)."""
    names = ["fc0.weight", "fc1.weight", "fc2.weight"]
    series = clipped_gradients(names, 0.2) | {n: walking(seed=i) for i, n in enumerate(names)}
    report = analyze(series, encoding="tensor")
    clip = report.clipping
    assert clip is not None and clip.clipped, clip
    assert clip.source == "formed from 3 gradient series"
    assert clip.ceiling == pytest.approx(0.2, rel=0.02)
    assert report.counts["exploding"] == 0


def test_chance_near_ties_of_an_estimated_norm_are_not_clipped() -> None:
    """The zoo's tf_loop_deep_sigmoid_vanishing: 3 of 20 noisy steps within 1% of the maximum
    of a bucket-estimated norm are a coincidence, not a ceiling."""
    scales = [0.40, 0.71, 0.52, 0.50, 0.70, 0.66, 0.13, 0.705, 0.34, 0.55,
              0.37, 0.26, 0.55, 0.30, 0.39, 0.37, 0.32, 0.30, 0.36, 0.12]  # fmt: skip
    shape = np.random.default_rng(4).normal(0, 1, 256)
    shape /= np.linalg.norm(shape)
    series = {"w": walking(seed=3), "w/grad": lambda s: shape * scales[s]}
    report = analyze(series, encoding="tensor", steps=len(scales))
    assert report.clipping is not None and not report.clipping.clipped


def test_an_embedding_table_is_not_vanishing_by_the_stalled_ratio() -> None:
    """torch_embedding_bag_helper_healthy: an embedding's rows get the gradient of the few
    tokens that use them, 6e-3 of the head's per element; the loss plateaus on a hard task.
    The stalled 1e-2 ratio does not apply to it; the plain 1e-3 one still does."""
    series = healthy_mlp()
    series["embed.weight"] = walking(seed=40)
    series["embed.weight/grad"] = gaussian(0.05 * 6e-3, seed=41)
    series["fc0.weight/grad"] = gaussian(0.05 * 6e-3, seed=42)  # a dense layer as far down
    stalled = analyze(series, scalars={"loss": lambda s: 1.38 + 0.01 * math.cos(s)})
    assert layer(stalled, "embed.weight").verdict == "ok"
    assert layer(stalled, "fc0.weight").verdict == "vanishing"
    series["embed.weight/grad"] = gaussian(0.05 * 3e-4, seed=41)
    stalled = analyze(series, scalars={"loss": lambda s: 1.38 + 0.01 * math.cos(s)})
    assert layer(stalled, "embed.weight").verdict == "vanishing"


def test_static_weights_under_a_gradient_below_float32_resolution_blame_the_gradient() -> None:
    """keras_fit_tiny_init_tanh_gradient_logger_vanishing: SGD cannot move a weight of RMS 0.01
    with a gradient of RMS 3e-10 (the update rounds away); the optimizer is not to blame."""
    series = healthy_mlp()
    series["fc0.weight"] = lambda s: np.random.default_rng(9).normal(0, 0.01, 256)
    series["fc0.weight/grad"] = gaussian(3e-10, seed=20)
    tiny = layer(analyze(series), "fc0.weight")
    assert "static" in tiny.flags and "below float32 resolution" in tiny.evidence
    series["fc0.weight/grad"] = gaussian(0.02, seed=20)
    left_out = layer(analyze(series), "fc0.weight")
    assert "static" in left_out.flags and "left out of the optimizer" in left_out.evidence


# --------------------------------------------------------------------------------------------
# The onset of an exploding rise
# --------------------------------------------------------------------------------------------


def converge_then_climb(step: int, start: float = 0.05) -> float:
    """A gradient scale that converges 10x per 20 steps down to step 24, then doubles at every
    step from 25: it leaves 2x of its early baseline only at step 29."""
    if step < 25:
        return start * 10 ** (-step / 20)
    return start * 10 ** (-24 / 20) * 2 ** (step - 24)


def test_a_rise_from_far_below_the_baseline_begins_where_the_climb_begins() -> None:
    """torch_linear_diverging_finite: the norm had converged 5x below its early baseline when
    the learning rate pushed it past stability; the onset was the last step within 2x of the
    early baseline (4 logged steps late), it is the first step of the climb."""
    series = healthy_mlp()
    series["fc1.weight/grad"] = gaussian(converge_then_climb, seed=21)
    result = layer(analyze(series), "fc1.weight")
    assert result.verdict == "exploding"
    assert result.first_bad_step == 25 and result.stats["explode_onset_step"] == 25
    assert "the rise began at step 25" in result.evidence


def test_a_jump_on_a_noisy_plateau_begins_at_the_jump() -> None:
    """torch_lr_jump_at_60_into_nan: a norm that swings 1.6x from step to step does not climb
    when it swings up just before a 1000x jump: the onset is the jump, not the swing."""
    series = healthy_mlp()
    swing = lambda s: 0.03 * (1.6 if s % 2 else 1.0) * (1000.0 if s >= 30 else 1.0)  # noqa: E731
    series["fc1.weight/grad"] = gaussian(swing, seed=21)
    result = layer(analyze(series), "fc1.weight")
    assert result.verdict == "exploding" and result.first_bad_step == 30


def test_a_bias_rising_with_its_weight_gets_the_weights_onset() -> None:
    """torch_linear_diverging_finite: the bias's gradient (the batch's summed error) swings 4x
    from step to step, so the climb it shares with its weight stands out only 2 steps later."""
    series = healthy_mlp()
    series["fc0.weight/grad"] = gaussian(converge_then_climb, seed=20)
    bias = lambda s: 0.01 * (4.0 if s % 2 and s < 25 else 1.0) * 2 ** max(0, s - 24)  # noqa: E731
    series["fc0.bias/grad"] = gaussian(bias, size=32, seed=30)
    series["fc0.bias"] = walking(size=32, seed=31)
    report = analyze(series)
    weight, bias_result = layer(report, "fc0.weight"), layer(report, "fc0.bias")
    assert weight.verdict == bias_result.verdict == "exploding"
    assert weight.first_bad_step == bias_result.first_bad_step == 25
    assert "the rise began at step 31 (fc0.weight, in the same layer, from step 25)" in (
        bias_result.evidence
    )


def test_a_rise_that_ends_in_zero_gradients_says_so_and_is_not_nan() -> None:
    """torch_warmup_too_aggressive_explodes: after the blow-up every ReLU is dead and the
    gradients are exactly zero; the evidence said 'then turned non-finite'."""
    blow_up = lambda s: 0.03 * 10 ** (2 * (s - 19)) if 20 <= s < 24 else 0.03  # noqa: E731
    series = healthy_mlp()
    series["fc1.weight/grad"] = gaussian(lambda s: blow_up(s) if s < 24 else 0.0, seed=21)
    result = layer(analyze(series), "fc1.weight")
    assert result.flags == ("exploding",), result.evidence
    assert "then collapsed to exactly zero (dead units" in result.evidence
    assert "non-finite" not in result.evidence and "first_nan_step" not in result.stats
    assert result.first_bad_step == 20 and result.stats["grad_norm_last"] == 0.0


# --------------------------------------------------------------------------------------------
# Frozen parameters: no gradient logged for them
# --------------------------------------------------------------------------------------------


def test_a_parameter_without_gradient_in_a_run_that_logs_gradients_is_frozen() -> None:
    """torch_finetune_frozen_backbone_bn: gradcheck's helpers log no gradient for a parameter
    with requires_grad=False; the hint said to log gradients, which the run does."""
    series = healthy_mlp() | {"backbone.weight": frozen(seed=50)}
    result = layer(analyze(series), "backbone.weight")
    assert result.verdict == "static"
    assert "no gradient was logged for it (3 other parameters have one): frozen" in (
        result.evidence
    )
    assert result.hint == hints.STATIC_FROZEN
    weights_only = {name: values for name, values in series.items() if "grad" not in name}
    result = layer(analyze(weights_only), "backbone.weight")
    assert result.verdict == "static" and "no gradient was logged" not in result.evidence
    assert result.hint.endswith(hints.STATIC_NO_GRADIENTS)


def test_a_frozen_batchnorm_without_gradients_says_frozen_and_its_statistics_do_not() -> None:
    """The same for BatchNorm gamma (trainable=False); its moving statistics never have a
    gradient, so nothing is said about gradients for them."""
    series = healthy_mlp() | {
        "bn.weight": constant(1.0),
        "bn.running_mean": constant(0.5),
    }
    report = analyze(series)
    gamma, moving = layer(report, "bn.weight"), layer(report, "bn.running_mean")
    assert gamma.verdict == moving.verdict == "static"
    assert gamma.hint == hints.STATIC_BN_AFFINE + hints.STATIC_NO_GRADIENT_HERE
    assert moving.hint == hints.STATIC_BN_MOVING and "gradient" not in moving.evidence


def test_zero_gradients_logged_do_not_excuse_a_run_that_trained() -> None:
    """Whatever the gradient coverage: gradients logged, but zero (a loss cut off from the
    model), weights bit-identical, the training loss logged at every step."""
    series = {"fc.weight": frozen(), "fc.weight/grad": constant(0.0, size=256)}
    trained = analyze(series, scalars={"train/loss": lambda step: 0.7})
    (layer,) = trained.layers
    assert layer.flags == ("vanishing", "static"), layer.notes  # its gradient is zero too
    assert "not an evaluation log: the training loss (train/loss) is logged at 40 steps" in (
        layer.evidence
    )
    assert "its gradient is zero" in layer.evidence
    (excused,) = analyze(series).layers
    assert excused.flags == ("vanishing",)
    assert any("an evaluation log?" in note for note in excused.notes)


def test_a_loss_that_rose_has_not_stalled() -> None:
    """Issue 30's MLP: 'while the loss stalled (loss at 6.05e+14x its early value)'. A layer
    2.5 orders below the largest (the stalled margin applies while the loss does not fall)
    says the loss rose when it did."""
    series = healthy_mlp()
    series["fc0.weight/grad"] = gaussian(0.05 * 3e-3, seed=42)
    rising = analyze(series, scalars={"loss": lambda s: 1.0 + 0.05 * s})
    result = layer(rising, "fc0.weight")
    assert result.verdict == "vanishing"
    assert "while the loss rose (loss at 2.67x its early value)" in result.evidence
    flat = analyze(series, scalars={"loss": lambda s: 1.0 + 0.001 * math.sin(s)})
    assert "while the loss stalled (loss at" in layer(flat, "fc0.weight").evidence


def test_a_branch_that_exploded_is_not_also_vanishing() -> None:
    """runs15 loss_falls_while_branch_explodes: the branch's gradient starts 2.5e-6 of the main
    layer's and rises 1e6x; it was 'exploding; also vanishing'. The small early level is the
    start of the blow-up, not a vanishing gradient; the note says why it was not flagged."""
    path = TEST_DATA / "runs15" / "loss_falls_while_branch_explodes"
    (run,) = run_analyze([str(path)], jobs=1).runs
    branch = layer(run, "branch.weight")
    assert branch.flags == ("exploding",)
    # it climbs 1.4x a step from its first logged step (issue 30's onset rule: a blow-up from
    # the start has its onset there), so no step before the blow-up is left to call vanishing
    assert branch.onsets == {"exploding": 0}
    assert all("vanishing" not in layer.flags for layer in run.layers)


def test_nothing_vanishes_by_depth_in_a_run_that_blew_up() -> None:
    """A layer far below the others while the run's gradients explode: not vanishing because
    another's gradient is orders of magnitude larger (the blow-up's rows say what happened)."""

    def exploding(base: float) -> Values:
        return gaussian(lambda s: base * (10 ** (s - 24) if s >= 25 else 1.0), seed=int(base * 1e4))

    series = {f"fc{i}.weight": walking(seed=10 + i) for i in range(3)}
    series["fc0.weight/grad"] = gaussian(1e-5, seed=20)  # 2.5e-4 of the largest, throughout
    series["fc1.weight/grad"] = exploding(0.03)
    series["fc2.weight/grad"] = exploding(0.04)
    report = analyze(series, scalars={"loss": lambda s: 2.0})
    assert layer(report, "fc1.weight").verdict == "exploding"
    fc0 = layer(report, "fc0.weight")
    assert fc0.verdict == "ok", fc0.evidence
    assert any("but the run blew up from step" in note for note in fc0.notes), fc0.notes
