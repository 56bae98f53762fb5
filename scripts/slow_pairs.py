"""Twin Keras CNNs for the "are my kernels moving enough?" question (issue 18 §1, seed 000).

    python scripts/slow_pairs.py --out DIR [--only NAME ...]

The same small CNN (Conv2D-Conv2D-Dense on 12x12 random images of standard deviation 10, the
class the brightest of three regions), logged by Keras'
stock ``TensorBoard(histogram_freq=1)`` (weight histograms and ``epoch_learning_rate`` once per
epoch, no gradient), trained for 5 epochs of 12 batches with plain SGD twice:

- ``tiny_lr``: learning rate 1e-7, the seed question's run: every kernel moves about 6e-7 of
  its spread per epoch (5e-8 per update), the model learns nothing;
- ``healthy``: learning rate 0.005, the same model learning normally;
- ``float32_gradients``: learning rate 1e-7 on inputs of unit scale, gradients and weights also
  logged every 4 steps by ``gradcheck.keras.GradientLogger`` (the stock callback logs only
  the loss and learning rate): the kernels' updates are below
  float32 resolution, the weights stay put (their exact norms move ~1e-10: a few small
  elements' updates survive rounding).

Deterministic (seeded); a few seconds each on 2 CPU cores.
``tests/verdicts/real/test_slow_real.py`` writes them into a temporary directory; the docs'
transcript reads ``sample_slow/tiny_lr`` and ``sample_slow/healthy``, written by
``python scripts/slow_pairs.py --out sample_slow --only tiny_lr healthy``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import tensorflow as tf  # noqa: E402

keras = tf.keras
SEED = 0
ROWS, SIDE, CLASSES, BATCH, EPOCHS = 384, 12, 3, 32, 5
PIXEL_SCALE = 10.0  # inputs not normalised to unit scale (as raw pixel values often are)
RUNS = {  # name: (learning rate, input scale, gradients logged)
    "tiny_lr": (1e-7, PIXEL_SCALE, False),
    "healthy": (0.005, PIXEL_SCALE, False),
    "float32_gradients": (1e-7, 1.0, True),
}


def _data(scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Images whose class is the quadrant with the brightest mean (learnable by a CNN)."""
    rng = np.random.default_rng(SEED + 1)
    x = (scale * rng.normal(size=(ROWS, SIDE, SIDE, 1))).astype("float32")
    half = SIDE // 2
    quadrants = np.stack(
        [
            x[:, :half, :half].mean((1, 2, 3)),
            x[:, half:, :half].mean((1, 2, 3)),
            x[:, :, half:].mean((1, 2, 3)),
        ],
        axis=1,
    )
    return x, np.argmax(quadrants, axis=1).astype("int32")


def _model() -> Any:
    keras.utils.set_random_seed(SEED)
    return keras.Sequential(
        [
            keras.Input((SIDE, SIDE, 1)),
            keras.layers.Conv2D(16, 3, activation="relu", name="conv1"),
            keras.layers.Conv2D(32, 3, activation="relu", name="conv2"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(CLASSES, activation="softmax", name="head"),
        ]
    )


def train(log_dir: Path, learning_rate: float, scale: float, gradients: bool) -> None:
    """Five epochs of SGD at ``learning_rate``, logged by the stock TensorBoard callback (and
    with ``gradients`` by GradientLogger, into the same run directory)."""
    x, y = _data(scale)
    model = _model()
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate), loss="sparse_categorical_crossentropy"
    )
    histograms = 0 if gradients else 1  # GradientLogger logs the weights itself
    callbacks = [keras.callbacks.TensorBoard(log_dir=str(log_dir), histogram_freq=histograms)]
    if gradients:
        from gradcheck.keras import GradientLogger

        callbacks.append(GradientLogger(str(log_dir / "train"), (x[:64], y[:64]), every_n_steps=4))
    model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0, callbacks=callbacks)


def write_runs(out: Path, only: list[str] | None = None) -> dict[str, Path]:
    """The runs (all, or those named in ``only``) under ``out`` (``out/tiny_lr``...); their
    paths by name."""
    runs = {}
    for name, (learning_rate, scale, gradients) in RUNS.items():
        if only and name not in only:
            continue
        train(out / name, learning_rate, scale, gradients)
        runs[name] = out / name
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="+", choices=sorted(RUNS))
    arguments = parser.parse_args()
    write_runs(arguments.out, arguments.only)


if __name__ == "__main__":
    main()
