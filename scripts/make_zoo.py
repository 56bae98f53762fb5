"""A zoo of small real training runs to calibrate gradcheck's verdicts and catch false alarms.

    python scripts/make_zoo.py --out /tmp/zoo                 # every run (a few minutes)
    python scripts/make_zoo.py --out /tmp/zoo --only torch    # one family: torch, tf, keras
    python scripts/make_zoo.py --out /tmp/zoo --runs torch_deep_sigmoid_vanishing
    python scripts/make_zoo.py --out /tmp/zoo2 --seed 1       # fresh seeds, same runs
    python scripts/make_zoo.py --check /tmp/zoo               # analyse and compare

Each run trains a tiny model on synthetic data for seconds on CPU and logs the way people do
by hand: PyTorch ``SummaryWriter.add_histogram(name, p)`` / ``(name + '/grad', p.grad)`` (and
other tag styles), TF2 custom loops with ``tf.summary.histogram(var.name, var)`` and
``'Gradients_' + var.name``, and Keras ``model.fit`` with ``TensorBoard(histogram_freq=1)``
(weights only). Runs cover healthy training of several architectures and optimizers, clipped
training, exploding gradients (into NaN or not), vanishing gradients (deep sigmoid/tanh, dead
ReLU) and frozen layers / BatchNorm. Each run directory gets an ``expected.json`` saying what
gradcheck must and must not find; ``--check`` prints a verdict table and the mismatches.

The zoo is not committed: it is how held-out-style runs can be reproduced. Frameworks are
imported only by the family being generated.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared _training.py

import _training  # noqa: E402
from _training import ce as _ce  # noqa: E402
from _training import mlp as _mlp  # noqa: E402
from _training import mse as _mse  # noqa: E402
from _training import seeded  # noqa: E402
from _training import summary_writer as _writer  # noqa: E402
from _training import tf_module as _tf  # noqa: E402
from _training import torch_module as _torch  # noqa: E402


@dataclass(frozen=True)
class Expect:
    """What gradcheck must find in a run."""

    clean: bool = False  # no parameter flagged at all
    must: tuple[tuple[str, str], ...] = ()  # (verdict, regex on the parameter name) flagged
    must_not: tuple[str, ...] = ()  # verdicts that must not appear anywhere in the run
    clipped: bool | None = None  # ClipInfo.clipped, when it matters
    note: str = ""


@dataclass(frozen=True)
class ZooRun:
    name: str
    family: str  # torch, tf, keras
    make: Callable[[Path], None]
    expect: Expect = field(default_factory=Expect)


ZOO: dict[str, ZooRun] = {}


def zoo_run(
    family: str, expect: Expect
) -> Callable[[Callable[[Path], None]], Callable[[Path], None]]:
    def register(make: Callable[[Path], None]) -> Callable[[Path], None]:
        ZOO[make.__name__] = ZooRun(make.__name__, family, make, expect)
        return make

    return register


HEALTHY = Expect(clean=True)


# ============================================================================================
# PyTorch
# ============================================================================================


def _classification(torch: Any, rows: int = 512, features: int = 20, classes: int = 4) -> tuple:
    generator = torch.Generator().manual_seed(seeded(1))
    x = torch.randn(rows, features, generator=generator)
    teacher = torch.randn(features, classes, generator=generator)
    return x, (x @ teacher).argmax(dim=1)


def _regression(torch: Any, rows: int = 512, features: int = 16, scale: float = 1.0) -> tuple:
    generator = torch.Generator().manual_seed(seeded(2))
    x = torch.randn(rows, features, generator=generator)
    y = torch.tanh(x @ torch.randn(features, 1, generator=generator) / 3) * 3 * scale
    return x, y + 0.05 * torch.randn(rows, 1, generator=generator)


GradStyle = Callable[[str], str]
STYLES: dict[str, tuple[GradStyle, GradStyle]] = {
    "slash": (lambda n: n, lambda n: n + "/grad"),
    "dot": (lambda n: n, lambda n: n + ".grad"),
    "underscore": (lambda n: n, lambda n: n + "_grad"),
    "prefix": (lambda n: "weights/" + n, lambda n: "grads/" + n),
    "params": (lambda n: "params/" + n, lambda n: "gradients/" + n),
}


def _log_torch(
    writer: Any, model: Any, step: int, style: str = "slash", buffers: bool = False
) -> None:
    """What people write by hand: every parameter and its gradient as histograms."""
    weight_tag, grad_tag = STYLES[style]
    for name, parameter in model.named_parameters():
        writer.add_histogram(weight_tag(name), parameter.detach(), step)
        if parameter.grad is not None:
            writer.add_histogram(grad_tag(name), parameter.grad, step)
    if buffers:
        for name, buffer in model.named_buffers():
            if buffer.dtype.is_floating_point:
                writer.add_histogram(weight_tag(name), buffer, step)


def _train_torch(
    log_dir: Path,
    model: Any,
    optimizer: Any,
    data: tuple,
    loss_fn: Callable[[Any, Any], Any],
    steps: int,
    *,
    every: int = 1,
    style: str = "slash",
    batch: int = 64,
    clip: float | None = None,
    log_after_clip: bool = False,
    tensorboardx: bool = False,
    buffers: bool = False,
    spoil: Callable[[int, Any], Any] | None = None,
    stop_on_writer_error: bool = False,
) -> None:
    torch = _torch()
    x, y = data
    generator = torch.Generator().manual_seed(seeded(3))
    writer = _writer(log_dir, tensorboardx)
    for step in range(steps):
        index = torch.randint(0, len(x), (batch,), generator=generator)
        inputs = x[index] if spoil is None else spoil(step, x[index])
        model.zero_grad()
        loss = loss_fn(model(inputs), y[index])
        loss.backward()
        if clip is not None:
            if not log_after_clip and step % every == 0:
                _log_step(writer, model, step, loss, style, buffers, stop_on_writer_error)
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            if log_after_clip and step % every == 0:
                _log_step(writer, model, step, loss, style, buffers, stop_on_writer_error)
        elif step % every == 0 and not _log_step(
            writer, model, step, loss, style, buffers, stop_on_writer_error
        ):
            break
        optimizer.step()
    writer.close()


def _log_step(
    writer: Any, model: Any, step: int, loss: Any, style: str, buffers: bool, stop: bool
) -> bool:
    writer.add_scalar("loss", float(loss.item()), step)
    try:
        _log_torch(writer, model, step, style, buffers)
    except ValueError:
        if stop:  # the script crashes here, as real ones do on non-finite tensors
            return False
        raise
    return True


@zoo_run("torch", HEALTHY)
def torch_mlp_relu_adam_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(0))
    model = _mlp(torch, [20, 64, 64, 4], torch.nn.ReLU)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    _train_torch(log_dir, model, optimizer, _classification(torch), _ce(torch), 200)


def _small_cnn(torch: Any) -> Any:
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3),
        torch.nn.ReLU(),
        torch.nn.Conv2d(8, 16, 3),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(64, 4),
    )


def _images(torch: Any, rows: int = 256) -> tuple:
    generator = torch.Generator().manual_seed(seeded(4))
    y = torch.randint(0, 4, (rows,), generator=generator)
    x = torch.randn(rows, 1, 12, 12, generator=generator) * 0.5
    x[:, 0, :6, :6] += (y == 0).float()[:, None, None]
    x[:, 0, 6:, 6:] += (y == 1).float()[:, None, None]
    x[:, 0, :6, 6:] += (y == 2).float()[:, None, None]
    return x, y


@zoo_run("torch", HEALTHY)
def torch_cnn_sgd_momentum_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(0))
    model = _small_cnn(torch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    _train_torch(
        log_dir, model, optimizer, _images(torch), _ce(torch), 150, style="prefix", batch=32
    )


def _recurrent(torch: Any, cell: str) -> Any:
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = getattr(torch.nn, cell)(8, 32, batch_first=True)
            self.head = torch.nn.Linear(32, 1)

        def forward(self, x: Any) -> Any:
            out, _ = self.rnn(x)
            return self.head(out[:, -1])

    return Model()


def _sequences(torch: Any, rows: int = 256, length: int = 12) -> tuple:
    generator = torch.Generator().manual_seed(seeded(5))
    x = torch.randn(rows, length, 8, generator=generator)
    y = x[:, :, 0].cumsum(dim=1)[:, -1:] / length**0.5
    return x, y


@zoo_run("torch", HEALTHY)
def torch_lstm_adam_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(0))
    model = _recurrent(torch, "LSTM")
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    _train_torch(log_dir, model, optimizer, _sequences(torch), _mse(torch), 150, style="dot")


@zoo_run("torch", HEALTHY)
def torch_gru_sgd_clip_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(1))
    model = _recurrent(torch, "GRU")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    _train_torch(log_dir, model, optimizer, _sequences(torch), _mse(torch), 200, every=4, clip=5.0)


@zoo_run("torch", HEALTHY)
def torch_bn_dropout_rmsprop_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(0))
    model = torch.nn.Sequential(
        torch.nn.Linear(20, 64),
        torch.nn.BatchNorm1d(64),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.3),
        torch.nn.Linear(64, 32),
        torch.nn.BatchNorm1d(32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 4),
    )
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    _train_torch(
        log_dir, model, optimizer, _classification(torch), _ce(torch), 200, style="underscore"
    )


@zoo_run("torch", HEALTHY)
def torch_embedding_adam_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(0))

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = torch.nn.Embedding(2000, 16)
            self.head = torch.nn.Linear(16, 2)

        def forward(self, tokens: Any) -> Any:
            return self.head(self.embedding(tokens).mean(dim=1))

    generator = torch.Generator().manual_seed(seeded(6))
    tokens = torch.randint(0, 2000, (512, 10), generator=generator)
    labels = ((tokens % 7) == 0).sum(dim=1).clamp(max=1)
    model = Model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    _train_torch(log_dir, model, optimizer, (tokens, labels), _ce(torch), 200, style="params")


@zoo_run("torch", HEALTHY)
def torch_converges_to_zero_loss_healthy(log_dir: Path) -> None:
    """Separable data trained long: loss and gradients fall by orders of magnitude together."""
    torch = _torch()
    torch.manual_seed(seeded(0))
    generator = torch.Generator().manual_seed(seeded(7))
    x = torch.randn(256, 10, generator=generator)
    y = (x[:, 0] > 0).long()
    x[:, 0] += torch.where(y == 1, 2.0, -2.0)
    model = _mlp(torch, [10, 32, 2], torch.nn.ReLU)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    _train_torch(log_dir, model, optimizer, (x, y), _ce(torch), 600, every=5)


@zoo_run("torch", HEALTHY)
def torch_early_spikes_healthy(log_dir: Path) -> None:
    """A few outlier batches early on give gradient spikes; training recovers."""
    torch = _torch()
    torch.manual_seed(seeded(2))
    model = _mlp(torch, [20, 64, 4], torch.nn.ReLU)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def spoil(step: int, inputs: Any) -> Any:
        return inputs * 30 if step in (5, 9, 14) else inputs

    _train_torch(log_dir, model, optimizer, _classification(torch), _ce(torch), 200, spoil=spoil)


@zoo_run("torch", HEALTHY)
def torch_sgd_every10_tensorboardx_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(3))
    model = _mlp(torch, [16, 32, 32, 1], torch.nn.Tanh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
    _train_torch(
        log_dir, model, optimizer, _regression(torch), _mse(torch), 400, every=10,
        tensorboardx=True,
    )  # fmt: skip


@zoo_run("torch", HEALTHY)
def torch_residual_layernorm_adamw_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(4))

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(32)
            self.fc = torch.nn.Linear(32, 32)

        def forward(self, x: Any) -> Any:
            return x + self.fc(torch.nn.functional.gelu(self.norm(x)))

    model = torch.nn.Sequential(
        torch.nn.Linear(20, 32), *[Block() for _ in range(6)], torch.nn.Linear(32, 4)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    _train_torch(log_dir, model, optimizer, _classification(torch), _ce(torch), 200, every=5)


@zoo_run(
    "torch",
    Expect(must=(("vanishing", r"^0\.weight$"),), must_not=("exploding", "nan")),
)
def torch_deep_sigmoid_vanishing(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(0))
    model = _mlp(torch, [20] + [32] * 9 + [4], torch.nn.Sigmoid)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    _train_torch(log_dir, model, optimizer, _classification(torch), _ce(torch), 200, every=5)


@zoo_run(
    "torch",
    Expect(must=(("vanishing", r"^0\.weight$"),), must_not=("exploding", "nan")),
)
def torch_deep_tanh_small_init_vanishing(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(1))
    model = _mlp(torch, [20] + [64] * 10 + [4], torch.nn.Tanh)
    with torch.no_grad():
        for module in model:
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(0.0, 0.04)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    _train_torch(
        log_dir, model, optimizer, _classification(torch), _ce(torch), 150, every=3, style="dot"
    )


@zoo_run(
    "torch",
    Expect(must=(("vanishing", r"^0\.weight$"),), must_not=("exploding", "nan")),
)
def torch_dead_relu_vanishing(log_dir: Path) -> None:
    """A large negative bias kills the first ReLU layer: nothing flows back below it."""
    torch = _torch()
    torch.manual_seed(seeded(2))
    model = _mlp(torch, [20, 64, 64, 4], torch.nn.ReLU)
    with torch.no_grad():
        model[2].bias.fill_(-50.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    _train_torch(log_dir, model, optimizer, _classification(torch), _ce(torch), 100, every=2)


@zoo_run("torch", Expect(must=(("nan", r".*"), ("exploding", r".*"))))
def torch_exploding_to_nan(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(0))
    model = _mlp(torch, [16, 64, 64, 1], torch.nn.ReLU)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.08, momentum=0.9)
    _train_torch(
        log_dir, model, optimizer, _regression(torch, scale=30.0), _mse(torch), 120,
        style="prefix", stop_on_writer_error=True,
    )  # fmt: skip


@zoo_run("torch", Expect(must=(("exploding", r".*"),), must_not=("nan",)))
def torch_exploding_no_nan(log_dir: Path) -> None:
    """Plain SGD a bit beyond the stability limit of a linear model: geometric growth."""
    torch = _torch()
    torch.manual_seed(seeded(1))
    model = torch.nn.Sequential(torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1.1)
    _train_torch(log_dir, model, optimizer, _regression(torch), _mse(torch), 60, batch=256)


@zoo_run("torch", Expect(must=(("nan", r".*"),)))
def torch_crash_on_nan(log_dir: Path) -> None:
    """The writer raises on a non-finite histogram (bins='auto'-style): the script stops with
    the NaN loss logged and no histogram for that step."""
    torch = _torch()
    torch.manual_seed(seeded(0))
    model = _mlp(torch, [16, 64, 1], torch.nn.ReLU)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    writer = _writer(log_dir)
    x, y = _regression(torch, scale=50.0)
    for step in range(200):
        model.zero_grad()
        loss = _mse(torch)(model(x[:64]), y[:64])
        loss.backward()
        writer.add_scalar("train/loss", float(loss.item()), step)
        grads = [p.grad for p in model.parameters()] + list(model.parameters())
        if not all(bool(torch.isfinite(g).all()) for g in grads):
            break  # the histogram call raised ValueError: the script died here
        _log_torch(writer, model, step)
        optimizer.step()
    writer.close()


@zoo_run(
    "torch",
    Expect(must=(("static", r"^fc1\."),), must_not=("exploding", "nan", "vanishing")),
)
def torch_frozen_layer(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(0))

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = torch.nn.Linear(20, 64)
            self.fc2 = torch.nn.Linear(64, 64)
            self.fc3 = torch.nn.Linear(64, 4)

        def forward(self, x: Any) -> Any:
            return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))

    model = Model()
    model.fc1.requires_grad_(False)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    _train_torch(log_dir, model, optimizer, _classification(torch), _ce(torch), 150, every=5)


@zoo_run(
    "torch",
    Expect(must=(("static", r"^bn\.(weight|bias)$"),), must_not=("exploding", "nan")),
)
def torch_batchnorm_not_in_optimizer(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(0))

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = torch.nn.Linear(20, 64)
            self.bn = torch.nn.BatchNorm1d(64)
            self.fc2 = torch.nn.Linear(64, 4)

        def forward(self, x: Any) -> Any:
            return self.fc2(torch.relu(self.bn(self.fc1(x))))

    model = Model()
    held = [p for n, p in model.named_parameters() if not n.startswith("bn.")]
    optimizer = torch.optim.Adam(held, lr=1e-3)
    _train_torch(
        log_dir, model, optimizer, _classification(torch), _ce(torch), 150, every=5, buffers=True
    )


@zoo_run("torch", Expect(clean=True, must_not=("exploding",), clipped=True))
def torch_clipped_logged_after_clip(log_dir: Path) -> None:
    """clip_grad_norm_(1.0) far below the natural norm: the logged norm sits at the ceiling."""
    torch = _torch()
    torch.manual_seed(seeded(0))
    model = _mlp(torch, [16, 64, 64, 1], torch.nn.Tanh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    _train_torch(
        log_dir, model, optimizer, _regression(torch, scale=10.0), _mse(torch), 200,
        clip=1.0, log_after_clip=True, every=2,
    )  # fmt: skip


@zoo_run("torch", Expect(clean=True, must_not=("exploding",)))
def torch_clipped_exploding_lr_held(log_dir: Path) -> None:
    """The exploding run's learning rate, held by clip_grad_norm_(0.5): gradients logged
    before clipping, training stays finite."""
    torch = _torch()
    torch.manual_seed(seeded(0))
    model = _mlp(torch, [16, 64, 64, 1], torch.nn.ReLU)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    _train_torch(
        log_dir, model, optimizer, _regression(torch, scale=3.0), _mse(torch), 200,
        clip=0.5, every=2, style="prefix",
    )  # fmt: skip


@zoo_run("torch", HEALTHY)
def torch_linear_bn_sgd_healthy(log_dir: Path) -> None:
    """Linear -> BatchNorm with plain SGD: the Linear bias gets ~zero gradient and never
    moves, by design (BatchNorm removes it)."""
    torch = _torch()
    torch.manual_seed(seeded(5))
    model = torch.nn.Sequential(
        torch.nn.Linear(20, 64),
        torch.nn.BatchNorm1d(64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 4),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    _train_torch(log_dir, model, optimizer, _classification(torch), _ce(torch), 150, every=3)


@zoo_run("torch", HEALTHY)
def torch_fast_initial_drop_healthy(log_dir: Path) -> None:
    """A large initial loss that Adam removes in a few steps: gradients fall 100x early."""
    torch = _torch()
    torch.manual_seed(seeded(6))
    model = _mlp(torch, [16, 32, 1], torch.nn.ReLU)
    with torch.no_grad():
        model[2].bias.fill_(40.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.5)
    _train_torch(log_dir, model, optimizer, _regression(torch), _mse(torch), 150)


@zoo_run("torch", HEALTHY)
def torch_warmup_cosine_sgd_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(7))
    model = _mlp(torch, [20, 128, 64, 4], torch.nn.GELU)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=300)

    class Stepper:  # step the schedule with the optimizer
        def __init__(self) -> None:
            self.param_groups = optimizer.param_groups

        def step(self) -> None:
            optimizer.step()
            schedule.step()

    _train_torch(log_dir, model, Stepper(), _classification(torch), _ce(torch), 300, every=6)


@zoo_run("torch", Expect(must=(("static", r"^backbone\."),), must_not=("exploding", "nan")))
def torch_finetune_frozen_backbone(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(8))

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = _mlp(torch, [20, 64, 64], torch.nn.ReLU)
            self.head = torch.nn.Linear(64, 4)

        def forward(self, x: Any) -> Any:
            return self.head(torch.relu(self.backbone(x)))

    model = Model()
    optimizer = torch.optim.Adam(model.head.parameters(), lr=1e-3)  # backbone not optimised
    _train_torch(log_dir, model, optimizer, _classification(torch), _ce(torch), 120, every=4)


@zoo_run("torch", Expect(must=(("exploding", r".*"),), must_not=("vanishing",)))
def torch_exploding_gradual_to_nan(log_dir: Path) -> None:
    """Momentum SGD slightly past stability: the norm climbs over tens of steps."""
    torch = _torch()
    torch.manual_seed(seeded(9))
    model = _mlp(torch, [16, 64, 64, 1], torch.nn.Tanh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.15, momentum=0.9)
    _train_torch(
        log_dir, model, optimizer, _regression(torch), _mse(torch), 150, every=2,
        stop_on_writer_error=True,
    )  # fmt: skip


# ============================================================================================
# TensorFlow 2 custom loops (the seed question's logging)
# ============================================================================================


def _tf_classification(tf: Any, rows: int = 512, features: int = 20, classes: int = 4) -> tuple:
    import numpy as np

    rng = np.random.default_rng(seeded(11))
    x = rng.normal(size=(rows, features)).astype("float32")
    y = (x @ rng.normal(size=(features, classes))).argmax(axis=1)
    return tf.constant(x), tf.constant(y)


def _np_images(seed: int, rows: int) -> tuple:
    """12x12 noise images in 3 classes: class 0 brighter top-left, 1 bottom-right, 2 neither."""
    import numpy as np

    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=rows)
    x = rng.normal(size=(rows, 12, 12, 1)).astype("float32") * 0.5
    x[y == 0, :6, :6] += 1
    x[y == 1, 6:, 6:] += 1
    return x, y


def _dense_variables(tf: Any, sizes: list[int], init_std: float | None = None) -> list:
    variables = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        std = init_std if init_std is not None else (2.0 / (a + b)) ** 0.5
        variables.append(
            tf.Variable(tf.random.normal([a, b], stddev=std), name=f"dense_{i}/kernel")
        )
        variables.append(tf.Variable(tf.zeros([b]), name=f"dense_{i}/bias"))
    return variables


def _dense_forward(tf: Any, variables: list, x: Any, activation: Callable) -> Any:
    pairs = list(zip(variables[0::2], variables[1::2], strict=True))
    for i, (kernel, bias) in enumerate(pairs):
        x = x @ kernel + bias
        if i < len(pairs) - 1:
            x = activation(x)
    return x


def _tf_loop(
    log_dir: Path,
    variables: list,
    forward: Callable[[Any], Any],
    loss_fn: Callable[[Any, Any], Any],
    data: tuple,
    optimizer: Any,
    steps: int,
    *,
    every: int = 1,
    trainable: list | None = None,
    clip_global: float | None = None,
) -> None:
    """The seed question's loop: tf.summary.histogram(var.name, var) and 'Gradients_'+name."""
    tf = _tf()
    x, y = data
    trainable = variables if trainable is None else trainable
    writer = tf.summary.create_file_writer(str(log_dir))
    rng = tf.random.Generator.from_seed(seeded(5))
    with writer.as_default():
        for step in range(steps):
            index = rng.uniform([64], 0, int(x.shape[0]), dtype=tf.int64)
            with tf.GradientTape() as tape:
                loss = loss_fn(forward(tf.gather(x, index)), tf.gather(y, index))
            gradients = tape.gradient(loss, trainable)
            if clip_global is not None:
                gradients, _ = tf.clip_by_global_norm(gradients, clip_global)
            if step % every == 0:
                tf.summary.scalar("loss", loss, step=step)
                for var in variables:
                    tf.summary.histogram(var.name, var, step=step)
                for var, gradient in zip(trainable, gradients, strict=True):
                    tf.summary.histogram("Gradients_" + var.name, gradient, step=step)
            optimizer.apply_gradients(zip(gradients, trainable, strict=True))
    writer.close()


