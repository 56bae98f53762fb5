"""A held-out set of small real training runs, different from the zoo, to judge gradcheck.

    python scripts/make_heldout.py --out /tmp/heldout              # every run (a few minutes)
    python scripts/make_heldout.py --out /tmp/heldout --only torch # one family: torch, tf, keras
    python scripts/make_heldout.py --out /tmp/heldout --runs NAME  # some runs
    python scripts/make_heldout.py --out /tmp/heldout2 --seed 1     # fresh seeds, same runs
    gradcheck analyze /tmp/heldout --format json --fail-on none -o /tmp/heldout.json
    python scripts/make_heldout.py --score /tmp/heldout.json --runs-dir /tmp/heldout

``scripts/make_zoo.py`` calibrated the verdicts; these runs vary what it does not: other
architectures (autoencoders, a char-LSTM, LayerNorm stacks, embeddings bags, conv
autoencoders), activations (GELU, ELU, LeakyReLU, tanh), inits, optimizers (AdamW, Adagrad,
SGD+Nesterov, RMSprop), schedules (warm-up, cosine, step jumps), batch sizes, logging every
step / every 10 / per epoch, run lengths of 5 to 500 logged steps, and the tag styles people
use (``var.name`` + ``'Gradients_' + var.name``, ``grads/<name>``, ``<name>/gradient``,
Keras 3 ``var.path``, ``<name>.grad``, ``weights/<name>``, Keras ``TensorBoard`` callback,
gradcheck's helpers). Pathologies have their ground truth by construction (a learning rate
jump at a known step, a division by zero at a known step, a layer left out of the optimizer).

Each run directory gets ``expected.json``:

- ``must``: ``[verdict, regex, "all" | "any"]``: every (or at least one) parameter whose name
  matches carries the verdict among its flags; a parameter without it is a miss.
- ``allow``: ``[verdict, regex]``: flags that are not wrong (ambiguous by construction, e.g.
  ``exploding`` next to ``nan`` after a blow-up). Any other flag is a false alarm.
- ``onset``: ``[verdict, regex, first, last]``: where the trouble of the matching flagged
  parameters began (the earliest of their ``onsets``: a NaN after an explosion began with the
  explosion) lies in ``[first, last]`` (the known onset, widened by the logging interval).
- ``clipped``: the run's ``clipping.clipped`` when it matters.

Frameworks are imported only by the family being generated.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
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
from _training import summary_writer as _summary_writer  # noqa: E402
from _training import tf_module as _tf  # noqa: E402
from _training import torch_module as _torch  # noqa: E402

QUIET = ("nan", "exploding", "vanishing", "static")


@dataclass(frozen=True)
class Truth:
    """The ground truth of one run (see the module docstring)."""

    healthy: bool = True
    must: tuple[tuple[str, str, str], ...] = ()
    allow: tuple[tuple[str, str], ...] = ()
    onset: tuple[tuple[str, str, int, int], ...] = ()
    clipped: bool | None = None
    note: str = ""


@dataclass(frozen=True)
class HeldOutRun:
    name: str
    family: str
    make: Callable[[Path], None]
    truth: Truth = field(default_factory=Truth)


RUNS: dict[str, HeldOutRun] = {}


def held_out(
    family: str, truth: Truth
) -> Callable[[Callable[[Path], None]], Callable[[Path], None]]:
    def register(make: Callable[[Path], None]) -> Callable[[Path], None]:
        RUNS[make.__name__] = HeldOutRun(make.__name__, family, make, truth)
        return make

    return register


HEALTHY = Truth()
BLOW_UP_ALLOWED = (("exploding", ".*"), ("nan", ".*"))


def _nan_from(first: int, last: int, note: str) -> Truth:
    """A blow-up into NaN: every parameter goes NaN, first flagged in [first, last]."""
    return Truth(
        healthy=False,
        must=(("nan", ".*", "all"),),
        allow=BLOW_UP_ALLOWED,
        onset=(("nan", ".*", first, last),),
        note=note,
    )


# ============================================================================================
# PyTorch
# ============================================================================================


TorchTags = tuple[Callable[[str], str], Callable[[str], str]]
TORCH_TAGS: dict[str, TorchTags] = {
    "slash": (lambda n: n, lambda n: n + "/grad"),
    "dot": (lambda n: n, lambda n: n + ".grad"),
    "grads": (lambda n: "weights/" + n, lambda n: "grads/" + n),
    "grads_bare": (lambda n: n, lambda n: "grads/" + n),
}


def _log_by_hand(writer: Any, model: Any, step: int, style: str, buffers: bool = False) -> bool:
    """``add_histogram`` per parameter and gradient; False when the writer refuses (NaN)."""
    weight_tag, grad_tag = TORCH_TAGS[style]
    try:
        for name, parameter in model.named_parameters():
            writer.add_histogram(weight_tag(name), parameter.detach(), step)
            if parameter.grad is not None:
                writer.add_histogram(grad_tag(name), parameter.grad, step)
        if buffers:
            for name, buffer in model.named_buffers():
                if buffer.dtype.is_floating_point:
                    writer.add_histogram(weight_tag(name), buffer, step)
    except ValueError:
        return False  # the script crashes here, as real ones do on non-finite tensors
    return True


def _train_torch(
    log_dir: Path,
    model: Any,
    optimizer: Any,
    batches: Callable[[int], tuple[Any, Any]],
    loss_fn: Callable[[Any, Any], Any],
    steps: int,
    *,
    every: int = 1,
    style: str = "slash",
    helper: bool = False,
    clip: float | None = None,
    pre_clip_scalar: str | None = None,
    schedule: Callable[[int], float] | None = None,
    buffers: bool = False,
    tensorboardx: bool = False,
) -> None:
    """A training loop logging after backward (after clipping when ``clip``), as people do."""
    torch = _torch()
    writer = _summary_writer(log_dir, tensorboardx)
    base_lrs = [g["lr"] for g in optimizer.param_groups]
    for step in range(steps):
        if schedule is not None:
            for group, lr in zip(optimizer.param_groups, base_lrs, strict=True):
                group["lr"] = lr * schedule(step)
        x, y = batches(step)
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        if clip is not None:
            total = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            if pre_clip_scalar and step % every == 0:
                writer.add_scalar(pre_clip_scalar, float(total), step)
        if step % every == 0:
            writer.add_scalar("loss", float(loss.item()), step)
            if helper:
                from gradcheck.torch import log_gradients

                log_gradients(writer, model, step)
            elif not _log_by_hand(writer, model, step, style, buffers):
                break
        optimizer.step()
    writer.close()


def _sampler(torch: Any, x: Any, y: Any, batch: int, seed: int = 3) -> Callable[[int], tuple]:
    generator = torch.Generator().manual_seed(seeded(seed))

    def draw(step: int) -> tuple[Any, Any]:
        index = torch.randint(0, len(x), (batch,), generator=generator)
        return x[index], y[index]

    return draw


def _blobs(torch: Any, rows: int = 1024, features: int = 24, classes: int = 5) -> tuple:
    """Gaussian blobs: a classification task that can be learned well."""
    generator = torch.Generator().manual_seed(seeded(21))
    centers = torch.randn(classes, features, generator=generator) * 1.5
    y = torch.randint(0, classes, (rows,), generator=generator)
    return centers[y] + torch.randn(rows, features, generator=generator), y


def _smooth_regression(torch: Any, rows: int = 1024, features: int = 8) -> tuple:
    generator = torch.Generator().manual_seed(seeded(22))
    x = torch.randn(rows, features, generator=generator)
    w = torch.randn(features, 1, generator=generator)
    return x, torch.sin(x @ w / 2) + 0.1 * (x[:, :1] ** 2)


def _low_rank_data(torch: Any, rows: int = 1024, features: int = 32) -> tuple:
    generator = torch.Generator().manual_seed(seeded(23))
    codes = torch.randn(rows, 4, generator=generator)
    x = codes @ torch.randn(4, features, generator=generator) / 2
    return x, x


@held_out("torch", HEALTHY)
def torch_gelu_mlp_adamw_every_step_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(0))
    model = _mlp(torch, [24, 128, 128, 5], torch.nn.GELU)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
    x, y = _blobs(torch)
    _train_torch(log_dir, model, optimizer, _sampler(torch, x, y, 32), _ce(torch), 150)


@held_out("torch", HEALTHY)
def torch_elu_autoencoder_rmsprop_every10_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(1))
    model = _mlp(torch, [32, 24, 4, 24, 32], torch.nn.ELU)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    x, y = _low_rank_data(torch)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 64), _mse(torch), 400, every=10,
        style="grads",
    )  # fmt: skip


@held_out("torch", HEALTHY)
def torch_leakyrelu_cnn_nesterov_every5_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(2))
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 6, 3, padding=1),
        torch.nn.LeakyReLU(0.1),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(6, 12, 3, padding=1),
        torch.nn.LeakyReLU(0.1),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(12, 3),
    )
    for module in model:
        if isinstance(module, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(module.weight, a=0.1)
    generator = torch.Generator().manual_seed(seeded(24))
    y = torch.randint(0, 3, (384,), generator=generator)
    x = torch.randn(384, 1, 12, 12, generator=generator) * 0.5
    x[:, 0, :4, :4] += (y == 0).float()[:, None, None] * 1.5
    x[:, 0, -4:, -4:] += (y == 1).float()[:, None, None] * 1.5
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, nesterov=True)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 32), _ce(torch), 200, every=5,
        style="dot",
    )  # fmt: skip


@held_out("torch", HEALTHY)
def torch_long_converging_regression_500_healthy(log_dir: Path) -> None:
    """500 logged steps: gradients shrink by orders of magnitude as the loss converges."""
    torch = _torch()
    torch.manual_seed(seeded(3))
    model = _mlp(torch, [8, 32, 32, 1], torch.nn.Tanh)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    x, y = _smooth_regression(torch)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 128), _mse(torch), 500,
        schedule=lambda s: 0.5 ** (s // 150),
    )  # fmt: skip


@held_out(
    "torch",
    Truth(
        healthy=False,
        must=(("exploding", r"^(0|2)\.weight$", "all"),),
        allow=(("exploding", ".*"),),
        onset=(("exploding", ".*", 28, 32),),
        note="warm-up to SGD lr=0.4 with momentum: the loss reaches ~0 at step 28, the "
        "gradients blow up from step 30 (1e19) and every ReLU dies (zero gradients after); "
        "the gradients shrinking with the loss before the blow-up are healthy",
    ),
)
def torch_warmup_too_aggressive_explodes(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(4))
    model = _mlp(torch, [24, 64, 64, 5], torch.nn.ReLU)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.4, momentum=0.9)
    x, y = _blobs(torch)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 64), _ce(torch), 200, every=2,
        schedule=lambda s: min(1.0, (s + 1) / 30) * (0.2 if s > 100 else 1.0),
        style="grads_bare",
    )  # fmt: skip


@held_out("torch", Truth(note="warm-up over 40 steps then step decay; noisy labels keep the "
                         "loss above zero; the loss rises during warm-up"))  # fmt: skip
def torch_warmup_step_decay_noisy_labels_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(4))
    model = _mlp(torch, [24, 64, 64, 5], torch.nn.ReLU)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = _blobs(torch)
    generator = torch.Generator().manual_seed(seeded(28))
    flip = torch.rand(len(y), generator=generator) < 0.2
    y = torch.where(flip, torch.randint(0, 5, y.shape, generator=generator), y)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 64), _ce(torch), 240, every=2,
        schedule=lambda s: min(1.0, (s + 1) / 40) * (0.1 if s > 160 else 1.0),
        style="grads_bare",
    )  # fmt: skip


@held_out("torch", Truth(note="5 logged steps: one per epoch"))
def torch_per_epoch_five_logs_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(5))
    model = _mlp(torch, [24, 48, 5], torch.nn.Tanh, torch.nn.init.xavier_uniform_)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
    x, y = _blobs(torch, rows=640)
    draw = _sampler(torch, x, y, 64)
    writer = _summary_writer(log_dir)
    for epoch in range(5):
        for _ in range(10):
            bx, by = draw(0)
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(bx), by)
            loss.backward()
            optimizer.step()
        writer.add_scalar("epoch_loss", float(loss.item()), epoch)
        _log_by_hand(writer, model, epoch, "slash")
    writer.close()


@held_out(
    "torch",
    Truth(
        allow=(("vanishing", r"^0\.bias$"), ("static", r"^0\.bias$")),
        note="Linear -> LayerNorm: the Linear bias gets ~zero gradient by design",
    ),
)
def torch_layernorm_gelu_helper_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(6))
    model = torch.nn.Sequential(
        torch.nn.Linear(24, 64),
        torch.nn.LayerNorm(64),
        torch.nn.GELU(),
        torch.nn.Dropout(0.2),
        torch.nn.Linear(64, 64),
        torch.nn.LayerNorm(64),
        torch.nn.GELU(),
        torch.nn.Linear(64, 5),
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    x, y = _blobs(torch)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 64), _ce(torch), 200, every=10,
        helper=True,
    )  # fmt: skip


class _Bag:
    """EmbeddingBag-style text classifier (mean of token embeddings)."""

    @staticmethod
    def build(torch: Any) -> Any:
        class Model(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = torch.nn.Embedding(500, 16)
                self.head = torch.nn.Linear(16, 3)

            def forward(self, tokens: Any) -> Any:
                return self.head(self.embed(tokens).mean(dim=1))

        return Model()


@held_out("torch", Truth(note="embedding rows: sparse gradients"))
def torch_embedding_bag_helper_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(7))
    model = _Bag.build(torch)
    generator = torch.Generator().manual_seed(seeded(25))
    tokens = torch.randint(0, 500, (1024, 12), generator=generator)
    y = (tokens % 3 == 0).sum(dim=1) % 3
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, tokens, y, 32), _ce(torch), 150, every=3,
        helper=True,
    )  # fmt: skip


class _CharLSTM:
    @staticmethod
    def build(torch: Any, vocab: int = 20) -> Any:
        class Model(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = torch.nn.Embedding(vocab, 16)
                self.lstm = torch.nn.LSTM(16, 48, batch_first=True)
                self.out = torch.nn.Linear(48, vocab)

            def forward(self, tokens: Any) -> Any:
                hidden, _ = self.lstm(self.embed(tokens))
                return self.out(hidden).reshape(-1, self.out.out_features)

        return Model()

    @staticmethod
    def data(torch: Any, vocab: int = 20, length: int = 16) -> tuple:
        text = "the quick brown fox jumps over a lazy dog " * 40
        chars = sorted(set(text))[:vocab]
        ids = torch.tensor([chars.index(c) if c in chars else 0 for c in text])
        starts = torch.arange(0, len(ids) - length - 1, 3)
        x = torch.stack([ids[s : s + length] for s in starts])
        y = torch.stack([ids[s + 1 : s + length + 1] for s in starts]).reshape(len(starts), -1)
        return x, y


@held_out(
    "torch",
    Truth(
        clipped=True,
        note="char-LSTM, clip_grad_norm_(0.05) active at every step; post-clip grads logged, "
        "pre-clip norm as scalar total_grad_norm",
    ),
)
def torch_char_lstm_clipped_active_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(8))
    model = _CharLSTM.build(torch)
    x, y = _CharLSTM.data(torch)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 32),
        lambda out, target: torch.nn.functional.cross_entropy(out, target.reshape(-1)),
        150, every=2, clip=0.05, pre_clip_scalar="total_grad_norm", style="grads",
    )  # fmt: skip


@held_out(
    "torch",
    Truth(
        healthy=False,
        must=(("static", r"^backbone\.", "all"),),
        note="fine-tuning with a deliberately frozen backbone: static is the correct finding",
    ),
)
def torch_finetune_frozen_backbone_bn(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(9))

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = torch.nn.Sequential(
                torch.nn.Linear(24, 64), torch.nn.BatchNorm1d(64), torch.nn.ReLU(),
                torch.nn.Linear(64, 32), torch.nn.ReLU(),
            )  # fmt: skip
            self.head = torch.nn.Linear(32, 5)

        def forward(self, x: Any) -> Any:
            return self.head(self.backbone(x))

    model = Model()
    model.backbone.requires_grad_(False)
    model.backbone.eval()
    optimizer = torch.optim.SGD(model.head.parameters(), lr=0.05, momentum=0.9)
    x, y = _blobs(torch)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 64), _ce(torch), 120, every=4,
        style="grads", buffers=True,
    )  # fmt: skip


@held_out(
    "torch",
    Truth(
        healthy=False,
        must=(("static", r"^bn\.running_(mean|var)$", "all"),),
        note="BatchNorm in eval mode during training: running statistics never update "
        "(gamma/beta still learn)",
    ),
)
def torch_bn_eval_mode_during_training(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(10))

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = torch.nn.Linear(24, 64)
            self.bn = torch.nn.BatchNorm1d(64)
            self.fc2 = torch.nn.Linear(64, 5)

        def forward(self, x: Any) -> Any:
            return self.fc2(torch.relu(self.bn(self.fc1(x))))

    model = Model()
    model.eval()  # forgot model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    x, y = _blobs(torch)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 64), _ce(torch), 100, every=2,
        buffers=True,
    )  # fmt: skip


@held_out(
    "torch",
    Truth(
        healthy=False,
        must=(("static", r"^decoder\.0\.", "all"),),
        note="decoder.0 left out of the optimizer's parameter list; its gradients are not zero",
    ),
)
def torch_param_left_out_of_optimizer(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(11))

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = torch.nn.Sequential(torch.nn.Linear(32, 8), torch.nn.Tanh())
            self.decoder = torch.nn.Sequential(torch.nn.Linear(8, 32))

        def forward(self, x: Any) -> Any:
            return self.decoder(self.encoder(x))

    model = Model()
    optimizer = torch.optim.Adam(model.encoder.parameters(), lr=3e-3)
    x, y = _low_rank_data(torch)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 64), _mse(torch), 150, every=5,
        style="dot",
    )  # fmt: skip


@held_out(
    "torch",
    _nan_from(
        60,
        62,
        "learning rate x300 at step 60: SGD blows up into NaN within a few steps; the "
        "writer refuses the NaN histogram and the script stops",
    ),
)
def torch_lr_jump_at_60_into_nan(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(12))
    model = _mlp(torch, [8, 64, 64, 1], torch.nn.ReLU)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = _smooth_regression(torch)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 64), _mse(torch), 120,
        schedule=lambda s: 300.0 if s >= 60 else 1.0, helper=True,
    )  # fmt: skip


@held_out(
    "torch",
    Truth(
        healthy=False,
        must=(("exploding", r"weight$", "any"),),
        allow=(("exploding", ".*"),),
        onset=(("exploding", ".*", 40, 46),),
        note="a linear model on unnormalised inputs with the SGD step raised past stability at "
        "step 40: the gradient norm grows ~1.5x per step and stays finite (stopped at 100)",
    ),
)
def torch_linear_diverging_finite(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(13))
    generator = torch.Generator().manual_seed(seeded(26))
    x = torch.randn(512, 6, generator=generator) * torch.tensor([1.0, 2, 4, 8, 1, 1])
    y = x @ torch.randn(6, 1, generator=generator)
    model = torch.nn.Linear(6, 1)
    # the largest curvature is 2 * 64 = 128: a step above 2/128 diverges
    optimizer = torch.optim.SGD(model.parameters(), lr=0.004)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 256), _mse(torch), 100, every=2,
        schedule=lambda s: 5.5 if s >= 40 else 1.0, style="grads",
    )  # fmt: skip


@held_out(
    "torch",
    _nan_from(
        50, 50, "per-sample normalisation x / x.norm(): an all-zero sample at step 50 gives 0/0"
    ),
)
def torch_div_by_zero_at_50_nan(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(14))
    model = _mlp(torch, [24, 32, 5], torch.nn.ReLU)

    class Normalised(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: Any) -> Any:
            return self.inner(x / x.norm(dim=1, keepdim=True))

    wrapped = Normalised(model)
    x, y = _blobs(torch)
    draw = _sampler(torch, x, y, 32)

    def batches(step: int) -> tuple:
        bx, by = draw(step)
        if step == 50:
            bx = bx.clone()
            bx[0] = 0.0
        return bx, by

    optimizer = torch.optim.Adam(wrapped.parameters(), lr=1e-3)
    _train_torch(log_dir, wrapped, optimizer, batches, _ce(torch), 80, helper=True)


@held_out(
    "torch",
    Truth(
        healthy=False,
        must=(("exploding", r"^rnn\.weight_hh", "any"),),
        allow=BLOW_UP_ALLOWED,
        note="vanilla tanh RNN, recurrent weights scaled to spectral radius ~1.3 after step 30, "
        "long sequences, no clipping: gradients through time explode",
    ),
)
def torch_rnn_no_clip_exploding(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(15))

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = torch.nn.RNN(4, 32, batch_first=True)
            self.out = torch.nn.Linear(32, 1)

        def forward(self, x: Any) -> Any:
            hidden, _ = self.rnn(x)
            return self.out(hidden[:, -1])

    model = Model()
    generator = torch.Generator().manual_seed(seeded(27))
    x = torch.randn(256, 60, 4, generator=generator)
    y = x[:, :5, 0].sum(dim=1, keepdim=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    draw = _sampler(torch, x, y, 32)

    def batches(step: int) -> tuple:
        if step == 30:
            with torch.no_grad():
                q, _ = torch.linalg.qr(torch.randn(32, 32, generator=generator))
                model.rnn.weight_hh_l0.copy_(q * 1.6)
        return draw(step)

    _train_torch(log_dir, model, optimizer, batches, _mse(torch), 90, style="slash")


@held_out(
    "torch",
    Truth(
        healthy=False,
        must=(("vanishing", r"^[0-5]\.weight$", "all"),),
        allow=(("vanishing", r"^([0-9]|1[0-9])\.(weight|bias)$"),),
        note="12 sigmoid layers, width 32, Adagrad, helper every 10 steps: the first layers' "
        "gradients are orders of magnitude below the last's",
    ),
)
def torch_deep_sigmoid_adagrad_vanishing(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(16))
    model = _mlp(torch, [24] + [32] * 11 + [5], torch.nn.Sigmoid)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.01)
    x, y = _blobs(torch)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 64), _ce(torch), 200, every=10,
        helper=True,
    )  # fmt: skip


@held_out(
    "torch",
    Truth(
        healthy=False,
        must=(("vanishing", r"^(0|2|4)\.weight$", "all"),),
        allow=(("vanishing", r"^\d+\.(weight|bias)$"),),
        note="8 tanh layers with N(0, 0.02) init: the signal and gradients die going down",
    ),
)
def torch_tiny_init_tanh_vanishing(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(17))
    model = _mlp(
        torch, [24] + [64] * 7 + [5], torch.nn.Tanh, lambda w: torch.nn.init.normal_(w, 0, 0.02)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = _blobs(torch)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 64), _ce(torch), 150, every=3,
        style="grads_bare", tensorboardx=True,
    )  # fmt: skip


@held_out("torch", Truth(note="tensorboardX, ResNet-ish residual MLP with BatchNorm, SGD"))
def torch_residual_bn_tensorboardx_healthy(log_dir: Path) -> None:
    torch = _torch()
    torch.manual_seed(seeded(18))

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(48, 48, bias=False)
            self.bn = torch.nn.BatchNorm1d(48)

        def forward(self, x: Any) -> Any:
            return x + torch.relu(self.bn(self.fc(x)))

    model = torch.nn.Sequential(
        torch.nn.Linear(24, 48), Block(), Block(), Block(), torch.nn.Linear(48, 5)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    x, y = _blobs(torch)
    _train_torch(
        log_dir, model, optimizer, _sampler(torch, x, y, 128), _ce(torch), 120, every=4,
        style="slash", tensorboardx=True,
    )  # fmt: skip


# ============================================================================================
# TensorFlow custom loops
# ============================================================================================


def _np_blobs(rows: int = 1024, features: int = 24, classes: int = 5) -> tuple:
    import numpy as np

    rng = np.random.default_rng(seeded(31))
    centers = rng.normal(size=(classes, features)) * 1.5
    y = rng.integers(0, classes, rows)
    return (centers[y] + rng.normal(size=(rows, features))).astype("float32"), y.astype("int64")


def _np_regression(rows: int = 1024, features: int = 8) -> tuple:
    import numpy as np

    rng = np.random.default_rng(seeded(32))
    x = rng.normal(size=(rows, features)).astype("float32")
    return x, np.sin(x @ rng.normal(size=(features, 1)) / 2).astype("float32")


TfTags = tuple[Callable[[Any], str], Callable[[Any], str]]
TF_TAGS: dict[str, TfTags] = {
    "seed": (lambda v: v.name, lambda v: "Gradients_" + v.name),
    "grads": (lambda v: v.name, lambda v: f"grads/{v.name}"),
    "gradient_suffix": (lambda v: v.path, lambda v: f"{v.path}/gradient"),
    "path_seed": (lambda v: v.path, lambda v: "Gradients_" + v.path),
    "weights_only": (lambda v: v.name, lambda v: ""),
}


def _tf_train(
    log_dir: Path,
    model: Any,
    x: Any,
    y: Any,
    loss_fn: Callable[[Any, Any], Any],
    optimizer: Any,
    steps: int,
    *,
    every: int = 1,
    tags: str = "seed",
    batch: int = 64,
    trainable: list | None = None,
    clip_global: float | None = None,
    pre_clip_scalar: str | None = None,
    helper: bool = False,
    spoil: Callable[[int, Any], Any] | None = None,
    lr_at: Callable[[int], float] | None = None,
) -> None:
    """A TF2 custom training loop logging with tf.summary after computing gradients."""
    tf = _tf()
    import numpy as np

    writer = tf.summary.create_file_writer(str(log_dir))
    rng = np.random.default_rng(seeded(33))
    weight_tag, grad_tag = TF_TAGS[tags]
    with writer.as_default():
        for step in range(steps):
            index = rng.integers(0, len(x), batch)
            bx = x[index] if spoil is None else spoil(step, x[index].copy())
            with tf.GradientTape() as tape:
                loss = loss_fn(y[index], model(bx, training=True))
            variables = model.trainable_variables if trainable is None else trainable
            gradients = tape.gradient(loss, variables)
            if clip_global is not None:
                gradients, total = tf.clip_by_global_norm(gradients, clip_global)
                if pre_clip_scalar and step % every == 0:
                    tf.summary.scalar(pre_clip_scalar, total, step=step)
            if step % every == 0:
                tf.summary.scalar("train/loss", loss, step=step)
                if helper:
                    from gradcheck.keras import log_step

                    log_step(None, variables, gradients, step)
                else:
                    for var in model.weights:
                        tf.summary.histogram(weight_tag(var), var, step=step)
                    if tags != "weights_only":
                        for var, gradient in zip(variables, gradients, strict=True):
                            tf.summary.histogram(grad_tag(var), gradient, step=step)
            if lr_at is not None:
                optimizer.learning_rate.assign(lr_at(step))
            optimizer.apply_gradients(zip(gradients, variables, strict=True))
    writer.close()


def _sequential(tf: Any, layers: list, inputs: int) -> Any:
    model = tf.keras.Sequential([tf.keras.Input((inputs,)), *layers])
    return model


def _sparse_ce(tf: Any) -> Callable:
    return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@held_out("tf", Truth(note="tf.Variable names with :0, grads/<name>, every 10 of 300 steps"))
def tf_loop_tanh_regression_grads_prefix_healthy(log_dir: Path) -> None:
    tf = _tf()
    x, y = _np_regression()
    layers = tf.keras.layers
    model = _sequential(
        tf,
        [layers.Dense(32, activation="tanh", name="h1"),
         layers.Dense(32, activation="tanh", name="h2"),
         layers.Dense(1, name="out")],
        8,
    )  # fmt: skip
    optimizer = tf.keras.optimizers.SGD(0.05, momentum=0.9)
    _tf_train(
        log_dir, model, x, y, tf.keras.losses.MeanSquaredError(), optimizer, 300, every=10,
        tags="grads",
    )  # fmt: skip


@held_out("tf", Truth(note="Keras 3 var.path and <path>/gradient, cosine decay, every step"))
def tf_loop_gelu_cosine_gradient_suffix_healthy(log_dir: Path) -> None:
    tf = _tf()
    x, y = _np_blobs()
    layers = tf.keras.layers
    model = _sequential(
        tf,
        [layers.Dense(64, activation="gelu", name="enc"),
         layers.LayerNormalization(name="ln"),
         layers.Dense(64, activation="gelu", name="mid"),
         layers.Dense(5, name="logits_layer")],
        24,
    )  # fmt: skip
    schedule = tf.keras.optimizers.schedules.CosineDecay(3e-3, 120, warmup_target=None)
    optimizer = tf.keras.optimizers.Adam(schedule)
    _tf_train(
        log_dir, model, x, y, _sparse_ce(tf), optimizer, 120, tags="gradient_suffix", batch=32
    )


@held_out("tf", Truth(note="weights only, var.name (colliding Keras 3 names), Adagrad"))
def tf_loop_weights_only_adagrad_healthy(log_dir: Path) -> None:
    tf = _tf()
    x, y = _np_blobs()
    layers = tf.keras.layers
    model = _sequential(
        tf,
        [layers.Dense(48, activation="elu"), layers.Dense(48, activation="elu"), layers.Dense(5)],
        24,
    )
    optimizer = tf.keras.optimizers.Adagrad(0.05)
    _tf_train(log_dir, model, x, y, _sparse_ce(tf), optimizer, 100, every=5, tags="weights_only")


@held_out(
    "tf",
    Truth(
        clipped=True,
        note="tf.clip_by_global_norm(0.2) active at every step with a high learning rate; "
        "post-clip 'Gradients_' histograms (30-bucket estimates) and the pre-clip norm as "
        "scalar global_norm",
    ),
)
def tf_loop_clip_global_norm_active_healthy(log_dir: Path) -> None:
    tf = _tf()
    import numpy as np

    x, y = _np_blobs()
    rng = np.random.default_rng(seeded(36))
    noisy = rng.random(len(y)) < 0.3  # label noise keeps the gradient above the clip norm
    y = np.where(noisy, rng.integers(0, 5, len(y)), y)
    layers = tf.keras.layers
    model = _sequential(
        tf,
        [layers.Dense(64, activation="relu", name="a"),
         layers.Dense(64, activation="relu", name="b"),
         layers.Dense(5, name="c")],
        24,
    )  # fmt: skip
    optimizer = tf.keras.optimizers.SGD(0.5)
    _tf_train(
        log_dir, model, x, y, _sparse_ce(tf), optimizer, 150, every=3, tags="path_seed",
        clip_global=0.2, pre_clip_scalar="global_norm",
    )  # fmt: skip


@held_out(
    "tf",
    _nan_from(
        50, 56, "learning rate raised 500x at step 50 (after that step's log): explodes into NaN"
    ),
)
def tf_loop_lr_jump_at_50_into_nan(log_dir: Path) -> None:
    tf = _tf()
    x, y = _np_regression()
    x = x * 3
    layers = tf.keras.layers
    model = _sequential(
        tf, [layers.Dense(64, activation="relu"), layers.Dense(64, activation="relu"),
             layers.Dense(1)], 8,
    )  # fmt: skip
    optimizer = tf.keras.optimizers.SGD(0.01)
    _tf_train(
        log_dir, model, x, y, tf.keras.losses.MeanSquaredError(), optimizer, 90, every=2,
        tags="path_seed", lr_at=lambda s: 5.0 if s >= 50 else 0.01,
    )  # fmt: skip


@held_out(
    "tf",
    _nan_from(
        40, 40, "log of a negative: tf.math.log(x) on a feature that turns negative at step 40"
    ),
)
def tf_loop_log_negative_at_40_nan(log_dir: Path) -> None:
    tf = _tf()
    import numpy as np

    x, y = _np_blobs()
    x = np.abs(x) + 0.5
    layers = tf.keras.layers
    inputs = tf.keras.Input((24,))
    hidden = layers.Dense(32, activation="relu", name="dense_a")(
        layers.Lambda(lambda t: tf.math.log(t))(inputs)
    )
    model = tf.keras.Model(inputs, layers.Dense(5, name="dense_b")(hidden))

    def spoil(step: int, batch: Any) -> Any:
        if step == 40:
            batch[:, 3] = -1.0
        return batch

    _tf_train(
        log_dir, model, x, y, _sparse_ce(tf), tf.keras.optimizers.RMSprop(1e-3), 70,
        tags="seed", spoil=spoil,
    )  # fmt: skip


@held_out(
    "tf",
    Truth(
        healthy=False,
        must=(("vanishing", r"(^|/)(d0|d1|d2)/kernel$", "all"),),
        allow=(("vanishing", r"(^|/)d\d+/(kernel|bias)$"),),
        note="10 sigmoid layers, Keras 3 var.path tags with Gradients_, SGD: early layers' "
        "gradients far below the last's",
    ),
)
def tf_loop_deep_sigmoid_path_tags_vanishing(log_dir: Path) -> None:
    tf = _tf()
    x, y = _np_blobs()
    layers = tf.keras.layers
    stack = [layers.Dense(32, activation="sigmoid", name=f"d{i}") for i in range(9)]
    model = _sequential(tf, [*stack, layers.Dense(5, name="d9")], 24)
    _tf_train(
        log_dir, model, x, y, _sparse_ce(tf), tf.keras.optimizers.SGD(0.1), 150, every=5,
        tags="path_seed",
    )  # fmt: skip


@held_out(
    "tf",
    Truth(
        healthy=False,
        must=(("static", r"(^|/)enc/(kernel|bias)$", "all"),),
        note="the encoder's variables are left out of the list passed to tape.gradient and "
        "apply_gradients (weights logged, no gradients)",
    ),
)
def tf_loop_encoder_not_trained(log_dir: Path) -> None:
    tf = _tf()
    x, _ = _np_blobs()
    layers = tf.keras.layers
    encoder = layers.Dense(8, activation="tanh", name="enc")
    decoder = layers.Dense(24, name="dec")
    model = _sequential(tf, [encoder, decoder], 24)
    _tf_train(
        log_dir, model, x, x, tf.keras.losses.MeanSquaredError(), tf.keras.optimizers.Adam(3e-3),
        120, every=4, tags="path_seed", trainable=decoder.trainable_variables,
    )  # fmt: skip


@held_out("tf", Truth(note="gradcheck.keras.log_step, small CNN, every 5 steps"))
def tf_loop_log_step_helper_cnn_healthy(log_dir: Path) -> None:
    tf = _tf()
    import numpy as np

    rng = np.random.default_rng(seeded(34))
    y = rng.integers(0, 3, 384)
    x = rng.normal(size=(384, 10, 10, 1)).astype("float32") * 0.5
    x[y == 0, :4, :4, 0] += 1.5
    x[y == 1, -4:, -4:, 0] += 1.5
    layers = tf.keras.layers
    model = tf.keras.Sequential(
        [tf.keras.Input((10, 10, 1)),
         layers.Conv2D(8, 3, activation="relu", name="conv1"),
         layers.Conv2D(8, 3, activation="relu", name="conv2"),
         layers.GlobalAveragePooling2D(),
         layers.Dense(3, name="head")],
    )  # fmt: skip
    _tf_train(
        log_dir, model, x, y, _sparse_ce(tf), tf.keras.optimizers.Adam(3e-3), 150, every=5,
        helper=True, batch=32,
    )  # fmt: skip


# ============================================================================================
# Keras model.fit
# ============================================================================================


def _tensorboard(log_dir: Path) -> Any:
    import tensorflow as tf

    return tf.keras.callbacks.TensorBoard(str(log_dir), histogram_freq=1)


@held_out("keras", Truth(note="TensorBoard(histogram_freq=1), 8 epochs: 8 logged steps"))
def keras_fit_gelu_adamw_healthy(log_dir: Path) -> None:
    tf = _tf()
    x, y = _np_blobs()
    layers = tf.keras.layers
    model = _sequential(
        tf, [layers.Dense(64, activation="gelu"), layers.Dense(64, activation="gelu"),
             layers.Dense(5)], 24,
    )  # fmt: skip
    model.compile(tf.keras.optimizers.AdamW(2e-3, weight_decay=0.02), _sparse_ce(tf))
    model.fit(x, y, epochs=8, batch_size=64, verbose=0, callbacks=[_tensorboard(log_dir)])


@held_out("keras", Truth(note="conv autoencoder, MSE, RMSprop, weights only"))
def keras_fit_conv_autoencoder_healthy(log_dir: Path) -> None:
    tf = _tf()
    import numpy as np

    rng = np.random.default_rng(seeded(35))
    x = rng.normal(size=(256, 8, 8, 1)) * 0.3 + np.linspace(0, 1, 8)[None, :, None, None]
    x = x.astype("float32")
    layers = tf.keras.layers
    model = tf.keras.Sequential(
        [tf.keras.Input((8, 8, 1)),
         layers.Conv2D(8, 3, padding="same", activation="relu"),
         layers.MaxPooling2D(2),
         layers.Conv2D(4, 3, padding="same", activation="relu"),
         layers.UpSampling2D(2),
         layers.Conv2D(1, 3, padding="same")],
    )  # fmt: skip
    model.compile(tf.keras.optimizers.RMSprop(1e-3), "mse")
    model.fit(x, x, epochs=6, batch_size=32, verbose=0, callbacks=[_tensorboard(log_dir)])


@held_out(
    "keras",
    Truth(
        healthy=False,
        must=(("static", r"(^|/)base_(dense|bn)/", "all"),),
        allow=(("static", r"batch_normalization|moving"),),
        note="fine-tuning: base model (Dense + BatchNorm) trainable=False, head trained; "
        "static on the base is the correct finding",
    ),
)
def keras_fit_frozen_base_finetune(log_dir: Path) -> None:
    tf = _tf()
    x, y = _np_blobs()
    layers = tf.keras.layers
    base = tf.keras.Sequential(
        [tf.keras.Input((24,)), layers.Dense(32, activation="relu", name="base_dense"),
         layers.BatchNormalization(name="base_bn")],
        name="base",
    )  # fmt: skip
    base.trainable = False
    model = tf.keras.Sequential([tf.keras.Input((24,)), base, layers.Dense(5, name="head")])
    model.compile(tf.keras.optimizers.Adam(3e-3), _sparse_ce(tf))
    model.fit(x, y, epochs=6, batch_size=64, verbose=0, callbacks=[_tensorboard(log_dir)])


@held_out(
    "keras",
    Truth(
        healthy=False,
        must=(("nan", ".*", "any"),),
        allow=BLOW_UP_ALLOWED,
        note="SGD(lr=0.5) on unnormalised regression targets (x100): weights blow up to NaN "
        "within the first epochs; weights only",
    ),
)
def keras_fit_unnormalised_targets_nan(log_dir: Path) -> None:
    tf = _tf()
    x, y = _np_regression()
    layers = tf.keras.layers
    model = _sequential(tf, [layers.Dense(32, activation="relu"), layers.Dense(1)], 8)
    model.compile(tf.keras.optimizers.SGD(0.05), "mse")
    model.fit(x * 10, y * 100, epochs=8, batch_size=32, verbose=0,
              callbacks=[_tensorboard(log_dir)])  # fmt: skip


@held_out("keras", Truth(note="GradientLogger every 10 steps, embedding + LSTM char model"))
def keras_fit_char_lstm_gradient_logger_healthy(log_dir: Path) -> None:
    tf = _tf()
    import numpy as np

    from gradcheck.keras import GradientLogger

    text = "the quick brown fox jumps over a lazy dog " * 30
    chars = sorted(set(text))
    ids = np.array([chars.index(c) for c in text])
    starts = np.arange(0, len(ids) - 17, 3)
    x = np.stack([ids[s : s + 16] for s in starts])
    y = np.stack([ids[s + 1 : s + 17] for s in starts])
    layers = tf.keras.layers
    model = tf.keras.Sequential(
        [tf.keras.Input((16,), dtype="int64"),
         layers.Embedding(len(chars), 16),
         layers.LSTM(48, return_sequences=True),
         layers.Dense(len(chars))],
    )  # fmt: skip
    model.compile(tf.keras.optimizers.Adam(5e-3), _sparse_ce(tf))
    logger = GradientLogger(str(log_dir), data=(x[:128], y[:128]), every_n_steps=10)
    model.fit(x, y, epochs=4, batch_size=32, verbose=0, callbacks=[logger])


@held_out(
    "keras",
    Truth(note="GradientLogger (pre-clip gradients of the compiled loss), SGD clipnorm=0.5 "
          "at a high learning rate, BatchNorm + dropout + L2"),
)  # fmt: skip
def keras_fit_clipnorm_bn_gradient_logger_healthy(log_dir: Path) -> None:
    tf = _tf()
    from gradcheck.keras import GradientLogger

    x, y = _np_blobs()
    layers = tf.keras.layers
    l2 = tf.keras.regularizers.l2(1e-4)
    model = _sequential(
        tf,
        [layers.Dense(64, kernel_regularizer=l2), layers.BatchNormalization(),
         layers.Activation("relu"), layers.Dropout(0.3), layers.Dense(5)],
        24,
    )  # fmt: skip
    model.compile(tf.keras.optimizers.SGD(0.3, momentum=0.9, clipnorm=0.5), _sparse_ce(tf))
    logger = GradientLogger(str(log_dir), data=(x[:256], y[:256]), every_n_steps=5)
    model.fit(x, y, epochs=5, batch_size=32, verbose=0, callbacks=[logger])


@held_out(
    "keras",
    Truth(
        healthy=False,
        must=(("vanishing", r"(^|/)h0/kernel$", "all"),),
        allow=(
            ("vanishing", r"(^|/)h[0-8]/(kernel|bias)$"),
            ("static", r"(^|/)h[0-8]/(kernel|bias)$"),
        ),
        note="GradientLogger on 10 tanh layers with tiny (stddev 0.01) init; with SGD the "
        "hidden kernels' updates fall below float32 resolution, so static is true too",
    ),
)
def keras_fit_tiny_init_tanh_gradient_logger_vanishing(log_dir: Path) -> None:
    tf = _tf()
    from gradcheck.keras import GradientLogger

    x, y = _np_blobs()
    layers = tf.keras.layers
    init = tf.keras.initializers.RandomNormal(stddev=0.01)
    stack = [
        layers.Dense(64, activation="tanh", kernel_initializer=init, name=f"h{i}") for i in range(9)
    ]
    model = _sequential(tf, [*stack, layers.Dense(5, name="h9")], 24)
    model.compile(tf.keras.optimizers.SGD(0.05), _sparse_ce(tf))
    logger = GradientLogger(str(log_dir), data=(x[:256], y[:256]), every_n_steps=8)
    model.fit(x, y, epochs=4, batch_size=32, verbose=0, callbacks=[logger])


@held_out("keras", Truth(note="dropout + L2, RMSprop, 12 epochs, TensorBoard callback"))
def keras_fit_dropout_l2_rmsprop_healthy(log_dir: Path) -> None:
    tf = _tf()
    x, y = _np_blobs()
    layers = tf.keras.layers
    l2 = tf.keras.regularizers.l2(1e-3)
    model = _sequential(
        tf,
        [layers.Dense(96, activation="relu", kernel_regularizer=l2), layers.Dropout(0.4),
         layers.Dense(48, activation="leaky_relu", kernel_regularizer=l2), layers.Dense(5)],
        24,
    )  # fmt: skip
    model.compile(tf.keras.optimizers.RMSprop(5e-4), _sparse_ce(tf))
    model.fit(x, y, epochs=12, batch_size=128, verbose=0, callbacks=[_tensorboard(log_dir)])


# ============================================================================================
# Generate and score
# ============================================================================================


def write_truths(out: Path, names: list[str]) -> None:
    """Rewrite expected.json of runs already generated (after a correction of their truth)."""
    for name in names:
        if (out / name).is_dir():
            (out / name / "expected.json").write_text(
                json.dumps(asdict(RUNS[name].truth), indent=1)
            )


def generate(out: Path, names: list[str]) -> None:
    _training.generate(out, [(n, RUNS[n].make, RUNS[n].truth) for n in names])


@dataclass
class Score:
    """Confusion numbers over the held-out set."""

    runs: int = 0
    healthy_runs: int = 0
    parameters: int = 0
    false_alarms: int = 0
    misses: int = 0
    onset_errors: int = 0
    clip_errors: int = 0
    runs_wrong: int = 0
    false_alarm_runs: int = 0  # healthy runs with any false alarm


def score(report_file: Path, runs_dir: Path) -> Score:
    """Compare ``gradcheck analyze --format json`` with each run's expected.json; print why."""
    document = json.loads(report_file.read_text())
    by_run: dict[str, list[dict]] = {}
    for run in document["runs"]:
        name = Path(run["run"]).resolve().relative_to(runs_dir.resolve()).parts[0]
        by_run.setdefault(name, []).append(run)
    total = Score()
    for expected_file in sorted(runs_dir.glob("*/expected.json")):
        name = expected_file.parent.name
        truth = json.loads(expected_file.read_text())
        problems = _problems(truth, by_run.get(name, []), total)
        total.runs += 1
        total.healthy_runs += bool(truth["healthy"])
        total.runs_wrong += bool(problems)
        flagged = [
            f"{layer['verdict']}:{layer['name']}@{layer['first_bad_step']}"
            for run in by_run.get(name, [])
            for layer in run["layers"]
            if layer["verdict"] != "ok"
        ]
        print(f"{'FAIL' if problems else 'ok  '} {name}: {len(flagged)} flagged {flagged[:5]}")
        for problem in problems:
            print(f"       {problem}")
    return total


