"""Issue 37 on real Keras 3 runs, logged as users log them: ``gradcheck.keras.GradientLogger``
and Keras' own ``TensorBoard(histogram_freq=1)`` writing into one run directory (the callback
writes ``<log_dir>/train``; the logger is pointed there too).

Small models of the kinds AUTOTRAINER and DeepDiagnosis were evaluated on (deep ReLU and sigmoid
stacks on a toy two-circles problem), trained here in a few seconds each, deterministic
(``enable_op_determinism``):

- ``dead_relu``: 8 ReLU layers initialised N(0, 0.05), SGD 0.3: the first layers' gradients
  vanish, their logged weights stop moving (per-step update exactly zero): gradcheck crashed
  (``ZeroDivisionError`` in the slow rule, exit 3);
- ``warm_up`` / ``warm_up_callback_only``: a healthy MLP under Adam with a learning-rate warm-up,
  its zero-initialised biases growing from ~1e-6 to ~0.3: flagged ``exploding`` (exit 1) from
  the callback's weights, which carry no gradient;
- ``stalled_relu``: 8 ReLU layers, Adam 0.03, the loss stalled at ln 2: the last hidden
  kernel's logged gradient is exactly zero at most steps (its inputs, the units before it,
  are dead) while its bias's is not: called ``ok``, excused by the bias;
- ``deep_sigmoid``: 8 sigmoid layers, SGD 0.01: the first kernels' updates round away, but not
  all of them: the exact norms GradientLogger logs change where the histograms do not: called
  ``bit-identical``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
tf = pytest.importorskip("tensorflow")

from click.testing import CliRunner  # noqa: E402

from gradcheck import cli  # noqa: E402
from gradcheck.events.discover import discover  # noqa: E402
from gradcheck.events.reader import read_run  # noqa: E402
from gradcheck.keras import GradientLogger  # noqa: E402
from gradcheck.model import LayerResult, RunData, RunReport  # noqa: E402
from gradcheck.pipeline import analyze  # noqa: E402
from gradcheck.series.reduce import reduce_records  # noqa: E402

pytestmark = pytest.mark.slow
keras = tf.keras
DEPTH, WIDTH, ROWS, BATCH = 8, 16, 512, 32


def circles(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two noisy concentric circles, balanced classes (a constant prediction scores ln 2)."""
    rng = np.random.default_rng(seed)
    radius = np.where(rng.random(ROWS) < 0.5, 0.5, 1.0)
    angle = rng.random(ROWS) * 2 * np.pi
    x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1)
    x += rng.normal(0, 0.05, x.shape)
    return x.astype("float32"), (radius > 0.75).astype("float32")


def train(
    log_dir: Path,
    *,
    activation: str,
    hidden: int,
    optimizer: Any,
    epochs: int,
    every: int | None,
    init_std: float | None = None,
    seed: int = 0,
) -> tuple[Path, Any]:
    """Train an MLP on ``circles`` logged by Keras' callback and (``every``) GradientLogger into
    one run directory; the run's path and the model. Kernels are Glorot-uniform, or N(0,
    ``init_std``) (built after seeding: an initializer made before draws its own seed)."""
    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    x, y = circles()
    layers = [
        keras.layers.Dense(
            WIDTH,
            activation=activation,
            kernel_initializer="glorot_uniform"
            if init_std is None
            else keras.initializers.RandomNormal(0.0, init_std, seed=seed + i),
            name=f"hidden{i}",
        )
        for i in range(hidden)
    ]
    model = keras.Sequential(
        [keras.Input((2,)), *layers, keras.layers.Dense(1, activation="sigmoid", name="out")],
        name="net",
    )
    model.compile(optimizer=optimizer, loss="binary_crossentropy")
    callbacks: list[Any] = [keras.callbacks.TensorBoard(str(log_dir), histogram_freq=1)]
    run = log_dir / "train"
    if every is not None:
        callbacks.append(GradientLogger(str(run), data=(x[:128], y[:128]), every_n_steps=every))
    model.fit(x, y, batch_size=BATCH, epochs=epochs, verbose=0, callbacks=callbacks)
    for callback in callbacks[1:]:
        callback.close()
    return run, model


