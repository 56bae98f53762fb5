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
  can be seen: the loss's rise says where the blow-up began.
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


@dataclass
class Truth:
    """What happened in process: the loss and every parameter's exact gradient norm by step
    (before any clipping), the first non-finite loss step."""

    loss: list[float] = field(default_factory=list)
    norms: dict[str, list[float]] = field(default_factory=dict)
    nan_step: int | None = None


RUNS: dict[str, Spec] = {
    "mlp_nan_sparse": Spec((64, 64), "tanh", 0.5, momentum=0.9, every=5),
    "mlp_nan_loss_first": Spec((64, 64, 64, 64), "relu", 0.5, momentum=0.9, every=5),
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
    x = torch.randn(512, 20) * spec.input_scale
    y = (x @ torch.randn(20, 1) + 0.1 * torch.randn(512, 1)) * spec.target_scale
    activation = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[spec.activation]
    layers: list[Any] = []
    width = 20
    for size in spec.hidden:
        layers += [torch.nn.Linear(width, size), activation()]
        width = size
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.learning_rate, momentum=spec.momentum)
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
