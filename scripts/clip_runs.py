"""Real PyTorch runs for the question "where and how should I clip?".

    python scripts/clip_runs.py --out sample_clipping [--only NAME ...]

A small LSTM (16 units, a linear head on the last of 30 time steps; the target is the first
step's input) trained with Adam for 40 steps, logged every 2 steps by
``gradcheck.torch.log_gradients`` *after* the clip, so that the log shows it:

- ``none``: no clipping;
- ``global_tight``/``global_loose``: ``clip_grad_norm_(model.parameters(), 0.1 / 0.5)``;
- ``per_tensor``: ``clip_grad_norm_([p], 0.05)`` for each parameter alone (what Keras
  ``clipnorm`` and ``tf.clip_by_norm`` per tensor do);
- ``value``: ``clip_grad_value_(model.parameters(), 0.01)``;
- ``rnn_vanishing``: three plain ``nn.RNN`` layers scaled to 0.3 of their init, SGD 0.01, no
  clip: the first layer's gradient vanishes.

Seeded; seconds each on 2 CPU cores. The tests
(``tests/verdicts/real/test_clipping_real.py``) write every run into a temporary directory, with
the pre-clip numbers the loop saw; the clipping guide's transcript
reads ``sample_clipping/value`` and ``sample_clipping/none``, written by this script
(``python scripts/clip_runs.py --out sample_clipping --only none value``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils.tensorboard import SummaryWriter

from gradcheck.torch import log_gradients

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared _training.py
from _training import out_and_only  # noqa: E402

STEPS, EVERY, BATCH = 40, 2, 32


@dataclass
class Logged:
    """What the loop saw at the logged steps, before clipping."""

    path: Path
    global_norms: list[float] = field(default_factory=list)
    largest_tensor_norms: list[float] = field(default_factory=list)
    largest_elements: list[float] = field(default_factory=list)


class Recurrent(torch.nn.Module):
    """``depth`` recurrent layers of 16 units and a linear head on the last time step."""

    def __init__(self, cell: type, depth: int = 1, scale: float = 1.0) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(
            cell(3 if i == 0 else 16, 16, batch_first=True) for i in range(depth)
        )
        with torch.no_grad():
            for parameter in self.layers.parameters():
                parameter.mul_(scale)
        self.head = torch.nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x, _ = layer(x)
        return self.head(x[:, -1])


def train(log_dir: Path, clip: str | None = None, limit: float = 0.0, **model: Any) -> Logged:
    """Adam (SGD for the plain-RNN stack) on a memory task: the target is the first of 30
    time steps' input, the loss is taken at the last one."""
    torch.manual_seed(0)
    net = Recurrent(**model)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(256, 30, 3, generator=generator)
    y = x[:, 0, :1]
    plain = model.get("cell") is torch.nn.RNN
    optimizer = (
        torch.optim.SGD(net.parameters(), lr=0.01)
        if plain
        else torch.optim.Adam(net.parameters(), lr=0.01)
    )
    writer = SummaryWriter(str(log_dir))
    logged = Logged(log_dir)
    for step in range(STEPS):
        batch = slice((step * BATCH) % 256, (step * BATCH) % 256 + BATCH)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x[batch]), y[batch])
        loss.backward()
        gradients = [p.grad for p in net.parameters()]
        if step % EVERY == 0:
            flat = torch.cat([g.flatten() for g in gradients])
            logged.global_norms.append(float(flat.norm()))
            logged.largest_tensor_norms.append(max(float(g.norm()) for g in gradients))
            logged.largest_elements.append(max(float(g.abs().max()) for g in gradients))
        if clip == "global":
            torch.nn.utils.clip_grad_norm_(net.parameters(), limit)
        elif clip == "per_tensor":
            for parameter in net.parameters():
                torch.nn.utils.clip_grad_norm_([parameter], limit)
        elif clip == "value":
            torch.nn.utils.clip_grad_value_(net.parameters(), limit)
        if step % EVERY == 0:
            log_gradients(writer, net, step, bins=30)
            writer.add_scalar("loss", loss.item(), step)
        optimizer.step()
    writer.close()
    return logged


LSTM: dict[str, Any] = {"cell": torch.nn.LSTM}
RUNS: dict[str, dict[str, Any]] = {
    "none": LSTM,
    "global_tight": {"clip": "global", "limit": 0.1, **LSTM},
    "global_loose": {"clip": "global", "limit": 0.5, **LSTM},
    "per_tensor": {"clip": "per_tensor", "limit": 0.05, **LSTM},
    "value": {"clip": "value", "limit": 0.01, **LSTM},
    "rnn_vanishing": {"cell": torch.nn.RNN, "depth": 3, "scale": 0.3},
}


def write_runs(out: Path, names: list[str] | None = None) -> dict[str, Logged]:
    """Each run (all, or ``names``) into ``out/<name>``, with what its loop saw."""
    return {name: train(out / name, **RUNS[name]) for name in names or list(RUNS)}


def main() -> None:
    write_runs(*out_and_only(__doc__ or "", list(RUNS)))


if __name__ == "__main__":
    main()