def warm_up(total_steps: int, warm_steps: int) -> Any:
    return keras.optimizers.Adam(
        keras.optimizers.schedules.CosineDecay(
            0.0, decay_steps=total_steps, warmup_target=0.01, warmup_steps=warm_steps
        )
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    root = tmp_path_factory.mktemp("both_writers")
    relu = {"activation": "relu", "hidden": DEPTH, "epochs": 5, "every": 5, "init_std": 0.05}
    return {
        "dead_relu": train(root / "dead_relu", **relu, optimizer=keras.optimizers.SGD(0.3)),
        "warm_up": train(root / "warm_up", activation="relu", hidden=2, epochs=10, every=2,
                         optimizer=warm_up(200, 100)),
        "warm_up_callback_only": train(root / "warm_up_callback_only", activation="relu",
                                       hidden=2, epochs=30, every=None,
                                       optimizer=warm_up(400, 200)),
        "stalled_relu": train(root / "stalled_relu", **relu,
                              optimizer=keras.optimizers.Adam(0.03)),
        "deep_sigmoid": train(root / "deep_sigmoid", activation="sigmoid", hidden=DEPTH,
                              epochs=6, every=20, optimizer=keras.optimizers.SGD(0.01)),
    }  # fmt: skip


def report_of(run: Path) -> RunReport:
    (report,) = analyze([str(run)], jobs=1).runs
    return report


def exit_code(run: Path, *options: str) -> int:
    result = CliRunner().invoke(cli.cli, ["analyze", str(run), *options], prog_name="gradcheck")
    assert "internal error" not in result.output, result.output
    return result.exit_code


def layers_of(report: RunReport) -> dict[str, LayerResult]:
    return {layer.name: layer for layer in report.layers}


def logged(run: Path) -> RunData:
    (found,) = discover([str(run)])
    return reduce_records(read_run(found))


def test_first_layers_that_stop_moving_do_not_crash_the_report(runs) -> None:
    run, model = runs["dead_relu"]
    assert exit_code(run) == 0  # nan,exploding: none (was 3: ZeroDivisionError)
    assert exit_code(run, "--fail-on", "vanishing") == 1
    layers = layers_of(report_of(run))
    assert not [note for layer in layers.values() for note in layer.notes if "internal" in note]
    for i in range(4):  # the first layers' gradients vanish: RMS below 1e-7, ~1e-6 of the top
        kernel = layers[f"net/hidden{i}/kernel"]
        assert kernel.verdict == "vanishing", kernel.evidence
        assert kernel.stats["grad_rms_median"] < 1e-7
    assert layers["net/out/bias"].verdict == "ok"


def test_both_writers_give_one_row_per_variable(runs) -> None:
    for name in ("warm_up", "stalled_relu", "deep_sigmoid", "dead_relu"):
        run, model = runs[name]
        data = logged(run)
        assert any(tag.endswith("/histogram") for tag, _ in data.histograms)  # the callback's
        assert any(tag.startswith("weights/") for tag, _ in data.histograms)  # the logger's
        report = report_of(run)
        assert [layer.name for layer in report.layers] != []
        assert sorted(layer.name for layer in report.layers) == sorted(
            v.path for v in model.trainable_variables
        )
        for layer in report.layers:  # judged on the logger's series: its gradients' clock
            assert layer.weight_tag == f"weights/{layer.name}"
            assert layer.grad_tag == f"gradients/{layer.name}"


@pytest.mark.parametrize("name", ["warm_up", "warm_up_callback_only"])
def test_zero_initialised_biases_growing_under_adam_are_not_exploding(runs, name: str) -> None:
    run, model = runs[name]
    report = report_of(run)
    assert {layer.verdict for layer in report.layers} == {"ok"}, [
        (layer.name, layer.evidence) for layer in report.layers if layer.verdict != "ok"
    ]
    assert exit_code(run) == 0
    biases = [layer for layer in report.layers if layer.name.endswith("/bias")]
    first = [layer.stats["weight_norm_first"] for layer in biases]
    last = [layer.stats["weight_norm_last"] for layer in biases]
    assert max(first) < 0.01 < 0.05 < min(last)  # from (about) zero to a healthy size


def test_a_kernel_with_dead_inputs_is_vanishing_whatever_its_bias_gets(runs) -> None:
    run, model = runs["stalled_relu"]
    loss = logged(run).scalars["epoch_loss"].values
    assert abs(loss[-1] - math.log(2)) < 0.01  # stalled at a constant prediction
    last = f"net/hidden{DEPTH - 1}"
    norms = logged(run).scalars
    kernel_norm = norms[f"gradient_norm/{last}/kernel"].values
    bias_norm = norms[f"gradient_norm/{last}/bias"].values
    assert np.median(kernel_norm) == 0.0 < np.median(bias_norm)  # the units before it are dead
    layers = layers_of(report_of(run))
    kernel = layers[f"{last}/kernel"]
    assert kernel.verdict == "vanishing", (kernel.evidence, kernel.notes)
    assert "gradient RMS 0 " in kernel.evidence
    assert exit_code(run, "--fail-on", "vanishing") == 1


def test_bit_identical_only_when_the_exact_logged_norms_are(runs) -> None:
    claims = 0
    for name in ("deep_sigmoid", "stalled_relu", "dead_relu"):
        run, _ = runs[name]
        norms = logged(run).scalars
        for layer in report_of(run).layers:
            exact = norms[f"weight_norm/{layer.name}"].values
            identical = bool((exact == exact[0]).all())
            said = "bit-identical" in layer.evidence or layer.stats.get("weight_bit_identical")
            assert bool(said) == identical or layer.verdict != "static", (name, layer.name)
            if "static" in layer.flags:
                claims += 1
                assert layer.stats["weight_bit_identical"] == int(identical), (name, layer.name)
                assert layer.stats["weight_norm_first"] == exact[0]  # exact, not the buckets'
    assert claims  # the deep sigmoid's first kernels: static, moved ~1e-9 of their norm
