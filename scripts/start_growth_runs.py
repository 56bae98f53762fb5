"""Runs whose weights blow up between the first and the second logged step, and their healthy
twins (weights that legitimately grow by orders of magnitude from a tiny start).

    python scripts/start_growth_runs.py --out DIR [--only NAME ...]

- ``hf_lr5`` (``hf_lr5_every1``): a tiny GPT-2 built from a config (2 layers of width 32,
  vocabulary 100: no download) trained on random tokens by ``transformers.Trainer`` at AdamW's
  learning rate 5 (linear decay, the Trainer's default clipping at 1.0), reporting to
  TensorBoard every 5 steps with ``gradcheck.hf.GradientLogger(trainer, every_n_steps=5)``
  (logged at steps 1, 6, 11, ...), or every step: every matrix grows 500-2,500x in the first
  5 steps, the loss is 773 at its first log (step 5; ln 100 = 4.6 at the start);
- ``hf_lr5e-4`` and ``hf_lr0.05``: the same at 5e-4 (the loss stays near 4.3) and at 0.05
  (weights grow up to 26x, gradients fall 6x);
- ``torch_layerscale``: a residual MLP whose branches are scaled by LayerScale gammas at 1e-6
  (CaiT, ConvNeXt), AdamW at 3e-3, logged with ``gradcheck.torch.log_gradients`` at step 0 and
  every 10 steps: the gammas grow by orders of magnitude, the matrices do not;
- ``torch_lora``: a frozen linear layer with a LoRA adapter (A random, B zero) and a
  zero-initialised head, Adam at 1e-3, logged every 10 steps: B and the head start at zero;
- ``torch_sparse``: an MLP trained by Adam at 1e-3 for 500 steps, logged at step 0 and then
  every 100 steps.

Deterministic (seeded, one thread); seconds each (the HF runs: about 15 s each).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HF_RUNS: dict[str, tuple[float, int]] = {  # learning rate, log every n steps
    "hf_lr5": (5.0, 5),
    "hf_lr5_every1": (5.0, 1),
    "hf_lr5e-4": (5e-4, 5),
    "hf_lr0.05": (0.05, 5),
}
TORCH_RUNS = ("torch_layerscale", "torch_lora", "torch_sparse")
RUNS = (*HF_RUNS, *TORCH_RUNS)


def write_hf(out: Path, name: str) -> Path:
    """The HF Trainer run ``name`` (its TensorBoard run directory)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from gradcheck.hf import GradientLogger

    torch.set_num_threads(1)
    torch.manual_seed(0)
    learning_rate, every = HF_RUNS[name]
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32)
    model = GPT2LMHeadModel(config)
    data = [
        {"input_ids": torch.randint(0, 100, (16,)), "labels": torch.randint(0, 100, (16,))}
        for _ in range(256)
    ]
    arguments = TrainingArguments(
        str(out / name), per_device_train_batch_size=8, max_steps=60, logging_steps=every,
        report_to=["tensorboard"], learning_rate=learning_rate, use_cpu=True, save_strategy="no",
        disable_tqdm=True, seed=0,
    )  # fmt: skip
    trainer = Trainer(model=model, args=arguments, train_dataset=data)
    trainer.add_callback(GradientLogger(trainer, every_n_steps=every))
    trainer.train()
    (events,) = (out / name / "runs").iterdir()  # the Trainer's TensorBoard run directory
    return events


def write_torch(out: Path, name: str) -> Path:
    """The torch run ``name`` (its TensorBoard run directory)."""
    import torch
    from torch.utils.tensorboard import SummaryWriter

    from gradcheck.torch import log_gradients

    torch.set_num_threads(1)
    torch.manual_seed(0)
    inputs = torch.randn(512, 16)
    targets = (inputs[:, :4].sum(1) > 0).long()
    model, optimizer, steps, every = _torch_model(torch, name)
    writer = SummaryWriter(str(out / name))
    for step in range(steps + 1):
        batch = torch.randint(0, 512, (32,))
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs[batch]), targets[batch])
        loss.backward()
        if step % every == 0:
            log_gradients(writer, model, step)
            writer.add_scalar("loss", loss.item(), step)
        optimizer.step()
    writer.close()
    return out / name


def _torch_model(torch: Any, name: str) -> tuple[Any, Any, int, int]:
    """Model, optimizer, steps and logging interval of torch run ``name``."""
    nn = torch.nn
    if name == "torch_layerscale":

        class Block(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.norm = nn.LayerNorm(32)
                self.fc1, self.fc2 = nn.Linear(32, 64), nn.Linear(64, 32)
                self.gamma = nn.Parameter(torch.full((32,), 1e-6))  # LayerScale

            def forward(self, x: Any) -> Any:
                return x + self.gamma * self.fc2(torch.relu(self.fc1(self.norm(x))))

        model = nn.Sequential(nn.Linear(16, 32), Block(), Block(), Block(), nn.Linear(32, 2))
        return model, torch.optim.AdamW(model.parameters(), lr=3e-3), 300, 10
    if name == "torch_lora":

        class LoRA(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.base = nn.Linear(16, 64)
                self.base.requires_grad_(False)
                self.lora_A = nn.Parameter(torch.randn(4, 16) / 4)
                self.lora_B = nn.Parameter(torch.zeros(64, 4))

            def forward(self, x: Any) -> Any:
                return self.base(x) + x @ self.lora_A.T @ self.lora_B.T

        head = nn.Linear(64, 2)
        nn.init.zeros_(head.weight)
        nn.init.zeros_(head.bias)
        model = nn.Sequential(LoRA(), nn.ReLU(), head)
        trainable = [p for p in model.parameters() if p.requires_grad]
        return model, torch.optim.Adam(trainable, lr=1e-3), 300, 10
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
    model.append(nn.Linear(64, 2))
    return model, torch.optim.Adam(model.parameters(), lr=1e-3), 500, 100


def write_runs(out: Path, only: list[str] | None = None) -> dict[str, Path]:
    """Every run (or those in ``only``) under ``out``, by name."""
    paths = {}
    for name in only or RUNS:
        paths[name] = write_hf(out, name) if name in HF_RUNS else write_torch(out, name)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*", choices=RUNS)
    arguments = parser.parse_args()
    for name, path in write_runs(arguments.out, arguments.only).items():
        print(name, path)


if __name__ == "__main__":
    main()