def _sparse_ce(tf: Any) -> Callable:
    def loss(logits: Any, labels: Any) -> Any:
        return tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )

    return loss


@zoo_run("tf", HEALTHY)
def tf_loop_mlp_adam_healthy(log_dir: Path) -> None:
    tf = _tf()
    variables = _dense_variables(tf, [20, 64, 64, 4])
    _tf_loop(
        log_dir, variables, lambda x: _dense_forward(tf, variables, x, tf.nn.relu),
        _sparse_ce(tf), _tf_classification(tf), tf.keras.optimizers.Adam(1e-3), 150,
    )  # fmt: skip


@zoo_run("tf", HEALTHY)
def tf_loop_keras_layers_name_collisions_healthy(log_dir: Path) -> None:
    """Keras 3 variables are named 'kernel'/'bias': var.name collides across layers."""
    tf = _tf()
    model = tf.keras.Sequential(
        [
            tf.keras.Input((20,)),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(32, activation="relu"),
            tf.keras.layers.Dense(4),
        ]
    )
    _tf_loop(
        log_dir, model.trainable_variables, lambda x: model(x, training=True), _sparse_ce(tf),
        _tf_classification(tf), tf.keras.optimizers.RMSprop(1e-3), 120, every=2,
    )  # fmt: skip


