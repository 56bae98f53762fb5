"""gradcheck.keras on real Keras 3 / TensorFlow: what the callback and log_step write, read back.

All TensorFlow tests live in this one module (importing TensorFlow alone takes seconds).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
tf = pytest.importorskip("tensorflow")

from gradcheck.errors import InputError  # noqa: E402
from gradcheck.keras import (  # noqa: E402
    GradientLogger,
    histogram_buckets,
    log_step,
    variable_path,
)
from gradcheck.tags import logtags  # noqa: E402
from tests.support.readback import bucket_total, read_logs, readme_helper_examples  # noqa: E402

keras = tf.keras
pytestmark = pytest.mark.slow

ROWS, FEATURES, BATCH = 128, 6, 32


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, FEATURES)).astype("float32")
    y = (x[:, :2].sum(axis=1, keepdims=True) > 0).astype("float32")
    return x, y


def _model(dropout: bool, run_eagerly: bool = False) -> keras.Model:
    """A tiny Dense-BatchNorm[-Dropout]-Dense classifier; ``run_eagerly`` also makes the
    callback log eagerly (no tracing: faster for a handful of steps)."""
    keras.utils.set_random_seed(7)
    layers = [
        keras.Input((FEATURES,)),
        keras.layers.Dense(12, activation="relu", name="hidden"),
        keras.layers.BatchNormalization(name="norm"),
    ]
    if dropout:
        layers.append(keras.layers.Dropout(0.3, name="drop"))
    layers.append(keras.layers.Dense(1, activation="sigmoid", name="out"))
    model = keras.Sequential(layers, name="net")
    model.compile(
        optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy", run_eagerly=run_eagerly
    )
    return model


def _tape_gradients(model: keras.Model, x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    with tf.GradientTape() as tape:
        loss = model.compute_loss(x=x, y=y, y_pred=model(x, training=True))
    return [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[keras.Model, Path, np.ndarray]:
    """Two epochs of 4 steps, logged every 3 steps and at each epoch end."""
    x, y = _data()
    log_dir = tmp_path_factory.mktemp("callback")
    model = _model(dropout=False)
    callback = GradientLogger(str(log_dir), data=(x[:64], y[:64]), every_n_steps=3, per_epoch=True)
    model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0, callbacks=[callback])
    callback.close()
    return model, log_dir, _tape_gradients(model, x[:64], y[:64])


def test_callback_logs_every_tag_at_the_expected_steps(fitted) -> None:
    model, log_dir, _ = fitted
    logs = read_logs(log_dir)
    paths = [variable_path(v) for v in model.trainable_variables]
    assert paths[0] == "net/hidden/kernel"
    expected_steps = [0, 3, 4, 6, 8]  # start, every 3 steps, epoch ends at 4 and 8
    for path in paths:
        for prefix in (logtags.WEIGHTS, logtags.GRADIENTS):
            assert logs.steps(logtags.tag(prefix, path)) == expected_steps
        for prefix in (logtags.WEIGHT_NORM, logtags.GRADIENT_NORM, logtags.GRADIENT_NONFINITE):
            assert logs.steps(logtags.tag(prefix, path)) == expected_steps
    assert logs.steps(logtags.GLOBAL_GRADIENT_NORM) == expected_steps
    assert not logs.tags_with_prefix("weights/net/norm/moving")  # trainable variables only


def test_callback_norms_are_exact_at_the_last_step(fitted) -> None:
    model, log_dir, gradients = fitted
    logs = read_logs(log_dir)
    squared_sum = 0.0
    for variable, gradient in zip(model.trainable_variables, gradients, strict=True):
        path = variable_path(variable)
        weight_norm = float(np.linalg.norm(variable.numpy().astype(np.float64)))
        grad_norm = float(np.linalg.norm(gradient.astype(np.float64)))
        assert logs.scalar(logtags.tag(logtags.WEIGHT_NORM, path), 8) == pytest.approx(
            weight_norm, rel=1e-6
        )
        assert logs.scalar(logtags.tag(logtags.GRADIENT_NORM, path), 8) == pytest.approx(
            grad_norm, rel=1e-4
        )
        assert logs.scalar(logtags.tag(logtags.GRADIENT_NONFINITE, path), 8) == 0
        histogram = logs.histograms[logtags.tag(logtags.GRADIENTS, path)][8]
        assert histogram.encoding == "tensor"
        assert bucket_total(histogram) == gradient.size
        assert histogram.left[0] == pytest.approx(gradient.min(), rel=1e-6)
        assert histogram.right[-1] == pytest.approx(gradient.max(), rel=1e-6)
        squared_sum += grad_norm**2
    assert logs.scalar(logtags.GLOBAL_GRADIENT_NORM, 8) == pytest.approx(
        math.sqrt(squared_sum), rel=1e-4
    )
    assert logs.scalar(logtags.GLOBAL_GRADIENT_NONFINITE, 8) == 0


def test_weights_move_between_logged_steps(fitted) -> None:
    _, log_dir, _ = fitted
    logs = read_logs(log_dir)
    norms = logs.scalars["weight_norm/net/hidden/kernel"]
    assert norms[0] != norms[8]
    assert logs.scalar("weight_norm/net/hidden/bias", 0) == 0.0  # zeros at initialisation


def test_callback_leaves_training_bit_identical(tmp_path: Path) -> None:
    """BatchNorm statistics, dropout seeds and metrics are restored after each logging step."""
    x, y = _data()
    plain = _model(dropout=True)
    plain.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    logged = _model(dropout=True)
    callback = GradientLogger(str(tmp_path), data=(x[:64], y[:64]), every_n_steps=1)
    logged.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0, callbacks=[callback])
    for before, after in zip(plain.weights, logged.weights, strict=True):
        np.testing.assert_array_equal(before.numpy(), after.numpy(), err_msg=before.path)
    assert callback.seconds_logging > 0
    callback.close()
    # The callback did log, before each of the 2 x 128 / 32 updates and after the last: the
    # equality above held with the logging steps in place, not because there were none.
    logs = read_logs(tmp_path)
    assert logs.steps(logtags.GLOBAL_GRADIENT_NORM) == list(range(2 * ROWS // BATCH + 1))
    assert bucket_total(logs.histograms["gradients/net/hidden/kernel"][7]) == FEATURES * 12


def test_callback_takes_a_dataset_and_resamples(tmp_path: Path) -> None:
    x, y = _data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    model = _model(dropout=False, run_eagerly=True)
    callback = GradientLogger(str(tmp_path), data=dataset, every_n_steps=2, resample=True)
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[callback])
    callback.close()
    logs = read_logs(tmp_path)
    assert logs.steps(logtags.GLOBAL_GRADIENT_NORM) == [0, 2, 4]
    histogram = logs.histograms["gradients/net/hidden/kernel"][2]
    assert bucket_total(histogram) == FEATURES * 12


def test_callback_with_steps_per_execution_logs_at_execution_boundaries(tmp_path: Path) -> None:
    """Keras calls batch hooks once per execution of 2 steps: a due log waits for the next one."""
    x, y = _data()
    model = _model(dropout=False)
    model.compile(optimizer="adam", loss="binary_crossentropy", steps_per_execution=2)
    callback = GradientLogger(str(tmp_path), data=(x[:32], y[:32]), every_n_steps=3)
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[callback])
    callback.close()
    assert read_logs(tmp_path).steps(logtags.GLOBAL_GRADIENT_NORM) == [0, 4, 6]


def test_callback_frozen_weights_logs_non_trainable_variables(tmp_path: Path) -> None:
    x, y = _data()
    model = _model(dropout=False, run_eagerly=True)
    model.get_layer("hidden").trainable = False
    model.compile(optimizer="adam", loss="binary_crossentropy", run_eagerly=True)
    callback = GradientLogger(
        str(tmp_path), data=(x[:32], y[:32]), every_n_steps=2, frozen_weights=True
    )
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[callback])
    callback.close()
    logs = read_logs(tmp_path)
    kernel_norms = logs.scalars["weight_norm/net/hidden/kernel"]
    assert len(set(kernel_norms.values())) == 1  # frozen: never moves
    assert "gradients/net/hidden/kernel" not in logs.histograms
    assert "weight_norm/net/norm/moving_mean" in logs.scalars
    assert "gradients/net/out/kernel" in logs.histograms


def test_log_step_counts_nonfinite_gradients(tmp_path: Path) -> None:
    variables = [tf.Variable([[1.0, 2.0], [3.0, 4.0]], name="a/kernel"), tf.Variable([0.5, 1.5])]
    nan_gradient = tf.constant([[1.0, np.nan], [np.inf, 2.0]])
    writer = tf.summary.create_file_writer(str(tmp_path))
    summary = log_step(writer, variables, [nan_gradient, None], 5, names=None)
    writer.close()
    assert math.isnan(float(summary.global_norm))
    assert int(summary.nonfinite) == 2
    logs = read_logs(tmp_path)
    assert logs.scalar("gradient_nonfinite/a/kernel", 5) == 2
    assert math.isnan(logs.scalar("gradient_norm/a/kernel", 5))
    assert math.isnan(logs.scalar("gradient_norm/global", 5))
    assert logs.scalar("gradient_nonfinite/global", 5) == 2
    nan_histogram = logs.histograms["gradients/a/kernel"][5]
    assert np.isnan(nan_histogram.left).all() and bucket_total(nan_histogram) == 0
    assert logs.scalar("weight_norm/a/kernel", 5) == pytest.approx(math.sqrt(30.0))
    assert logs.scalar("weight_nonfinite/a/kernel", 5) == 0
    unnamed = variable_path(variables[1])  # a tf.Variable's default name, without ":0"
    assert ":" not in unnamed and f"weights/{unnamed}" in logs.histograms
    assert f"gradients/{unnamed}" not in logs.histograms  # None gradient: weight only


def test_log_step_inf_only_gives_infinite_global_norm(tmp_path: Path) -> None:
    writer = tf.summary.create_file_writer(str(tmp_path))
    summary = log_step(writer, [tf.Variable([1.0, 2.0], name="w")], [tf.constant([np.inf, 1])], 0)
    assert float(summary.global_norm) == math.inf and int(summary.nonfinite) == 1


def test_log_step_inside_tf_function_custom_loop(tmp_path: Path) -> None:
    """The pattern of a custom training loop: log_step traced into a tf.function."""
    x, y = _data()
    keras.utils.set_random_seed(3)
    dense = keras.layers.Dense(1, name="linear")
    dense.build((None, FEATURES))
    optimizer = keras.optimizers.SGD(0.1)
    writer = tf.summary.create_file_writer(str(tmp_path))

    @tf.function
    def train_step(step: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(dense(x) - y))
        gradients = tape.gradient(loss, dense.trainable_variables)
        with writer.as_default():
            summary = log_step(None, dense.trainable_variables, gradients, step)
        optimizer.apply_gradients(zip(gradients, dense.trainable_variables, strict=True))
        return summary.global_norm

    norms = [float(train_step(tf.constant(step, tf.int64))) for step in range(3)]
    writer.close()
    logs = read_logs(tmp_path)
    assert logs.steps("gradient_norm/global") == [0, 1, 2]
    for step, norm in enumerate(norms):
        assert logs.scalar("gradient_norm/global", step) == pytest.approx(norm, rel=1e-6)
    kernel, bias = (logs.scalars[f"gradient_norm/linear/{name}"][2] for name in ("kernel", "bias"))
    assert math.hypot(kernel, bias) == pytest.approx(norms[2], rel=1e-5)
    assert norms[0] > norms[2]  # plain SGD on a convex loss: the gradient shrinks


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"data": None}, "needs data="),
        ({"data": [np.zeros((2, 2)), np.zeros((2, 1))]}, "must be a batch"),
        ({"data": (np.zeros((2, 2)),)}, "labelled batches"),
        ({"every_n_steps": 0}, "positive integer"),
        ({"every_n_steps": None}, "would never log"),
        ({"writer": object()}, "exactly one of"),
    ],
)
def test_callback_rejects_bad_options(tmp_path: Path, kwargs: dict, message: str) -> None:
    options = {"data": (np.zeros((2, 2)), np.zeros((2, 1)))} | kwargs
    with pytest.raises(InputError, match=message):
        GradientLogger(str(tmp_path), **options)


def test_callback_without_a_loss_says_so(tmp_path: Path) -> None:
    x, y = _data()
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    model.compile(optimizer="adam")  # no loss: the callback is asked before fit's first step
    callback = GradientLogger(str(tmp_path), data=(x[:8], y[:8]))
    callback.set_model(model)
    with pytest.raises(InputError, match="loss_fn="):
        callback.on_train_begin()


def test_log_step_rejects_mismatched_lists() -> None:
    with pytest.raises(InputError, match="one gradient and one name per variable"):
        log_step(None, [tf.Variable([1.0])], [], 0)


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(1).normal(size=(64, 33)),
        np.random.default_rng(2).uniform(-1e30, 1e30, size=1000),
        [2.5] * 7,  # constant: zero-width rows, all counted in the last
        [],  # empty: zero rows
        [1.0, np.nan, 3.0],  # NaN edges, nothing counted
        [1.0, np.inf, 3.0],
        [-np.inf, 1.0, 3.0],
        [1e-300, 2e-300, 0.0],
        [np.float32(3e38), np.float32(-3e38)],
    ],
    ids=["normal", "huge", "constant", "empty", "nan", "inf", "-inf", "tiny", "float32 max"],
)
def test_histogram_buckets_match_tensorboards_own(values: list[float] | np.ndarray) -> None:
    from tensorboard.plugins.histogram.summary_v2 import _buckets

    data = tf.constant(np.asarray(values, dtype=np.float64))
    expected = _buckets(data, tf.constant(30)).numpy()
    np.testing.assert_array_equal(histogram_buckets(data).numpy(), expected)


def test_readme_examples_run_and_write_the_tags(tmp_path: Path) -> None:
    fit_example, loop_example = readme_helper_examples("gradcheck.keras", tmp_path)
    x, y = _data()
    model = _model(dropout=False, run_eagerly=True)
    exec(fit_example, {"model": model, "x_train": x, "y_train": y})
    fit_logs = read_logs(tmp_path / "fit")
    assert fit_logs.steps("gradients/net/hidden/kernel") == [0]
    loop_scope = {
        "model": model,
        "dataset": tf.data.Dataset.from_tensor_slices((x, y)).batch(32),
        "loss_fn": keras.losses.BinaryCrossentropy(),
        "optimizer": keras.optimizers.SGD(0.1),
    }
    exec(loop_example, loop_scope)
    loop_logs = read_logs(tmp_path / "loop")
    assert loop_logs.steps("gradient_norm/global") == [0]
    assert loop_logs.tags_with_prefix("gradients/") == fit_logs.tags_with_prefix("gradients/")
