"""Log weights and gradients from PyTorch in the tags gradcheck pairs by itself.

``log_gradients(writer, model, step)`` after ``loss.backward()`` (and before
``optimizer.step()``, and before any gradient clipping if you want the norm the clipper saw)
writes, for every parameter, the tags of :mod:`gradcheck.tags.logtags`: weight and gradient
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

from gradcheck._optional import require
from gradcheck.errors import InputError
from gradcheck.tags import logtags

torch = require("torch", extra="torch", helper="gradcheck.torch")

__all__ = [
    "GradientSummary",
    "RawHistogram",
    "TensorMeasure",
    "histograms_of",
    "log_gradients",
    "measure",
    "raw_histogram",
    "scalars_of",
    "wandb_histograms",
]

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


class RawHistogram(NamedTuple):
    """A tensor's histogram as ``add_histogram_raw`` takes it: equal-width buckets over its
    finite values (``edges``: one more than ``counts``; empty when nothing is finite), and the
    whole tensor's statistics (NaN or Inf when it holds one)."""

    min: float
    max: float
    num: int
    sum: float
    sum_squares: float
    edges: np.ndarray
    counts: np.ndarray


def raw_histogram(flat: np.ndarray, squared_norm: float, buckets: int = 0) -> RawHistogram:
    """The :class:`RawHistogram` of the float64 values ``flat`` (``buckets``: default
    :data:`FALLBACK_BUCKETS`; ``squared_norm``: their sum of squares, computed already)."""
    finite = flat[np.isfinite(flat)]
    if finite.size:
        edges = equal_width_edges(finite.min(), finite.max(), buckets)
        counts, _ = np.histogram(finite, bins=edges)
    else:
        edges, counts = np.zeros(0), np.zeros(0, dtype=np.int64)
    return RawHistogram(
        float(np.min(flat)) if flat.size else 0.0,
        float(np.max(flat)) if flat.size else 0.0,
        int(flat.size),
        float(np.sum(flat)),
        squared_norm,
        edges,
        counts.astype(np.float64),
    )


def add_raw_histogram(writer: Any, tag: str, histogram: RawHistogram, step: int) -> None:
    """``histogram`` through a SummaryWriter's ``add_histogram_raw``; a tensor without a
    finite value gets one empty bucket, which keeps its series going."""
    if histogram.counts.size:
        limits, counts = histogram.edges[1:].tolist(), histogram.counts.tolist()
    else:
        limits, counts = [histogram.max], [0.0]
    writer.add_histogram_raw(
        tag,
        min=histogram.min,
        max=histogram.max,
        num=histogram.num,
        sum=histogram.sum,
        sum_squares=histogram.sum_squares,
        bucket_limits=limits,
        bucket_counts=counts,
        global_step=step,
    )


def _add_raw_histogram(
    writer: Any, tag: str, flat: np.ndarray, squared_norm: float, step: int, bins: str | int
) -> None:
    """Equal-width buckets over the finite values, with the whole tensor's statistics."""
    buckets = bins if isinstance(bins, int) else 0
    add_raw_histogram(writer, tag, raw_histogram(flat, squared_norm, buckets), step)


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


# --------------------------------------------------------------------------------------------
# Measurements for the trainers' callbacks (gradcheck.hf, gradcheck.lightning): the same
# numbers as log_gradients, handed to whatever logger the trainer has.
# --------------------------------------------------------------------------------------------


class TensorMeasure(NamedTuple):
    """One tensor's exact squared L2 norm (float64), NaN/Inf count and, when asked, histogram."""

    squared_norm: float
    nonfinite: int
    histogram: RawHistogram | None


def measure(tensor: Any, *, histogram: bool = False, buckets: int = 0) -> TensorMeasure:
    """:class:`TensorMeasure` of ``tensor`` (read only: a float64 copy is measured)."""
    values = tensor.detach()
    if values.is_sparse:
        values = values.to_dense()
    values = values.to(torch.float64)
    squared_norm = float(torch.sum(values * values))
    nonfinite = int(torch.count_nonzero(~torch.isfinite(values)))
    raw = None
    if histogram:
        raw = raw_histogram(values.reshape(-1).cpu().numpy(), squared_norm, buckets)
    return TensorMeasure(squared_norm, nonfinite, raw)


def scalars_of(
    weights: dict[str, TensorMeasure], gradients: dict[str, TensorMeasure]
) -> dict[str, float]:
    """The scalar tags :func:`log_gradients` writes (``weight_norm/<param>``, ...,
    ``gradient_norm/global``), from the measures of each parameter and of its gradient."""
    scalars: dict[str, float] = {}
    for tags, measures in ((logtags.WEIGHT_TAGS, weights), (logtags.GRADIENT_TAGS, gradients)):
        for name, measured in measures.items():
            scalars[logtags.tag(tags.norm, name)] = math.sqrt(measured.squared_norm)
            scalars[logtags.tag(tags.nonfinite, name)] = float(measured.nonfinite)
    if gradients:
        total = sum(measured.squared_norm for measured in gradients.values())
        scalars[logtags.GLOBAL_GRADIENT_NORM] = math.sqrt(total)
        scalars[logtags.GLOBAL_GRADIENT_NONFINITE] = float(
            sum(measured.nonfinite for measured in gradients.values())
        )
    return scalars


def histograms_of(
    weights: dict[str, TensorMeasure], gradients: dict[str, TensorMeasure]
) -> dict[str, RawHistogram]:
    """The histogram tags (``weights/<param>``, ``gradients/<param>``) of the measures that
    hold one."""
    found: dict[str, RawHistogram] = {}
    for tags, measures in ((logtags.WEIGHT_TAGS, weights), (logtags.GRADIENT_TAGS, gradients)):
        for name, measured in measures.items():
            if measured.histogram is not None:
                found[logtags.tag(tags.histogram, name)] = measured.histogram
    return found


def wandb_histograms(histograms: dict[str, RawHistogram]) -> dict[str, Any]:
    """A ``wandb.Histogram`` of each histogram holding a finite value (``wandb.watch`` also
    leaves out a tensor without one; gradcheck reads a missing element count as NaN/Inf)."""
    import wandb

    return {
        tag: wandb.Histogram(np_histogram=(histogram.counts, histogram.edges))
        for tag, histogram in histograms.items()
        if histogram.counts.size
    }
