"""Per-parameter gradient norms from a Lightning training, into the trainer's own loggers.

``GradientLogger(every_n_steps=100)`` is a Lightning ``Callback``. At every ``every_n_steps``-th
optimizer step (the first included) it measures, in ``on_before_optimizer_step``, every
parameter's weight and gradient: exact L2 norms (summed in float64), NaN/Inf counts, the
global gradient norm and, with ``histograms=True``, weight and gradient histograms. Lightning
calls that hook once the step's gradients are accumulated and, with mixed precision, unscaled,
and before it clips them (``Precision._after_closure``; AMP's ``scaler.unscale_`` comes first):
the norms are the ones the clipper sees.

The scalars go to every logger the trainer has, through ``Logger.log_metrics(metrics,
step=trainer.global_step)`` (TensorBoard, CSV, MLflow, W&B, any other), at the index of the
optimizer step about to be taken; the histograms to the loggers that hold histograms
(``TensorBoardLogger``: ``add_histogram_raw``; ``WandbLogger``: ``wandb.Histogram``, with
``trainer/global_step``). Tags are :mod:`gradcheck.tags.logtags`', which ``gradcheck analyze`` pairs
per parameter in every one of those logs. The callback only reads tensors: training is
bit-identical with and without it.

Needs Lightning (``pip install lightning``, gradcheck's ``lightning`` extra) and torch; this
module and :mod:`gradcheck.hf` are the only ones importing them.
"""

from __future__ import annotations

from typing import Any

from gradcheck._optional import require
from gradcheck.errors import ConfigError

pl = require("lightning.pytorch", extra="lightning", helper="gradcheck.lightning")

from gradcheck import torch as gradcheck_torch  # noqa: E402  (needs lightning's torch)

__all__ = ["GradientLogger"]


class GradientLogger(pl.Callback):  # type: ignore[misc,name-defined]
    """Log weight and gradient norms (and histograms) every ``every_n_steps`` optimizer steps
    to the trainer's loggers (see the module docstring). ``buckets``: histogram buckets
    (equal width over each tensor's finite values)."""

    def __init__(
        self, every_n_steps: int = 100, *, histograms: bool = False, buckets: int = 30
    ) -> None:
        if every_n_steps < 1 or buckets < 1:
            raise ConfigError("GradientLogger needs every_n_steps >= 1 and buckets >= 1")
        self.every_n_steps = every_n_steps
        self.histograms = histograms
        self.buckets = buckets

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        step = int(trainer.global_step)
        if step % self.every_n_steps or not trainer.loggers:
            return
        weights, gradients = {}, {}
        for name, parameter in pl_module.named_parameters():
            if not parameter.is_floating_point():
                continue
            weights[name] = self._measure(parameter)
            if parameter.grad is not None:
                gradients[name] = self._measure(parameter.grad)
        scalars = gradcheck_torch.scalars_of(weights, gradients)
        histograms = gradcheck_torch.histograms_of(weights, gradients)
        for logger in trainer.loggers:
            logger.log_metrics(scalars, step=step)
            if histograms:
                _log_histograms(logger, histograms, step)

    def _measure(self, tensor: Any) -> gradcheck_torch.TensorMeasure:
        return gradcheck_torch.measure(tensor, histogram=self.histograms, buckets=self.buckets)


def _log_histograms(
    logger: Any, histograms: dict[str, gradcheck_torch.RawHistogram], step: int
) -> None:
    """The histograms into ``logger`` when it holds histograms (TensorBoard, W&B)."""
    from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger

    if isinstance(logger, TensorBoardLogger):
        for tag, histogram in histograms.items():
            gradcheck_torch.add_raw_histogram(logger.experiment, tag, histogram, step)
    elif isinstance(logger, WandbLogger):
        rows = gradcheck_torch.wandb_histograms(histograms)
        logger.experiment.log({**rows, "trainer/global_step": step})
