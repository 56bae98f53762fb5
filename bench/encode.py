"""Histograms as the writers compute them, Event payloads, and TFRecord framing.

``tf2_buckets`` follows ``tensorboard.plugins.histogram.summary_v2`` (k equal-width buckets
between min and max, ``[k, 3]`` rows ``(left, right, count)`` as float64); ``torch_histograms``
follows ``torch.utils.tensorboard.summary.make_histogram`` with the ``SummaryWriter`` default
bins (exponential edges 1e-12 * 1.1**i on both sides of 0, support trimmed to the non-empty
range, one empty bucket on the left). Both are vectorised over all parameters of a step.
``frame`` writes the same bytes as ``tensorboard.summary.writer.record_writer.RecordWriter``
with the C CRC32C.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import google_crc32c
import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2, types_pb2

TF2_BUCKETS = 30
_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC32C of ``data`` (C implementation)."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(payload: bytes) -> bytes:
    """One TFRecord: length, masked CRC of the length, payload, masked CRC of the payload."""
    header = struct.pack("<Q", len(payload))
    return b"".join(
        (
            header,
            struct.pack("<I", masked_crc32c(header)),
            payload,
            struct.pack("<I", masked_crc32c(payload)),
        )
    )


def _weighted_row_bincount(
    index: np.ndarray, bins: int, valid: np.ndarray, weight: np.ndarray
) -> np.ndarray:
    """Per-row histogram counts of bin indices ``index`` (P, S), each valid sample weighing
    ``weight[row]``."""
    rows = index.shape[0]
    flat = (index + (np.arange(rows) * bins)[:, None]).ravel()
    sample_weight = (valid * weight[:, None]).ravel()
    return np.bincount(flat, weights=sample_weight, minlength=rows * bins).reshape(rows, bins)


def _row_min_max(values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.where(valid, values, np.inf).min(axis=1), np.where(valid, values, -np.inf).max(axis=1)


def tf2_buckets(
    values: np.ndarray, valid: np.ndarray, weight: np.ndarray, buckets: int = TF2_BUCKETS
) -> np.ndarray:
    """TF2 ``tf.summary.histogram`` tensors for every row: shape ``(P, buckets, 3)`` float64."""
    low, high = _row_min_max(values, valid)
    width = (high - low) / buckets
    safe_width = np.where(width > 0, width, 1.0)
    index = np.floor((values - low[:, None]) / safe_width[:, None])
    index = np.clip(np.where(valid, index, 0), 0, buckets - 1).astype(np.intp)
    counts = _weighted_row_bincount(index, buckets, valid, weight)
    edges = np.linspace(low, high, buckets + 1, axis=1)
    return np.stack((edges[:, :-1], edges[:, 1:], counts), axis=-1)


def torch_default_bins() -> np.ndarray:
    """``SummaryWriter.default_bins``: +-1e-12 * 1.1**i up to 1e20, and 0."""
    buckets = []
    value = 1e-12
    while value < 1e20:
        buckets.append(value)
        value *= 1.1
    return np.array([-v for v in reversed(buckets)] + [0.0] + buckets)


TORCH_BINS = torch_default_bins()


@dataclass(frozen=True)
class TorchHistogram:
    """The fields of one PyTorch ``HistogramProto``."""

    min: float
    max: float
    num: float
    sum: float
    sum_squares: float
    bucket_limit: np.ndarray
    bucket: np.ndarray


def torch_histograms(
    values: np.ndarray, valid: np.ndarray, weight: np.ndarray
) -> list[TorchHistogram]:
    """PyTorch ``add_histogram`` protos (default bins) for every row of ``values``."""
    edges = TORCH_BINS
    bins = len(edges) - 1
    index = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, bins - 1)
    counts = _weighted_row_bincount(np.where(valid, index, 0), bins, valid, weight)
    low, high = _row_min_max(values, valid)
    masked = np.where(valid, values, 0.0)
    sums = (masked * weight[:, None]).sum(axis=1)
    squares = (masked * masked * weight[:, None]).sum(axis=1)
    nonzero = counts > 0
    first = nonzero.argmax(axis=1)
    last = bins - 1 - nonzero[:, ::-1].argmax(axis=1)
    result = []
    for row in range(values.shape[0]):
        start, end = int(first[row]), int(last[row]) + 1
        if start > 0:
            row_counts = counts[row, start - 1 : end]
        else:
            row_counts = np.concatenate(([0.0], counts[row, :end]))
        result.append(
            TorchHistogram(
                min=float(low[row]),
                max=float(high[row]),
                num=float(valid[row].sum() * weight[row]),
                sum=float(sums[row]),
                sum_squares=float(squares[row]),
                bucket_limit=edges[start : end + 1],
                bucket=row_counts,
            )
        )
    return result


def file_version_event(wall_time: float, writer: str) -> bytes:
    """The first event of every file: ``brain.Event:2`` and the writer's name."""
    event = event_pb2.Event(wall_time=wall_time, file_version="brain.Event:2")
    event.source_metadata.writer = writer
    return event.SerializeToString()


def tensor_histogram_event(
    tag: str, wall_time: float, step: int, rows: np.ndarray, with_metadata: bool
) -> bytes:
    """A TF2 histogram: ``[k, 3]`` DT_DOUBLE ``tensor_content``, plugin metadata if asked."""
    event = event_pb2.Event(wall_time=wall_time, step=step)
    value = event.summary.value.add(tag=tag)
    value.tensor.dtype = types_pb2.DT_DOUBLE
    value.tensor.tensor_shape.dim.add(size=rows.shape[0])
    value.tensor.tensor_shape.dim.add(size=rows.shape[1])
    value.tensor.tensor_content = rows.astype("<f8").tobytes()
    if with_metadata:
        value.metadata.plugin_data.plugin_name = "histograms"
    return event.SerializeToString()


def tensor_scalar_event(
    tag: str, wall_time: float, step: int, number: float, with_metadata: bool
) -> bytes:
    """A TF2 ``tf.summary.scalar``: DT_FLOAT scalar tensor, plugin ``scalars``."""
    event = event_pb2.Event(wall_time=wall_time, step=step)
    value = event.summary.value.add(tag=tag)
    value.tensor.dtype = types_pb2.DT_FLOAT
    value.tensor.tensor_shape.SetInParent()
    value.tensor.tensor_content = struct.pack("<f", number)
    if with_metadata:
        value.metadata.plugin_data.plugin_name = "scalars"
    return event.SerializeToString()


def histo_event(tag: str, wall_time: float, step: int, histogram: TorchHistogram) -> bytes:
    """A PyTorch ``add_histogram`` event (``Summary.Value.histo``)."""
    histo = summary_pb2.HistogramProto(
        min=histogram.min,
        max=histogram.max,
        num=histogram.num,
        sum=histogram.sum,
        sum_squares=histogram.sum_squares,
        bucket_limit=histogram.bucket_limit.tolist(),
        bucket=histogram.bucket.tolist(),
    )
    event = event_pb2.Event(wall_time=wall_time, step=step)
    event.summary.value.add(tag=tag, histo=histo)
    return event.SerializeToString()


def simple_value_event(tag: str, wall_time: float, step: int, number: float) -> bytes:
    """A PyTorch ``add_scalar`` event (``simple_value``)."""
    event = event_pb2.Event(wall_time=wall_time, step=step)
    event.summary.value.add(tag=tag, simple_value=number)
    return event.SerializeToString()
