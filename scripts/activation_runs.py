"""Real runs whose layers' outputs are logged as activation histograms (issue 35), written by
the real writers in seconds each, for tests/verdicts/real/test_activations_real.py:

- ``torch_relu_dies``: a ReLU MLP, forward hooks writing ``activations/<layer>``; one batch of
  corrupt targets (-400 where they lie within about ±5) at step 40 drives ``fc2``'s
  pre-activations below zero for good: ``relu2`` dies, ``relu1`` stays about half zeros;
- ``torch_tanh_saturated``: a tanh MLP initialised 40 times too large, hooks writing
  ``<layer>/output``: its hidden layers sit at -1 and 1;
- ``torch_healthy_cnn``: a small CNN trained well, hooks writing ``act/<layer>``;
- ``keras_callback``: a Keras model with a callback writing ``<layer>/activations``
  (``tf.summary.histogram``, TF2's 30 even buckets) every few batches: ``dense_dead``'s bias
  starts at -3 (its units never fire), ``dense_ok`` is healthy;
- ``tf1_name_scopes``: a TF1 graph (``tf.compat.v1``) with ``tf.summary.histogram
  ('activations', h)`` under name scopes ``layer1`` (ReLU, healthy) and ``layer2`` (sigmoid
  initialised 60 times too large: saturated).

``python scripts/activation_runs.py DIR`` writes them all under DIR.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def _hooks(model, writer, tag: Callable[[str], str], step: list[int], kinds: tuple) -> dict:  # noqa: ANN001
    """A forward hook on each module of ``kinds`` writing its output's histogram; returns the
    exact shares it saw, ``{layer: [[step, exact zeros, |x| >= 0.96], ...]}``."""
    truth: dict[str, list[list[float]]] = {}
    for name, module in model.named_modules():
        if isinstance(module, kinds):

            def hook(_module, _inputs, output, name=name):  # noqa: ANN001, ANN202
                values = output.detach()
                writer.add_histogram(tag(name), values, step[0])
                zeros = float((values.abs() <= 1e-12).float().mean())
                bounds = float((values.abs() >= 0.96).float().mean())
                truth.setdefault(name, []).append([step[0], zeros, bounds])

            module.register_forward_hook(hook)
    return truth


def _save_truth(path: Path, truth: dict) -> None:
    """The exact shares beside the event file (discovery reads event files only)."""
    (path / "truth.json").write_text(json.dumps(truth))


def torch_relu_dies(root: Path, steps: int = 80, corrupt_at: int = 40) -> Path:
    import torch
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(0)
    model = torch.nn.Sequential()
    model.add_module("fc1", torch.nn.Linear(16, 64))
    model.add_module("relu1", torch.nn.ReLU())
    model.add_module("fc2", torch.nn.Linear(64, 64))
    model.add_module("relu2", torch.nn.ReLU())
    model.add_module("head", torch.nn.Linear(64, 1))
    with torch.no_grad():  # every unit of relu2 feeds the output with a positive weight
        model.head.weight.abs_()
    inputs = torch.randn(256, 16)
    targets = inputs[:, :4].sum(dim=1, keepdim=True)
    path = root / "torch_relu_dies"
    writer = SummaryWriter(str(path))
    step = [0]
    truth = _hooks(model, writer, lambda name: f"activations/{name}", step, (torch.nn.ReLU,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for at in range(steps):
        step[0] = at
        batch = torch.randint(0, 256, (64,))
        wanted = targets[batch] if at != corrupt_at else torch.full((64, 1), -400.0)
        loss = torch.nn.functional.mse_loss(model(inputs[batch]), wanted)
        optimizer.zero_grad()
        loss.backward()
        writer.add_scalar("loss", loss.item(), at)
        optimizer.step()
    writer.close()
    _save_truth(path, truth)
    return path


def torch_tanh_saturated(root: Path, steps: int = 40) -> Path:
    import torch
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(1)
    model = torch.nn.Sequential()
    model.add_module("fc1", torch.nn.Linear(16, 64))
    model.add_module("tanh1", torch.nn.Tanh())
    model.add_module("fc2", torch.nn.Linear(64, 64))
    model.add_module("tanh2", torch.nn.Tanh())
    model.add_module("head", torch.nn.Linear(64, 1))
    with torch.no_grad():
        for layer in (model.fc1, model.fc2):
            layer.weight.mul_(40.0)
    inputs = torch.randn(256, 16)
    targets = torch.tanh(inputs[:, :4].sum(dim=1, keepdim=True))
    path = root / "torch_tanh_saturated"
    writer = SummaryWriter(str(path))
    step = [0]
    kinds = (torch.nn.Tanh, torch.nn.Linear)
    truth = _hooks(model, writer, lambda name: f"{name}/output", step, kinds)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for at in range(steps):
        step[0] = at
        batch = torch.randint(0, 256, (64,))
        loss = torch.nn.functional.mse_loss(model(inputs[batch]), targets[batch])
        optimizer.zero_grad()
        loss.backward()
        writer.add_scalar("loss", loss.item(), at)
        optimizer.step()
    writer.close()
    _save_truth(path, truth)
    return path


def torch_healthy_cnn(root: Path, steps: int = 60) -> Path:
    import torch
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(2)
    model = torch.nn.Sequential()
    model.add_module("conv1", torch.nn.Conv2d(1, 8, 3, padding=1))
    model.add_module("relu1", torch.nn.ReLU())
    model.add_module("pool", torch.nn.MaxPool2d(2))
    model.add_module("conv2", torch.nn.Conv2d(8, 16, 3, padding=1))
    model.add_module("relu2", torch.nn.ReLU())
    model.add_module("flatten", torch.nn.Flatten())
    model.add_module("fc", torch.nn.Linear(16 * 6 * 6, 32))
    model.add_module("relu3", torch.nn.ReLU())
    model.add_module("classifier", torch.nn.Linear(32, 3))
    model.add_module("softmax", torch.nn.Softmax(dim=1))
    # three classes of 12x12 images: a bright row, a bright column, a bright diagonal
    labels = torch.randint(0, 3, (384,))
    images = 0.3 * torch.randn(384, 1, 12, 12)
    for index, label in enumerate(labels.tolist()):
        where = torch.randint(2, 10, ()).item()
        if label == 0:
            images[index, 0, where, :] += 1.0
        elif label == 1:
            images[index, 0, :, where] += 1.0
        else:
            images[index, 0].diagonal().add_(1.0)
    path = root / "torch_healthy_cnn"
    writer = SummaryWriter(str(path))
    step = [0]
    kinds = (torch.nn.ReLU, torch.nn.Softmax)
    truth = _hooks(model, writer, lambda name: f"act/{name}", step, kinds)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for at in range(steps):
        step[0] = at
        batch = torch.randint(0, 384, (64,))
        probabilities = model(images[batch])
        loss = torch.nn.functional.nll_loss(torch.log(probabilities + 1e-9), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        writer.add_scalar("loss", loss.item(), at)
        optimizer.step()
    writer.close()
    _save_truth(path, truth)
    return path


def keras_callback(root: Path, epochs: int = 4) -> Path:
    import numpy as np
    import tensorflow as tf

    keras = tf.keras
    tf.random.set_seed(3)
    rng = np.random.default_rng(3)
    inputs = rng.normal(size=(512, 16)).astype("float32")
    labels = (inputs[:, 0] > 0).astype("int64") + (inputs[:, 1] > 0).astype("int64")
    model = keras.Sequential(
        [
            keras.Input(shape=(16,)),
            keras.layers.Dense(32, activation="relu", name="dense_ok"),
            keras.layers.Dense(
                32,
                activation="relu",
                name="dense_dead",
                bias_initializer=keras.initializers.Constant(-1.5),
            ),
            keras.layers.Dense(3, activation="softmax", name="probs"),
        ]
    )
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy")
    features = keras.Model(model.inputs, [layer.output for layer in model.layers])
    path = root / "keras_callback"
    writer = tf.summary.create_file_writer(str(path))
    probe = tf.constant(inputs[:128])

    class ActivationLogger(keras.callbacks.Callback):
        """Every 4th batch, each Dense layer's outputs on a fixed batch, as histograms."""

        def __init__(self) -> None:
            super().__init__()
            self.step = 0
            self.truth: dict[str, list[list[float]]] = {}

        def on_train_batch_end(self, batch, logs=None):  # noqa: ANN001, ANN201
            if self.step % 4 == 0:
                with writer.as_default():
                    for layer, values in zip(model.layers, features(probe), strict=True):
                        tf.summary.histogram(f"{layer.name}/activations", values, step=self.step)
                        zeros = float(np.mean(np.abs(values.numpy()) <= 1e-12))
                        self.truth.setdefault(layer.name, []).append([self.step, zeros])
            self.step += 1

    logger = ActivationLogger()
    model.fit(inputs, labels, batch_size=32, epochs=epochs, verbose=0, callbacks=[logger])
    writer.close()
    _save_truth(path, logger.truth)
    return path


