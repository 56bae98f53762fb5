"""PyTorch runs whose weights stop moving part-way, and healthy runs that must not look so
(issue 30, point 2).

    python scripts/stop_runs_torch.py --out DIR [--only NAME ...]

Every run is a small tanh MLP (20 inputs, 64 and 64 units, one output; a noisy linear target)
trained here on CPU (one thread, seeded: deterministic) for 40 epochs of 12 batches (480
optimizer steps), logged as users log it with ``torch.utils.tensorboard.SummaryWriter``:
``add_histogram(name, parameter)`` and ``add_histogram(name + ".grad", parameter.grad)`` every
5 steps, the training loss (``loss``) at every step, and where said the learning rate
(``lr``, ``scheduler.get_last_lr()``).

- ``epochs_for_steps``: SGD lr 0.05 with momentum 0.9, a linear decay written for epochs
  (``LambdaLR(optimizer, lambda epoch: max(0.0, 1 - epoch / 40))``) but stepped every batch:
  the learning rate is exactly 0 from step 40 on, the weights bit-identical from the weights
  logged at step 40 to the end while the gradients stay as they were;
- ``epochs_for_steps_lr``: the same with the learning rate logged;
- ``cosine_to_small``: the same optimizer with ``CosineAnnealingLR(T_max=480)``: the learning
  rate decays to about 5e-7 (1e-5 of its start) at the last step, never 0: healthy;
- ``fine_tune``: 300 steps at lr 0.05 not logged, then 480 logged at lr 1e-4 (SGD, no
  momentum): small moves, healthy;
- ``converged``: a noiseless linear target, SGD lr 0.05 with momentum on full batches: the
  loss falls to ~1e-10 and the weights barely move near the end: healthy;
- ``layer_dies``: ReLU layers at SGD lr 0.01 with momentum, every unit of the second hidden
  layer dead from step 200 (``KILL_STEP``): the gradients of it and of the layer before are
  exactly 0 from then on.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EPOCHS = 40
BATCHES = 12
STEPS = EPOCHS * BATCHES
EVERY = 5
KILL_STEP = 200
"""``layer_dies``: the step its second hidden layer dies."""
STOP_STEP = 40
"""The first step whose learning rate is 0 (and the first logged step of the final weights:
weights are logged before the step's update)."""


@dataclass(frozen=True)
class Spec:
    """One run: its schedule, optimizer and what is logged."""

    schedule: str  # "epochs_for_steps", "cosine" or "constant"
    learning_rate: float = 0.05
    momentum: float = 0.9
    log_lr: bool = False
    pretrain_steps: int = 0
    noiseless: bool = False
    full_batch: bool = False
    activation: str = "tanh"
    kill_step: int | None = None
    """At this step every unit of the second hidden layer is pushed dead (its bias set to -50,
    what one huge update does to a ReLU layer): its gradients and those before it are exactly
    0 from then on."""


RUNS: dict[str, Spec] = {
    "epochs_for_steps": Spec("epochs_for_steps"),
    "epochs_for_steps_lr": Spec("epochs_for_steps", log_lr=True),
    "cosine_to_small": Spec("cosine", log_lr=True),
    "fine_tune": Spec("constant", learning_rate=1e-4, momentum=0.0, pretrain_steps=300),
    "converged": Spec("constant", noiseless=True, full_batch=True),
    "layer_dies": Spec("constant", learning_rate=0.01, activation="relu", kill_step=KILL_STEP),
}


def write_run(log_dir: Path, spec: Spec) -> list[float]:
    """Train ``spec`` and log it into ``log_dir``; return the learning rate of every step."""
    import torch
    from torch.utils.tensorboard import SummaryWriter

    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(BATCHES * 64, 20)
    noise = 0.0 if spec.noiseless else 0.1
    y = x @ torch.randn(20, 1) + noise * torch.randn(len(x), 1)
    activation = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[spec.activation]
    model = torch.nn.Sequential(
        torch.nn.Linear(20, 64),
        activation(),
        torch.nn.Linear(64, 64),
        activation(),
        torch.nn.Linear(64, 1),
    )
    generator = torch.Generator().manual_seed(1)
    if spec.pretrain_steps:
        _train(torch, model, x, y, generator, spec.pretrain_steps, 0.05, 0.9)
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.learning_rate, momentum=spec.momentum)
    scheduler = _scheduler(torch, optimizer, spec.schedule)
    writer = SummaryWriter(str(log_dir))
    rates = []
    for step in range(STEPS):
        if step == spec.kill_step:
            with torch.no_grad():
                model[2].bias.fill_(-50.0)
        inputs, targets = _batch(torch, x, y, generator, step, spec.full_batch)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        writer.add_scalar("loss", loss.item(), step)
        rate = scheduler.get_last_lr()[0] if scheduler else spec.learning_rate
        rates.append(rate)
        if spec.log_lr:
            writer.add_scalar("lr", rate, step)
        if step % EVERY == 0:
            for name, parameter in model.named_parameters():
                writer.add_histogram(name, parameter, step)
                writer.add_histogram(f"{name}.grad", parameter.grad, step)
        optimizer.step()
        if scheduler:
            scheduler.step()
    writer.close()
    return rates


def _scheduler(torch: Any, optimizer: Any, schedule: str) -> Any:
    if schedule == "epochs_for_steps":  # written for epochs, stepped every batch
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda epoch: max(0.0, 1 - epoch / EPOCHS)
        )
    if schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=STEPS)
    return None


def _batch(torch: Any, x: Any, y: Any, generator: Any, step: int, full: bool) -> tuple[Any, Any]:
    if full:
        return x, y
    index = torch.randint(0, len(x), (64,), generator=generator)
    return x[index], y[index]


def _train(
    torch: Any, model: Any, x: Any, y: Any, generator: Any, steps: int, rate: float, momentum: float
) -> None:
    """Train without logging (the pre-training a fine-tune starts from)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=rate, momentum=momentum)
    for step in range(steps):
        inputs, targets = _batch(torch, x, y, generator, step, False)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(inputs), targets).backward()
        optimizer.step()


def write_runs(out: Path, only: list[str] | None = None) -> dict[str, tuple[Path, list[float]]]:
    """Every run (or those in ``only``) under ``out/<name>``, with its learning rates."""
    return {
        name: (out / name, write_run(out / name, spec))
        for name, spec in RUNS.items()
        if not only or name in only
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    for name, (path, rates) in write_runs(args.out, args.only).items():
        print(name, path, "last learning rate", rates[-1])


if __name__ == "__main__":
    main()
