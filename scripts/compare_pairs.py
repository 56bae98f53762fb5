"""Pairs of real Keras runs for ``gradcheck compare``: ``model.fit`` against a hand-written step.

    python scripts/compare_pairs.py --out sample_pairs [--only NAME ...]

Each pair is one small model (an MLP, unnamed as most are, so that the second build of it in a
process is ``sequential_1/dense_2/...``) trained twice from the same initial weights on the
same batches in the same order: ``fit/`` with ``model.fit`` (``gradcheck.keras.GradientLogger``
logging every step on the batch fit is about to apply, and Keras' stock ``TensorBoard``
callback for the loss), ``loop/`` with a ``tf.GradientTape`` step logged by
``gradcheck.keras.log_step``. Only the one difference a pair is named after separates them:

- ``summed_loss``: the loop sums the per-example losses instead of averaging them (its
  gradients are ``BATCH`` times fit's at the first step);
- ``batchnorm_inference``: the loop calls the model with ``training=False``, so BatchNorm
  normalises with its moving statistics and never updates them (the seed question's bug);
- ``learning_rate``: the loop's SGD has ``LR_FACTOR`` times fit's learning rate;
- ``agreeing``: none (the loop averages the loss, as fit does): the runs must agree.

Deterministic (seeded, ``enable_op_determinism``); a few seconds per pair on 2 CPU cores. The
tests (``tests/compare/test_compare_real.py``) write the pairs into a temporary directory; the docs'
transcript reads ``sample_pairs/summed_loss``, written by this script
(``python scripts/compare_pairs.py --out sample_pairs --only summed_loss``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import tensorflow as tf  # noqa: E402

from gradcheck.keras import GradientLogger, log_step  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared _training.py
from _training import out_and_only  # noqa: E402

keras = tf.keras
SEED = 0
ROWS, FEATURES, CLASSES = 384, 16, 3
BATCH = 32
STEPS = ROWS // BATCH  # one epoch
LEARNING_RATE = 0.01
LR_FACTOR = 10.0


def _data() -> tuple[np.ndarray, np.ndarray]:
    """Three classes from the argmax of a random projection of a nonlinear feature map."""
    rng = np.random.default_rng(SEED + 1)
    x = rng.normal(size=(ROWS, FEATURES)).astype("float32")
    projection = rng.normal(size=(2 * FEATURES, CLASSES))
    y = np.argmax(np.concatenate([x, np.abs(x)], axis=1) @ projection, axis=1)
    return x, y.astype("int32")


def _model(batchnorm: bool) -> Any:
    """Dense(32, relu)[-BatchNorm]-Dense(3, softmax), layers and model unnamed."""
    keras.utils.set_random_seed(SEED)
    layers = [keras.Input((FEATURES,)), keras.layers.Dense(32, activation="relu")]
    if batchnorm:
        layers.append(keras.layers.BatchNormalization())
    layers.append(keras.layers.Dense(CLASSES, activation="softmax"))
    return keras.Sequential(layers)


def _batches(x: np.ndarray, y: np.ndarray) -> Any:
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)


def train_fit(log_dir: Path, batchnorm: bool, initial: list[np.ndarray] | None) -> list[Any]:
    """``model.fit`` for one epoch, unshuffled; returns the initial weights it started from."""
    x, y = _data()
    model = _model(batchnorm)
    if initial is not None:
        model.set_weights(initial)
    start = model.get_weights()
    model.compile(
        optimizer=keras.optimizers.SGD(LEARNING_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(),
    )
    # resample=True: at step k the logger draws batch k, the batch fit applies next.
    logger = GradientLogger(
        str(log_dir / "train"),
        data=_batches(x, y),
        every_n_steps=1,
        resample=True,
        frozen_weights=batchnorm,
    )
    board = keras.callbacks.TensorBoard(str(log_dir), write_graph=False, profile_batch=0)
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[logger, board])
    logger.close()
    return start


def train_loop(
    log_dir: Path,
    initial: list[Any],
    *,
    batchnorm: bool = False,
    summed: bool = False,
    training: bool = True,
    learning_rate: float = LEARNING_RATE,
) -> None:
    """The same epoch with a hand-written ``tf.GradientTape`` step, logged with ``log_step``
    before each update (as the logger in :func:`train_fit` logs)."""
    x, y = _data()
    model = _model(batchnorm)
    model.set_weights(initial)
    optimizer = keras.optimizers.SGD(learning_rate)
    reduction = "sum" if summed else "sum_over_batch_size"
    loss_fn = keras.losses.SparseCategoricalCrossentropy(reduction=reduction)
    writer = tf.summary.create_file_writer(str(log_dir))

    @tf.function
    def train_step(step: Any, batch_x: Any, batch_y: Any) -> None:
        with tf.GradientTape() as tape:
            loss = loss_fn(batch_y, model(batch_x, training=training))
        gradients = tape.gradient(loss, model.trainable_variables)
        with writer.as_default():
            tf.summary.scalar("loss", loss, step=step)
            log_step(None, model.trainable_variables, gradients, step)
            if batchnorm:
                frozen = model.non_trainable_variables
                log_step(None, frozen, [None] * len(frozen), step)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))

    for step, (batch_x, batch_y) in enumerate(_batches(x, y)):
        train_step(tf.constant(step, tf.int64), batch_x, batch_y)
    writer.close()


def summed_loss(out: Path) -> None:
    start = train_fit(out / "fit", batchnorm=False, initial=None)
    train_loop(out / "loop", start, summed=True)


def batchnorm_inference(out: Path) -> None:
    start = train_fit(out / "fit", batchnorm=True, initial=None)
    train_loop(out / "loop", start, batchnorm=True, training=False)


def learning_rate(out: Path) -> None:
    start = train_fit(out / "fit", batchnorm=False, initial=None)
    train_loop(out / "loop", start, learning_rate=LEARNING_RATE * LR_FACTOR)


def agreeing(out: Path) -> None:
    start = train_fit(out / "fit", batchnorm=False, initial=None)
    train_loop(out / "loop", start)


PAIRS: dict[str, Callable[[Path], None]] = {
    "summed_loss": summed_loss,
    "batchnorm_inference": batchnorm_inference,
    "learning_rate": learning_rate,
    "agreeing": agreeing,
}


def write_pairs(out: Path, names: list[str] | None = None) -> dict[str, Path]:
    """Each pair (all, or ``names``) into ``out/<name>/{fit,loop}``; their directories."""
    tf.config.experimental.enable_op_determinism()
    written = {}
    for name in names or list(PAIRS):
        started = time.perf_counter()
        PAIRS[name](out / name)
        print(f"{name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
        written[name] = out / name
    return written


def main() -> None:
    write_pairs(*out_and_only(__doc__ or "", list(PAIRS)))


if __name__ == "__main__":
    main()
