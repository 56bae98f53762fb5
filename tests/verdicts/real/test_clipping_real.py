"""Where and how to clip, on real PyTorch runs: a small LSTM trained without clipping, with
``clip_grad_norm_`` on all parameters (tight and loose), with ``clip_grad_norm_`` on each
parameter alone (per tensor, as Keras ``clipnorm`` does) and with ``clip_grad_value_``, each
logged by ``gradcheck.torch.log_gradients`` after the clip (so the log shows it); and a stack
of plain RNNs at a small init whose first layer's gradient vanishes.

The numbers the assertions check come from the training loop itself: ``clip_grad_norm_``'s
returned pre-clip norm and the largest gradient element before ``clip_grad_value_``, recorded
at the logged steps.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from gradcheck import cli  # noqa: E402
from gradcheck.model import RunReport  # noqa: E402
from gradcheck.pipeline import analyze  # noqa: E402
from gradcheck.report.interface import Env  # noqa: E402
from gradcheck.report.numbers import format_number  # noqa: E402
from tests.support.scripts import load_script  # noqa: E402

pytestmark = pytest.mark.slow


CLIP_RUNS = load_script("clip_runs")
Logged = CLIP_RUNS.Logged


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Logged]:
    """Every run of ``scripts/clip_runs.py``, trained once (seconds each)."""
    return CLIP_RUNS.write_runs(tmp_path_factory.mktemp("clipping"))


def report(logged: Logged) -> RunReport:
    (run,) = analyze([str(logged.path)]).runs
    return run


def test_an_unclipped_lstm_gets_a_clip_norm_from_healthy_steps_and_where_to_put_it(
    runs: dict[str, Logged],
) -> None:
    clip = report(runs["none"]).clipping
    assert clip is not None and clip.kind is None and not clip.clipped
    norms = np.array(runs["none"].global_norms)
    assert clip.suggested_clip_norm == pytest.approx(float(f"{np.percentile(norms, 95):.2g}"))
    assert clip.suggested_share == pytest.approx(np.mean(norms > clip.suggested_clip_norm))
    assert 0 < clip.suggested_share <= 0.1
    assert clip.framework == "pytorch"
    assert "after loss.backward() and before optimizer.step()" in clip.advice
    assert (
        f"torch.nn.utils.clip_grad_norm_(model.parameters(), {clip.suggested_clip_norm:.2g})"
        in clip.advice
    )
    assert "scaler.unscale_(optimizer) first" in clip.advice


def test_a_global_clip_acting_on_every_step_is_a_learning_rate_in_disguise(
    runs: dict[str, Logged],
) -> None:
    clip = report(runs["global_tight"]).clipping
    assert clip is not None and clip.kind == "global_norm" and clip.clipped
    assert clip.ceiling == pytest.approx(0.1, rel=1e-4)
    expected = np.mean(np.array(runs["global_tight"].global_norms) >= 0.1)
    assert expected == 1.0 and clip.clipped_share == pytest.approx(expected)
    assert "more than 50%" in clip.advice and "learning rate in disguise" in clip.advice


def test_a_loose_global_clip_leaves_most_updates_alone(runs: dict[str, Logged]) -> None:
    clip = report(runs["global_loose"]).clipping
    assert clip is not None and clip.kind == "global_norm"
    assert clip.ceiling == pytest.approx(0.5, rel=1e-4)
    expected = np.mean(np.array(runs["global_loose"].global_norms) > 0.5)
    assert 0.1 <= expected <= 0.5
    assert clip.clipped_share == pytest.approx(expected)
    assert "most updates keep their size" in clip.advice


def test_clipping_each_parameter_alone_is_per_tensor_not_global(runs: dict[str, Logged]) -> None:
    clip = report(runs["per_tensor"]).clipping
    assert clip is not None and clip.kind == "per_tensor_norm"
    assert clip.clip_value == pytest.approx(0.05, rel=1e-3)
    expected = np.mean(np.array(runs["per_tensor"].largest_tensor_norms) > 0.05)
    assert clip.clipped_share == pytest.approx(expected)
    assert "changes the gradients' relative scale" in clip.advice
    assert "torch.nn.utils.clip_grad_norm_(model.parameters()" in clip.advice


def test_clipping_by_value_is_seen_in_the_histograms_min_and_max(
    runs: dict[str, Logged],
) -> None:
    clip = report(runs["value"]).clipping
    assert clip is not None and clip.kind == "value" and not clip.clipped
    assert clip.clip_value == pytest.approx(0.01, rel=1e-3)
    expected = np.mean(np.array(runs["value"].largest_elements) > 0.01)
    assert clip.clipped_share == pytest.approx(expected)
    assert "changes the gradient's direction" in clip.advice
    assert "clip the global norm instead" in clip.advice
    assert "clip_grad_norm_(model.parameters(), max_norm)" in clip.advice
    assert "with max_norm from the norm before any clip" in clip.advice


def test_clipping_kind_and_advice_reach_json_table_and_markdown(runs: dict[str, Logged]) -> None:
    path = str(runs["value"].path)
    outputs = {
        fmt: CliRunner().invoke(
            cli.cli,
            ["analyze", path, "--format", fmt, "--fail-on", "none", "--explain"],
            obj=Env(width=100),
        )
        for fmt in ("json", "table", "markdown")
    }
    document = json.loads(outputs["json"].stdout)["runs"][0]["clipping"]
    assert document["kind"] == "value" and document["framework"] == "pytorch"
    clip_value = document["clip_value"]
    assert clip_value == pytest.approx(0.01, rel=1e-3)
    for fmt in ("table", "markdown"):
        text = " ".join(outputs[fmt].stdout.split())
        assert f"gradients clipped by value at ±{format_number(clip_value)}" in text, fmt
        assert "changes the gradient's direction" in text, fmt
    # by default too: a clip by value is worth a word in a run that did not blow up
    default = CliRunner().invoke(
        cli.cli, ["analyze", path, "--fail-on", "none"], obj=Env(width=100)
    )
    assert "changes the gradient's direction" in " ".join(default.stdout.split())


def test_a_vanishing_recurrent_layer_is_not_told_to_use_relu(runs: dict[str, Logged]) -> None:
    run = report(runs["rnn_vanishing"])
    vanishing = [layer for layer in run.layers if layer.verdict == "vanishing"]
    assert any(layer.name == "layers.0.weight_hh_l0" for layer in vanishing)
    for layer in vanishing:
        assert "ReLU" not in layer.hint
        assert "recurrent_initializer='orthogonal'" in layer.hint
        assert "use a gated layer (LSTM or GRU)" in layer.hint