@zoo_run("tf", HEALTHY)
def tf_loop_cnn_sgd_every5_healthy(log_dir: Path) -> None:
    tf = _tf()
    x, y = _np_images(seeded(12), 256)
    model = tf.keras.Sequential(
        [
            tf.keras.Input((12, 12, 1)),
            tf.keras.layers.Conv2D(8, 3, activation="relu", name="conv_a"),
            tf.keras.layers.Conv2D(16, 3, activation="relu", name="conv_b"),
            tf.keras.layers.GlobalAveragePooling2D(),
            tf.keras.layers.Dense(3, name="head"),
        ]
    )
    variables = model.trainable_variables
    names = {id(v): v.path for v in variables}

    class Named:  # log by variable path, as many custom loops do with Keras 3
        def __init__(self, var: Any) -> None:
            self.var, self.name = var, names[id(var)]

    _tf_loop_named(
        log_dir, [Named(v) for v in variables], lambda x: model(x, training=True),
        _sparse_ce(tf), (tf.constant(x), tf.constant(y)),
        tf.keras.optimizers.SGD(0.05, momentum=0.9), 150, every=5,
    )  # fmt: skip


def _tf_loop_named(
    log_dir: Path,
    named: list,
    forward: Callable,
    loss_fn: Callable,
    data: tuple,
    optimizer: Any,
    steps: int,
    every: int,
) -> None:
    """Like _tf_loop, with ``name/histogram``-free names taken from ``Named`` wrappers."""
    tf = _tf()
    x, y = data
    variables = [n.var for n in named]
    writer = tf.summary.create_file_writer(str(log_dir))
    rng = tf.random.Generator.from_seed(seeded(6))
    with writer.as_default():
        for step in range(steps):
            index = rng.uniform([32], 0, int(x.shape[0]), dtype=tf.int64)
            with tf.GradientTape() as tape:
                loss = loss_fn(forward(tf.gather(x, index)), tf.gather(y, index))
            gradients = tape.gradient(loss, variables)
            if step % every == 0:
                tf.summary.scalar("train/loss", loss, step=step)
                for item, gradient in zip(named, gradients, strict=True):
                    tf.summary.histogram(item.name, item.var, step=step)
                    tf.summary.histogram(item.name + "/gradient", gradient, step=step)
            optimizer.apply_gradients(zip(gradients, variables, strict=True))
    writer.close()


