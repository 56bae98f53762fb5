"""Real torch runs for the loss-spike rule (issue 35), logged with ``gradcheck.torch`` (exact
per-parameter gradient norms) and a ``loss`` scalar, seconds each, for
tests/verdicts/real/test_spikes_real.py:

- ``spikes``: a small model (``embed``, ``hidden``, ``lm_head``) trained with SGD; at steps
  100, 200 and 300 the gradient of ``lm_head.weight`` is multiplied by 300 before the update
  (as one bad batch does), so the loss logged at the next step spikes and recovers. The exact
  norms seen in the process are saved (``truth.json``: each injected step's rises, every
  parameter's norm over its own median of the previous 20 logged steps);
- ``noisy``: the same model on noisy targets with batches of 8: a loss that jumps around by
  tens of percent, healthy;
- ``diverging``: the same model at a learning rate that makes it blow up for good.

``python scripts/spike_runs.py DIR`` writes them under DIR.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

INJECT_AT = (100, 200, 300)
INJECT_FACTOR = 300.0
WINDOW = 20


def _model():  # noqa: ANN202
    import torch

    model = torch.nn.Sequential()
    model.add_module("embed", torch.nn.Linear(12, 32))
    model.add_module("act", torch.nn.Tanh())
    model.add_module("hidden", torch.nn.Linear(32, 32))
    model.add_module("act2", torch.nn.Tanh())
    model.add_module("lm_head", torch.nn.Linear(32, 4))
    return model


def _train(
    path: Path,
    steps: int,
    lr: float,
    batch: int,
    noise: float,
    inject: tuple[int, ...] = (),
    seed: int = 0,
) -> dict:
    import numpy as np
    import torch
    from torch.utils.tensorboard import SummaryWriter

    from gradcheck.torch import log_gradients

    torch.manual_seed(seed)
    model = _model()
    inputs = torch.randn(2048, 12)
    mixing = torch.randn(12, 4)
    targets = torch.tanh(inputs @ mixing) + noise * torch.randn(2048, 4)
    writer = SummaryWriter(str(path))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    norms: dict[str, list[float]] = {name: [] for name, _ in model.named_parameters()}
    rises: dict[int, dict[str, float]] = {}
    for step in range(steps):
        rows = torch.randint(0, 2048, (batch,))
        loss = torch.nn.functional.mse_loss(model(inputs[rows]), targets[rows])
        optimizer.zero_grad()
        loss.backward()
        if step in inject:
            model.lm_head.weight.grad.mul_(INJECT_FACTOR)
        writer.add_scalar("loss", loss.item(), step)
        log_gradients(writer, model, step, histograms=False)
        for name, parameter in model.named_parameters():
            norms[name].append(float(parameter.grad.double().norm()))
        if step in inject:
            rises[step] = {
                name: values[-1] / float(np.median(values[-1 - WINDOW : -1]))
                for name, values in norms.items()
            }
        optimizer.step()
    writer.close()
    truth = {"inject": list(inject), "rises": {str(k): v for k, v in rises.items()}}
    (path / "truth.json").write_text(json.dumps(truth))
    return truth


def write_runs(root: Path) -> dict[str, Path]:
    runs = {
        "spikes": dict(steps=400, lr=0.1, batch=64, noise=0.05, inject=INJECT_AT),
        "noisy": dict(steps=400, lr=0.1, batch=8, noise=0.5),
        "diverging": dict(steps=120, lr=3.0, batch=64, noise=0.05),
    }
    paths = {}
    for name, settings in runs.items():
        paths[name] = root / name
        _train(paths[name], **settings)
    return paths


if __name__ == "__main__":
    for name, made in write_runs(Path(sys.argv[1] if len(sys.argv) > 1 else "spike_runs")).items():
        print(name, made)
