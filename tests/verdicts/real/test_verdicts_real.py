"""Verdicts end to end on real training runs: PyTorch runs trained here, the committed
sample_runs/ (Keras, TF2 loops, PyTorch), and the shared corpus of other people's logs.

The PyTorch runs reuse the training helpers of ``scripts/make_zoo.py`` (the calibration zoo)
with short schedules, written through tensorboardX's ``SummaryWriter.add_histogram`` with
its default bins (the same HistogramProto as ``torch.utils.tensorboard``).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from gradcheck.events.discover import discover
from gradcheck.events.reader import read_run
from gradcheck.model import HistogramRecord, LayerResult, RunReport
from gradcheck.series.reduce import reduce_records
from gradcheck.verdicts.detect import analyze_run
from tests.support.paths import CORPUS_RUNS as CORPUS
from tests.support.paths import REPO

SAMPLE_RUNS = REPO / "sample_runs"


def analyze(path: Path) -> RunReport:
    (run,) = discover([str(path)])
    return analyze_run(reduce_records(read_run(run)))


def by_name(report: RunReport) -> dict[str, LayerResult]:
    return {layer.name: layer for layer in report.layers}


# --------------------------------------------------------------------------------------------
# PyTorch runs trained here
# --------------------------------------------------------------------------------------------


def _zoo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_zoo", REPO / "scripts" / "make_zoo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_zoo"] = module
    spec.loader.exec_module(module)
    return module


def _healthy(zoo: ModuleType, torch: Any, log_dir: Path) -> None:
    torch.manual_seed(0)
    model = zoo._mlp(torch, [20, 64, 64, 4], torch.nn.ReLU)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    zoo._train_torch(
        log_dir, model, optimizer, zoo._classification(torch), zoo._ce(torch), 160, every=4,
        tensorboardx=True,
    )  # fmt: skip


def _vanishing(zoo: ModuleType, torch: Any, log_dir: Path) -> None:
    torch.manual_seed(0)
    model = zoo._mlp(torch, [20] + [32] * 9 + [4], torch.nn.Sigmoid)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    zoo._train_torch(
        log_dir, model, optimizer, zoo._classification(torch), zoo._ce(torch), 100, every=10,
        tensorboardx=True,
    )  # fmt: skip


def _exploding(zoo: ModuleType, torch: Any, log_dir: Path) -> None:
    torch.manual_seed(9)
    model = zoo._mlp(torch, [16, 64, 64, 1], torch.nn.Tanh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.15, momentum=0.9)
    zoo._train_torch(
        log_dir, model, optimizer, zoo._regression(torch), zoo._mse(torch), 150, every=2,
        tensorboardx=True, stop_on_writer_error=True,
    )  # fmt: skip


def _frozen(zoo: ModuleType, torch: Any, log_dir: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(20, 64),  # frozen: requires_grad=False
        torch.nn.ReLU(),
        torch.nn.Linear(64, 64),
        torch.nn.BatchNorm1d(64),  # gamma/beta left out of the optimizer
        torch.nn.ReLU(),
        torch.nn.Linear(64, 4),
    )
    model[0].requires_grad_(False)
    held = [p for n, p in model.named_parameters() if p.requires_grad and not n.startswith("3.")]
    optimizer = torch.optim.Adam(held, lr=1e-3)
    zoo._train_torch(
        log_dir, model, optimizer, zoo._classification(torch), zoo._ce(torch), 120, every=6,
        tensorboardx=True,
    )  # fmt: skip


def _clipped(zoo: ModuleType, torch: Any, log_dir: Path) -> None:
    torch.manual_seed(0)
    model = zoo._mlp(torch, [16, 64, 64, 1], torch.nn.Tanh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    zoo._train_torch(
        log_dir, model, optimizer, zoo._regression(torch, scale=10.0), zoo._mse(torch), 120,
        clip=1.0, log_after_clip=True, every=3, tensorboardx=True,
    )  # fmt: skip


TRAINED: dict[str, Callable[[ModuleType, Any, Path], None]] = {
    "healthy": _healthy,
    "vanishing": _vanishing,
    "exploding": _exploding,
    "frozen": _frozen,
    "clipped": _clipped,
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    torch = pytest.importorskip("torch")
    pytest.importorskip("tensorboardX")
    torch.set_num_threads(1)
    zoo = _zoo()
    root = tmp_path_factory.mktemp("trained")
    for name, train in TRAINED.items():
        train(zoo, torch, root / name)
    return {name: root / name for name in TRAINED}


@pytest.mark.slow
def test_healthy_relu_adam_run_has_no_flag(trained: dict[str, Path]) -> None:
    report = analyze(trained["healthy"])
    assert report.counts["ok"] == len(report.layers) == 6
    assert report.steps == (0, 156)
    assert report.clipping is not None and not report.clipping.clipped
    assert report.clipping.suggested_clip_norm is not None


@pytest.mark.slow
def test_deep_sigmoid_run_vanishes_from_the_first_layers(trained: dict[str, Path]) -> None:
    report = analyze(trained["vanishing"])
    layers = by_name(report)
    assert layers["0.weight"].verdict == "vanishing"
    assert layers["0.weight"].first_bad_step == 0
    assert layers["0.weight"].stats["grad_ratio_to_largest"] < 1e-3
    assert layers["18.weight"].verdict == "ok"  # the output layer: the largest gradient
    ranked = [layer.name for layer in report.layers if layer.name.endswith(".weight")]
    assert ranked[0] == "0.weight"  # the deepest from the loss is the most severe
    assert report.counts["exploding"] == report.counts["nan"] == 0


def _raw_gradient_norms(path: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Exact norms straight from the records' sum_squares (no gradcheck statistics)."""
    found: dict[str, tuple[list[int], list[float]]] = {}
    (run,) = discover([str(path)])
    for record in read_run(run):
        if isinstance(record, HistogramRecord) and record.tag.endswith("/grad"):
            steps, norms = found.setdefault(record.tag[: -len("/grad")], ([], []))
            steps.append(record.step)
            norms.append(math.sqrt(record.sum_squares or 0.0))
    return {name: (np.array(s), np.array(n)) for name, (s, n) in found.items()}