@zoo_run("tf", Expect(must=(("vanishing", r"^dense_0/kernel$"),), must_not=("exploding", "nan")))
def tf_loop_deep_sigmoid_vanishing(log_dir: Path) -> None:
    tf = _tf()
    variables = _dense_variables(tf, [20] + [32] * 8 + [4], init_std=0.2)
    _tf_loop(
        log_dir, variables, lambda x: _dense_forward(tf, variables, x, tf.nn.sigmoid),
        _sparse_ce(tf), _tf_classification(tf), tf.keras.optimizers.SGD(0.5), 200, every=10,
    )  # fmt: skip


@zoo_run("tf", Expect(must=(("nan", r".*"), ("exploding", r".*"))))
def tf_loop_exploding_to_nan(log_dir: Path) -> None:
    import numpy as np

    tf = _tf()
    rng = np.random.default_rng(seeded(13))
    x = rng.normal(size=(512, 16)).astype("float32")
    y = (np.tanh(x @ rng.normal(size=(16, 1)) / 3) * 60).astype("float32")
    variables = _dense_variables(tf, [16, 64, 64, 1])
    _tf_loop(
        log_dir, variables, lambda x: _dense_forward(tf, variables, x, tf.nn.relu),
        lambda p, t: tf.reduce_mean((p - t) ** 2), (tf.constant(x), tf.constant(y)),
        tf.keras.optimizers.SGD(0.05, momentum=0.9), 80,
    )  # fmt: skip


