"""Trainings with gradcheck's trainer callbacks, for ``test_trainer_callbacks.py``.

Run as ``python tests/support/callback_logs.py TRAINER OUT`` (one process per trainer, as
``tests/support/library_logs.py``). ``hf``: a tiny GPT-2 built from a config, trained by the HF
Trainer with ``gradcheck.hf.GradientLogger`` reporting to TensorBoard, W&B (offline) and MLflow
(file store) and saving ``trainer_state.json``; ``lightning``: a small MLP trained by Lightning
with ``gradcheck.lightning.GradientLogger`` and TensorBoard, CSV, MLflow and W&B loggers. Each
trains a ``healthy`` run and a ``broken`` one (plain SGD at a learning rate far too high:
gradients explode, then turn NaN), and writes ``OUT/facts.json``: the first step whose gradient
held a NaN by the trainer's own account (HF: its ``grad_norm``; Lightning: the module's own
hook), whether the final weights of the same training with and without the callback (every
step, histograms on) are equal bit for bit, and (HF) whether the callback unscales an fp16
run's gradients as the ``GradScaler`` does. No network.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

STEPS = 30


def _torch() -> Any:
    import torch

    torch.set_num_threads(1)
    return torch


def weights_digest(model: Any) -> str:
    """SHA-256 of every parameter's bytes, in name order."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# HF Trainer
# --------------------------------------------------------------------------------------------


def _hf_train(out: Path, kind: str, *, report_to: Any, callback: bool) -> Any:
    torch = _torch()
    import transformers

    from gradcheck.hf import GradientLogger

    class Tokens(torch.utils.data.Dataset):
        """Arithmetic sequences: the next token is learnable."""

        def __len__(self) -> int:
            return 512

        def __getitem__(self, index: int) -> dict[str, Any]:
            ids = (torch.arange(16) * (1 + index % 3) + index) % 64
            return {"input_ids": ids, "labels": ids}

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16)
    healthy = kind == "healthy"
    arguments = transformers.TrainingArguments(
        output_dir=str(out), max_steps=STEPS, per_device_train_batch_size=8, logging_steps=1,
        report_to=report_to, use_cpu=True, disable_tqdm=True, seed=0, save_strategy="no",
        optim="adamw_torch" if healthy else "sgd", learning_rate=3e-3 if healthy else 200.0,
        lr_scheduler_type="constant", max_grad_norm=0.0,
    )  # fmt: skip
    trainer = transformers.Trainer(
        model=transformers.GPT2LMHeadModel(config), args=arguments, train_dataset=Tokens()
    )
    if callback:
        trainer.add_callback(GradientLogger(trainer, every_n_steps=1, histograms=True))
    trainer.train()
    trainer.save_state()
    return trainer


def write_hf(out: Path) -> None:
    os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DISABLE_GIT="true")
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    facts: dict[str, Any] = {}
    for kind in ("healthy", "broken"):
        os.environ["MLFLOW_TRACKING_URI"] = f"file:{out / kind / 'mlruns'}"
        os.environ["WANDB_DIR"] = str(out / kind)
        (out / kind).mkdir(parents=True)
        loggers = ["tensorboard", "wandb", "mlflow"]
        trainer = _hf_train(out / kind / "trainer", kind, report_to=loggers, callback=True)
        import wandb

        wandb.finish()  # the Trainer leaves its run open: the next would log into it
        wandb.teardown()  # and the next run is to read WANDB_DIR again
        norms = [e for e in trainer.state.log_history if "grad_norm" in e]
        facts[kind] = {
            "first_nan": next((e["step"] for e in norms if math.isnan(e["grad_norm"])), None)
        }
    digests = [
        weights_digest(_hf_train(out / f"same_{c}", "healthy", report_to="none", callback=c).model)
        for c in (False, True)
    ]
    facts["identical"] = digests[0] == digests[1]
    facts["unscaled"] = unscaled_as_the_scaler_does()
    (out / "facts.json").write_text(json.dumps(facts))


