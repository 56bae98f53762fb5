"""A blow-up between the first and the second logged step (issue 38, on issue 30's "divergence
that clipping hides"), on real runs trained here (``scripts/start_growth_runs.py``).

The HF Trainer at AdamW's learning rate 5, logged every 5 steps by ``gradcheck.hf``'s
callback: every matrix of the GPT-2 grows 500-2,500x its initial scale in the first 5 steps and
stays there; every early baseline (the first 10% of logged values) already holds the jump, and
the training loss is first logged at step 5, at 773. The model's weights grown 100x over their
first logged scale, in more than half of the model, find it. Its twins at 5e-4 and 0.05 (weights
up to 26x), LayerScale gammas at 1e-6 that grow 10^5x in a healthy run, a LoRA adapter whose B
and head start at zero, and a run logged at step 0 and then every 100 steps stay healthy."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gradcheck import cli
from gradcheck.model import LOSS_ROW, RunReport
from gradcheck.pipeline import analyze
from gradcheck.verdicts import hints
from tests.support.scripts import load_script

pytestmark = pytest.mark.slow

MATRICES = {
    "transformer.wte.weight",
    "transformer.wpe.weight",
    *(
        f"transformer.h.{block}.{matrix}.weight"
        for block in (0, 1)
        for matrix in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
    ),
}


def only_run(path: Path) -> RunReport:
    (run,) = analyze([str(path)], jobs=1).runs
    return run


def exit_status(path: Path) -> int:
    return CliRunner().invoke(cli.cli, ["analyze", str(path)]).exit_code


@pytest.fixture(scope="module")
def hf(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("transformers")
    runs = load_script("start_growth_runs")
    return runs.write_runs(tmp_path_factory.mktemp("hf"), list(runs.HF_RUNS))


@pytest.fixture(scope="module")
def torch_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("torch")
    runs = load_script("start_growth_runs")
    return runs.write_runs(tmp_path_factory.mktemp("torch"), list(runs.TORCH_RUNS))


@pytest.mark.parametrize(("name", "second_step"), [("hf_lr5", 6), ("hf_lr5_every1", 2)])
def test_weights_blown_up_before_the_second_logged_step_are_exploding(
    hf: dict[str, Path], name: str, second_step: int
) -> None:
    run = only_run(hf[name])
    exploding = {layer.name: layer for layer in run.layers if layer.verdict == "exploding"}
    assert set(exploding) == MATRICES  # the norm gains (23x) and the zero-started biases are not
    assert run.counts["exploding"] == 10 and run.counts["ok"] == 18
    for layer in exploding.values():
        assert layer.first_bad_step == second_step
        assert layer.hint == hints.EXPLODING_FROM_START
        assert layer.stats["weight_start_growth_factor"] >= 500
        assert "as did 10 of the run's 15 weights that started non-zero" in layer.evidence
        assert f"the growth began after step 1 (by step {second_step})" in layer.evidence
    wte = exploding["transformer.wte.weight"].evidence
    assert "their first logged scale 1.12 (step 1)" in wte, wte
    assert "the global gradient norm" in wte and "at step 1 to a median" in wte
    assert not [layer for layer in run.layers if layer.name == LOSS_ROW]
    assert exit_status(hf[name]) == 1


def test_a_loss_first_logged_after_the_blow_up_is_no_start(hf: dict[str, Path]) -> None:
    (layer, *_) = [layer for layer in only_run(hf["hf_lr5"]).layers if layer.name in MATRICES]
    assert "the training loss (train/loss) was first logged at step 5, after the weights' " in (
        layer.evidence
    )
    assert "no level before the blow-up to measure its rise from" in layer.evidence
    (layer, *_) = [
        layer for layer in only_run(hf["hf_lr5_every1"]).layers if layer.name in MATRICES
    ]
    assert "the training loss (train/loss) went from 4.32 at step 1 to a median" in layer.evidence


@pytest.mark.parametrize("name", ["hf_lr5e-4", "hf_lr0.05"])
def test_the_healthy_twins_stay_healthy(hf: dict[str, Path], name: str) -> None:
    run = only_run(hf[name])
    assert {layer.verdict for layer in run.layers} == {"ok"}
    assert exit_status(hf[name]) == 0


def test_tiny_and_zero_initialised_parameters_that_grow_stay_healthy(
    torch_runs: dict[str, Path],
) -> None:
    layerscale = only_run(torch_runs["torch_layerscale"])
    assert {layer.verdict for layer in layerscale.layers} == {"ok"}
    gammas = [layer for layer in layerscale.layers if layer.name.endswith("gamma")]
    assert len(gammas) == 3
    for gamma in gammas:  # grown 10^5x from 1e-6, healthy: a minority of the model
        assert gamma.stats["weight_norm_last"] > 1e4 * gamma.stats["weight_norm_first"]
    lora = only_run(torch_runs["torch_lora"])
    verdicts = {layer.name: layer.verdict for layer in lora.layers}
    assert {verdicts["0.lora_A"], verdicts["0.lora_B"], verdicts["2.weight"]} == {"ok"}
    assert lora.counts["exploding"] == 0 and exit_status(torch_runs["torch_lora"]) == 0


def test_a_healthy_run_logged_at_step_0_and_every_100_steps_stays_healthy(
    torch_runs: dict[str, Path],
) -> None:
    run = only_run(torch_runs["torch_sparse"])
    assert run.steps == (0, 500)
    assert {layer.verdict for layer in run.layers} == {"ok"}
    assert exit_status(torch_runs["torch_sparse"]) == 0
