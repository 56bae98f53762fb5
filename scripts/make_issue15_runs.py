"""Small real training runs for issue 15, written by the real writers, with their ground truth.

    python scripts/make_issue15_runs.py                       # every run into tests/data/runs15
    python scripts/make_issue15_runs.py --runs amp_overflow_skipped lightning_healthy
    python scripts/make_issue15_runs.py --out /tmp/runs15     # elsewhere

Each run trains a tiny model on synthetic data for a few seconds on CPU (fixed seeds, one
thread) and logs the way a real trainer or a real hand-written loop does: PyTorch Lightning's
``grad_norm`` through ``TensorBoardLogger``, the HF Trainer's ``train/grad_norm`` scalars,
hand-written per-parameter norms (tensorboardX), ``torch.amp.GradScaler``, TF1 graph mode
through ``tf.compat.v1``, Keras 3 ``model.fit`` with ``TensorBoard(histogram_freq=1)`` (also
resumed from a checkpoint), gradcheck's own ``GradientLogger``, and torch ``SummaryWriter``
histograms in several tag conventions, healthy and pathological.

``TRUTH.tsv`` says, for every run (a directory holding event files, relative to ``--out``),
what a correct analysis finds: one ``(run)`` row with the run's class and one row per
parameter finding, with columns ``run  parameter  expect  step  tags  why``:

- ``expect``: ``nan``, ``exploding``, ``vanishing``, ``static``, ``overflow``, ``ok``,
  ``nothing-judgeable`` (no weight or gradient histograms, no gradient norms) or
  ``no-gradients`` (weights but no gradients: only NaN and movement can be judged).
- ``step``: where the trouble truly began, from the training code (the step of the update with
  the injected fault, or the first step whose logged value is non-finite); ``-`` when none.
- ``tags``: the tags that belong to that parameter (comma-separated), when it matters.
- ``why``: how the run was trained, and what the writer actually did where it surprised.

The truth is decided from how each run was trained, never from what gradcheck says. Each run is
made in its own process (TensorFlow and torch stay apart; seeds do not leak between runs).

Needs TensorFlow, Keras, torch, tensorboardX and PyTorch Lightning (imported lazily, only by its
runs; install it without letting pip touch torch: ``pip install --no-deps pytorch-lightning
lightning-utilities torchmetrics pyyaml tqdm``). Histograms use ``bins="auto"``: torch's default
``"tensorflow"`` bins cost ~8 KB a histogram (1.1x-spaced buckets from 1e-12 with the empty ones
between kept), which would make the files ten times larger.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared _training.py

from _training import summary_writer as _writer  # noqa: E402
from _training import tf_module as _tf  # noqa: E402
from _training import torch_module as _torch  # noqa: E402

COLUMNS = ("run", "parameter", "expect", "step", "tags", "why")
RUN = "(run)"
GLOBAL = "(global gradient norm)"


@dataclass(frozen=True)
class Truth:
    """One row of ``TRUTH.tsv`` (the run's directory is added when written)."""

    parameter: str
    expect: str
    step: int | None = None
    tags: tuple[str, ...] = ()
    why: str = ""
    run: str = ""  # a sub-directory of the run's directory, when the run is one of several


Make = Callable[[Path], list[Truth]]
RUNS: dict[str, Make] = {}


def issue15_run(make: Make) -> Make:
    RUNS[make.__name__] = make
    return make


# ============================================================================================
# Shared pieces (torch)
# ============================================================================================


def _regression(torch: Any, rows: int = 256, features: int = 8, seed: int = 2) -> tuple:
    """Inputs and a smooth target of them, with a little noise."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, features, generator=generator)
    y = torch.tanh(x @ torch.randn(features, 1, generator=generator) / 2) * 2
    return x, y + 0.05 * torch.randn(rows, 1, generator=generator)


def _classes(torch: Any, rows: int = 256, features: int = 8, classes: int = 3) -> tuple:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(rows, features, generator=generator)
    return x, (x @ torch.randn(features, classes, generator=generator)).argmax(dim=1)


def _batches(torch: Any, rows: int, batch: int, steps: int, seed: int = 3) -> Iterator[Any]:
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        yield torch.randint(0, rows, (batch,), generator=generator)


def _mlp(torch: Any, sizes: list[int], activation: Any = None) -> Any:
    activation = activation or torch.nn.Tanh
    layers: list[Any] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(activation())
    return torch.nn.Sequential(*layers)


def _first_non_finite(values: dict[int, float]) -> int | None:
    bad = [step for step, value in values.items() if not math.isfinite(value)]
    return min(bad) if bad else None


def _log_histograms(
    writer: Any,
    model: Any,
    step: int,
    weight_tag: Callable[[str], str],
    grad_tag: Any,
    bins: str = "auto",
) -> list[str]:
    """Every parameter as a histogram, and its gradient when ``grad_tag`` is given. The tags the
    writer refused: torch's and tensorboardX's ``add_histogram`` raise "The histogram is empty"
    on a tensor with no finite value (one with some finite values is written)."""
    refused = []
    for name, parameter in model.named_parameters():
        tensors = [(weight_tag(name), parameter.detach())]
        if grad_tag is not None and parameter.grad is not None:
            tensors.append((grad_tag(name), parameter.grad))
        for tag, tensor in tensors:
            try:
                writer.add_histogram(tag, tensor, step, bins=bins)
            except ValueError:
                refused.append(tag)
    return refused


# ============================================================================================
# 1. PyTorch Lightning: grad_norm(self, norm_type=2) through TensorBoardLogger
# ============================================================================================


def _lightning_fit(
    log_dir: Path,
    *,
    lr: Callable[[int], float],
    data: tuple,
    epochs: int,
    on_norms: Callable[[int, dict[str, float]], None],
    activation: str = "ReLU",
    sizes: tuple[int, ...] = (16, 16),
) -> None:
    """A Lightning regressor (linear layers of hidden ``sizes``, ``activation`` between them, SGD
    with the per-step learning rate ``lr(step)``) logging ``grad_norm`` before each optimizer
    step."""
    os.environ.setdefault("PL_DISABLE_FORK", "1")
    import pytorch_lightning as pl
    from pytorch_lightning.loggers import TensorBoardLogger
    from pytorch_lightning.utilities import grad_norm

    torch = _torch()
    pl.seed_everything(0, verbose=False)

    class Regressor(pl.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.net = _mlp(torch, [data[0].shape[1], *sizes, 1], getattr(torch.nn, activation))

        def training_step(self, batch: Any, index: int) -> Any:
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def on_before_optimizer_step(self, optimizer: Any) -> None:
            norms = grad_norm(self, norm_type=2)
            self.log_dict(norms)  # Lightning's documented way
            on_norms(self.trainer.global_step, {k: float(v) for k, v in norms.items()})

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=1.0)
            schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lr)
            return {
                "optimizer": optimizer,
                "lr_scheduler": {"scheduler": schedule, "interval": "step"},
            }

    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(*data),
        batch_size=32,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )
    trainer = pl.Trainer(
        max_epochs=epochs,
        logger=TensorBoardLogger(str(log_dir), name="", version=""),
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
    )
    trainer.fit(Regressor(), loader)


LIGHTNING_TOTAL = "grad_2.0_norm_total"


@issue15_run
def lightning_healthy(log_dir: Path) -> list[Truth]:
    torch = _torch()
    tags: set[str] = set()
    _lightning_fit(
        log_dir,
        lr=lambda step: 0.05,
        data=_regression(torch),
        epochs=8,
        on_norms=lambda step, norms: tags.update(norms),
    )
    why = (
        "Lightning 2.6 TensorBoardLogger, grad_norm(self, 2) in on_before_optimizer_step,"
        " SGD 0.05, loss falls"
    )
    rows = [Truth(RUN, "ok", why=why)]
    for tag in sorted(tags):
        name = GLOBAL if tag == LIGHTNING_TOTAL else tag.removeprefix("grad_2.0_norm/")
        rows.append(Truth(name, "ok", None, (tag,), why))
    return rows


@issue15_run
def lightning_diverged_inf_then_nan(log_dir: Path) -> list[Truth]:
    torch = _torch()
    x, y = _regression(torch)
    x[:, 0] = torch.where(torch.arange(len(x)) % 16 == 0, 1e30, x[:, 0])  # missing-value sentinel
    totals: dict[int, float] = {}
    _lightning_fit(
        log_dir,
        lr=lambda step: 0.05,
        data=(x, y),
        epochs=2,
        on_norms=lambda step, norms: totals.__setitem__(step, norms[LIGHTNING_TOTAL]),
    )
    first = min(totals)
    assert math.isinf(totals[first]), totals[first]
    assert all(math.isnan(v) for s, v in totals.items() if s > first)
    why = (
        "one input row in 16 holds a 1e30 missing-value sentinel: the first batch's loss and"
        f" gradients overflow (total norm Inf at step {first}), the update makes the weights"
        " Inf and every later norm is NaN; scalars only, no histograms"
    )
    return [
        Truth(RUN, "nan", first, why=why),
        Truth(GLOBAL, "nan", first, (LIGHTNING_TOTAL,), why),
    ]


@issue15_run
def lightning_gradual_explosion(log_dir: Path) -> list[Truth]:
    torch = _torch()
    jump = 60
    totals: dict[int, float] = {}
    per_parameter: dict[str, dict[int, float]] = {}

    def keep(step: int, norms: dict[str, float]) -> None:
        totals[step] = norms[LIGHTNING_TOTAL]
        for tag, value in norms.items():
            per_parameter.setdefault(tag, {})[step] = value

    _lightning_fit(
        log_dir,
        lr=lambda step: 0.05 if step < jump else 1.5,
        data=_regression(torch),
        epochs=24,
        on_norms=keep,
        sizes=(),  # linear regression: the instability grows geometrically, nothing stops it
    )
    nan_at = _first_non_finite(totals)
    assert nan_at is not None and nan_at > jump + 10, (nan_at, totals)
    first_nan = min(step for step, value in totals.items() if math.isnan(value))
    before = np.median([totals[s] for s in range(jump - 10, jump)])
    largest = max(v for v in totals.values() if math.isfinite(v))
    why = (
        "linear regression (MSE), SGD lr 0.05 then 1.5 (above 2 / top Hessian eigenvalue) from"
        f" the update of step {jump} (LambdaLR per step): the first gradient it changes is logged"
        f" at step {jump + 1}; the total norm grows about 2x a step from {before:.3g} (median of"
        f" the 10 steps before) to {largest:.3g}; at step {nan_at} it is Inf (the loss too) while"
        " the gradient's elements are still finite (grad_norm's float32 sum of squares"
        f" overflows), the first NaN is at step {first_nan} once the weights overflow"
    )
    rows = [Truth(RUN, "nan", nan_at, why=why)]
    for tag, values in per_parameter.items():
        name = GLOBAL if tag == LIGHTNING_TOTAL else tag.removeprefix("grad_2.0_norm/")
        rows.append(Truth(name, "exploding", jump + 1, (tag,), why))
        rows.append(Truth(name, "nan", _first_non_finite(values), (tag,), why))
    return rows


# ============================================================================================
# 2. HF-Trainer-style scalars: train/grad_norm (global, pre-clip), train/loss, learning_rate
# ============================================================================================

HF_NORM = "train/grad_norm"


def _hf_loop(
    log_dir: Path,
    model: Any,
    lr: Callable[[int], float],
    steps: int,
    logging_steps: int,
) -> dict[int, float]:
    """What ``transformers.Trainer`` logs, from a plain loop: AdamW, ``clip_grad_norm_(1.0)``
    (its return value, the pre-clip global norm, is ``grad_norm``), the loss averaged since the
    last log, steps counted from 1 (``global_step`` after the update). The logged norms."""
    torch = _torch()
    x, y = _regression(torch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1.0, weight_decay=0.0)
    writer = _writer(log_dir)
    logged: dict[int, float] = {}
    losses: list[float] = []
    for step, index in enumerate(_batches(torch, len(x), 32, steps)):
        for group in optimizer.param_groups:
            group["lr"] = lr(step)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[index]), y[index])
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        optimizer.step()
        losses.append(float(loss))
        global_step = step + 1
        if global_step % logging_steps == 0:
            writer.add_scalar("train/loss", float(np.mean(losses)), global_step)
            writer.add_scalar(HF_NORM, norm, global_step)
            writer.add_scalar("train/learning_rate", lr(step), global_step)
            writer.add_scalar("train/epoch", global_step * 32 / len(x), global_step)
            logged[global_step] = norm
            losses = []
    writer.close()
    return logged


@issue15_run
def hf_scalars_clipped_healthy(log_dir: Path) -> list[Truth]:
    torch = _torch()
    torch.manual_seed(0)
    model = _mlp(torch, [8, 32, 32, 1])
    steps = 300
    norms = _hf_loop(log_dir, model, lambda step: 3e-3 * (1 - step / steps), steps, 5)
    clipped = sum(value > 1.0 for value in norms.values())
    assert clipped > 0, norms
    why = (
        "AdamW 3e-3 with linear decay, clip_grad_norm_(1.0), logging_steps=5 (steps 5..300);"
        f" the logged pre-clip norm is above the clip threshold at {clipped} of {len(norms)}"
        f" logged steps (max {max(norms.values()):.3g}): clipping active, training healthy"
    )
    return [Truth(RUN, "ok", why=why), Truth(GLOBAL, "ok", None, (HF_NORM,), why)]


@issue15_run
def hf_scalars_exploding(log_dir: Path) -> list[Truth]:
    torch = _torch()
    torch.manual_seed(0)
    model = _mlp(torch, [8, 16, 16, 16, 16, 16, 1], torch.nn.Identity)
    jump = 100
    norms = _hf_loop(log_dir, model, lambda step: 1e-3 if step < jump else 10.0, 140, 1)
    bad = _first_non_finite(norms)
    assert bad is not None and bad > jump + 3, norms
    nans = [step for step, value in norms.items() if math.isnan(value)]
    before = np.median([norms[s] for s in range(jump - 10, jump + 1)])
    why = (
        f"deep linear net (6 layers), AdamW lr 1e-3 then 10 (a peak 1e4x too high) from the"
        f" update of step {jump} (logged as global_step {jump + 1}, the last norm before it);"
        f" clip_grad_norm_(1.0) active throughout (Adam's steps do not shrink with the"
        f" gradient); the pre-clip norm goes from {before:.3g} to"
        f" {norms[jump + 2]:.3g} at global_step {jump + 2} and is first non-finite at {bad}"
        f" ({'first NaN at ' + str(min(nans)) if nans else 'Inf, never NaN'}): the float32 norm"
        " overflows while the gradient's elements and the loss stay finite (loss ~1e26), and"
        " clip_grad_norm_ then scales the gradients by max_norm / Inf = 0; logging_steps=1"
    )
    return [
        Truth(RUN, "nan", bad, why=why),
        Truth(GLOBAL, "exploding", jump + 2, (HF_NORM,), why),
        Truth(GLOBAL, "nan", bad, (HF_NORM,), why),
    ]


# ============================================================================================
# 3. Hand-written per-parameter norms (tensorboardX), three tag conventions
# ============================================================================================

NORM_TAGS: dict[str, Callable[[str], str]] = {
    "prefix": lambda name: f"grad_norm/{name}",
    "suffix": lambda name: f"{name}/grad_norm",
    "gradients": lambda name: f"gradients/{name}/norm",
}


def _norms_run(log_dir: Path, convention: str, vanishing: bool) -> dict[str, dict[int, float]]:
    """Per-parameter gradient norms and the loss, by tensorboardX. Healthy: a Tanh MLP with
    Adam. Vanishing: a 10-layer sigmoid MLP with SGD (Glorot & Bengio 2010)."""
    torch = _torch()
    torch.manual_seed(0)
    x, y = _classes(torch)
    if vanishing:
        model = _mlp(torch, [8] + [16] * 9 + [3], torch.nn.Sigmoid)
        optimizer: Any = torch.optim.SGD(model.parameters(), lr=0.1)
    else:
        model = _mlp(torch, [8, 32, 32, 3])
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    writer = _writer(log_dir, tensorboardx=True)
    tag = NORM_TAGS[convention]
    norms: dict[str, dict[int, float]] = {}
    for step, index in enumerate(_batches(torch, len(x), 32, 200)):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[index]), y[index])
        loss.backward()
        if step % 4 == 0:
            writer.add_scalar("loss", float(loss), step)
            for name, parameter in model.named_parameters():
                value = float(parameter.grad.norm())
                writer.add_scalar(tag(name), value, step)
                norms.setdefault(name, {})[step] = value
        optimizer.step()
    writer.close()
    return norms


def _norms_healthy(convention: str) -> Make:
    def make(log_dir: Path) -> list[Truth]:
        norms = _norms_run(log_dir, convention, vanishing=False)
        why = (
            "tensorboardX add_scalar of each parameter's gradient L2 norm as"
            f" {NORM_TAGS[convention]('<p>')}, Tanh MLP, Adam 3e-3, every 4th step"
        )
        return [Truth(RUN, "ok", why=why)] + [
            Truth(name, "ok", None, (NORM_TAGS[convention](name),), why) for name in norms
        ]

    make.__name__ = f"norms_{convention}_healthy"
    return make


def _norms_vanishing(convention: str) -> Make:
    def make(log_dir: Path) -> list[Truth]:
        norms = _norms_run(log_dir, convention, vanishing=True)
        median = {name: float(np.median(list(values.values()))) for name, values in norms.items()}
        last = median[list(median)[-2]]  # the output layer's weight
        rows = []
        for name, value in median.items():
            ratio = value / last
            why = (
                "10-layer sigmoid MLP (width 16), SGD 0.1, tensorboardX"
                f" {NORM_TAGS[convention]('<p>')};"
                f" median gradient norm {value:.2g}, {ratio:.2g}x the output layer's"
            )
            if ratio < 1e-3:
                rows.append(Truth(name, "vanishing", 0, (NORM_TAGS[convention](name),), why))
            elif ratio > 0.1:
                rows.append(Truth(name, "ok", None, (NORM_TAGS[convention](name),), why))
        vanished = [row.parameter for row in rows if row.expect == "vanishing"]
        assert len(vanished) >= 4, median
        why = (
            f"deep sigmoid MLP: the first {len(vanished)} parameters' gradients are below 1e-3x"
            " the output layer's from the first step (rows 'vanishing'); parameters between"
            " 1e-3x and 0.1x are ambiguous by construction and have no row"
        )
        return [Truth(RUN, "vanishing", 0, why=why), *rows]

    make.__name__ = f"norms_{convention}_vanishing"
    return make


for _convention in NORM_TAGS:
    issue15_run(_norms_healthy(_convention))
    issue15_run(_norms_vanishing(_convention))


# ============================================================================================
# 4. torch AMP: torch.amp.GradScaler("cpu") with float16 autocast
# ============================================================================================

LOSS_SCALE = "amp/loss_scale"


def _amp_run(
    log_dir: Path, lr: Callable[[int], float], steps: int, init_scale: float, activation: Any
) -> tuple[list[int], dict[int, float], list[str]]:
    """SGD under ``autocast("cpu", float16)`` and a ``GradScaler``; gradients logged after
    ``scaler.unscale_`` (histograms and ``grad_norm/<p>`` scalars), weights, the loss and the
    scale. The steps the scaler skipped (its scale dropped), the losses, the parameter names."""
    torch = _torch()
    torch.manual_seed(0)
    x, y = _regression(torch)
    model = _mlp(torch, [8, 16, 16, 1], activation)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    writer = _writer(log_dir)
    skipped: list[int] = []
    losses: dict[int, float] = {}
    refused: dict[int, list[str]] = {}
    for step, index in enumerate(_batches(torch, len(x), 32, steps)):
        for group in optimizer.param_groups:
            group["lr"] = lr(step)
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x[index]), y[index])
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        scale = scaler.get_scale()
        writer.add_scalar("loss", float(loss), step)
        writer.add_scalar(LOSS_SCALE, scale, step)
        for name, parameter in model.named_parameters():
            writer.add_scalar(f"grad_norm/{name}", float(parameter.grad.norm()), step)
        finite = all(p.grad.isfinite().all() for p in model.parameters())
        if (step % 10 == 0 or not finite) and (
            tags := _log_histograms(writer, model, step, lambda n: n, lambda n: n + "/grad")
        ):
            refused[step] = tags
        scaler.step(optimizer)
        scaler.update()
        if scaler.get_scale() < scale:
            skipped.append(step)
        losses[step] = float(loss)
    writer.close()
    REFUSED.update(refused)
    return skipped, losses, [name for name, _ in model.named_parameters()]


REFUSED: dict[int, list[str]] = {}
"""The histograms the writer refused in the last AMP run, by step."""


def _refused_text() -> str:
    if not REFUSED:
        return "the writer wrote every histogram"
    tags = sorted({tag for tags in REFUSED.values() for tag in tags})
    return (
        f"the torch writer refused (ValueError 'The histogram is empty') the all-non-finite"
        f" histograms {','.join(tags)} at steps {','.join(map(str, sorted(REFUSED)))}: those"
        " steps have the grad_norm scalars (non-finite) but not those histograms"
    )


@issue15_run
def amp_overflow_skipped(log_dir: Path) -> list[Truth]:
    torch = _torch()
    skipped, losses, names = _amp_run(log_dir, lambda step: 0.05, 120, 2.0**24, torch.nn.ReLU)
    assert skipped and max(skipped) < 20 and all(math.isfinite(v) for v in losses.values())
    start = np.mean([losses[s] for s in range(20, 30)])
    end = np.mean([losses[s] for s in range(110, 120)])
    assert end < start / 2, (start, end)
    why = (
        "GradScaler('cpu', init_scale=2**24), autocast float16, SGD 0.05: the scaled backward"
        f" overflows float16 and the scaler skips steps {','.join(map(str, skipped))} (NaN/Inf"
        " gradients after unscale_), halving the scale each time, then trains: weights and"
        f" loss always finite, loss {start:.3g} -> {end:.3g}; gradient histograms every 10th"
        " step and at every skipped step, grad_norm/<p> and amp/loss_scale every step; "
        + _refused_text()
    )
    rows = [Truth(RUN, "overflow", skipped[0], why=why)]
    rows += [
        Truth(name, "overflow", skipped[0], (name, name + "/grad", f"grad_norm/{name}"), why)
        for name in names
    ]
    return rows


@issue15_run
def amp_diverged_nan(log_dir: Path) -> list[Truth]:
    torch = _torch()
    jump = 40
    skipped, losses, names = _amp_run(
        log_dir, lambda step: 0.01 if step < jump else 0.5, 80, 2.0**10, torch.nn.Identity
    )
    bad = _first_non_finite(losses)
    assert bad is not None and all(not math.isfinite(losses[s]) for s in range(bad, 80)), losses
    persist = skipped[0]
    assert len(skipped) >= (80 - persist) - 2, skipped
    why = (
        "GradScaler('cpu', init_scale=2**10), autocast float16, deep linear net, SGD 0.01 then"
        f" 0.5 from the update of step {jump}: the weights grow until the float16 forward"
        f" overflows: from step {persist} the gradients are non-finite at every step but"
        f" {80 - persist - len(skipped)} (the scaler skipped {len(skipped)} of the last"
        f" {80 - persist}), the loss is non-finite from step {bad} to the end, the weights stay"
        " finite (never updated again)"
        " and the scale falls towards 0: a real divergence, not a transient overflow; "
        + _refused_text()
    )
    rows = [Truth(RUN, "nan", persist, why=why)]
    rows += [
        Truth(name, "nan", persist, (name, name + "/grad", f"grad_norm/{name}"), why)
        for name in names
    ]
    return rows


# ============================================================================================
# 7. Gradients rising ~100x out of a plateau, healthy
# ============================================================================================


@issue15_run
def plateau_escape_healthy(log_dir: Path) -> list[Truth]:
    """A deep linear net initialised tiny sits on a saddle, then learns (Saxe et al. 2014)."""
    torch = _torch()
    torch.manual_seed(0)
    x, y = _regression(torch)
    y = y - y.mean()
    model = torch.nn.Sequential(
        *(torch.nn.Linear(a, b, bias=False) for a, b in ((8, 16), (16, 16), (16, 16), (16, 1)))
    )
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(0.2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    writer = _writer(log_dir)
    norms: dict[str, dict[int, float]] = {}
    losses: dict[int, float] = {}
    for step, index in enumerate(_batches(torch, len(x), 64, 400)):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[index]), y[index])
        loss.backward()
        if step % 10 == 0:
            writer.add_scalar("loss", float(loss), step)
            _log_histograms(writer, model, step, lambda n: n, lambda n: n + "/grad")
            for name, parameter in model.named_parameters():
                norms.setdefault(name, {})[step] = float(parameter.grad.norm())
            losses[step] = float(loss)
        optimizer.step()
    writer.close()
    total = {step: math.sqrt(sum(norms[name][step] ** 2 for name in norms)) for step in losses}
    steps = sorted(total)
    plateau = float(np.median([total[s] for s in steps[:10]]))
    peak_step = max(steps, key=lambda s: total[s])
    factor = total[peak_step] / plateau
    assert factor >= 100, (factor, total)
    end = float(np.mean([losses[s] for s in steps[-10:]]))
    assert end < losses[0] / 2
    why = (
        "deep linear net (4 layers, no biases) initialised at 0.2x the default, SGD 0.1,"
        " histograms every"
        f" 10 steps: loss flat at {losses[0]:.3g} on the saddle, the global gradient norm rises"
        f" {factor:.0f}x from its plateau (median of the first 10 logged steps, {plateau:.2g}) to"
        f" {total[peak_step]:.3g} at step {peak_step}, then the loss falls to {end:.3g}"
    )
    rows = [Truth(RUN, "ok", why=why)]
    for name, values in norms.items():
        rise = max(values.values()) / float(np.median([values[s] for s in steps[:10]]))
        rows.append(
            Truth(
                name,
                "ok",
                None,
                (name, name + "/grad"),
                f"{why}; this parameter's gradient norm rises {rise:.0f}x",
            )
        )
    return rows


# ============================================================================================
# 8. Pairing conventions (torch SummaryWriter histograms)
# ============================================================================================


def _histogram_run(
    log_dir: Path,
    weight_tag: Callable[[str], str],
    grad_tag: Callable[[str], str] | None,
    *,
    loss_scale: float = 1.0,
    optimizer_name: str = "Adam",
    step_optimizer: bool = True,
    layer_norm: bool = False,
    drop_no_decay: bool = False,
    steps: int = 120,
    every: int = 4,
) -> Any:
    """A small classifier, histograms of weights (and gradients) every ``every`` steps."""
    torch = _torch()
    torch.manual_seed(0)
    x, y = _classes(torch)
    if layer_norm:
        model = torch.nn.Sequential(
            torch.nn.Linear(8, 32), torch.nn.LayerNorm(32), torch.nn.ReLU(), torch.nn.Linear(32, 3)
        )
    else:
        model = _mlp(torch, [8, 32, 3])
    if drop_no_decay:  # the usual weight-decay split, the second group forgotten
        decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
        optimizer: Any = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}], lr=3e-3)
    elif optimizer_name == "Adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    writer = _writer(log_dir)
    first = {n: p.detach().clone() for n, p in model.named_parameters()}
    losses = []
    for step, index in enumerate(_batches(torch, len(x), 32, steps)):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[index]), y[index]) * loss_scale
        loss.backward()
        if step % every == 0:
            writer.add_scalar("loss", float(loss), step)
            _log_histograms(writer, model, step, weight_tag, grad_tag)
        if step_optimizer:
            optimizer.step()
        losses.append(float(loss))
    writer.close()
    moved = {
        n: float((p.detach() - first[n]).norm() / first[n].norm().clamp_min(1e-12))
        for n, p in model.named_parameters()
    }
    return model, moved, losses


def _pairing(weight_tag: Callable[[str], str], grad_tag: Callable[[str], str], name: str) -> Make:
    def make(log_dir: Path) -> list[Truth]:
        model, _, losses = _histogram_run(log_dir, weight_tag, grad_tag)
        assert np.mean(losses[-10:]) < np.mean(losses[:10]) / 2
        why = (
            f"torch SummaryWriter histograms {weight_tag('<p>')} and {grad_tag('<p>')}, Adam"
            " 3e-3, healthy: each weight tag pairs with the gradient tag of the same <p>"
        )
        return [Truth(RUN, "ok", why=why)] + [
            Truth(n, "ok", None, (weight_tag(n), grad_tag(n)), why)
            for n, _ in model.named_parameters()
        ]

    make.__name__ = name
    return make


issue15_run(
    _pairing(
        lambda n: f"hist/weights/{n}", lambda n: f"hist/grads/{n}", "pairing_hist_weights_grads"
    )
)
issue15_run(_pairing(lambda n: f"{n}/weight", lambda n: f"{n}/grad", "pairing_p_weight_grad"))


# ============================================================================================
# 9-11, 14, 16. Static parameters, tiny-but-healthy gradients, nothing to judge
# ============================================================================================


@issue15_run
def dropped_param_group_static(log_dir: Path) -> list[Truth]:
    model, moved, losses = _histogram_run(
        log_dir, lambda n: n, lambda n: n + "/grad", layer_norm=True, drop_no_decay=True
    )
    static = [n for n, p in model.named_parameters() if p.ndim < 2]
    assert all(moved[n] == 0.0 for n in static) and all(
        moved[n] > 0 for n in moved if n not in static
    )
    why = (
        "AdamW built with the weight-decay group only (p.ndim >= 2): the no-decay group (biases,"
        " LayerNorm weight and bias) was forgotten, so those never change (bit-identical) while"
        " their gradients are healthy; the Linear weights train"
    )
    rows = [Truth(RUN, "static", 0, why=why)]
    for name, _ in model.named_parameters():
        expect = "static" if name in static else "ok"
        rows.append(
            Truth(
                name,
                expect,
                0 if name in static else None,
                (name, name + "/grad"),
                f"{why}; moved {moved[name]:.3g} (relative)",
            )
        )
    return rows


@issue15_run
def optimizer_step_never_called(log_dir: Path) -> list[Truth]:
    model, moved, _ = _histogram_run(
        log_dir, lambda n: n, lambda n: n + "/grad", optimizer_name="SGD", step_optimizer=False
    )
    assert not any(moved.values())
    why = (
        "loss.backward() every step but optimizer.step() never called: every weight"
        " bit-identical, gradients healthy"
    )
    return [Truth(RUN, "static", 0, why=why)] + [
        Truth(n, "static", 0, (n, n + "/grad"), why) for n, _ in model.named_parameters()
    ]


@issue15_run
def adam_loss_scaled_1e5_healthy(log_dir: Path) -> list[Truth]:
    model, moved, losses = _histogram_run(
        log_dir, lambda n: n, lambda n: n + "/grad", loss_scale=1e-5
    )
    assert np.mean(losses[-10:]) < np.mean(losses[:10]) / 2 and min(moved.values()) > 0.05
    why = (
        "Adam 3e-3 on the cross-entropy times 1e-5: every gradient is ~1e-5x its usual size but"
        " Adam's update does not depend on the scale; weights move normally (relative movement"
        f" {min(moved.values()):.2g}..{max(moved.values()):.2g}) and the loss falls"
        f" {np.mean(losses[:10]) / np.mean(losses[-10:]):.1f}x"
    )
    return [Truth(RUN, "ok", why=why)] + [
        Truth(n, "ok", None, (n, n + "/grad"), why) for n, _ in model.named_parameters()
    ]


@issue15_run
def weights_only_healthy(log_dir: Path) -> list[Truth]:
    _, moved, losses = _histogram_run(log_dir, lambda n: n, None)
    assert np.mean(losses[-10:]) < np.mean(losses[:10]) / 2
    return [
        Truth(
            RUN,
            "no-gradients",
            why="torch SummaryWriter histograms of the weights only (no gradient), Adam 3e-3,"
            " healthy: only NaN and weight movement can be judged",
        )
    ]


@issue15_run
def scalars_only(log_dir: Path) -> list[Truth]:
    torch = _torch()
    torch.manual_seed(0)
    x, y = _classes(torch)
    model = _mlp(torch, [8, 32, 3])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    writer = _writer(log_dir)
    for step, index in enumerate(_batches(torch, len(x), 32, 100)):
        optimizer.zero_grad()
        logits = model(x[index])
        loss = torch.nn.functional.cross_entropy(logits, y[index])
        loss.backward()
        optimizer.step()
        writer.add_scalar("loss", float(loss), step)
        writer.add_scalar("accuracy", float((logits.argmax(1) == y[index]).float().mean()), step)
    writer.close()
    return [
        Truth(RUN, "nothing-judgeable", why="torch SummaryWriter scalars loss and accuracy only")
    ]


# ============================================================================================
# 12. Gradients rising >= 1e4x while the logged loss still falls
# ============================================================================================


@issue15_run
def loss_falls_while_branch_explodes(log_dir: Path) -> list[Truth]:
    """GD instability in one branch only: a branch initialised near zero (1e-8, as zero-init
    residual branches are) reads unnormalised features (std 5) that carry no signal, so the
    learning rate that suits the main layer is above 2 / (its curvature) in that branch: its
    deviation grows 1.4x a step from the first update, its loss share from ~1e-16, so the total
    loss keeps falling (the main layer learns) while its gradient rises by orders of magnitude.
    Constructed (the branch's features are orthogonalised against the target and the other
    features so that nothing but the instability moves it), not found in the wild."""
    torch = _torch()
    generator = torch.Generator().manual_seed(5)
    rows = 256
    x = torch.randn(rows, 12, generator=generator)
    y = torch.tanh(x @ torch.randn(12, 1, generator=generator) / 2) * 2
    y = y + 0.05 * torch.randn(rows, 1, generator=generator)
    raw = torch.randn(rows, 4, generator=generator)
    basis, _ = torch.linalg.qr(torch.cat([torch.ones(rows, 1), x, y], dim=1))
    raw = raw - basis @ (basis.T @ raw)
    branch_x = raw / raw.std(dim=0) * 5
    curvature = float(torch.linalg.eigvalsh(2 * branch_x.T @ branch_x / rows).max())
    main_curvature = float(torch.linalg.eigvalsh(2 * x.T @ x / rows).max())
    lr = 2.4 / curvature
    torch.manual_seed(0)
    main = torch.nn.Linear(12, 1)
    branch = torch.nn.Linear(4, 1, bias=False)
    with torch.no_grad():
        branch.weight.normal_(0, 1e-8)
    model = torch.nn.ModuleDict({"main": main, "branch": branch})
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    writer = _writer(log_dir)
    losses: dict[int, float] = {}
    norms: dict[str, dict[int, float]] = {}
    steps = 44
    for step in range(steps):  # full batch
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(main(x) + branch(branch_x), y)
        loss.backward()
        writer.add_scalar("loss", float(loss), step)
        _log_histograms(writer, model, step, lambda n: n, lambda n: n + "/grad")
        for name, parameter in model.named_parameters():
            norms.setdefault(name, {})[step] = float(parameter.grad.norm())
        losses[step] = float(loss)
        optimizer.step()
    writer.close()
    lowest = min(losses, key=losses.__getitem__)
    rise_at_lowest = norms["branch.weight"][lowest] / norms["branch.weight"][0]
    rise = max(norms["branch.weight"].values()) / norms["branch.weight"][0]
    assert rise_at_lowest >= 1e4 and losses[steps - 1] < losses[0], (rise_at_lowest, losses)
    why = (
        f"full-batch GD lr {lr:.3g}: lr x curvature is {lr * main_curvature:.2f} in the main layer"
        f" and 2.4 in the branch (growth 1.4x a step from step 0); the loss falls from"
        f" {losses[0]:.3g} to {losses[lowest]:.3g} at step {lowest} while branch.weight's gradient"
        f" norm rises {rise_at_lowest:.2g}x, then {rise:.2g}x by step {steps - 1} where the loss is"
        f" {losses[steps - 1]:.3g} (still below its start); constructed, see the docstring"
    )
    return [
        Truth(RUN, "exploding", 0, why=why),
        Truth("branch.weight", "exploding", 0, ("branch.weight", "branch.weight/grad"), why),
        Truth("main.weight", "ok", None, ("main.weight", "main.weight/grad"), why),
        Truth("main.bias", "ok", None, ("main.bias", "main.bias/grad"), why),
    ]


# ============================================================================================
# 5. TF1 graph mode through tf.compat.v1: summary names uniquified by TensorFlow
# ============================================================================================


def _tf1_run(log_dir: Path, grad_name: Callable[[str], str]) -> list[tuple[str, str, str]]:
    """A 2-layer Tanh regressor built from ``variable_scope(None, default_name="dense")`` layers
    (scopes ``dense``, ``dense_1``), SGD 0.05, ``tf.compat.v1.summary.histogram(var.op.name,
    var)`` and ``histogram(grad_name(var.op.name), grad)`` merged and written every 5 steps by a
    ``FileWriter``. TensorFlow uniquifies a summary's name against the graph's op names, so the
    tag is not the name asked for: ``(variable, weight tag, gradient tag)`` as written."""
    tf = _tf()
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    rng = np.random.default_rng(0)
    x_data = rng.normal(size=(256, 8)).astype(np.float32)
    y_data = np.tanh(x_data @ rng.normal(size=(8, 1)) / 2).astype(np.float32) * 2
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(0)
        x = v1.placeholder(tf.float32, [None, 8])
        y = v1.placeholder(tf.float32, [None, 1])

        def dense(inputs: Any, units: int, activation: Any) -> Any:
            with v1.variable_scope(None, default_name="dense"):
                kernel = v1.get_variable("kernel", [inputs.shape[1], units])
                bias = v1.get_variable("bias", [units], initializer=v1.zeros_initializer())
                out = tf.matmul(inputs, kernel) + bias
                return activation(out) if activation else out

        prediction = dense(dense(x, 16, tf.nn.tanh), 1, None)
        loss = tf.reduce_mean(tf.square(prediction - y))
        optimizer = v1.train.GradientDescentOptimizer(0.05)
        grads_and_vars = optimizer.compute_gradients(loss)
        train = optimizer.apply_gradients(grads_and_vars)
        summaries = [v1.summary.scalar("loss", loss)]
        tags = []
        for grad, var in grads_and_vars:
            weight = v1.summary.histogram(var.op.name, var)
            gradient = v1.summary.histogram(grad_name(var.op.name), grad)
            summaries += [weight, gradient]
            tags.append((var.op.name, weight.op.name, gradient.op.name))
        merged = v1.summary.merge(summaries)
        writer = v1.summary.FileWriter(str(log_dir))
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            for step in range(100):
                rows = rng.integers(0, 256, 32)
                feed = {x: x_data[rows], y: y_data[rows]}
                if step % 5 == 0:
                    writer.add_summary(session.run(merged, feed), step)
                session.run(train, feed)
        writer.close()
    return tags


def _tf1_truth(tags: list[tuple[str, str, str]], how: str) -> list[Truth]:
    why = (
        f"TF1 graph mode (tf.compat.v1, FileWriter), {how}; the summary op's name is uniquified"
        " against the graph's ops, and that name is the tag: weight and gradient tags as"
        " written, the weight tag first; SGD 0.05, healthy"
    )
    return [Truth(RUN, "ok", why=why)] + [
        Truth(variable, "ok", None, (weight, gradient), why) for variable, weight, gradient in tags
    ]


@issue15_run
def tf1_graph_uniquified(log_dir: Path) -> list[Truth]:
    tags = _tf1_run(log_dir, lambda name: name + "/gradient")
    assert all(weight == variable + "_1" for variable, weight, _ in tags), tags
    return _tf1_truth(
        tags, "histogram(var.op.name, var) and histogram(var.op.name + '/gradient', grad)"
    )


@issue15_run
def tf1_graph_same_name(log_dir: Path) -> list[Truth]:
    tags = _tf1_run(log_dir, lambda name: name)
    assert all(g == v + "_2" for v, _, g in tags), tags
    return _tf1_truth(
        tags, "histogram(var.op.name, var) and histogram(var.op.name, grad): the same name twice"
    )


# ============================================================================================
# 6, 13, 15. Keras 3 model.fit with TensorBoard(histogram_freq=1)
# ============================================================================================


def _keras_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8)).astype(np.float32)
    return x, (np.tanh(x @ rng.normal(size=(8, 1)) / 2) * 2).astype(np.float32)


def _keras_model() -> Any:
    import keras

    _tf()
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="tanh", name="hidden"),
            keras.layers.Dense(1, name="out"),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="mse")
    return model


def _tensorboard(log_dir: Path) -> Any:
    import keras

    return keras.callbacks.TensorBoard(
        log_dir=str(log_dir), histogram_freq=1, write_graph=False, profile_batch=0
    )


def _event_tags(directory: Path) -> dict[str, tuple[str, list[int]]]:
    """``{tag: (file name, steps)}`` of the histograms under ``directory``, file by file."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    found: dict[str, tuple[str, list[int]]] = {}
    for path in sorted(directory.glob("*tfevents*")):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == "histograms":
                    found.setdefault(f"{path.name}:{value.tag}", (path.name, []))[1].append(
                        event.step
                    )
    return found


def _keras_variables(model: Any) -> list[str]:
    return [variable.path for variable in model.trainable_weights]


@issue15_run
def keras_resumed_from_checkpoint(log_dir: Path) -> list[Truth]:
    import keras

    x, y = _keras_data()
    model = _keras_model()
    model.fit(x, y, epochs=3, batch_size=32, verbose=0, callbacks=[_tensorboard(log_dir)])
    with tempfile.TemporaryDirectory() as keep:
        checkpoint = Path(keep) / "model.keras"
        model.save(checkpoint)
        keras.backend.clear_session()
        model = keras.models.load_model(checkpoint)
    model.fit(
        x, y, epochs=6, initial_epoch=3, batch_size=32, verbose=0, callbacks=[_tensorboard(log_dir)]
    )
    found = _event_tags(log_dir / "train")
    files = sorted({name for name, _ in found.values()})
    per_file = {
        f: sorted({key.split(":", 1)[1] for key, (name, _) in found.items() if name == f})
        for f in files
    }
    steps = {
        f: sorted({s for key, (name, st) in found.items() if name == f for s in st}) for f in files
    }
    described = "; ".join(
        f"file {i + 1}: tags {','.join(per_file[f])} at epochs {steps[f]}"
        for i, f in enumerate(files)
    )
    why = (
        "Keras 3 fit 3 epochs with TensorBoard(histogram_freq=1), model.save(.keras),"
        " keras.models.load_model, fit(epochs=6, initial_epoch=3) with a new TensorBoard on the"
        " same log dir, Adam 3e-3, healthy (weights only, no gradients). What was written:"
        f" {described}"
    )
    assert not (log_dir / "validation").exists()  # no validation data, no validation run
    rows = [Truth(RUN, "no-gradients", run="train", why=why)]
    tags_by_variable: dict[str, list[str]] = {}
    for tags in per_file.values():
        for tag in tags:
            base = tag.removesuffix("/histogram")
            key = base.split("/", 1)[-1] if base.count("/") >= 2 else base
            tags_by_variable.setdefault(key, []).append(tag)
    for variable, tags in tags_by_variable.items():
        why = "one parameter: its tag lost the model's name ('sequential/') after load_model"
        rows.append(Truth(variable, "ok", None, tuple(sorted(set(tags))), why, run="train"))
    return rows


@issue15_run
def keras_fit_train_validation(log_dir: Path) -> list[Truth]:
    x, y = _keras_data()
    model = _keras_model()
    model.fit(
        x,
        y,
        epochs=6,
        batch_size=32,
        verbose=0,
        validation_split=0.25,
        callbacks=[_tensorboard(log_dir)],
    )
    assert (log_dir / "validation").is_dir() and not _event_tags(log_dir / "validation")
    why = (
        "Keras 3 fit with TensorBoard(histogram_freq=1) and validation_split=0.25, Adam 3e-3,"
        " healthy"
    )
    tags = sorted({key.split(":", 1)[1] for key in _event_tags(log_dir / "train")})
    return [
        Truth(
            RUN,
            "no-gradients",
            run="train",
            why=f"{why}: weight histograms only ({','.join(tags)}), no gradient",
        ),
        Truth(
            RUN,
            "nothing-judgeable",
            run="validation",
            why=f"{why}: epoch scalars only (loss), no histogram",
        ),
    ]


@issue15_run
def keras_gradient_logger_and_tensorboard(log_dir: Path) -> list[Truth]:
    from gradcheck.keras import GradientLogger

    x, y = _keras_data()
    model = _keras_model()
    logger = GradientLogger(str(log_dir / "gradcheck"), data=(x[:128], y[:128]), every_n_steps=4)
    model.fit(
        x,
        y,
        epochs=6,
        batch_size=32,
        verbose=0,
        callbacks=[_tensorboard(log_dir / "keras"), logger],
    )
    variables = _keras_variables(model)
    why = (
        "one Keras 3 fit, Adam 3e-3, healthy, with two callbacks: gradcheck.keras.GradientLogger"
        " (every 4 steps, weights and gradients) into gradcheck/ and the stock"
        " TensorBoard(histogram_freq=1) (weights per epoch) into keras/train: the same"
        " parameters, verdicts must agree; steps differ: optimizer iterations (0..48) in"
        " gradcheck/, epochs (0..5) in keras/train"
    )
    rows = [
        Truth(RUN, "ok", run="gradcheck", why=why),
        Truth(RUN, "no-gradients", run="keras/train", why=why),
    ]
    rows += [
        Truth(v, "ok", None, (f"weights/{v}", f"gradients/{v}"), why, "gradcheck")
        for v in variables
    ]
    rows += [Truth(v, "ok", None, (f"{v}/histogram",), why, "keras/train") for v in variables]
    return rows


# ============================================================================================
# Driver
# ============================================================================================


def make_one(name: str, out: Path) -> list[dict[str, str]]:
    """Run ``name`` into ``out/name`` (emptied first); its TRUTH rows as strings."""
    log_dir = out / name
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    rows = RUNS[name](log_dir)
    sizes = {str(p.relative_to(out)): p.stat().st_size for p in log_dir.rglob("*tfevents*")}
    assert sizes, f"{name} wrote no event file"
    assert max(sizes.values()) < 1_000_000, sizes
    print(f"{name}: {sum(sizes.values()) / 1000:.0f} KB in {len(sizes)} file(s)", file=sys.stderr)
    return [_row(name, truth) for truth in rows]


def _row(name: str, truth: Truth) -> dict[str, str]:
    fields = asdict(truth)
    return {
        "run": f"{name}/{truth.run}" if truth.run else name,
        "parameter": truth.parameter,
        "expect": truth.expect,
        "step": "-" if truth.step is None else str(truth.step),
        "tags": ",".join(truth.tags) or "-",
        "why": " ".join(str(fields["why"]).split()) or "-",
    }


def read_truth(path: Path) -> list[dict[str, str]]:
    """The rows of a ``TRUTH.tsv``."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [dict(zip(COLUMNS, line.split("\t"), strict=True)) for line in lines[1:]]


def write_truth(path: Path, rows: list[dict[str, str]]) -> None:
    order = {name: i for i, name in enumerate(RUNS)}
    rows = sorted(rows, key=lambda row: order[row["run"].split("/")[0]])  # stable within a run
    lines = ["\t".join(COLUMNS), *("\t".join(row[c] for c in COLUMNS) for row in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("tests/data/runs15"))
    parser.add_argument("--runs", nargs="+", choices=sorted(RUNS), help="only these runs")
    parser.add_argument("--child", choices=sorted(RUNS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one run in this process; its rows as JSON on the last line of stdout
        print(json.dumps(make_one(args.child, args.out)))
        return
    names = args.runs or list(RUNS)
    args.out.mkdir(parents=True, exist_ok=True)
    truth_path = args.out / "TRUTH.tsv"
    rows = [row for row in read_truth(truth_path) if row["run"].split("/")[0] not in names]
    for name in names:
        command = [sys.executable, __file__, "--out", str(args.out), "--child", name]
        done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
        rows += json.loads(done.stdout.strip().splitlines()[-1])
        write_truth(truth_path, rows)  # after each run: partial results stay usable


if __name__ == "__main__":
    main()