def _problems(truth: dict, runs: list[dict], total: Score) -> list[str]:
    layers = [layer for run in runs for layer in run["layers"]]
    total.parameters += len(layers)
    if not runs:
        return ["no report for this run"]
    problems: list[str] = []
    expected = [(v, p) for v, p, _ in truth["must"]] + [tuple(a) for a in truth["allow"]]
    false_alarms = 0
    for layer in layers:
        for flag in layer["flags"]:
            if not any(flag == v and re.search(p, layer["name"]) for v, p in expected):
                false_alarms += 1
                problems.append(f"false alarm {flag} on {layer['name']}: {layer['evidence']}")
    total.false_alarms += false_alarms
    total.false_alarm_runs += bool(false_alarms and truth["healthy"])
    for verdict, pattern, mode in truth["must"]:
        matching = [x for x in layers if re.search(pattern, x["name"])]
        lacking = [x["name"] for x in matching if verdict not in x["flags"]]
        if not matching:
            total.misses += 1
            problems.append(f"miss: no parameter matches {pattern!r}")
        elif mode == "all" and lacking:
            total.misses += len(lacking)
            problems.append(f"miss {verdict} on {', '.join(lacking)}")
        elif mode == "any" and len(lacking) == len(matching):
            total.misses += 1
            problems.append(f"miss {verdict} on every parameter matching {pattern!r}")
    for verdict, pattern, first, last in truth["onset"]:
        for x in layers:
            # where the trouble began: a NaN's first bad step is its first non-finite step,
            # and the explosion that led to it has its own onset (``onsets``, schema 1)
            step = min((x.get("onsets") or {}).values(), default=x["first_bad_step"])
            matches = x["verdict"] == verdict and re.search(pattern, x["name"])
            if matches and (step is None or not first <= step <= last):
                total.onset_errors += 1
                problems.append(f"onset of {verdict} on {x['name']} at {step}, not {first}-{last}")
    if truth["clipped"] is not None:
        clipped = [run["clipping"] and run["clipping"]["clipped"] for run in runs]
        if clipped != [truth["clipped"]] * len(runs):
            total.clip_errors += 1
            problems.append(f"clipped is {clipped}, expected {truth['clipped']}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="directory to write the runs to")
    parser.add_argument("--only", choices=("torch", "tf", "keras"), help="one family")
    parser.add_argument("--runs", nargs="*", default=None, help="run names to generate")
    parser.add_argument("--score", type=Path, help="a gradcheck analyze --format json report")
    parser.add_argument("--runs-dir", type=Path, default=Path("/tmp/heldout"))
    parser.add_argument("--list", action="store_true", help="list the runs")
    parser.add_argument(
        "--seed", type=int, default=0, help="shift every random seed (0: the usual runs)"
    )
    parser.add_argument("--truth-only", action="store_true", help="only rewrite expected.json")
    args = parser.parse_args()
    _training.SEED_SHIFT = args.seed
    if args.list:
        for run in RUNS.values():
            print(f"{run.family:6s} {'healthy ' if run.truth.healthy else 'finding '} {run.name}")
        return 0
    if args.score:
        total = score(args.score, args.runs_dir)
        print(json.dumps(asdict(total)))
        return 1 if total.runs_wrong else 0
    if args.out is None:
        parser.error("--out or --score is required")
    names = args.runs or [n for n, r in RUNS.items() if args.only in (None, r.family)]
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        parser.error(f"unknown runs: {', '.join(unknown)}")
    (write_truths if args.truth_only else generate)(args.out, names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
