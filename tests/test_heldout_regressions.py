"""Regressions found by the held-out runs of ``scripts/make_heldout.py``, one scenario per bug,
built in memory like ``tests/test_detect.py`` (the held-out run each one comes from is named)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.test_detect import Values, analyze, gaussian, healthy_mlp, layer, walking


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