@zoo_run("tf", Expect(clean=True, must_not=("exploding",)))
def tf_loop_clip_by_global_norm_healthy(log_dir: Path) -> None:
    """Gradients logged after tf.clip_by_global_norm(0.5): bucket-estimated norms."""
    tf = _tf()
    variables = _dense_variables(tf, [20, 64, 64, 4])
    _tf_loop(
        log_dir, variables, lambda x: _dense_forward(tf, variables, x, tf.nn.relu),
        _sparse_ce(tf), _tf_classification(tf), tf.keras.optimizers.SGD(0.1), 150, every=2,
        clip_global=0.5,
    )  # fmt: skip


@zoo_run(
    "tf",
    Expect(must=(("static", r"^dense_1/kernel$"),), must_not=("exploding", "nan", "vanishing")),
)
def tf_loop_variable_left_out(log_dir: Path) -> None:
    """One layer's variables are left out of the list the tape and optimizer get."""
    tf = _tf()
    variables = _dense_variables(tf, [20, 64, 64, 4])
    trainable = [v for v in variables if not v.name.startswith("dense_1/")]
    _tf_loop(
        log_dir, variables, lambda x: _dense_forward(tf, variables, x, tf.nn.relu),
        _sparse_ce(tf), _tf_classification(tf), tf.keras.optimizers.Adam(1e-3), 120,
        every=4, trainable=trainable,
    )  # fmt: skip


