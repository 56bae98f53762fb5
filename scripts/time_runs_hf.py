"""HF Trainer runs: a loss that diverges under the Trainer's default clipping (issue 30, point 4).

    python scripts/time_runs_hf.py --out DIR [--only NAME ...]

A tiny BERT built from a config (2 layers of width 32, vocabulary 64: no download) classifies
token sequences (is token 7 in the sequence?) with ``transformers.Trainer`` on CPU, logging to
TensorBoard (``report_to=["tensorboard"]``) at every step: ``train/loss``, ``train/grad_norm``
(the global norm before ``max_grad_norm=1.0`` clips it: the Trainer's default), and
``train/learning_rate``; ``trainer.save_state()`` writes ``trainer_state.json`` too.

- ``lr5``: AdamW at learning rate 5 (constant): the loss leaves ln 2 for orders of magnitude
  within a few steps and never comes back below it, while clipping holds every update's norm;
- ``healthy``: the same at 5e-4 with warm-up: the loss falls.

Deterministic (seeded, one thread); seconds each.
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

SEED, VOCAB, LENGTH, ROWS, STEPS = 0, 64, 16, 512, 60
RUNS: dict[str, dict[str, Any]] = {
    "lr5": {"learning_rate": 5.0, "lr_scheduler_type": "constant"},
    "healthy": {"learning_rate": 5e-4, "warmup_steps": 6, "lr_scheduler_type": "linear"},
}


class _Sequences:
    """Random token sequences; the label says whether token 7 occurs in them."""

    def __init__(self, torch: Any) -> None:
        generator = torch.Generator().manual_seed(SEED)
        self.ids = torch.randint(8, VOCAB, (ROWS, LENGTH), generator=generator)
        plant = torch.rand(ROWS, generator=generator) < 0.5
        self.ids[plant, 3] = 7
        self.labels = plant.long()

    def __len__(self) -> int:
        return ROWS

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"input_ids": self.ids[index], "labels": self.labels[index]}


def write_run(out: Path, name: str) -> Path:
    """Train run ``name`` into ``out`` (its output and TensorBoard directory)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=LENGTH,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    args = TrainingArguments(
        output_dir=str(out),
        per_device_train_batch_size=32,
        max_steps=STEPS,
        logging_steps=1,
        report_to=["tensorboard"],
        save_strategy="no",
        use_cpu=True,
        seed=SEED,
        disable_tqdm=True,
        **RUNS[name],
    )
    trainer = Trainer(model=model, args=args, train_dataset=_Sequences(torch))
    trainer.train()
    trainer.save_state()
    return out


def write_runs(out: Path, only: list[str] | None = None) -> dict[str, Path]:
    """Every run (or those in ``only``) under ``out/<name>``."""
    return {name: write_run(out / name, name) for name in RUNS if not only or name in only}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    for name, path in write_runs(args.out, args.only).items():
        print(name, path)


if __name__ == "__main__":
    main()
