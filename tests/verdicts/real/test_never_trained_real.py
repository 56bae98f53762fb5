"""A run that never trained is not an evaluation log (issue 30, point 3): TF2 custom loops
trained here (``scripts/time_runs_tf.py``) whose weights never move while a training loss or a
learning rate is logged are ``static``, saying which signal decided; an evaluation log (a
held-out loss only) and the healthy twin are not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
pytest.importorskip("tensorflow")

from gradcheck import cli  # noqa: E402
from gradcheck.model import RunReport  # noqa: E402
from gradcheck.pipeline import analyze  # noqa: E402
from gradcheck.verdicts import hints  # noqa: E402
from tests.support.scripts import load_script  # noqa: E402

pytestmark = pytest.mark.slow
RUNS = load_script("time_runs_tf")


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return RUNS.write_runs(tmp_path_factory.mktemp("never_trained"))


def only_run(path: Path) -> RunReport:
    (run,) = analyze([str(path)], jobs=1).runs
    return run


def exit_status(path: Path, fail_on: str) -> int:
    result = CliRunner().invoke(cli.cli, ["analyze", str(path), "--fail-on", fail_on])
    return result.exit_code


@pytest.mark.parametrize(
    ("name", "signal"),
    [
        (
            "never_trained_loss",
            "the training loss (loss) is logged at 291 steps from step 0 to 290",
        ),
        ("never_trained_lr", "the learning rate (learning_rate) is logged at 291 steps"),
    ],
)
def test_weights_that_never_move_while_the_run_trains_are_static(
    paths: dict[str, Path], name: str, signal: str
) -> None:
    run = only_run(paths[name])
    assert run.gradients == "none"  # no gradient logged: nothing else could decide
    assert [layer.verdict for layer in run.layers] == ["static"] * 4
    for layer in run.layers:
        assert layer.first_bad_step == 0
        assert "bit-identical at all 30 logged steps (0-290)" in layer.evidence
        assert f"not an evaluation log: {signal}" in layer.evidence, layer.evidence
        assert "frozen on purpose" not in layer.evidence
        assert layer.hint == hints.STATIC_NEVER_TRAINED
    assert exit_status(paths[name], "static") == 1
    assert exit_status(paths[name], "any") == 1
    assert exit_status(paths[name], "nan,exploding") == 0  # static is not in the default


def test_the_flat_training_loss_is_quoted(paths: dict[str, Path]) -> None:
    (layer, *_) = only_run(paths["never_trained_loss"]).layers
    assert "(its late level 1.05x its early one)" in layer.evidence


def test_an_evaluation_log_with_a_held_out_loss_is_still_excused(paths: dict[str, Path]) -> None:
    run = only_run(paths["evaluation"])
    assert [layer.verdict for layer in run.layers] == ["ok"] * 4
    for layer in run.layers:
        assert any("an evaluation log?" in note for note in layer.notes), layer.notes
    assert exit_status(paths["evaluation"], "any") == 0


def test_the_trained_twin_has_no_flag(paths: dict[str, Path]) -> None:
    run = only_run(paths["trained"])
    assert [layer.verdict for layer in run.layers] == ["ok"] * 4
    assert exit_status(paths["trained"], "any") == 0