# ============================================================================================
# Keras model.fit with the TensorBoard callback (weight histograms only)
# ============================================================================================


def _keras_fit(
    log_dir: Path, model: Any, data: tuple, loss: str, optimizer: Any, epochs: int = 8
) -> None:
    tf = _tf()
    x, y = data
    model.compile(optimizer=optimizer, loss=loss)
    callback = tf.keras.callbacks.TensorBoard(str(log_dir), histogram_freq=1)
    model.fit(x, y, epochs=epochs, batch_size=32, verbose=0, callbacks=[callback])


def _np_classification(rows: int = 1024, features: int = 20, classes: int = 4) -> tuple:
    import numpy as np

    rng = np.random.default_rng(seeded(21))
    x = rng.normal(size=(rows, features)).astype("float32")
    return x, (x @ rng.normal(size=(features, classes))).argmax(axis=1)


@zoo_run("keras", HEALTHY)
def keras_fit_mlp_bn_dropout_healthy(log_dir: Path) -> None:
    tf = _tf()
    layers = tf.keras.layers
    model = tf.keras.Sequential(
        [
            tf.keras.Input((20,)),
            layers.Dense(64, activation="relu"),
            layers.BatchNormalization(),
            layers.Dropout(0.3),
            layers.Dense(32, activation="relu"),
            layers.Dense(4),
        ]
    )
    _keras_fit(
        log_dir, model, _np_classification(),
        tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        tf.keras.optimizers.Adam(1e-3),
    )  # fmt: skip


