"""Overhead of ``gradcheck.hf.GradientLogger`` and ``gradcheck.lightning.GradientLogger`` on a
small transformer built from a config.

    python bench/trainer_callback_overhead.py [--trainer hf|lightning|both] [--steps 60]

A GPT-2 of 2 blocks (``n_embd`` 64, 4 heads, a 256-token vocabulary, 64 positions: 121k
parameters in 28 tensors), batches of 8 sequences of 64 tokens, AdamW, on the CPU with one
thread, logging to TensorBoard. Each configuration trains ``--steps`` optimizer steps; the time
of each step is taken between two ``on_train_batch_start``/``on_step_begin`` calls, and the
median after the first 5 (warm-up) is reported: without the callback, with it logging every
step without histograms, every step with histograms (30 buckets), and every 1000th (only the
first step, in the warm-up: the median is the cost of a step not logged). The cost of one
logged step is the difference of medians; at ``every_n_steps=N`` a training pays it once per N
steps.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import torch  # noqa: E402

WARM_UP = 5
CONFIGURATIONS: tuple[tuple[str, dict[str, Any] | None], ...] = (
    ("no callback", None),
    ("every step, norms only", {"every_n_steps": 1, "histograms": False}),
    ("every step, with histograms", {"every_n_steps": 1, "histograms": True}),
    ("every 1000th, with histograms", {"every_n_steps": 1000, "histograms": True}),
)


def config() -> Any:
    import transformers

    return transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=64)


class Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, index: int) -> dict[str, Any]:
        ids = torch.randint(0, 256, (64,), generator=torch.Generator().manual_seed(index))
        return {"input_ids": ids, "labels": ids}


def hf_steps(options: dict[str, Any] | None, steps: int, out: str) -> list[float]:
    import transformers

    from gradcheck.hf import GradientLogger

    times: list[float] = []

    class Clock(transformers.TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            times.append(time.perf_counter())

    torch.manual_seed(0)
    arguments = transformers.TrainingArguments(
        output_dir=out, max_steps=steps + 1, per_device_train_batch_size=8, logging_steps=10,
        report_to="tensorboard", use_cpu=True, disable_tqdm=True, seed=0, save_strategy="no",
    )  # fmt: skip
    trainer = transformers.Trainer(
        model=transformers.GPT2LMHeadModel(config()), args=arguments, train_dataset=Tokens()
    )
    trainer.add_callback(Clock())
    if options is not None:
        trainer.add_callback(GradientLogger(trainer, **options))
    trainer.train()
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def lightning_steps(options: dict[str, Any] | None, steps: int, out: str) -> list[float]:
    import lightning
    import transformers
    from lightning.pytorch.loggers import TensorBoardLogger

    from gradcheck.lightning import GradientLogger

    times: list[float] = []

    class Clock(lightning.Callback):  # type: ignore[misc]
        def on_train_batch_start(self, *args: Any) -> None:
            times.append(time.perf_counter())

    class Module(lightning.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.model = transformers.GPT2LMHeadModel(config())

        def training_step(self, batch: Any, index: int) -> Any:
            loss = self.model(**batch).loss
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.AdamW(self.parameters(), lr=5e-5)

    callbacks: list[Any] = [Clock()]
    if options is not None:
        callbacks.append(GradientLogger(**options))
    loader = torch.utils.data.DataLoader(Tokens(), batch_size=8)
    trainer = lightning.Trainer(
        max_steps=steps + 1, logger=TensorBoardLogger(out), log_every_n_steps=10,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        accelerator="cpu", callbacks=callbacks,
    )  # fmt: skip
    trainer.fit(Module(), loader)
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainer", choices=("hf", "lightning", "both"), default="both")
    parser.add_argument("--steps", type=int, default=60)
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    trainers = ("hf", "lightning") if arguments.trainer == "both" else (arguments.trainer,)
    for trainer in trainers:
        measure = hf_steps if trainer == "hf" else lightning_steps
        baseline = None
        for name, options in CONFIGURATIONS:
            with tempfile.TemporaryDirectory() as out:
                durations = measure(options, arguments.steps, out)[WARM_UP:]
            median = statistics.median(durations)
            baseline = median if baseline is None else baseline
            extra = "" if options is None else f", {(median - baseline) * 1e3:+.1f} ms a step"
            print(f"{trainer:9} {name:30} median {median * 1e3:6.1f} ms a step{extra}")


if __name__ == "__main__":
    main()
