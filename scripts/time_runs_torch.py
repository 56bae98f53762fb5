"""PyTorch runs whose trouble starts part-way, with their exact onsets (issue 30).

    python scripts/time_runs_torch.py --out DIR [--only NAME ...]

Every run is a small MLP trained here on CPU (one thread, seeded: deterministic), its weights
and gradients logged by ``gradcheck.torch.log_gradients`` (histograms, exact norms, the global
norm) through ``torch.utils.tensorboard.SummaryWriter``, the training loss at every step. The
exact per-parameter gradient norms of every step are kept in process (``Truth.norms``), so a
test can compare gradcheck's onsets with the step where they really began.

- ``mlp_nan_sparse``: a regression MLP (two tanh layers) at SGD lr 0.5 with momentum 0.9,
  gradients logged every 5 steps: the loss rises by orders of magnitude from step 2, the
  weights are thrown far off by step 5, the loss is NaN from step 18 (issue 30's MLP at lr
  0.5: no vanishing, no "stalled", no movement figure, the blow-up's hint);
- ``mlp_nan_loss_first``: four ReLU layers, the same optimizer and logging: the loss is NaN
  from step 8 and the gradients are logged finite at steps 0 and 5 only, so no gradient rise
  can be seen: the loss's rise says where the blow-up began;
- ``lr_step_typo``: two tanh layers at SGD lr 0.01 with momentum, a step schedule typed 50x
  instead of 0.02x at step 40: the gradients explode from step 41 (exactly: the first
  gradient after the first such update), NaN from step 53;
- ``loss_spike_recovers``: the same at lr 0.01 but for one update at 150x (step 30): the loss
  jumps from 0.54 to 190 and 280, then falls back to 2.4 and below: a spike, not divergence;
- ``zero_grad_forgotten``: four ReLU layers at SGD lr 1e-4 with momentum 0.9, gradients never
  zeroed: the global gradient norm grows linearly for 60 steps (2.8 to 157), then blows up
  from step 68 (115 to 600 by step 100);
- ``warm_up_too_high``: two tanh layers, a linear warm-up to lr 0.3 with momentum 0.9: the
  gradients climb from step 36-38 (lr 0.11) and the run is NaN from step 111;
- ``rnn_unclipped``: a tanh RNN at SGD lr 0.05 with momentum 0.9, no clipping: spiky
  gradients (up to 60x their early level) and a burst at steps 251-253 (6.8e3);
- ``late_after_plateau``: two tanh layers at lr 0.01 with momentum, the loss flat at ~0.07
  by step 150, then the learning rate raised steeply (:func:`rising_after_plateau`): the
  gradients climb from step 181-183 and the run is NaN from step 209.

The last four log every step, so a logged step is an optimizer step.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Spec:
    """One MLP run: its layers, optimizer and logging."""

    hidden: tuple[int, ...]
    activation: str
    learning_rate: float
    momentum: float = 0.0
    steps: int = 60
    every: int = 1
    seed: int = 0
    input_scale: float = 1.0
    target_scale: float = 1.0
    schedule: Callable[[int], float] | None = None
    """Learning-rate factor by step (``LambdaLR``), logged as ``lr`` when given."""
    accumulate: bool = False
    """``optimizer.zero_grad()`` forgotten: gradients add up from step to step."""
    clip: float | None = None
    """``clip_grad_norm_`` to this global norm after the gradients are logged."""
    model: str = "mlp"
    """``mlp``: ``hidden`` Linear layers; ``rnn``: one ``torch.nn.RNN`` (tanh) of width
    ``hidden[0]`` over sequences of 20 steps (the sum of the inputs so far is the target)."""
    optimizer: str = "sgd"
    """``sgd`` (with ``momentum``) or ``adam``."""


@dataclass
class Truth:
    """What happened in process: the loss and every parameter's exact gradient norm by step
    (before any clipping), the first non-finite loss step."""

    loss: list[float] = field(default_factory=list)
    norms: dict[str, list[float]] = field(default_factory=dict)
    nan_step: int | None = None


def lr_step_typo(step: int) -> float:
    """A step schedule whose factor was typed 50 instead of 0.02: from step 40 on, the
    learning rate is 50x (the gradient computed after the first such update, at step 41, is
    the first affected: the exact onset)."""
    return 1.0 if step < 40 else 50.0


def lr_spike(step: int) -> float:
    """One update at 150x the learning rate (step 30): the loss spikes 300x the level it had
    reached and training recovers from it."""
    return 150.0 if step == 30 else 1.0


def warm_up(step: int) -> float:
    """A linear warm-up over 100 steps to a peak learning rate far too high: the run blows up
    part-way through it, where the learning rate crosses what the loss's curvature allows."""
    return min(1.0, (step + 1) / 100)


def rising_after_plateau(step: int) -> float:
    """The learning rate held for 150 steps (the loss has plateaued), then raised by half of
    its value every step (a cyclic schedule's rising half set far too steep): the run blows up
    late, some 30 steps after the rise began."""
    return 1.0 if step < 150 else 1.0 + (step - 150) / 2


TYPO_ONSET = 41
"""The first step whose gradient the typo'd learning rate changed."""