@pytest.mark.slow
def test_exploding_run_is_flagged_at_the_onset_before_the_blow_up(
    trained: dict[str, Path],
) -> None:
    report = analyze(trained["exploding"])
    raw = _raw_gradient_norms(trained["exploding"])
    assert set(by_name(report)) == set(raw)
    for name, layer in by_name(report).items():
        steps, norms = raw[name]
        blow_up = int(steps[np.argmax(norms >= 100 * np.median(norms[:3]))])
        assert "exploding" in layer.flags, name
        assert layer.first_bad_step is not None and 0 < layer.first_bad_step <= blow_up, name
        assert layer.stats["grad_rise_factor"] > 1e4
    # the worst rose far past the threshold (1e7x of it and more: how far depends on the
    # last logged step before the writer stopped, which varies across torch builds)
    worst = report.layers[0]
    assert worst.severity > 3.7
    assert worst.severity == pytest.approx(
        3 + min(0.99, math.log10(worst.stats["grad_rise_factor"] / 100) / 10)
    )


@pytest.mark.slow
def test_frozen_layer_and_batchnorm_left_out_of_the_optimizer_are_static(
    trained: dict[str, Path],
) -> None:
    layers = by_name(analyze(trained["frozen"]))
    static = {name for name, layer in layers.items() if layer.verdict == "static"}
    assert static == {"0.weight", "0.bias", "3.weight", "3.bias"}
    assert "bit-identical" in layers["0.weight"].evidence
    assert layers["0.weight"].grad_tag is None  # requires_grad=False: no gradient logged
    assert "gradient is not zero" in layers["3.weight"].evidence  # gets gradients, never moves
    assert all(layers[n].verdict == "ok" for n in ("2.weight", "2.bias", "5.weight", "5.bias"))


@pytest.mark.slow
def test_clipped_run_is_pinned_at_the_ceiling_and_not_exploding(
    trained: dict[str, Path],
) -> None:
    report = analyze(trained["clipped"])
    clip = report.clipping
    assert clip is not None and clip.clipped
    assert clip.ceiling == pytest.approx(1.0, rel=1e-4)
    # logged after the clip: the norms describe the clip, no clip norm is suggested from them
    assert clip.suggested_clip_norm is None and "already clipped" in clip.rule
    assert report.counts["exploding"] == report.counts["nan"] == 0
    assert report.counts["ok"] == len(report.layers)


