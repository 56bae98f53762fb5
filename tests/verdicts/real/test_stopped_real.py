"""Weights that stop part-way (issue 30, point 2): PyTorch runs trained here
(``scripts/stop_runs_torch.py``, logged as users log them: ``add_histogram`` of every weight
and gradient every 5 steps, the loss every step). A linear decay written for epochs but
stepped every batch reaches a learning rate of exactly 0 at step 40 of 480: every parameter
is ``static`` from step 40, with the cause. Runs whose weights move less and less (a cosine
schedule to ~1e-5 of its start, a fine-tune at lr 1e-4, a run that converged) stay ``ok``.
A ReLU layer that dies part-way is ``vanishing`` from that step, not from an earlier dip."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("torch")

from gradcheck import cli  # noqa: E402
from gradcheck.model import RunReport  # noqa: E402
from gradcheck.pipeline import analyze  # noqa: E402
from gradcheck.verdicts import hints  # noqa: E402
from tests.support.scripts import load_script  # noqa: E402

pytestmark = pytest.mark.slow
RUNS = load_script("stop_runs_torch")
TOLERANCE = 3 * RUNS.EVERY
"""Three logged steps (issue 30's tolerance for an onset)."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[float]]]:
    return RUNS.write_runs(tmp_path_factory.mktemp("stopped"))  # type: ignore[no-any-return]


def only_run(path: Path) -> RunReport:
    (run,) = analyze([str(path)], jobs=1).runs
    return run


def exit_status(path: Path, *options: str) -> int:
    return CliRunner().invoke(cli.cli, ["analyze", str(path), *options]).exit_code


@pytest.mark.parametrize("name", ["epochs_for_steps", "epochs_for_steps_lr"])
def test_a_schedule_that_reaches_zero_part_way_makes_every_weight_static_from_then(
    runs: dict[str, tuple[Path, list[float]]], name: str
) -> None:
    path, rates = runs[name]
    # in process: the learning rate is exactly 0 from step 40 on, not before
    assert rates[RUNS.STOP_STEP - 1] > 0 and set(rates[RUNS.STOP_STEP :]) == {0.0}
    run = only_run(path)
    assert len(run.layers) == 6
    for layer in run.layers:
        assert layer.verdict == "static", layer
        assert abs(layer.onsets["static"] - RUNS.STOP_STEP) <= TOLERANCE, layer.onsets
        assert layer.first_bad_step == RUNS.STOP_STEP  # exactly: the first logged final weights
        assert layer.hint == hints.STATIC_STOPPED
        assert "its gradient did not stop" in layer.evidence
    lr_said = "the learning rate (lr) is 0 from step 40"
    unlogged = "learning rate not logged: a schedule that reached 0?"
    expected = lr_said if name.endswith("_lr") else unlogged
    assert all(expected in layer.evidence for layer in run.layers)
    assert exit_status(path) == 0  # static is not in the default --fail-on
    assert exit_status(path, "--fail-on", "static") == 1


@pytest.mark.parametrize("name", ["cosine_to_small", "fine_tune", "converged"])
def test_weights_that_move_less_and_less_are_not_stopped(
    runs: dict[str, tuple[Path, list[float]]], name: str
) -> None:
    path, rates = runs[name]
    assert rates[-1] > 0
    run = only_run(path)
    assert {layer.verdict for layer in run.layers} == {"ok"}, [
        (layer.name, layer.evidence) for layer in run.layers if layer.verdict != "ok"
    ]
    assert exit_status(path, "--fail-on", "any") == 0


def test_a_layer_that_dies_part_way_vanishes_from_then(
    runs: dict[str, tuple[Path, list[float]]],
) -> None:
    path, _ = runs["layer_dies"]
    run = only_run(path)
    dead = {layer.name: layer for layer in run.layers if layer.name[0] in "02"}
    assert len(dead) == 4
    for layer in dead.values():
        assert layer.verdict == "vanishing", layer
        # its gradient dipped below the threshold at step 120 (0.2) before: not the onset
        assert abs(layer.onsets["vanishing"] - RUNS.KILL_STEP) <= TOLERANCE, layer.onsets
    assert exit_status(path, "--fail-on", "vanishing") == 1