@zoo_run(
    "keras",
    Expect(
        must=(("static", r"frozen_dense/kernel"), ("static", r"frozen_bn/gamma")),
        must_not=("exploding", "nan", "vanishing"),
    ),
)
def keras_fit_frozen_dense_and_bn(log_dir: Path) -> None:
    tf = _tf()
    layers = tf.keras.layers
    frozen = layers.Dense(64, activation="relu", name="frozen_dense")
    frozen_bn = layers.BatchNormalization(name="frozen_bn")
    frozen.trainable = False
    frozen_bn.trainable = False
    model = tf.keras.Sequential(
        [
            tf.keras.Input((20,)),
            frozen,
            frozen_bn,
            layers.Dense(32, activation="relu"),
            layers.Dense(4),
        ]
    )
    _keras_fit(
        log_dir, model, _np_classification(),
        tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        tf.keras.optimizers.SGD(0.05, momentum=0.9),
    )  # fmt: skip


@zoo_run("keras", Expect(must=(("nan", r".*"),)))
def keras_fit_exploding_to_nan(log_dir: Path) -> None:
    import numpy as np

    tf = _tf()
    rng = np.random.default_rng(seeded(22))
    x = rng.normal(size=(1024, 16)).astype("float32")
    y = (x @ rng.normal(size=(16, 1)) * 100).astype("float32")
    model = tf.keras.Sequential(
        [
            tf.keras.Input((16,)),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(1),
        ]
    )
    _keras_fit(log_dir, model, (x, y), "mse", tf.keras.optimizers.SGD(0.05, momentum=0.9), 6)


@zoo_run("keras", HEALTHY)
def keras_fit_lstm_healthy(log_dir: Path) -> None:
    import numpy as np

    tf = _tf()
    rng = np.random.default_rng(seeded(23))
    x = rng.normal(size=(512, 12, 8)).astype("float32")
    y = x[:, :, 0].sum(axis=1, keepdims=True) / 12**0.5
    model = tf.keras.Sequential(
        [tf.keras.Input((12, 8)), tf.keras.layers.LSTM(32), tf.keras.layers.Dense(1)]
    )
    _keras_fit(log_dir, model, (x, y), "mse", tf.keras.optimizers.Adam(3e-3), 8)


