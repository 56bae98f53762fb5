"""Twin Keras CNNs for the "are my kernels moving enough?" question (issue 18 §1, seed 000).

    python scripts/slow_pairs.py --out DIR

The same small CNN (Conv2D-Conv2D-Dense on 12x12 random images, 3 classes), logged by Keras'
stock ``TensorBoard(histogram_freq=1)`` (weight histograms and ``epoch_learning_rate`` once per
epoch, no gradient), trained for 5 epochs of 12 batches with plain SGD twice:

- ``tiny_lr``: learning rate 1e-7, the seed question's run: every kernel moves about 1e-8 of
  its spread per update, the model learns nothing;
- ``healthy``: learning rate 0.05, the same model learning normally.

Deterministic (seeded); a few seconds each on 2 CPU cores. ``tests/test_slow_real.py`` writes
them into a temporary directory.
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
LEARNING_RATES = {"tiny_lr": 1e-7, "healthy": 0.05}


def _data() -> tuple[np.ndarray, np.ndarray]:
    """Images whose class is the quadrant with the brightest mean (learnable by a CNN)."""
    rng = np.random.default_rng(SEED + 1)
    x = rng.normal(size=(ROWS, SIDE, SIDE, 1)).astype("float32")
    half = SIDE // 2
    quadrants = np.stack(
        [x[:, :half, :half].mean((1, 2, 3)), x[:, half:, :half].mean((1, 2, 3)),
         x[:, :, half:].mean((1, 2, 3))], axis=1
    )
    return x, np.argmax(quadrants, axis=1).astype("int32")


def _model() -> Any:
    keras.utils.set_random_seed(SEED)
    return keras.Sequential(
        [
            keras.Input((SIDE, SIDE, 1)),
            keras.layers.Conv2D(8, 3, activation="relu", name="conv1"),
            keras.layers.Conv2D(8, 3, activation="relu", name="conv2"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(CLASSES, activation="softmax", name="head"),
        ]
    )


def train(log_dir: Path, learning_rate: float) -> None:
    """Five epochs of SGD at ``learning_rate``, logged by the stock TensorBoard callback."""
    x, y = _data()
    model = _model()
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate), loss="sparse_categorical_crossentropy"
    )
    callback = keras.callbacks.TensorBoard(log_dir=str(log_dir), histogram_freq=1)
    model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0, callbacks=[callback])


def write_pairs(out: Path) -> dict[str, Path]:
    """Both runs under ``out`` (``out/tiny_lr``, ``out/healthy``); their paths by name."""
    runs = {}
    for name, learning_rate in LEARNING_RATES.items():
        train(out / name, learning_rate)
        runs[name] = out / name
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    write_pairs(parser.parse_args().out)


if __name__ == "__main__":
    main()
