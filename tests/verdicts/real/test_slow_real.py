"""``slow`` on real Keras runs (``scripts/slow_pairs.py``, trained here in a session fixture):
a CNN at SGD learning rate 1e-7, logged by the stock ``TensorBoard(histogram_freq=1)``, is
flagged and told that the whole model learns far slower than usual; its twin at a normal
learning rate is not; neither are the healthy ``sample_runs/`` and the corpus of other
projects' logs. Updates below float32 resolution (gradients and learning rate logged) leave
the weights static (within ~1e-10 of their norm, not bit-identical: the exact norms say so),
with a hint that names the learning rate."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
pytest.importorskip("tensorflow")

from gradcheck.model import RunReport  # noqa: E402
from gradcheck.pipeline import analyze  # noqa: E402
from tests.support.paths import CORPUS_RUNS as CORPUS
from tests.support.paths import REPO
from tests.support.scripts import load_script  # noqa: E402

pytestmark = pytest.mark.slow


RUNS = load_script("slow_pairs")
KERNELS = ("conv1/kernel", "conv2/kernel", "head/kernel")


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunReport]:
    """Every run of ``scripts/slow_pairs.py``, trained once (seconds each), analysed."""
    paths = RUNS.write_runs(tmp_path_factory.mktemp("slow"))
    return {name: only_run(path) for name, path in paths.items()}


def only_run(path: Path) -> RunReport:
    (run,) = analyze([str(path)], jobs=1).runs
    return run


def by_suffix(run: RunReport, suffix: str):  # noqa: ANN201
    (layer,) = [layer for layer in run.layers if layer.name.endswith(suffix)]
    return layer


def test_a_tiny_learning_rate_makes_every_kernel_slow(runs: dict[str, RunReport]) -> None:
    run = runs["tiny_lr"]
    for suffix in KERNELS:
        kernel = by_suffix(run, suffix)
        assert kernel.flags == ("slow",), kernel.evidence
        # ~5e-8 per update, 12 updates per epoch-step: a few 1e-7 per logged step
        assert 1e-7 < kernel.stats["update_ratio_median"] < 1e-5
        assert "a learning rate too small" in kernel.hint
    for bias in ("conv1/bias", "conv2/bias", "head/bias"):  # from zero: no scale to be slow on
        assert by_suffix(run, bias).verdict == "ok"
    (whole,) = [note for note in run.notes if "whole model" in note]
    assert "1,000x slower than usual" in whole and "3 of 3 kernels" in whole
    # the stock callback numbers its histograms by epoch (12 updates each): said so
    assert run.updates.startswith("Kernels moved a median 6e-7 of their scale per epoch")
    assert re.search(
        r"\(a lower bound; usual: ~1e-3 per update\); "
        r"slowest sequential(_\d+)?/conv1/kernel \de-7$",
        run.updates,
    )


def test_its_healthy_twin_is_not_slow(runs: dict[str, RunReport]) -> None:
    run = runs["healthy"]
    assert {layer.verdict for layer in run.layers} == {"ok"}
    assert not [note for note in run.notes if "whole model" in note]
    ratios = [by_suffix(run, suffix).stats["update_ratio_median"] for suffix in KERNELS]
    assert all(3e-4 < ratio < 3e-2 for ratio in ratios), ratios  # CS231n's ~1e-3
    assert (
        min(ratios) / by_suffix(runs["tiny_lr"], "head/kernel").stats["update_ratio_median"] > 1e3
    )  # learning rates 5e4 apart


def test_updates_below_float32_resolution_are_static_naming_the_learning_rate(
    runs: dict[str, RunReport],
) -> None:
    run = runs["float32_gradients"]
    for suffix in KERNELS:
        kernel = by_suffix(run, suffix)
        # Static, but not bit-identical: the exact weight_norm that GradientLogger logs moved
        # ~3e-10 (a few small elements' updates survive rounding); issue 37: exact values beat
        # the histograms, which stay the same
        assert kernel.verdict == "static" and kernel.stats["weight_bit_identical"] == 0
        assert "bit-identical" not in kernel.evidence
        assert 0 < kernel.stats["weight_movement"] < 1e-8
        assert "learning rate 1.00e-07 from epoch_learning_rate" in kernel.evidence
        assert "below float32 resolution" in kernel.evidence
        assert kernel.hint.startswith("Updates too small to move the weights: the learning rate")
        # lr * |g| / |w| per update: ~2e-9, far below float32's 1.2e-7
        assert 1e-10 < kernel.stats["update_ratio_sgd_median"] < 1e-7


@pytest.mark.parametrize(
    "root", [REPO / "sample_runs", REPO / "sample_slow" / "healthy", CORPUS], ids=str
)
def test_healthy_and_other_projects_runs_are_never_slow(root: Path) -> None:
    if not root.exists():
        pytest.skip(f"{root} is absent")
    report = analyze([str(root)], jobs=1)
    slow = [(run.run, layer.name) for run in report.runs for layer in run.layers
            if "slow" in layer.flags]  # fmt: skip
    assert slow == []
    assert not [note for run in report.runs for note in run.notes if "whole model" in note]