RUNS: dict[str, Spec] = {
    "mlp_nan_sparse": Spec((64, 64), "tanh", 0.5, momentum=0.9, every=5),
    "mlp_nan_loss_first": Spec((64, 64, 64, 64), "relu", 0.5, momentum=0.9, every=5),
    "lr_step_typo": Spec((64, 64), "tanh", 0.01, momentum=0.9, steps=60, schedule=lr_step_typo),
    "loss_spike_recovers": Spec((64, 64), "tanh", 0.01, momentum=0.9, steps=80, schedule=lr_spike),
    "zero_grad_forgotten": Spec((64, 64), "relu", 1e-4, momentum=0.9, steps=250, accumulate=True),
    "warm_up_too_high": Spec((64, 64), "tanh", 0.3, momentum=0.9, steps=120, schedule=warm_up),
    "rnn_unclipped": Spec((32,), "tanh", 0.05, momentum=0.9, steps=300, model="rnn"),
    "late_after_plateau": Spec(
        (64, 64), "tanh", 0.01, momentum=0.9, steps=220, schedule=rising_after_plateau
    ),
}


def _torch() -> Any:
    import torch

    torch.set_num_threads(1)
    return torch


def write_run(log_dir: Path, spec: Spec) -> Truth:
    """Train ``spec`` and log it into ``log_dir``; return what happened."""
    torch = _torch()
    from torch.utils.tensorboard import SummaryWriter

    from gradcheck.torch import log_gradients

    torch.manual_seed(spec.seed)
    x, y, model = _rnn(torch, spec) if spec.model == "rnn" else _mlp(torch, spec)
    if spec.optimizer == "adam":
        optimizer: Any = torch.optim.Adam(model.parameters(), lr=spec.learning_rate)
    else:
        optimizer = torch.optim.SGD(
            model.parameters(), lr=spec.learning_rate, momentum=spec.momentum
        )
    scheduler = (
        torch.optim.lr_scheduler.LambdaLR(optimizer, spec.schedule) if spec.schedule else None
    )
    generator = torch.Generator().manual_seed(spec.seed + 1)
    truth = Truth(norms={name: [] for name, _ in model.named_parameters()})
    writer = SummaryWriter(str(log_dir))
    for step in range(spec.steps):
        index = torch.randint(0, len(x), (64,), generator=generator)
        if not spec.accumulate:
            optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[index]), y[index])
        loss.backward()
        truth.loss.append(float(loss.item()))
        if truth.nan_step is None and not math.isfinite(truth.loss[-1]):
            truth.nan_step = step
        for name, parameter in model.named_parameters():
            truth.norms[name].append(float(parameter.grad.double().norm()))
        writer.add_scalar("loss", truth.loss[-1], step)
        if scheduler is not None:
            writer.add_scalar("lr", optimizer.param_groups[0]["lr"], step)
        if step % spec.every == 0:
            log_gradients(writer, model, step)
        if spec.clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), spec.clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    writer.close()
    return truth


def _mlp(torch: Any, spec: Spec) -> tuple[Any, Any, Any]:
    """Inputs, targets (a noisy linear function) and an MLP of ``spec.hidden`` layers."""
    x = torch.randn(512, 20) * spec.input_scale
    y = (x @ torch.randn(20, 1) + 0.1 * torch.randn(512, 1)) * spec.target_scale
    activation = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[spec.activation]
    layers: list[Any] = []
    width = 20
    for size in spec.hidden:
        layers += [torch.nn.Linear(width, size), activation()]
        width = size
    return x, y, torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))


def _rnn(torch: Any, spec: Spec) -> tuple[Any, Any, Any]:
    """Sequences of 20 steps of 4 inputs, the running sum of the first input as the target,
    and a one-layer tanh RNN of width ``spec.hidden[0]`` with a linear read-out."""

    class Recurrent(torch.nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.rnn = torch.nn.RNN(4, spec.hidden[0], batch_first=True)
            self.out = torch.nn.Linear(spec.hidden[0], 1)

        def forward(self, inputs: Any) -> Any:
            states, _ = self.rnn(inputs)
            return self.out(states)

    x = torch.randn(512, 20, 4) * spec.input_scale
    y = torch.cumsum(x[..., :1], dim=1) * spec.target_scale
    return x, y, Recurrent()


def write_runs(out: Path, only: list[str] | None = None) -> dict[str, tuple[Path, Truth]]:
    """Every run (or those in ``only``) under ``out/<name>``, with its truth."""
    found = {}
    for name, spec in RUNS.items():
        if not only or name in only:
            found[name] = (out / name, write_run(out / name, spec))
    return found


def first_above(values: list[float], factor: float, baseline_steps: int = 3) -> int | None:
    """The first step at which ``values`` are ``factor`` times the median of their first
    ``baseline_steps`` or more (or non-finite)."""
    baseline = float(np.median(values[:baseline_steps]))
    for step, value in enumerate(values):
        if not math.isfinite(value) or value >= factor * baseline:
            return step
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    for name, (path, truth) in write_runs(args.out, args.only).items():
        print(name, path, "loss NaN at", truth.nan_step)


if __name__ == "__main__":
    main()
