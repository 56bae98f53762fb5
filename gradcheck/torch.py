"""Log weights and gradients from PyTorch in the tags gradcheck pairs by itself.

``log_gradients(writer, model, step)`` after ``loss.backward()`` (and before
``optimizer.step()``, and before any gradient clipping if you want the norm the clipper saw)
writes, for every parameter, the tags of :mod:`gradcheck.logtags`: weight and gradient
histograms, exact float64 L2 norms, non-finite counts, and the global gradient norm.

Why not ``add_histogram(name, p.grad)`` by hand: on a tensor holding NaN or Inf it raises with
``bins='auto'`` or an integer, raises for an all-NaN tensor even with the default bins, and
otherwise writes NaN statistics, so whether a NaN reaches the log is luck. Here a non-finite
tensor never raises: its histogram is written from its finite values (30 equal-width buckets, or
``bins`` if an integer) with the whole tensor's ``min``, ``max``, ``sum``, ``sum_squares`` and
element count (so they show the NaN/Inf and the count exceeds the buckets' total, as PyTorch's
own default encoding does), and its non-finite count is always logged as a scalar. A finite
tensor the writer cannot bin faithfully (a range narrower than float spacing, values beyond the
default bins' 1e20, as in an exploding run) gets the same equal-width histogram instead of an
exception or dropped values.

Works with ``torch.utils.tensorboard.SummaryWriter`` and ``tensorboardX.SummaryWriter``. Needs
torch (``pip install torch``, gradcheck's ``torch`` extra); this is the only gradcheck module
importing it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from gradcheck import logtags
from gradcheck._optional import require
from gradcheck.errors import InputError

torch = require("torch", extra="torch", helper="gradcheck.torch")

__all__ = ["GradientSummary", "log_gradients"]

FALLBACK_BUCKETS = 30  # equal-width buckets when the writer's binning cannot be used
TF_BINS_LIMIT = 1e20  # the largest edge of PyTorch's and tensorboardX's default bins


class GradientSummary(NamedTuple):
    """The model-wide numbers :func:`log_gradients` logged."""

    global_norm: float  # L2 norm of all gradients together (NaN/Inf if one holds NaN/Inf)
    nonfinite: int  # NaN/Inf elements in all gradients


_WRITER_METHODS = ("add_scalar", "add_histogram", "add_histogram_raw")


def log_gradients(
    writer: Any,
    model: Any,
    step: int,
    *,
    histograms: bool = True,
    bins: str | int = "tensorflow",
) -> GradientSummary:
    """Log every parameter's weight and gradient at ``step``; return the global numbers.

    ``model``: a ``torch.nn.Module`` or an iterable of ``(name, parameter)`` pairs. A parameter
    without a gradient (``requires_grad=False``, or not used by the loss) logs its weight only,
    so frozen layers stay visible. ``bins`` is passed to ``add_histogram`` for finite tensors
    (PyTorch's default ``"tensorflow"``: exponential buckets). The global norm is that of
    ``torch.nn.utils.clip_grad_norm_``: NaN if any gradient holds a NaN, else Inf if one holds
    an Inf.
    """
    _check_writer(writer)
    squared_total, nonfinite_total, gradients_seen = 0.0, 0, 0
    for name, parameter in _named_parameters(model):
        if not parameter.is_floating_point():
            continue
        _log_tensor(writer, logtags.WEIGHT_TAGS, name, parameter, step, histograms, bins)
        if parameter.grad is not None:
            squared, nonfinite = _log_tensor(
                writer, logtags.GRADIENT_TAGS, name, parameter.grad, step, histograms, bins
            )
            squared_total += squared
            nonfinite_total += nonfinite
            gradients_seen += 1
    global_norm = math.sqrt(squared_total)
    if gradients_seen:
        writer.add_scalar(logtags.GLOBAL_GRADIENT_NORM, global_norm, step)
        writer.add_scalar(logtags.GLOBAL_GRADIENT_NONFINITE, nonfinite_total, step)
    return GradientSummary(global_norm, nonfinite_total)


def _check_writer(writer: Any) -> None:
    missing = [method for method in _WRITER_METHODS if not hasattr(writer, method)]
    if missing:
        raise InputError(
            "log_gradients needs a torch.utils.tensorboard or tensorboardX SummaryWriter; "
            f"{type(writer).__name__} has no {', '.join(missing)}"
        )


def _named_parameters(model: Any) -> Iterable[tuple[str, Any]]:
    if isinstance(model, torch.nn.Module):
        return list(model.named_parameters())
    try:
        pairs = list(model)
    except TypeError:
        pairs = None
    if pairs is None or not all(
        isinstance(pair, tuple) and len(pair) == 2 and torch.is_tensor(pair[1]) for pair in pairs
    ):
        raise InputError(
            "log_gradients needs a torch.nn.Module or (name, parameter) pairs such as "
            f"model.named_parameters(); got {type(model).__name__}"
        )
    return pairs


def _log_tensor(
    writer: Any,
    tags: logtags.TagSet,
    name: str,
    tensor: Any,
    step: int,
    histograms: bool,
    bins: str | int,
) -> tuple[float, int]:
    """Log one tensor's histogram, exact norm and non-finite count; return (norm², count)."""
    values = tensor.detach()
    if values.is_sparse:
        values = values.to_dense()
    values = values.to(torch.float64)
    squared_norm = float(torch.sum(values * values))
    nonfinite = int(torch.count_nonzero(~torch.isfinite(values)))
    if histograms:
        histogram_tag = logtags.tag(tags.histogram, name)
        if nonfinite or not _add_histogram(writer, histogram_tag, values, step, bins):
            flat = values.reshape(-1).cpu().numpy()
            _add_raw_histogram(writer, histogram_tag, flat, squared_norm, step, bins)
    writer.add_scalar(logtags.tag(tags.norm, name), math.sqrt(squared_norm), step)
    writer.add_scalar(logtags.tag(tags.nonfinite, name), nonfinite, step)
    return squared_norm, nonfinite


def _add_histogram(writer: Any, tag: str, values: Any, step: int, bins: str | int) -> bool:
    """The writer's own histogram; ``False`` when it would fail or lose values: numpy cannot
    bin a range too narrow for float spacing, and the exponential ``"tensorflow"`` bins end at
    1e20 and silently drop larger values (their count would then pass for NaNs)."""
    if bins == "tensorflow" and values.numel() and float(values.abs().max()) >= TF_BINS_LIMIT:
        return False
    try:
        writer.add_histogram(tag, values.cpu(), step, bins=bins)
    except ValueError:
        return False
    return True


def _add_raw_histogram(
    writer: Any, tag: str, flat: np.ndarray, squared_norm: float, step: int, bins: str | int
) -> None:
    """Equal-width buckets over the finite values, with the whole tensor's statistics."""
    finite = flat[np.isfinite(flat)]
    if finite.size:
        edges = equal_width_edges(finite.min(), finite.max(), bins if isinstance(bins, int) else 0)
        counts, _ = np.histogram(finite, bins=edges)
        limits, bucket_counts = edges[1:].tolist(), counts.astype(np.float64).tolist()
    else:  # nothing finite to bucket: one empty bucket keeps the series going
        limits, bucket_counts = [float(np.max(flat))], [0.0]
    writer.add_histogram_raw(
        tag,
        min=float(np.min(flat)),
        max=float(np.max(flat)),
        num=int(flat.size),
        sum=float(np.sum(flat)),
        sum_squares=squared_norm,
        bucket_limits=limits,
        bucket_counts=bucket_counts,
        global_step=step,
    )


def equal_width_edges(low: float, high: float, buckets: int = 0) -> np.ndarray:
    """``buckets`` (default :data:`FALLBACK_BUCKETS`) equal-width bucket edges from ``low`` to
    ``high``, computed on a scale where ``high - low`` cannot overflow; one bucket when
    ``low == high``. Edges never decrease (they may repeat for a range below float spacing)."""
    if low == high:
        return np.array([low, high], dtype=np.float64)
    scale = max(abs(low), abs(high))
    edges = np.linspace(low / scale, high / scale, (buckets or FALLBACK_BUCKETS) + 1) * scale
    edges[0], edges[-1] = low, high
    return np.maximum.accumulate(edges)