# --------------------------------------------------------------------------------------------
# The committed sample runs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["keras_healthy_callback", "torch_clipped"])
def test_healthy_sample_runs_have_no_flag(name: str) -> None:
    report = analyze(SAMPLE_RUNS / name)
    assert report.layers and report.counts["ok"] == len(report.layers)
    assert len(report.layers) == 6  # every parameter paired, none lost on the way


def test_sample_vanishing_sigmoid_flags_the_first_layers_only() -> None:
    layers = by_name(analyze(SAMPLE_RUNS / "tf_loop_vanishing_sigmoid"))
    assert layers["dense_0/kernel"].verdict == "vanishing"
    assert layers["dense_0/kernel"].grad_tag == "Gradients_dense_0/kernel:0"
    assert layers["dense_7/kernel"].verdict == "ok"
    assert layers["dense_0/kernel"].stats["grad_ratio_to_largest"] < 1e-4


@pytest.mark.parametrize("name", ["tf_loop_exploding_nan", "torch_exploding_nan"])
def test_sample_exploding_runs_are_nan_with_the_rise_before_the_nan(name: str) -> None:
    report = analyze(SAMPLE_RUNS / name)
    assert len(report.layers) == report.counts["nan"] == 6
    for layer in report.layers:
        assert layer.flags == ("nan", "exploding"), layer.name
        onset, first_nan = layer.stats["explode_onset_step"], layer.stats["first_nan_step"]
        assert isinstance(onset, int) and isinstance(first_nan, int)
        assert layer.first_bad_step == first_nan > onset
        assert layer.onsets == {"nan": first_nan, "exploding": onset}


def test_sample_frozen_runs_are_static() -> None:
    keras = by_name(analyze(SAMPLE_RUNS / "keras_fit_weights_only"))
    static = {name for name, layer in keras.items() if layer.verdict == "static"}
    assert static == {
        f"mlp/frozen_{p}"
        for p in ("dense/kernel", "dense/bias", "bn/gamma", "bn/beta", "bn/moving_mean")
    } | {"mlp/frozen_bn/moving_variance"}
    assert "moving statistics are static too" in keras["mlp/frozen_bn/gamma"].evidence
    torch_frozen = analyze(SAMPLE_RUNS / "torch_frozen")
    assert torch_frozen.counts["static"] == 4 and torch_frozen.counts["ok"] == 4


# --------------------------------------------------------------------------------------------
# Other people's logs
# --------------------------------------------------------------------------------------------

needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus not present")


@needs_corpus
def test_timegan_blow_up_is_nan_from_step_50() -> None:
    path = CORPUS / "Larsterbraak__TimeGAN/logs/Normal_training"
    report = analyze(next(path.glob("*/train")))
    nan = [layer for layer in report.layers if layer.verdict == "nan"]
    assert len(nan) == 25 and {layer.first_bad_step for layer in nan} == {50}
    assert all(layer.name.startswith(("generator/", "bidirectional", "Dense1/")) for layer in nan)
    assert report.counts["ok"] == 21  # the autoencoder's weights stay finite


@needs_corpus
def test_lstm_whose_first_layer_never_moves_is_static() -> None:
    report = analyze(
        CORPUS / "lyhue1991__eat_tensorflow2_in_30_days/data/keras_model/20200315-093920/train"
    )
    static = {layer.name for layer in report.layers if layer.verdict == "static"}
    assert static == {"lstm/kernel", "lstm/recurrent_kernel", "lstm/bias"}
    assert report.counts["ok"] == 11


@needs_corpus
def test_keras3_collisions_are_separate_healthy_parameters() -> None:
    report = analyze(CORPUS / "ldebris__Rossman/logs/train")
    names = sorted(layer.name for layer in report.layers)
    assert names == ["bias", "bias#1", "bias#2", "embeddings", "embeddings#1"] + [
        "kernel",
        "kernel#1",
        "kernel#2",
    ]
    assert report.counts["ok"] == 8
    assert any("kernel/histogram" in warning for warning in report.warnings)
