"""Per-parameter gradient norms from an HF ``Trainer``, into the trainer's own loggers.

``GradientLogger(trainer, every_n_steps=100)`` is a ``TrainerCallback``; add it to the trainer
it logs from (``trainer.add_callback(GradientLogger(trainer))``: it logs through the trainer).
At every ``every_n_steps``-th optimizer step (the first included) it measures every
parameter's weight (at the step's start) and gradient: exact L2 norms (summed in float64),
NaN/Inf counts, the global gradient norm and, with ``histograms=True``, weight and gradient
histograms.

Before clipping and after unscaling: the Trainer clips (``accelerator.clip_grad_norm_``, which
unscales an fp16 run's gradients first) before ``on_pre_optimizer_step``, so by then the
gradients are clipped. The gradients are read instead as autograd accumulates them (a
``register_post_accumulate_grad_hook`` per parameter, read on logged steps only: the last
micro-batch's reading is the step's whole gradient), divided by the fp16 loss scale as the
``GradScaler`` would (``loss_scale`` is logged too). With several processes (DDP), each
reads its own gradient, before the all-reduce, and the main process logs.

The scalars go where ``trainer.log`` sends what it logs: to every integration the trainer
reports to (TensorBoard, W&B, MLflow, Comet, ...: each callback's ``on_log``) and to
``trainer_state.json``'s ``log_history``, at the trainer's step (the one its own ``grad_norm``
and ``loss`` of that optimizer step carry); not to the console. The
histograms go to the integrations that hold histograms: TensorBoard (``add_histogram_raw``)
and W&B (``wandb.Histogram``, with ``train/global_step``). Tags are :mod:`gradcheck.tags.logtags`'
(the integrations prefix the scalars with ``train/``; the histograms are written without),
which ``gradcheck analyze`` pairs per parameter in every one of those logs. The callback only
reads tensors: training is bit-identical with and without it.

Needs transformers (``pip install transformers``, gradcheck's ``hf`` extra) and torch; this
module and :mod:`gradcheck.lightning` are the only ones importing them.
"""

from __future__ import annotations

import math
from typing import Any

from gradcheck._optional import require
from gradcheck.errors import ConfigError

transformers = require("transformers", extra="hf", helper="gradcheck.hf")

from gradcheck import torch as gradcheck_torch  # noqa: E402  (after the install hint)

torch = gradcheck_torch.torch

__all__ = ["GradientLogger"]

LOSS_SCALE = "loss_scale"
"""The tag of the fp16 loss scale (logged when the trainer has a ``GradScaler``)."""


class GradientLogger(transformers.TrainerCallback):  # type: ignore[misc,name-defined]
    """Log weight and gradient norms (and histograms) every ``every_n_steps`` optimizer steps
    through ``trainer`` (see the module docstring). ``buckets``: histogram buckets (equal
    width over each tensor's finite values)."""

    def __init__(
        self,
        trainer: Any,
        every_n_steps: int = 100,
        *,
        histograms: bool = False,
        buckets: int = 30,
    ) -> None:
        if every_n_steps < 1 or buckets < 1:
            raise ConfigError("GradientLogger needs every_n_steps >= 1 and buckets >= 1")
        if not hasattr(trainer, "log") or not hasattr(trainer, "callback_handler"):
            raise ConfigError(
                "GradientLogger(trainer) needs the transformers Trainer it logs through; "
                f"got {type(trainer).__name__}"
            )
        self.trainer = trainer
        self.every_n_steps = every_n_steps
        self.histograms = histograms
        self.buckets = buckets
        self.logging = False
        self.weights: dict[str, gradcheck_torch.TensorMeasure] = {}
        self.gradients: dict[str, gradcheck_torch.TensorMeasure] = {}
        self.handles: list[Any] = []

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._remove_hooks()
        for name, parameter in self.trainer.model.named_parameters():
            if parameter.requires_grad and parameter.is_floating_point():
                self.handles.append(
                    parameter.register_post_accumulate_grad_hook(self._reader(name))
                )

    def _reader(self, name: str) -> Any:
        def read(parameter: Any) -> None:
            if self.logging and parameter.grad is not None:
                self.gradients[name] = self._measure(self._unscaled(parameter.grad))

        return read

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.logging = state.global_step % self.every_n_steps == 0
        self.weights.clear()
        self.gradients.clear()
        if self.logging:
            for name, parameter in self.trainer.model.named_parameters():
                if parameter.is_floating_point():
                    self.weights[name] = self._measure(parameter)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self.logging:
            return
        self.logging = False
        scalars = gradcheck_torch.scalars_of(self.weights, self.gradients)
        scale = self._loss_scale()
        if scale is not None:
            scalars[LOSS_SCALE] = scale
        histograms = gradcheck_torch.histograms_of(self.weights, self.gradients)
        self.weights.clear()
        self.gradients.clear()
        self._log_scalars(args, state, control, scalars)
        if histograms and state.is_world_process_zero:
            self._log_histograms(histograms, int(state.global_step))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._remove_hooks()

    def _remove_hooks(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    def _measure(self, tensor: Any) -> gradcheck_torch.TensorMeasure:
        return gradcheck_torch.measure(tensor, histogram=self.histograms, buckets=self.buckets)

    def _scaler(self) -> Any:
        accelerator = getattr(self.trainer, "accelerator", None)
        return getattr(accelerator, "scaler", None)

    def _loss_scale(self) -> float | None:
        scaler = self._scaler()
        return None if scaler is None else float(scaler.get_scale())

    def _unscaled(self, gradient: Any) -> Any:
        """``gradient`` as the ``GradScaler`` unscales it: times ``1/scale`` (computed in
        float64, applied in float32); itself without a scaler."""
        scale = self._loss_scale()
        if scale is None or not math.isfinite(scale) or scale in (0.0, 1.0):
            return gradient
        inverse = torch.tensor(1.0 / scale, dtype=torch.float64).float()
        return gradient.float() * inverse.to(gradient.device)

    def _log_scalars(self, args: Any, state: Any, control: Any, scalars: dict[str, float]) -> None:
        """What ``trainer.log(scalars)`` does (a ``log_history`` entry at the trainer's step,
        then every callback's ``on_log``), without the callbacks that print what is logged:
        a line of every parameter's norms at each logged step would bury the loss."""
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        state.log_history.append({**scalars, "step": state.global_step})
        for callback in self.trainer.callback_handler.callbacks:
            quiet = isinstance(callback, (PrinterCallback, ProgressCallback, GradientLogger))
            if not quiet and type(callback).__name__ != "NotebookProgressCallback":
                callback.on_log(args, state, control, logs=dict(scalars), model=self.trainer.model)

    def _log_histograms(
        self, histograms: dict[str, gradcheck_torch.RawHistogram], step: int
    ) -> None:
        """The histograms to the TensorBoard and W&B integrations the trainer reports to."""
        from transformers.integrations import TensorBoardCallback, WandbCallback

        for callback in self.trainer.callback_handler.callbacks:
            if isinstance(callback, TensorBoardCallback) and callback.tb_writer is not None:
                for name, histogram in histograms.items():
                    gradcheck_torch.add_raw_histogram(callback.tb_writer, name, histogram, step)
            elif isinstance(callback, WandbCallback) and getattr(callback, "_initialized", False):
                rows = gradcheck_torch.wandb_histograms(histograms)
                callback._wandb.log({**rows, "train/global_step": step})
