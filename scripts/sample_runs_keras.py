"""Keras / TensorFlow training scripts behind ``sample_runs/keras_*`` and ``sample_runs/tf_*``.

Each trains a small model on synthetic data for seconds on CPU, deterministically (fixed seeds,
``enable_op_determinism``), and logs it one of the ways people do: the gradcheck callback, the
plain Keras ``TensorBoard(histogram_freq=1)`` callback, a hand-written custom loop in the style
of the classic question (``var.name`` / ``'Gradients_' + var.name``), and ``log_step``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import tensorflow as tf  # noqa: E402

from gradcheck.keras import GradientLogger, log_step  # noqa: E402

keras = tf.keras
SEED = 0


def _seed() -> None:
    keras.utils.set_random_seed(SEED)
    tf.config.experimental.enable_op_determinism()


def _classification(rows: int = 2048, features: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Three classes from the argmax of a random projection of a nonlinear feature map."""
    rng = np.random.default_rng(SEED + 1)
    x = rng.normal(size=(rows, features)).astype("float32")
    projection = rng.normal(size=(2 * features, 3))
    y = np.argmax(np.concatenate([x, np.abs(x)], axis=1) @ projection, axis=1)
    return x, y.astype("int32")


def _binary(rows: int = 1024, features: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Labels from the sign of a random projection (linearly separable)."""
    rng = np.random.default_rng(SEED + 2)
    x = rng.normal(size=(rows, features)).astype("float32")
    y = (x @ rng.normal(size=(features, 1)) > 0).astype("float32")
    return x, y


def keras_healthy_callback(log_dir: Path) -> None:
    """ReLU MLP, Adam 1e-3, ``model.fit`` with ``GradientLogger`` every 8 steps: healthy."""
    _seed()
    x, y = _classification()
    model = keras.Sequential(
        [
            keras.Input((x.shape[1],)),
            keras.layers.Dense(64, activation="relu", name="hidden_1"),
            keras.layers.Dense(32, activation="relu", name="hidden_2"),
            keras.layers.Dense(3, activation="softmax", name="output"),
        ],
        name="mlp",
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
    logger = GradientLogger(str(log_dir), data=(x[:256], y[:256]), every_n_steps=8)
    model.fit(x, y, batch_size=64, epochs=6, shuffle=False, verbose=0, callbacks=[logger])
    logger.close()


def keras_fit_weights_only(log_dir: Path) -> None:
    """A frozen Dense layer and a frozen BatchNorm (``trainable=False``: gamma/beta and the
    moving statistics never move), logged by the plain ``TensorBoard(histogram_freq=1)``
    callback: weight histograms once per epoch, no gradients (Keras removed ``write_grads``)."""
    _seed()
    x, y = _classification()
    model = keras.Sequential(
        [
            keras.Input((x.shape[1],)),
            keras.layers.Dense(64, activation="relu", name="frozen_dense", trainable=False),
            keras.layers.BatchNormalization(name="frozen_bn", trainable=False),
            keras.layers.Dense(32, activation="relu", name="hidden"),
            keras.layers.Dense(3, activation="softmax", name="output"),
        ],
        name="mlp",
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
    tensorboard = keras.callbacks.TensorBoard(
        str(log_dir), histogram_freq=1, write_graph=False, profile_batch=0
    )
    model.fit(x, y, batch_size=64, epochs=8, shuffle=False, verbose=0, callbacks=[tensorboard])


def _sigmoid_mlp(features: int, depth: int, width: int) -> list[tf.Variable]:
    """Raw ``tf.Variable``s named ``dense_<i>/kernel`` and ``dense_<i>/bias`` (Glorot normal)."""
    variables, fan_in = [], features
    for layer in range(depth + 1):
        fan_out = 1 if layer == depth else width
        scale = np.sqrt(2.0 / (fan_in + fan_out))
        kernel = tf.random.normal((fan_in, fan_out), stddev=scale, seed=SEED + layer)
        variables.append(tf.Variable(kernel, name=f"dense_{layer}/kernel"))
        variables.append(tf.Variable(tf.zeros((fan_out,)), name=f"dense_{layer}/bias"))
        fan_in = fan_out
    return variables


def _sigmoid_forward(variables: list[tf.Variable], x: tf.Tensor) -> tf.Tensor:
    hidden = x
    for index in range(0, len(variables) - 2, 2):
        hidden = tf.sigmoid(hidden @ variables[index] + variables[index + 1])
    return hidden @ variables[-2] + variables[-1]  # logits


def tf_loop_vanishing_sigmoid(log_dir: Path) -> None:
    """An MLP of 8 sigmoid layers trained by plain SGD in a custom loop, logged by hand the way
    the classic question does: ``tf.summary.histogram(var.name, var)`` and
    ``tf.summary.histogram('Gradients_' + var.name, grad)``, every 20 steps. Each sigmoid
    scales the gradient by at most 1/4, so the first layers get gradients orders of magnitude
    below the last's."""
    _seed()
    x, y = _binary()
    variables = _sigmoid_mlp(x.shape[1], depth=8, width=32)
    optimizer = keras.optimizers.SGD(0.5)
    writer = tf.summary.create_file_writer(str(log_dir))

    @tf.function
    def loss_and_gradients(batch_x: tf.Tensor, batch_y: tf.Tensor) -> tuple[tf.Tensor, list]:
        with tf.GradientTape() as tape:
            logits = _sigmoid_forward(variables, batch_x)
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(batch_y, logits))
        return loss, tape.gradient(loss, variables)

    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(64).take(301)
    with writer.as_default():
        for step, (batch_x, batch_y) in enumerate(dataset):
            loss, gradients = loss_and_gradients(batch_x, batch_y)
            if step % 20 == 0:
                tf.summary.scalar("loss", loss, step=step)
                for variable, gradient in zip(variables, gradients, strict=True):
                    tf.summary.histogram(variable.name, variable, step=step)
                    tf.summary.histogram("Gradients_" + variable.name, gradient, step=step)
            optimizer.apply_gradients(zip(gradients, variables, strict=True))
    writer.close()


