"""Builders that write real event files with tensorboard's pure-Python record writer.

No TensorFlow or torch: events are built from tensorboard's protobufs and framed by
``tensorboard.summary.writer.record_writer.RecordWriter``, exactly as TensorBoard's own tests do.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

from gradcheck.events.framing import masked_crc32c

Event = event_pb2.Event


def frame(payloads: Iterable[bytes]) -> bytes:
    """TFRecord-frame ``payloads`` with tensorboard's writer; return the bytes."""
    buffer = io.BytesIO()
    writer = RecordWriter(buffer)
    for payload in payloads:
        writer.write(payload)
    return buffer.getvalue()


def record_offsets(payloads: Sequence[bytes]) -> list[int]:
    """Byte offset of each record when ``payloads`` are framed back to back."""
    offsets, offset = [], 0
    for payload in payloads:
        offsets.append(offset)
        offset += 12 + len(payload) + 4
    return offsets


def write_events(path: str | Path, events: Iterable[Event]) -> list[int]:
    """Write ``events`` as an event file at ``path``; return each record's byte offset."""
    payloads = [event.SerializeToString() for event in events]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(frame(payloads))
    return record_offsets(payloads)


def file_version(wall_time: float = 1.0, version: str = "brain.Event:2") -> Event:
    return Event(wall_time=wall_time, file_version=version)


def source_writer(name: str, wall_time: float = 1.0) -> Event:
    event = Event(wall_time=wall_time)
    event.source_metadata.writer = name
    return event


def graph(wall_time: float = 1.0, size: int = 100) -> Event:
    """A graph_def event (opaque bytes: the reader must skip it without parsing)."""
    return Event(wall_time=wall_time, graph_def=b"g" * size)


def summary_event(step: int, values: Sequence[summary_pb2.Summary.Value], wall_time: float = 0.0):
    """An Event holding one Summary with ``values``."""
    return Event(
        wall_time=wall_time or 1000.0 + step,
        step=step,
        summary=summary_pb2.Summary(value=list(values)),
    )


def simple_scalar(tag: str, value: float) -> summary_pb2.Summary.Value:
    return summary_pb2.Summary.Value(tag=tag, simple_value=value)


def histo(
    tag: str,
    bucket_limit: Sequence[float],
    bucket: Sequence[float],
    *,
    min: float,
    max: float,
    num: float,
    sum: float,
    sum_squares: float,
) -> summary_pb2.Summary.Value:
    """A ``HistogramProto`` value with every field given explicitly."""
    proto = summary_pb2.HistogramProto(
        min=min,
        max=max,
        num=num,
        sum=sum,
        sum_squares=sum_squares,
        bucket_limit=list(bucket_limit),
        bucket=list(bucket),
    )
    return summary_pb2.Summary.Value(tag=tag, histo=proto)


def histo_of(tag: str, values: np.ndarray, bins: int = 10) -> summary_pb2.Summary.Value:
    """A ``HistogramProto`` of ``values`` the way PyTorch's writer builds one (finite data)."""
    counts, edges = np.histogram(values, bins=bins)
    return histo(
        tag,
        edges[1:].tolist(),
        counts.astype(float).tolist(),
        min=float(values.min()),
        max=float(values.max()),
        num=float(values.size),
        sum=float(values.sum()),
        sum_squares=float((values.astype(np.float64) ** 2).sum()),
    )


def _tensor(array: np.ndarray, dtype: int, as_content: bool) -> tensor_pb2.TensorProto:
    shape = tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=n) for n in array.shape]
    )
    proto = tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape)
    flat = array.reshape(-1)
    if dtype == types_pb2.DT_DOUBLE:
        if as_content:
            proto.tensor_content = flat.astype("<f8").tobytes()
        else:
            proto.double_val.extend(flat.tolist())
    elif dtype == types_pb2.DT_FLOAT:
        if as_content:
            proto.tensor_content = flat.astype("<f4").tobytes()
        else:
            proto.float_val.extend(flat.astype(np.float32).tolist())
    elif dtype == types_pb2.DT_HALF:
        if as_content:
            proto.tensor_content = flat.astype("<f2").tobytes()
        else:
            proto.half_val.extend(flat.astype(np.float16).view(np.uint16).tolist())
    else:
        raise ValueError(f"unsupported dtype {dtype}")
    return proto


def _metadata(plugin: str) -> summary_pb2.SummaryMetadata:
    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=plugin)
    )


def tensor_value(
    tag: str,
    array: np.ndarray,
    *,
    plugin: str | None,
    dtype: int = types_pb2.DT_DOUBLE,
    as_content: bool = True,
) -> summary_pb2.Summary.Value:
    """A ``Summary.Value.tensor``; ``plugin=None`` leaves the metadata out (as TF2 does after
    the first value of a tag)."""
    value = summary_pb2.Summary.Value(tag=tag, tensor=_tensor(array, dtype, as_content))
    if plugin is not None:
        value.metadata.CopyFrom(_metadata(plugin))
    return value


def tensor_histogram(
    tag: str,
    buckets: np.ndarray,
    *,
    first: bool = True,
    dtype: int = types_pb2.DT_DOUBLE,
    as_content: bool = True,
) -> summary_pb2.Summary.Value:
    """A TF2 ``[k, 3]`` histogram tensor; plugin metadata only when ``first``."""
    return tensor_value(
        tag, buckets, plugin="histograms" if first else None, dtype=dtype, as_content=as_content
    )


def tf2_buckets(values: np.ndarray, bucket_count: int = 30) -> np.ndarray:
    """``[k, 3]`` rows ``(left, right, count)`` as TF >= 2.8 ``tf.summary.histogram`` builds."""
    low, high = float(values.min()), float(values.max())
    if low == high:
        edges = np.full(bucket_count + 1, low)
        counts = np.zeros(bucket_count)
        counts[-1] = values.size
    else:
        edges = np.linspace(low, high, bucket_count + 1)
        counts, _ = np.histogram(values, bins=edges)
    return np.stack([edges[:-1], edges[1:], counts.astype(np.float64)], axis=1)


def tensor_scalar(
    tag: str, value: float, *, first: bool = True, dtype: int = types_pb2.DT_FLOAT
) -> summary_pb2.Summary.Value:
    return tensor_value(
        tag, np.array(value), plugin="scalars" if first else None, dtype=dtype, as_content=False
    )


def keras3_step(step: int) -> object:
    rng = np.random.default_rng(step)
    kernels = [rng.normal(size=n) for n in (50, 5000, 5500)]
    return summary_event(
        step,
        [tensor_histogram("kernel/histogram", tf2_buckets(k), first=step == 0) for k in kernels]
        + [
            tensor_histogram("bias/histogram", tf2_buckets(k[:5]), first=step == 0) for k in kernels
        ],
    )


def header_claiming(length: int) -> bytes:
    """A record header whose length CRC verifies, claiming ``length`` payload bytes."""
    packed = struct.pack("<Q", length)
    return packed + struct.pack("<I", masked_crc32c(packed))
