"""Issue 35, dead and saturated layers, on real runs (``scripts/activation_runs.py``, trained
here once per session, seconds each): torch forward hooks (a ReLU layer killed by one batch of
corrupt targets, a tanh net saturated by a large init, a healthy CNN), a Keras callback writing
TF2 histograms (30 even buckets: shares estimated) and a TF1 graph with name-scoped
``activations``. The exact shares the writers saw are saved beside each run (``truth.json``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from gradcheck.cli import cli
from gradcheck.model import LOSS_ROW, LayerResult, RunReport
from gradcheck.pipeline import analyze
from gradcheck.verdicts.gate import DEFAULT_FAIL_ON, parse_fail_on
from tests.support.scripts import load_script

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

pytestmark = pytest.mark.slow
RUNS = load_script("activation_runs")
RUNS_CORRUPT_AT = 40
"""``torch_relu_dies``' corrupt batch (``activation_runs.torch_relu_dies``' default)."""


@pytest.fixture(scope="session")
def torch_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("torch")
    return RUNS.write_torch_runs(tmp_path_factory.mktemp("activations_torch"))


@pytest.fixture(scope="session")
def tf_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("tensorflow")
    return RUNS.write_tf_runs(tmp_path_factory.mktemp("activations_tf"))


def judged(path: Path) -> RunReport:
    (run,) = analyze([str(path)], jobs=1).runs
    return run


def row(run: RunReport, name: str) -> LayerResult:
    (found,) = [layer for layer in run.layers if layer.name == name]
    return found


def truth(path: Path) -> dict[str, np.ndarray]:
    """``{layer: [[step, exact zeros, |x| >= 0.96], ...]}`` as the writer saw them."""
    return {
        name: np.array(rows) for name, rows in json.loads((path / "truth.json").read_text()).items()
    }


def exit_code(path: Path, *options: str) -> int:
    return CliRunner().invoke(cli, ["analyze", str(path), "--no-progress", *options]).exit_code


def test_a_relu_layer_killed_by_one_bad_batch_is_dead_from_when_it_died(
    torch_runs: dict[str, Path],
) -> None:
    path = torch_runs["torch_relu_dies"]
    run = judged(path)
    dead = row(run, "relu2")
    assert dead.flags == ("dead",) and dead.activation_tag == "activations/relu2"
    assert dead.weight_tag is dead.grad_tag is None
    seen = truth(path)["relu2"]
    # the writer's own shares: at or above 0.9 from the onset to the end, not just before it
    dying = seen[:, 1] >= 0.9
    first = int(np.flatnonzero(~dying)[-1]) + 1
    assert (
        f"at or above 0.9 at every one of the {seen.shape[0] - first} logged steps since "
        in (dead.evidence)
        and f"since step {int(seen[first, 0])}," in dead.evidence
    )
    # the onset (the shared rule, on the share left): the first forward pass after the corrupt
    # batch's update, where the zeros jumped from 0.55 to 0.84 on their way to 0.99
    assert dead.onsets == {"dead": RUNS_CORRUPT_AT + 1} == {"dead": dead.first_bad_step}
    assert f"rising into it from step {RUNS_CORRUPT_AT + 1}" in dead.evidence
    assert seen[RUNS_CORRUPT_AT + 1, 1] > 1.5 * seen[RUNS_CORRUPT_AT, 1]
    # PyTorch's default bins put zeros in [0, 1e-12): the share is exact, and said so
    assert dead.stats["exact_zero_share_last"] == pytest.approx(seen[-1, 1], abs=1e-6)
    assert "(exact: each bucket holds only such values or none)" in dead.evidence
    healthy = row(run, "relu1")  # about half zeros, as a healthy ReLU layer is
    assert healthy.verdict == "ok" and 0.3 < healthy.stats["exact_zero_share_median"] < 0.7
    assert not run.holds and run.judgeable  # only activations: judged, not "nothing to judge"
    assert "dead" not in parse_fail_on(DEFAULT_FAIL_ON)
    assert exit_code(path, "--fail-on", "nan,exploding") == 0
    assert exit_code(path, "--fail-on", "dead") == 1
    # the corrupt batch's loss (4e4x) and the loss left 4x its start by the dead layer make
    # the (training loss) row diverging, which the default --fail-on holds
    assert run.counts["diverging"] == 1 and exit_code(path) == 1


def test_activations_are_layers_not_weights(torch_runs: dict[str, Path]) -> None:
    """Before issue 35 ``activations/relu2`` was a weight named ``activations/relu2``."""
    run = judged(torch_runs["torch_relu_dies"])
    assert sorted(layer.name for layer in run.layers) == [LOSS_ROW, "relu1", "relu2"]
    assert all(layer.weight_tag is None for layer in run.layers)
    assert {layer.activation_tag for layer in run.layers} == {
        None, "activations/relu1", "activations/relu2"
    }  # fmt: skip


def test_a_tanh_net_initialised_too_large_is_saturated_and_its_linear_layers_are_not(
    torch_runs: dict[str, Path],
) -> None:
    path = torch_runs["torch_tanh_saturated"]
    run = judged(path)
    seen = truth(path)
    for name in ("tanh1", "tanh2"):
        layer = row(run, name)
        assert layer.flags == ("saturated",) and layer.onsets == {"saturated": 0}
        assert layer.activation_tag == f"{name}/output"
        share = layer.stats["bound_share_last"]
        assert share == pytest.approx(seen[name][-1, 2], abs=0.03), layer.evidence
        assert "tanh-like outputs" in layer.evidence
    for name in ("fc1", "fc2", "head"):  # unbounded outputs: no bounds to saturate at
        assert row(run, name).verdict == "ok"
    assert exit_code(path, "--fail-on", "saturated") == 1


def test_a_healthy_cnn_has_no_dead_or_saturated_layer(torch_runs: dict[str, Path]) -> None:
    path = torch_runs["torch_healthy_cnn"]
    run = judged(path)
    assert {layer.name for layer in run.layers} == {"relu1", "relu2", "relu3", "softmax"}
    assert {layer.verdict for layer in run.layers} == {"ok"}
    seen = truth(path)
    for name in ("relu1", "relu2", "relu3"):
        assert row(run, name).stats["exact_zero_share_last"] == pytest.approx(
            seen[name][-1, 1], abs=1e-6
        )
    assert exit_code(path, "--fail-on", "any") == 0


def test_keras_callback_histograms_estimate_the_zeros_within_their_bounds(
    tf_runs: dict[str, Path],
) -> None:
    """TF2's 30 even buckets put the zeros with the small positive values: the share is an
    estimate, its bounds said, and the writer's exact share lies between them."""
    path = tf_runs["keras_callback"]
    run = judged(path)
    dead = row(run, "dense_dead")
    assert dead.flags == ("dead",) and dead.onsets == {"dead": 0}
    assert "estimated" in dead.evidence and "the buckets allow" in dead.evidence
    exact = truth(path)["dense_dead"][-1, 1]
    assert dead.stats["exact_zero_share_last"] == pytest.approx(exact, abs=0.02)
    healthy = row(run, "dense_ok")
    assert healthy.verdict == "ok"
    assert healthy.stats["exact_zero_share_last"] == pytest.approx(
        truth(path)["dense_ok"][-1, 1], abs=0.05
    )
    assert row(run, "probs").verdict == "ok"  # a softmax output: bounded by design


def test_tf1_name_scoped_activations_are_named_after_their_scope(tf_runs: dict[str, Path]) -> None:
    run = judged(tf_runs["tf1_name_scopes"])
    assert [layer.activation_tag for layer in sorted(run.layers, key=lambda x: x.depth)] == [
        "layer1/activations",
        "layer2/activations",
        "output/activations",
    ]
    assert row(run, "layer2").flags == ("saturated",)
    assert "sigmoid-like outputs" in row(run, "layer2").evidence
    assert row(run, "layer1").verdict == row(run, "output").verdict == "ok"