def tf1_name_scopes(root: Path, steps: int = 40) -> Path:
    import numpy as np
    import tensorflow as tf

    v1 = tf.compat.v1
    path = root / "tf1_name_scopes"
    rng = np.random.default_rng(4)
    data = rng.normal(size=(256, 16)).astype("float32")
    targets = data[:, :1] * 0.5
    with tf.Graph().as_default():
        v1.set_random_seed(4)
        x = v1.placeholder(tf.float32, [None, 16])
        y = v1.placeholder(tf.float32, [None, 1])
        with v1.name_scope("layer1"):
            weights = tf.Variable(v1.truncated_normal([16, 32], stddev=0.25))
            hidden = tf.nn.relu(tf.matmul(x, weights) + tf.Variable(tf.fill([32], 0.1)))
            v1.summary.histogram("activations", hidden)
        with v1.name_scope("layer2"):  # initialised 60 times too large: saturated
            weights = tf.Variable(v1.truncated_normal([32, 32], stddev=60 * 0.25))
            squashed = tf.sigmoid(tf.matmul(hidden, weights) + tf.Variable(tf.zeros([32])))
            v1.summary.histogram("activations", squashed)
        with v1.name_scope("output"):
            weights = tf.Variable(v1.truncated_normal([32, 1], stddev=0.1))
            prediction = tf.matmul(squashed, weights) + tf.Variable(tf.zeros([1]))
            v1.summary.histogram("activations", prediction)
        loss = tf.reduce_mean(tf.square(prediction - y))
        v1.summary.scalar("loss", loss)
        train = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
        summaries = v1.summary.merge_all()
        writer = v1.summary.FileWriter(str(path))
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            for step in range(steps):
                rows = rng.integers(0, 256, 64)
                feed = {x: data[rows], y: targets[rows]}
                summary, _ = session.run([summaries, train], feed_dict=feed)
                writer.add_summary(summary, step)
        writer.close()
    return path


TF_RUNS = {"keras_callback": keras_callback, "tf1_name_scopes": tf1_name_scopes}

TORCH_RUNS = {
    "torch_relu_dies": torch_relu_dies,
    "torch_tanh_saturated": torch_tanh_saturated,
    "torch_healthy_cnn": torch_healthy_cnn,
}


def write_torch_runs(root: Path) -> dict[str, Path]:
    return {name: make(root) for name, make in TORCH_RUNS.items()}


def write_tf_runs(root: Path) -> dict[str, Path]:
    return {name: make(root) for name, make in TF_RUNS.items()}


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "activation_runs")
    for name, made in {**write_torch_runs(target), **write_tf_runs(target)}.items():
        print(name, made)
