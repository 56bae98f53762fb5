"""Write ``tests/data/sweep/``: a learning-rate sweep of ten small PyTorch runs (issue 20).

The same tanh MLP and regression task for every run, SGD with momentum 0.9; only the learning
rate and the batch size change. Low rates train, high ones blow up (the gradient norm climbs
by orders of magnitude, then NaN). Each run logs its hyperparameters with the TensorBoard
HParams plugin in its own event file (``session_start_info``, as ``SummaryWriter.add_hparams``
does but without its separate sub-run) and carries them in its directory name too
(``lr_0.3_bs32``), so both sources gradcheck reads are exercised.

    python scripts/make_sweep.py --out tests/data/sweep
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import torch
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

from gradcheck.torch import log_gradients

LEARNING_RATES = (0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.4, 0.6, 1.0, 2.0)
BATCH_SIZES = (32, 64)  # alternating: unrelated to the verdicts
STEPS = 40
EVERY = 2
BINS = 10  # equal-width buckets: PyTorch's default bins are ~10 KB a histogram


def train(log_dir: Path, lr: float, batch_size: int) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=generator)
    y = torch.tanh(x @ torch.randn(8, 1, generator=generator)) * 3
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    writer = SummaryWriter(str(log_dir))
    hparam_values = {"lr": lr, "bs": batch_size, "optimizer": "sgd", "momentum": 0.9}
    experiment, start, end = hparams(hparam_values, {"loss": 0.0})
    writer.file_writer.add_summary(experiment)
    writer.file_writer.add_summary(start)
    for step in range(STEPS):
        batch = torch.randint(0, len(x), (batch_size,), generator=generator)
        loss = torch.nn.functional.mse_loss(model(x[batch]), y[batch])
        model.zero_grad()
        loss.backward()
        if step % EVERY == 0 or step == STEPS - 1:
            writer.add_scalar("loss", loss.item(), step)
            log_gradients(writer, model, step, bins=BINS)
        optimizer.step()
    writer.file_writer.add_summary(end)
    writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    out = parser.parse_args().out
    for number, lr in enumerate(LEARNING_RATES):
        batch_size = BATCH_SIZES[number % len(BATCH_SIZES)]
        log_dir = out / f"lr_{lr}_bs{batch_size}"
        shutil.rmtree(log_dir, ignore_errors=True)
        train(log_dir, lr, batch_size)


if __name__ == "__main__":
    main()
