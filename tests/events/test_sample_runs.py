"""The committed sample runs, read back end to end: tags present, numbers that show each pathology.

No framework needed: the files were written once by ``scripts/make_sample_runs.py``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from gradcheck.model import LayerResult
from gradcheck.pipeline import analyze
from gradcheck.series.stats import histogram_stats
from tests.support.paths import SAMPLE_RUNS
from tests.support.readback import Logs, bucket_total, read_logs

RUN_NAMES = (
    "keras_healthy_callback",
    "keras_fit_weights_only",
    "tf_loop_vanishing_sigmoid",
    "tf_loop_exploding_nan",
    "torch_exploding_nan",
    "torch_clipped",
    "torch_frozen",
)


@pytest.fixture(scope="module", params=RUN_NAMES)
def run_name(request: pytest.FixtureRequest) -> str:
    return request.param


def _logs(name: str) -> Logs:
    return read_logs(SAMPLE_RUNS / name)


def _global_norms(logs: Logs) -> list[tuple[int, float]]:
    return sorted(logs.scalars["gradient_norm/global"].items())


def _first_nonfinite_step(logs: Logs) -> int:
    counts = logs.scalars["gradient_nonfinite/global"]
    return min(step for step, count in counts.items() if count > 0)


def _histogram_norms(logs: Logs, tag: str) -> dict[int, float]:
    return {
        step: histogram_stats(record.left, record.right, record.counts).l2_norm
        for step, record in logs.histograms[tag].items()
    }


def _identical_over_steps(logs: Logs, tag: str) -> bool:
    records = list(logs.histograms[tag].values())
    return len(records) > 1 and all(
        np.array_equal(r.counts, records[0].counts) and np.array_equal(r.left, records[0].left)
        for r in records[1:]
    )


def test_every_run_is_present_small_and_documented(run_name: str) -> None:
    files = [path for path in (SAMPLE_RUNS / run_name).rglob("*tfevents*")]
    assert len(files) == 1
    assert files[0].stat().st_size < 600_000
    assert f"`{run_name}" in (SAMPLE_RUNS / "README.md").read_text()


def test_helper_runs_hold_every_tag_and_a_consistent_global_norm() -> None:
    """Runs logged by gradcheck's helpers: all five tags per parameter at every logged step,
    and the global norm is the root of the summed squared parameter norms."""
    for name in ("keras_healthy_callback", "tf_loop_exploding_nan", "torch_clipped"):
        logs = _logs(name)
        params = {tag.split("/", 1)[1] for tag in logs.tags_with_prefix("gradients/")}
        assert len(params) == 6, name
        steps = logs.steps("gradient_norm/global")
        for param in params:
            for prefix in ("weights", "gradients", "weight_norm", "gradient_norm"):
                assert logs.steps(f"{prefix}/{param}") == steps, (name, prefix, param)
            assert logs.steps(f"gradient_nonfinite/{param}") == steps
        for step, global_norm in _global_norms(logs):
            if not math.isfinite(global_norm):
                continue
            squares = sum(logs.scalar(f"gradient_norm/{p}", step) ** 2 for p in params)
            assert global_norm == pytest.approx(math.sqrt(squares), rel=1e-5), (name, step)


def test_healthy_callback_run_stays_within_one_decade() -> None:
    logs = _logs("keras_healthy_callback")
    assert logs.steps("gradient_norm/global") == list(range(0, 193, 8))
    norms = [norm for _, norm in _global_norms(logs)]
    assert all(math.isfinite(norm) for norm in norms)
    assert 1.0 < norms[0] < 2.0 and max(norms) / min(norms) < 10.0
    assert sum(logs.scalars["gradient_nonfinite/global"].values()) == 0
    kernel = logs.scalars["weight_norm/mlp/hidden_1/kernel"]
    assert kernel[192] != kernel[0]


def test_keras_weights_only_run_has_frozen_layers_that_never_move() -> None:
    logs = _logs("keras_fit_weights_only")
    assert not any("grad" in tag.lower() for tag in logs.histograms)
    assert logs.steps("mlp/frozen_dense/kernel/histogram") == list(range(8))
    for frozen in ("frozen_dense/kernel", "frozen_bn/gamma", "frozen_bn/beta"):
        assert _identical_over_steps(logs, f"mlp/{frozen}/histogram"), frozen
    for trained in ("hidden/kernel", "output/kernel"):
        assert not _identical_over_steps(logs, f"mlp/{trained}/histogram"), trained
    assert "epoch_loss" in logs.scalars


def test_vanishing_run_first_layer_gradients_are_orders_of_magnitude_smaller() -> None:
    logs = _logs("tf_loop_vanishing_sigmoid")
    first = _histogram_norms(logs, "Gradients_dense_0/kernel:0")
    last = _histogram_norms(logs, "Gradients_dense_8/kernel:0")
    assert sorted(first) == list(range(0, 301, 20))
    ratios = [first[step] / last[step] for step in first]
    assert max(ratios) < 2e-4
    assert "dense_0/kernel:0" in logs.histograms and "loss" in logs.scalars


@pytest.mark.parametrize(
    ("name", "first_bad", "rise"),
    [("tf_loop_exploding_nan", 21, 1e30), ("torch_exploding_nan", 56, 1e20)],
)
def test_exploding_runs_rise_by_orders_of_magnitude_then_turn_nan(
    name: str, first_bad: int, rise: float
) -> None:
    logs = _logs(name)
    assert _first_nonfinite_step(logs) == first_bad
    norms = _global_norms(logs)
    before = [norm for step, norm in norms if step < first_bad]
    assert all(math.isfinite(norm) for norm in before)
    assert max(before) / before[0] > rise
    assert before[0] < 10.0
    after = [norm for step, norm in norms if step >= first_bad]
    assert after and all(math.isnan(norm) for norm in after)
    assert all(math.isnan(loss) for step, loss in logs.scalars["loss"].items() if step > first_bad)


def test_torch_nan_histograms_show_the_missing_values() -> None:
    logs = _logs("torch_exploding_nan")
    record = logs.histograms["gradients/4.weight"][60]
    assert record.encoding == "histo" and record.num == 64
    assert bucket_total(record) < record.num and math.isnan(record.sum)


def test_clipped_run_stays_bounded_and_learns() -> None:
    logs = _logs("torch_clipped")
    norms = [norm for _, norm in _global_norms(logs)]
    assert all(math.isfinite(norm) for norm in norms) and max(norms) < 10.0
    assert max(norms) > 1.0  # the clip at 1.0 was active early on
    losses = logs.scalars["loss"]
    assert losses[299] < losses[0] / 100


def test_torch_frozen_run_has_static_weights_with_and_without_gradients() -> None:
    logs = _logs("torch_frozen")
    for param in ("0.weight", "0.bias", "1.weight", "1.bias"):
        assert len(set(logs.scalars[f"weight_norm/{param}"].values())) == 1, param
        assert _identical_over_steps(logs, f"weights/{param}"), param
    assert "gradients/0.weight" not in logs.histograms  # requires_grad=False
    assert min(logs.scalars["gradient_norm/1.weight"].values()) > 0.1  # not in the optimizer
    assert not _identical_over_steps(logs, "weights/3.weight")


# --------------------------------------------------------------------------------------------
# Verdicts: what `gradcheck analyze sample_runs/` must say about each run.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def verdicts() -> dict[str, dict[str, LayerResult]]:
    """Run name -> parameter name -> its LayerResult, for every sample run."""
    report = analyze([str(SAMPLE_RUNS)])
    return {
        Path(run.run).relative_to(SAMPLE_RUNS).parts[0]: {layer.name: layer for layer in run.layers}
        for run in report.runs
    }


def test_every_sample_run_is_analysed(verdicts: dict[str, dict[str, LayerResult]]) -> None:
    assert sorted(verdicts) == sorted(RUN_NAMES)


@pytest.mark.parametrize("name", ["keras_healthy_callback", "torch_clipped"])
def test_healthy_and_clipped_runs_have_no_finding(
    verdicts: dict[str, dict[str, LayerResult]], name: str
) -> None:
    assert {layer.verdict for layer in verdicts[name].values()} == {"ok"}
    assert len(verdicts[name]) == 6


@pytest.mark.parametrize(
    ("name", "static", "healthy"),
    [
        (
            "keras_fit_weights_only",
            {f"mlp/frozen_{p}" for p in ("dense/kernel", "dense/bias", "bn/gamma", "bn/beta")},
            {f"mlp/{p}" for p in ("hidden/kernel", "hidden/bias", "output/kernel")},
        ),
        ("torch_frozen", {"0.weight", "0.bias", "1.weight", "1.bias"}, {"3.weight", "5.weight"}),
    ],
)
def test_frozen_parameters_are_static_and_the_rest_ok(
    verdicts: dict[str, dict[str, LayerResult]], name: str, static: set[str], healthy: set[str]
) -> None:
    layers = verdicts[name]
    assert {p for p in static if layers[p].verdict == "static"} == static
    assert {p for p in healthy if layers[p].verdict == "ok"} == healthy


def test_vanishing_run_flags_the_first_layers_and_not_the_last(
    verdicts: dict[str, dict[str, LayerResult]],
) -> None:
    layers = verdicts["tf_loop_vanishing_sigmoid"]
    assert layers["dense_0/kernel"].verdict == "vanishing"
    assert layers["dense_1/kernel"].verdict == "vanishing"
    assert layers["dense_8/kernel"].verdict == "ok"
    depth_of = {name: int(name.split("/")[0].removeprefix("dense_")) for name in layers}
    vanishing = [depth_of[n] for n, layer in layers.items() if layer.verdict == "vanishing"]
    healthy = [depth_of[n] for n, layer in layers.items() if layer.verdict == "ok"]
    assert max(vanishing) < min(healthy)  # gradients fade towards the input, not at random


@pytest.mark.parametrize(
    ("name", "first_nan"), [("tf_loop_exploding_nan", 21), ("torch_exploding_nan", 56)]
)
def test_exploding_runs_are_nan_after_an_earlier_explosion(
    verdicts: dict[str, dict[str, LayerResult]], name: str, first_nan: int
) -> None:
    assert len(verdicts[name]) == 6  # the loop below is over every parameter, not over none
    for layer in verdicts[name].values():
        assert layer.verdict == "nan" and "exploding" in layer.flags, layer.name
        assert layer.first_bad_step is not None and layer.first_bad_step >= first_nan
        assert layer.first_bad_step == layer.onsets["nan"] > layer.onsets["exploding"]
        assert layer.onsets["exploding"] < first_nan


@pytest.mark.parametrize(
    ("name", "framework", "where"),
    [
        ("torch_clipped", "pytorch", "torch.nn.utils.clip_grad_norm_(model.parameters()"),
        ("torch_frozen", "pytorch", "after loss.backward() and before optimizer.step()"),
        ("keras_healthy_callback", "tensorflow", "tf.clip_by_global_norm(gradients, 0.75)"),
    ],
)
def test_runs_logged_before_any_clip_get_advice_for_their_framework(
    name: str, framework: str, where: str
) -> None:
    """torch_clipped logs before its clip_grad_norm_, so no clip shows; the others never clip."""
    (run,) = analyze([str(SAMPLE_RUNS / name)]).runs
    assert run.clipping is not None and run.clipping.kind is None
    assert run.clipping.clipped_share is None and run.clipping.framework == framework
    assert run.clipping.advice.startswith("Not clipped") and where in run.clipping.advice


def test_no_clip_norm_is_suggested_from_fewer_steps_than_its_percentile_needs() -> None:
    """tf_loop_vanishing_sigmoid logs its gradients at 16 steps: a 95th percentile of 16 values
    is an interpolation between the two largest, not an estimate (20 are needed)."""
    (run,) = analyze([str(SAMPLE_RUNS / "tf_loop_vanishing_sigmoid")]).runs
    assert run.clipping is not None and run.clipping.suggested_clip_norm is None
    assert "too few healthy steps (16, all steps)" in run.clipping.rule
    assert run.clipping.advice == ""