def unscaled_as_the_scaler_does() -> bool:
    """Whether the HF callback's reading of an fp16 run's scaled gradients equals, bit for bit,
    what ``GradScaler.unscale_`` makes of them (a scale that is no power of two: rounding
    counts), with the scale logged. (The Trainer runs fp16 on a GPU only; the scaler's
    arithmetic is the same on the CPU.)"""
    from types import SimpleNamespace

    torch = _torch()
    from gradcheck.hf import GradientLogger

    torch.manual_seed(0)
    model = torch.nn.Linear(64, 32)
    scaler = torch.amp.GradScaler("cpu", init_scale=3000.0)
    scaler.scale(model(torch.randn(8, 64)).pow(2).sum()).backward()
    accelerator = SimpleNamespace(scaler=scaler)
    trainer = SimpleNamespace(log=None, callback_handler=None, accelerator=accelerator)
    logger = GradientLogger(trainer)
    read = [logger._unscaled(parameter.grad).clone() for parameter in model.parameters()]
    scaler.unscale_(torch.optim.SGD(model.parameters(), lr=0.1))
    same = all(torch.equal(a, p.grad) for a, p in zip(read, model.parameters(), strict=True))
    return same and logger._loss_scale() == 3000.0


# --------------------------------------------------------------------------------------------
# Lightning
# --------------------------------------------------------------------------------------------


def _lightning_train(loggers: list[Any], kind: str, *, callback: bool) -> Any:
    torch = _torch()
    import lightning

    from gradcheck.lightning import GradientLogger

    class Module(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(
                torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)
            )
            self.first_nan: int | None = None

        def training_step(self, batch: Any, index: int) -> Any:
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def on_before_optimizer_step(self, optimizer: Any) -> None:
            finite = all(bool(torch.isfinite(p.grad).all()) for p in self.parameters())
            if not finite and self.first_nan is None:
                self.first_nan = int(self.global_step)

        def configure_optimizers(self) -> Any:
            if kind == "healthy":
                return torch.optim.Adam(self.parameters(), lr=1e-2)
            return torch.optim.SGD(self.parameters(), lr=2.0)

    generator = torch.Generator().manual_seed(2)
    x = torch.randn(256, 16, generator=generator)
    y = torch.tanh(x @ torch.randn(16, 1, generator=generator) / 3) * 3
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    module = Module()
    trainer = lightning.Trainer(
        max_steps=STEPS, logger=loggers, log_every_n_steps=1, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
        deterministic=True, callbacks=[GradientLogger(every_n_steps=1, histograms=True)]
        if callback else [],
    )  # fmt: skip
    trainer.fit(module, loader)
    return module


def write_lightning(out: Path) -> None:
    os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DISABLE_GIT="true")
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    from lightning.pytorch.loggers import CSVLogger, MLFlowLogger, TensorBoardLogger, WandbLogger

    facts: dict[str, Any] = {}
    for kind in ("healthy", "broken"):
        root = out / kind
        root.mkdir(parents=True)
        loggers = [
            TensorBoardLogger(str(root / "tensorboard")),
            CSVLogger(str(root / "csv")),
            MLFlowLogger("gradcheck", run_name=kind, tracking_uri=f"file:{root / 'mlruns'}"),
            WandbLogger(name=kind, save_dir=str(root), offline=True),
        ]
        module = _lightning_train(loggers, kind, callback=True)
        loggers[-1].experiment.finish()
        facts[kind] = {"first_nan": module.first_nan}
    digests = [
        weights_digest(_lightning_train([CSVLogger(str(out / f"same_{c}"))], "healthy", callback=c))
        for c in (False, True)
    ]
    facts["identical"] = digests[0] == digests[1]
    (out / "facts.json").write_text(json.dumps(facts))


WRITERS = {"hf": write_hf, "lightning": write_lightning}

if __name__ == "__main__":
    trainer_name, out_dir = sys.argv[1], Path(sys.argv[2])
    WRITERS[trainer_name](out_dir)
