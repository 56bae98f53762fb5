"""Logs written by the real libraries, for ``test_sources_real.py``: HF Trainer output
directories, Lightning ``CSVLogger`` runs, MLflow file and SQLite stores (through Lightning's
``MLFlowLogger``) and W&B offline runs (``wandb.watch(model, log="all")``).

Run as ``python tests/support/library_logs.py LIBRARY OUT`` (one process per library, so they import
and train side by side and none of their global state reaches pytest; ``lightning`` writes
the CSV runs and both MLflow stores, under ``OUT/csv`` and ``OUT/mlflow``). Each library
writes four runs, named by what they are: ``healthy``, ``exploding`` (plain SGD past the
stability limit of a linear model: geometric growth), ``nan`` (a NaN input at step
:data:`NAN_STEP`: everything non-finite from there), ``vanishing`` (a deep sigmoid MLP: the
first layers' gradients orders of magnitude below the last's). Tiny models, a few seconds a
library. No network: the HF model is built from a config, W&B runs offline.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

NAN_STEP = 12
"""The step whose batch holds a NaN input (0-based: the 13th optimizer step)."""
STEPS = 40
KINDS = ("healthy", "exploding", "nan", "vanishing")
LIBRARIES = ("hf", "lightning", "wandb")


def _torch() -> Any:
    import torch

    torch.set_num_threads(1)
    return torch


def data(torch: Any, kind: str) -> tuple[Any, Any]:
    """256 rows of a smooth regression (16 features)."""
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(256, 16, generator=generator)
    y = torch.tanh(x @ torch.randn(16, 1, generator=generator) / 3) * 3
    return x, y


def model(torch: Any, kind: str) -> Any:
    torch.manual_seed(0)
    if kind == "exploding":
        return torch.nn.Sequential(torch.nn.Linear(16, 1))
    if kind == "vanishing":
        layers: list[Any] = []
        for size_in, size_out in zip([16] + [32] * 8, [32] * 8 + [1], strict=True):
            layers += [torch.nn.Linear(size_in, size_out), torch.nn.Sigmoid()]
        return torch.nn.Sequential(*layers[:-1])
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
        torch.nn.Linear(32, 1),
    )  # fmt: skip


def optimizer(torch: Any, kind: str, parameters: Any) -> Any:
    if kind == "exploding":
        return torch.optim.SGD(parameters, lr=1.1)
    if kind == "vanishing":
        return torch.optim.SGD(parameters, lr=0.1)
    return torch.optim.Adam(parameters, lr=1e-3)


def spoiled(torch: Any, kind: str, step: int, x: Any) -> Any:
    """The batch, with a NaN in it at :data:`NAN_STEP` of the ``nan`` run."""
    if kind == "nan" and step == NAN_STEP:
        x = x.clone()
        x[0, 0] = float("nan")
    return x


def batches(x: Any, y: Any, kind: str) -> tuple[int, int]:
    """Batch size and steps: the whole set a step for the linear model (plain gradient
    descent: its growth is geometric), 64 rows otherwise."""
    return (256, STEPS) if kind == "exploding" else (64, STEPS)


# --------------------------------------------------------------------------------------------
# W&B: a plain loop, wandb.watch and wandb.log
# --------------------------------------------------------------------------------------------


def write_wandb(out: Path) -> None:
    os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DISABLE_GIT="true")
    import wandb

    torch = _torch()
    for kind in KINDS:
        directory = out / kind
        directory.mkdir(parents=True)
        net = model(torch, kind)
        x, y = data(torch, kind)
        opt = optimizer(torch, kind, net.parameters())
        run = wandb.init(project="gradcheck", name=kind, dir=str(directory), mode="offline")
        wandb.watch(net, log="all", log_freq=1, idx=0)  # names as in a process of its own
        batch, steps = batches(x, y, kind)
        for step in range(steps):
            rows = slice((step * batch) % 256, (step * batch) % 256 + batch)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(net(spoiled(torch, kind, step, x[rows])), y[rows])
            loss.backward()
            opt.step()
            wandb.log({"loss": loss.item()})
        run.finish()


# --------------------------------------------------------------------------------------------
# Lightning: CSVLogger, and MLFlowLogger with both stores
# --------------------------------------------------------------------------------------------


def _lightning_module(torch: Any, kind: str) -> Any:
    import lightning
    from lightning.pytorch.utilities import grad_norm

    class Module(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = model(torch, kind)

        def training_step(self, batch: Any, index: int) -> Any:
            x, y = batch
            x = spoiled(torch, kind, self.global_step, x)
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def on_before_optimizer_step(self, optimizer: Any) -> None:
            self.log_dict(grad_norm(self, norm_type=2))  # after unscaling, before clipping

        def configure_optimizers(self) -> Any:
            return optimizer(torch, kind, self.parameters())

    return Module()


def _fit(torch: Any, kind: str, logger: Any) -> None:
    import lightning

    x, y = data(torch, kind)
    batch, steps = batches(x, y, kind)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch)
    trainer = lightning.Trainer(
        max_steps=steps, logger=logger, log_every_n_steps=1, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
        deterministic=True,
    )  # fmt: skip
    trainer.fit(_lightning_module(torch, kind), loader)


def write_lightning(out: Path) -> None:
    """CSVLogger runs under ``out/csv/<kind>``; MLflow runs (experiment ``gradcheck``, run
    names the kinds) in ``out/mlflow/files/mlruns`` and ``out/mlflow/sqlite/mlflow.db``."""
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # MLflow 3 keeps the file store behind this
    from lightning.pytorch.loggers import CSVLogger, MLFlowLogger

    torch = _torch()
    files = f"file:{out / 'mlflow' / 'files' / 'mlruns'}"
    (out / "mlflow" / "sqlite").mkdir(parents=True)
    database = f"sqlite:///{out / 'mlflow' / 'sqlite' / 'mlflow.db'}"
    for kind in KINDS:
        _fit(torch, kind, CSVLogger(str(out / "csv" / kind)))
        for uri in (files, database):
            _fit(torch, kind, MLFlowLogger("gradcheck", run_name=kind, tracking_uri=uri))


# --------------------------------------------------------------------------------------------
# HF Trainer: a tiny GPT-2 from a config
# --------------------------------------------------------------------------------------------


def write_hf(out: Path) -> None:
    torch = _torch()
    import transformers

    class Tokens(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 256

        def __getitem__(self, index: int) -> dict[str, Any]:
            ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(index))
            return {"input_ids": ids, "labels": ids}

    class Broken(transformers.Trainer):
        """The loss as the run's kind spoils it: scaled up 1.5x a step (exploding), NaN from
        :data:`NAN_STEP` (nan), scaled down 1e-6 (vanishing, which a global norm cannot
        show)."""

        kind = "healthy"

        def compute_loss(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            loss = super().compute_loss(model, inputs, *args, **kwargs)
            step = self.state.global_step
            if self.kind == "exploding":
                return loss * 1.5**step
            if self.kind == "nan" and step >= NAN_STEP:
                return loss * float("nan")
            if self.kind == "vanishing":
                return loss * 1e-6
            return loss

    for kind in KINDS:
        torch.manual_seed(0)
        config = transformers.GPT2Config(
            n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16
        )
        arguments = transformers.TrainingArguments(
            output_dir=str(out / kind), max_steps=STEPS, per_device_train_batch_size=8,
            logging_steps=1, save_steps=15, report_to="none", use_cpu=True,
            learning_rate=1e-3, disable_tqdm=True, seed=0, max_grad_norm=1e9,
        )  # fmt: skip
        trainer = Broken(
            model=transformers.GPT2LMHeadModel(config), args=arguments, train_dataset=Tokens()
        )
        trainer.kind = kind
        trainer.train()
        trainer.save_state()


WRITERS = {"hf": write_hf, "lightning": write_lightning, "wandb": write_wandb}

if __name__ == "__main__":
    library, out = sys.argv[1], Path(sys.argv[2])
    WRITERS[library](out)
