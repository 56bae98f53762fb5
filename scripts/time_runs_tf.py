"""TF2 custom-loop runs that never train, and an evaluation log (issue 30, point 3).

    python scripts/time_runs_tf.py --out DIR [--only NAME ...]

A two-layer Keras MLP on a regression task, trained by a hand-written ``tf.GradientTape`` loop
with ``SGD(0.1)`` for 300 steps, its weights logged by ``tf.summary.histogram`` every 10 steps
(no gradients), as the public run in issue 30 was:

- ``never_trained_loss``: ``optimizer.apply_gradients`` is never called; the training loss is
  logged (``tf.summary.scalar('loss')``) at every step: it stays flat, nothing moves;
- ``never_trained_lr``: the same loop logging the optimizer's learning rate (``learning_rate``)
  and no loss;
- ``evaluation``: no optimizer at all, a fixed model evaluated over the same 300 batches,
  weights and a held-out loss (``val_loss``) logged as above: an evaluation log;
- ``trained``: the loop with ``apply_gradients``, the healthy twin.

Deterministic (seeded); a few seconds each.
``tests/verdicts/real/test_never_trained_real.py`` writes them.
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
SEED, STEPS, EVERY, BATCH, LEARNING_RATE = 0, 300, 10, 32, 0.1
RUNS = ("never_trained_loss", "never_trained_lr", "evaluation", "trained")


def _model() -> Any:
    keras.utils.set_random_seed(SEED)
    return keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(32, activation="relu", name="hidden"),
            keras.layers.Dense(1, name="out"),
        ]
    )


def _batches() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(SEED + 1)
    truth = rng.normal(size=(8, 1))
    out = []
    for _ in range(STEPS):
        x = rng.normal(size=(BATCH, 8)).astype("float32")
        out.append((x, (x @ truth + 0.1 * rng.normal(size=(BATCH, 1))).astype("float32")))
    return out


def write_run(log_dir: Path, name: str) -> Path:
    """Run ``name`` (see the module docstring) into ``log_dir``."""
    model = _model()
    optimizer = keras.optimizers.SGD(LEARNING_RATE)
    loss_fn = keras.losses.MeanSquaredError()
    writer = tf.summary.create_file_writer(str(log_dir))
    with writer.as_default():
        for step, (x, y) in enumerate(_batches()):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=name != "evaluation"))
            if name != "evaluation":
                gradients = tape.gradient(loss, model.trainable_variables)
                if name == "trained":
                    pairs = zip(gradients, model.trainable_variables, strict=True)
                    optimizer.apply_gradients(pairs)
            if name in ("never_trained_loss", "trained"):
                tf.summary.scalar("loss", loss, step=step)
            elif name == "never_trained_lr":
                tf.summary.scalar("learning_rate", float(optimizer.learning_rate), step=step)
            else:
                tf.summary.scalar("val_loss", loss, step=step)
            if step % EVERY == 0:
                for variable in model.trainable_variables:
                    tf.summary.histogram(variable.path, variable, step=step)
    writer.close()
    return log_dir


def write_runs(out: Path, only: list[str] | None = None) -> dict[str, Path]:
    """Every run (or those in ``only``) under ``out/<name>``."""
    return {name: write_run(out / name, name) for name in RUNS if not only or name in only}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    for name, path in write_runs(args.out, args.only).items():
        print(name, path)


if __name__ == "__main__":
    main()