@zoo_run("keras", HEALTHY)
def keras_fit_cnn_clipnorm_healthy(log_dir: Path) -> None:
    tf = _tf()
    x, y = _np_images(seeded(24), 512)
    model = tf.keras.Sequential(
        [
            tf.keras.Input((12, 12, 1)),
            tf.keras.layers.Conv2D(8, 3, activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(16, 3, activation="relu"),
            tf.keras.layers.GlobalAveragePooling2D(),
            tf.keras.layers.Dense(3),
        ]
    )
    _keras_fit(
        log_dir, model, (x, y), tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        tf.keras.optimizers.SGD(0.05, momentum=0.9, clipnorm=1.0), 8,
    )  # fmt: skip


@zoo_run("keras", HEALTHY)
def keras_fit_embedding_healthy(log_dir: Path) -> None:
    import numpy as np

    tf = _tf()
    rng = np.random.default_rng(seeded(25))
    tokens = rng.integers(0, 3000, size=(1024, 10))
    labels = ((tokens % 7) == 0).any(axis=1).astype("int32")
    model = tf.keras.Sequential(
        [
            tf.keras.Input((10,), dtype="int32"),
            tf.keras.layers.Embedding(3000, 16),
            tf.keras.layers.GlobalAveragePooling1D(),
            tf.keras.layers.Dense(2),
        ]
    )
    _keras_fit(
        log_dir, model, (tokens, labels),
        tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        tf.keras.optimizers.Adam(1e-2), 8,
    )  # fmt: skip


@zoo_run("keras", HEALTHY)
def keras_fit_dense_bn_sgd_healthy(log_dir: Path) -> None:
    tf = _tf()
    layers = tf.keras.layers
    model = tf.keras.Sequential(
        [
            tf.keras.Input((20,)),
            layers.Dense(64),
            layers.BatchNormalization(),
            layers.Activation("relu"),
            layers.Dense(4),
        ]
    )
    _keras_fit(
        log_dir, model, _np_classification(),
        tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        tf.keras.optimizers.SGD(0.05), 6,
    )  # fmt: skip


@zoo_run("keras", HEALTHY)
def keras_fit_gru_rmsprop_two_epochs_healthy(log_dir: Path) -> None:
    import numpy as np

    tf = _tf()
    rng = np.random.default_rng(seeded(26))
    x = rng.normal(size=(256, 10, 4)).astype("float32")
    y = (x[:, :, 0].sum(axis=1) > 0).astype("int32")
    model = tf.keras.Sequential(
        [tf.keras.Input((10, 4)), tf.keras.layers.GRU(16), tf.keras.layers.Dense(2)]
    )
    _keras_fit(
        log_dir, model, (x, y), tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        tf.keras.optimizers.RMSprop(1e-3), 2,
    )  # fmt: skip


@zoo_run("tf", Expect(must=(("vanishing", r"^dense_0/kernel$"),), must_not=("exploding",)))
def tf_loop_dead_relu_vanishing(log_dir: Path) -> None:
    tf = _tf()
    variables = _dense_variables(tf, [20, 64, 64, 4])
    variables[3].assign(tf.fill([64], -40.0))  # dense_1/bias kills the second ReLU layer
    _tf_loop(
        log_dir, variables, lambda x: _dense_forward(tf, variables, x, tf.nn.relu),
        _sparse_ce(tf), _tf_classification(tf), tf.keras.optimizers.SGD(0.01), 60, every=3,
    )  # fmt: skip


# ============================================================================================
# Generation and checking
# ============================================================================================


def generate(out: Path, names: list[str]) -> None:
    _training.generate(out, [(n, ZOO[n].make, ZOO[n].expect) for n in names])


def check(zoo: Path) -> int:
    """Analyse every run under ``zoo`` and compare with its expected.json; mismatches count."""
    from gradcheck.events.discover import discover
    from gradcheck.events.reader import read_run
    from gradcheck.series.reduce import reduce_records
    from gradcheck.verdicts.detect import analyze_run

    failures = 0
    for expected_file in sorted(zoo.glob("*/expected.json")):
        expect = Expect(**{k: _tuples(v) for k, v in json.loads(expected_file.read_text()).items()})
        reports = [
            analyze_run(reduce_records(read_run(r))) for r in discover([str(expected_file.parent)])
        ]
        problems = _mismatches(expect, reports)
        failures += bool(problems)
        flagged = [
            f"{layer.verdict}:{layer.name}@{layer.first_bad_step}"
            for r in reports
            for layer in r.layers
            if layer.verdict != "ok"
        ]
        status = "FAIL" if problems else "ok  "
        print(f"{status} {expected_file.parent.name}: {len(flagged)} flagged {flagged[:6]}")
        for problem in problems:
            print(f"       {problem}")
    return failures


def _tuples(value: Any) -> Any:
    return (
        tuple(tuple(v) if isinstance(v, list) else v for v in value)
        if isinstance(value, list)
        else value
    )


def _mismatches(expect: Expect, reports: list) -> list[str]:
    layers = [layer for report in reports for layer in report.layers]
    flagged = [layer for layer in layers if layer.verdict != "ok"]
    problems = []
    if expect.clean:
        problems += [f"unexpected {x.verdict} on {x.name}: {x.evidence}" for x in flagged]
    for verdict, pattern in expect.must:
        if not any(verdict in x.flags and re.search(pattern, x.name) for x in layers):
            problems.append(f"missing {verdict} on a parameter matching {pattern!r}")
    if not expect.clean:
        problems += [
            f"forbidden {verdict} on {x.name}: {x.evidence}"
            for verdict in expect.must_not
            for x in layers
            if verdict in x.flags
        ]
    if expect.clipped is not None:
        clipped = [r.clipping.clipped for r in reports if r.clipping is not None]
        if not clipped or clipped != [expect.clipped] * len(clipped):
            problems.append(f"clipped is {clipped}, expected {expect.clipped}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="directory to write the runs to")
    parser.add_argument("--only", choices=("torch", "tf", "keras"), help="one family")
    parser.add_argument("--runs", nargs="*", default=None, help="run names to generate")
    parser.add_argument("--check", type=Path, help="analyse a zoo and compare with expected.json")
    parser.add_argument("--list", action="store_true", help="list the runs")
    parser.add_argument(
        "--seed", type=int, default=0, help="shift every random seed (0: the usual runs)"
    )
    args = parser.parse_args()
    _training.SEED_SHIFT = args.seed
    if args.list:
        for run in ZOO.values():
            print(f"{run.family:6s} {run.name}")
        return 0
    if args.check:
        return 1 if check(args.check) else 0
    if args.out is None:
        parser.error("--out or --check is required")
    names = args.runs or [n for n, r in ZOO.items() if args.only in (None, r.family)]
    unknown = [n for n in names if n not in ZOO]
    if unknown:
        parser.error(f"unknown runs: {', '.join(unknown)}")
    generate(args.out, names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