def tf_loop_exploding_nan(log_dir: Path) -> None:
    """A tanh MLP in a ``tf.function`` custom loop, SGD learning rate 0.5 with momentum 0.9 (too
    large), logged with ``gradcheck.keras.log_step`` at every step: the gradient norm rises by
    orders of magnitude, then turns NaN."""
    _seed()
    x, y = _binary()
    model = keras.Sequential(
        [
            keras.Input((x.shape[1],)),
            keras.layers.Dense(64, activation="tanh", name="hidden_1"),
            keras.layers.Dense(64, activation="tanh", name="hidden_2"),
            keras.layers.Dense(1, name="output"),
        ],
        name="mlp",
    )
    optimizer = keras.optimizers.SGD(0.5, momentum=0.9)
    writer = tf.summary.create_file_writer(str(log_dir))
    targets = y * 6.0 - 3.0  # regression onto +-3: squared error makes the step size bite

    @tf.function
    def train_step(step: tf.Tensor, batch_x: tf.Tensor, batch_y: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(batch_x, training=True) - batch_y))
        gradients = tape.gradient(loss, model.trainable_variables)
        with writer.as_default():
            tf.summary.scalar("loss", loss, step=step)
            log_step(None, model.trainable_variables, gradients, step)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))

    dataset = tf.data.Dataset.from_tensor_slices((x, targets)).repeat().batch(64).take(40)
    for step, (batch_x, batch_y) in enumerate(dataset):
        train_step(tf.constant(step, tf.int64), batch_x, batch_y)
    writer.close()


RUNS = {
    "keras_healthy_callback": keras_healthy_callback,
    "keras_fit_weights_only": keras_fit_weights_only,
    "tf_loop_vanishing_sigmoid": tf_loop_vanishing_sigmoid,
    "tf_loop_exploding_nan": tf_loop_exploding_nan,
}
