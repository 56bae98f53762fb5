"""``gradcheck compare`` on pairs trained here with Keras (``scripts/compare_pairs.py``):
``model.fit`` logged by ``GradientLogger`` and the stock ``TensorBoard`` callback, against a
``tf.GradientTape`` loop logged by ``log_step``, from the same initial weights on the same
batches. Each pair differs by one mistake; the numbers and the named cause must show it.
Built in one process, the loop's model is a later build (``sequential_<n>/dense_<m>``) than
fit's: every pair also tests name matching."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
pytest.importorskip("tensorflow")

from gradcheck import cli  # noqa: E402
from gradcheck.cli.status import ExitStatus  # noqa: E402
from gradcheck.report.interface import Env  # noqa: E402
from gradcheck.verdicts.numeric import median  # noqa: E402
from tests.support.scripts import load_script  # noqa: E402

pytestmark = pytest.mark.slow


PAIRS = load_script("compare_pairs")


@pytest.fixture(scope="session")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every pair of ``scripts/compare_pairs.py``, trained once (seconds each)."""
    return dict(PAIRS.write_pairs(tmp_path_factory.mktemp("pairs")))


def compare(pair: Path, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(
        cli.cli,
        ["compare", str(pair / "fit"), str(pair / "loop"), "--format", "json", *args],
        obj=Env(width=80),
    )
    assert result.exit_code in (ExitStatus.OK, ExitStatus.FINDINGS), result.output
    return result.exit_code, json.loads(result.stdout)


def test_summed_loss_gives_the_batch_size_from_the_first_step(pairs: dict[str, Path]) -> None:
    status, document = compare(pairs["summed_loss"], "--fail-on-divergence")
    assert status == ExitStatus.FINDINGS
    assert document["cause"] == "gradient_factor"
    batch = PAIRS.BATCH
    assert f"B's gradients are {batch}x A's from the first step" in document["summary"]
    assert f"summed instead of averaged over a batch of {batch}?" in document["summary"]
    for parameter in document["parameters"]:
        assert parameter["grad_norm_ratio_first"] == pytest.approx(batch, rel=0.1)
        assert parameter["first_divergent_step"] == 0
        assert parameter["name_b"] is not None and parameter["matched_by"] == "layer numbering"
    assert len(document["parameters"]) == 4


def test_batchnorm_in_inference_mode_leaves_its_statistics_static_in_b(
    pairs: dict[str, Path],
) -> None:
    _, document = compare(pairs["batchnorm_inference"])
    assert document["cause"] == "batchnorm_statistics"
    assert "BatchNorm moving statistics move in A only" in document["summary"]
    assert "training=True in B's step" in document["summary"]
    moving = [p for p in document["parameters"] if p["kind"] == "bn_moving"]
    assert sorted(p["name"].rsplit("/", 1)[1] for p in moving) == ["moving_mean", "moving_variance"]
    for parameter in moving:
        assert (parameter["moves_a"], parameter["moves_b"]) == (True, False)
        assert parameter["verdict_b"] == "static"
        assert parameter["update_ratio_median"] == 0.0
    assert document["parameters"][: len(moving)] == moving  # ranked first
    gamma_beta = [p for p in document["parameters"] if p["kind"] == "bn_affine"]
    assert len(gamma_beta) == 2 and all(p["moves_b"] for p in gamma_beta)


def test_a_tenfold_learning_rate_shows_in_the_updates(pairs: dict[str, Path]) -> None:
    _, document = compare(pairs["learning_rate"])
    factor = PAIRS.LR_FACTOR
    assert document["cause"] == "learning_rate"
    assert "B's learning rate" in document["summary"]
    parameters = document["parameters"]
    for parameter in parameters:  # same weights, same batch: the same first gradient
        assert parameter["grad_norm_ratio_first"] == pytest.approx(1.0, rel=1e-3)
    per_gradient = median([p["step_size_ratio_median"] for p in parameters])
    assert per_gradient == pytest.approx(factor, rel=0.25)
    biases = [p for p in parameters if p["name"].endswith("bias")]
    for bias in biases:  # small tensors: the histogram distance is their update exactly
        assert bias["step_size_ratio_median"] == pytest.approx(factor, rel=0.1)


def test_the_loop_done_right_agrees_with_fit(pairs: dict[str, Path]) -> None:
    status, document = compare(pairs["agreeing"], "--fail-on-divergence")
    assert status == ExitStatus.OK
    assert document["cause"] is None and document["summary"].startswith("The runs agree")
    for parameter in document["parameters"]:
        for key in ("grad_norm_ratio_first", "grad_norm_ratio_median", "update_ratio_median"):
            assert parameter[key] == pytest.approx(1.0, rel=0.05), (parameter["name"], key)
        assert parameter["diverges"] is False
