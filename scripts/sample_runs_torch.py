"""PyTorch training scripts behind ``sample_runs/torch_*`` (logged with ``gradcheck.torch``).

All three train a small MLP on the same synthetic regression task for seconds on one CPU thread,
deterministically (fixed seeds), and log with ``log_gradients`` plus a ``loss`` scalar.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch.utils.tensorboard import SummaryWriter

from gradcheck.torch import log_gradients

HISTOGRAM_BINS = 30  # equal-width buckets, as TF2 writes: PyTorch's default bins are ~10 KB each
SEED = 0


def _regression(rows: int = 512, features: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """A smooth target (scaled tanh of a random projection) plus a little noise."""
    generator = torch.Generator().manual_seed(SEED + 1)
    x = torch.randn(rows, features, generator=generator)
    projection = torch.randn(features, 1, generator=generator)
    y = torch.tanh(x @ projection / 4) * 3 + 0.1 * torch.randn(rows, 1, generator=generator)
    return x, y


def _tanh_mlp(features: int = 16, width: int = 64) -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(features, width),
        torch.nn.Tanh(),
        torch.nn.Linear(width, width),
        torch.nn.Tanh(),
        torch.nn.Linear(width, 1),
    )


def _seed() -> None:
    """Same initial weights and batches at every regeneration."""
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def _train(
    log_dir: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    steps: int,
    every: int,
    clip_norm: float | None = None,
) -> None:
    """SGD-style loop on the regression task, logging every ``every`` steps (and the last).

    Logging comes after ``backward`` and before clipping and ``optimizer.step()``, so the
    logged gradients (and ``gradient_norm/global``) are the ones the clipper saw.
    """
    generator = torch.Generator().manual_seed(SEED + 2)
    x, y = _regression()
    writer = SummaryWriter(str(log_dir))
    for step in range(steps):
        batch = torch.randint(0, len(x), (64,), generator=generator)
        loss = torch.nn.functional.mse_loss(model(x[batch]), y[batch])
        model.zero_grad()  # every parameter, also those the optimizer does not hold
        loss.backward()
        if step % every == 0 or step == steps - 1:
            writer.add_scalar("loss", loss.item(), step)
            log_gradients(writer, model, step, bins=HISTOGRAM_BINS)
        if clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
    writer.close()


def torch_exploding_nan(log_dir: Path) -> None:
    """Learning rate 0.2 with momentum 0.9 is too large for this tanh MLP: the gradient norm
    climbs by orders of magnitude from step ~8 and becomes NaN around step 65."""
    _seed()
    model = _tanh_mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    _train(log_dir, model, optimizer, steps=80, every=2)


def torch_clipped(log_dir: Path) -> None:
    """The exploding run's model, data and optimizer, with ``clip_grad_norm_(max_norm=1.0)``:
    it trains (loss 3.8 -> ~0.02). The logged global norm is the pre-clip one."""
    _seed()
    model = _tanh_mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    _train(log_dir, model, optimizer, steps=300, every=10, clip_norm=1.0)


def torch_frozen(log_dir: Path) -> None:
    """A frozen first layer (``requires_grad=False``) and a BatchNorm whose gamma/beta get
    gradients but were left out of the optimizer, so they never move; the rest trains."""
    _seed()
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 64),
        torch.nn.BatchNorm1d(64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 1),
    )
    model[0].requires_grad_(False)
    trained = [p for name, p in model.named_parameters() if not name.startswith(("0.", "1."))]
    optimizer = torch.optim.Adam(trained, lr=1e-3)
    _train(log_dir, model, optimizer, steps=200, every=10)


RUNS = {
    "torch_exploding_nan": torch_exploding_nan,
    "torch_clipped": torch_clipped,
    "torch_frozen": torch_frozen,
}
