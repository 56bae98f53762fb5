"""Issue 35, loss spikes and the parameters that led them, on real torch runs
(``scripts/spike_runs.py``, trained here once per session): a gradient spike injected into
``lm_head.weight`` at known steps (its exact norms in-process say which parameter rose most),
a healthy but noisy loss (no spike), a run that diverges (no spike: it blows up)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gradcheck.cli import cli
from gradcheck.model import RunReport
from gradcheck.pipeline import analyze
from gradcheck.report.view import spikes_line
from tests.support.scripts import load_script

pytest.importorskip("torch")
pytestmark = pytest.mark.slow
RUNS = load_script("spike_runs")


@pytest.fixture(scope="session")
def spike_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return RUNS.write_runs(tmp_path_factory.mktemp("spikes"))


def judged(path: Path) -> RunReport:
    (run,) = analyze([str(path)], jobs=1).runs
    return run


def test_injected_gradient_spikes_are_listed_led_by_the_parameter_that_rose_most(
    spike_runs: dict[str, Path],
) -> None:
    path = spike_runs["spikes"]
    run = judged(path)
    truth = json.loads((path / "truth.json").read_text())
    # the loss logged after each bad update spikes; the gradient logged before it led it
    assert [spike.step for spike in run.spikes] == [step + 1 for step in RUNS.INJECT_AT]
    for spike, injected in zip(run.spikes, RUNS.INJECT_AT, strict=True):
        rises = truth["rises"][str(injected)]
        leader = max(rises, key=rises.__getitem__)
        assert leader == "lm_head.weight" and spike.led_by[0] == leader
        assert spike.gradient_step == injected
        assert spike.rise == pytest.approx(rises[leader], rel=1e-6)  # exact norms logged
        assert spike.loss_ratio >= 3
    assert (
        spikes_line(run) == "3 loss spikes (steps 101, 201, 301), led by lm_head.weight each time"
    )
    assert {layer.verdict for layer in run.layers} == {"ok"}  # a spike that recovers is no blow-up
    outcome = CliRunner().invoke(cli, ["analyze", str(path), "--no-progress", "--format", "json"])
    assert outcome.exit_code == 0
    (document,) = json.loads(outcome.stdout)["runs"]
    assert [(s["step"], s["led_by"][0]) for s in document["spikes"]] == [
        (101, "lm_head.weight"), (201, "lm_head.weight"), (301, "lm_head.weight")
    ]  # fmt: skip
    table = CliRunner().invoke(cli, ["analyze", str(path), "--no-progress"]).stdout
    assert "3 loss spikes (steps 101, 201, 301), led by lm_head.weight each time" in table


def test_a_noisy_healthy_loss_has_no_spike(spike_runs: dict[str, Path]) -> None:
    run = judged(spike_runs["noisy"])
    assert run.spikes == () and {layer.verdict for layer in run.layers} == {"ok"}
    assert spikes_line(run) is None


def test_a_diverging_loss_is_no_spike_but_a_blow_up(spike_runs: dict[str, Path]) -> None:
    path = spike_runs["diverging"]
    run = judged(path)
    assert run.spikes == ()
    assert any("exploding" in layer.flags for layer in run.layers)
    assert CliRunner().invoke(cli, ["analyze", str(path), "--no-progress"]).exit_code == 1
