"""Event payloads -> typed records (histograms in both encodings, scalars), every field kept.

Reads ``Summary.Value.histo`` (``HistogramProto``: ``min, max, num, sum, sum_squares`` and the
buckets, unlike tensorboard's ``data_compat`` which drops ``sum``/``sum_squares``), TF2 ``[k, 3]``
histogram tensors (plugin ``histograms``), TF1 ``simple_value`` scalars and TF2 scalar tensors
(plugin ``scalars``), and the hyperparameters of the HParams plugin's ``session_start_info``
(plugin ``hparams``). Writers put the plugin name only in a tag's first value, so the decoder
remembers it per tag. Images, audio, text and other plugins are skipped. TensorFlow is never
imported: only tensorboard's generated protobufs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gradcheck.events.wire import event_head
from gradcheck.model import Damage, HistogramRecord, HParamsRecord, HParamValue, ScalarRecord

if TYPE_CHECKING:  # imported where used: the C engine rarely decodes here (start-up time)
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2

HISTOGRAMS_PLUGIN = "histograms"
SCALARS_PLUGIN = "scalars"
HPARAMS_PLUGIN = "hparams"

# Event fields (event.proto) whose payload is a large opaque blob we never need: graph_def,
# tagged_run_metadata, meta_graph_def.
_BLOB_FIELDS = {4: "graph_def", 8: "tagged_run_metadata", 9: "meta_graph_def"}

_FLOAT64 = np.dtype("<f8")
# types.proto's DataType values (checked against tensorboard's in tests/engine/test_fastpath.py)
DT_FLOAT, DT_DOUBLE, DT_HALF = 1, 2, 19
_NUMPY_DTYPES: dict[int, np.dtype[Any]] = {
    DT_FLOAT: np.dtype("<f4"),
    DT_DOUBLE: np.dtype("<f8"),
    DT_HALF: np.dtype("<f2"),
}

ValueRecord = HistogramRecord | ScalarRecord | Damage


@dataclass(eq=False, slots=True)
class Decoded:
    """What one Event payload held.

    ``what`` is the Event's oneof (``summary``, ``file_version``, ``graph_def``, ...; ``""``
    when the event has none, e.g. old tensorboardX's wall-time-only first event).
    ``records`` holds the histogram and scalar values (``index`` 0: the reader numbers
    collisions) and a ``Damage`` for each value that could not be read; ``hparams`` the
    HParams plugin's ``session_start_info`` values.
    """

    what: str
    step: int = 0
    wall_time: float = 0.0
    file_version: str | None = None
    writer: str | None = None
    records: list[ValueRecord] = field(default_factory=list)
    hparams: list[HParamsRecord] = field(default_factory=list)


class UndecodableEvent(Exception):
    """The payload's CRC verified but it is not a valid Event protobuf."""


class EventDecoder:
    """Decodes the Event payloads of one run, remembering each tag's plugin name."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.plugin_by_tag: dict[str, str] = {}

    def decode(self, payload: bytes, file: str, offset: int) -> Decoded:
        """Decode one payload; raise ``UndecodableEvent`` when it is not an Event."""
        blob = _blob_field(payload)
        if blob is not None:
            return Decoded(what=blob)
        from google.protobuf.message import DecodeError
        from tensorboard.compat.proto.event_pb2 import Event

        try:
            event = Event.FromString(payload)
        except DecodeError as error:
            raise UndecodableEvent(str(error) or "not an Event protobuf") from None
        what = event.WhichOneof("what") or ""
        decoded = Decoded(what=what, step=event.step, wall_time=event.wall_time)
        if what == "summary":
            self._decode_summary(event, file, offset, decoded)
        elif what == "file_version":
            decoded.file_version = event.file_version
        if event.HasField("source_metadata") and event.source_metadata.writer:
            decoded.writer = event.source_metadata.writer
        return decoded

    def _decode_summary(
        self, event: event_pb2.Event, file: str, offset: int, decoded: Decoded
    ) -> None:
        """Append a record per histogram or scalar value (the hot loop: kept flat)."""
        step, wall_time, records, run = event.step, event.wall_time, decoded.records, self.run
        for value in event.summary.value:
            kind = value.WhichOneof("value")
            if kind == "tensor":
                tag = value.tag  # each read makes a new str: once for the plugin and the record
                plugin = self._plugin_of(value, tag)
                if plugin == HISTOGRAMS_PLUGIN:
                    records.append(
                        _tensor_histogram(value.tensor, run, file, offset, tag, step, wall_time)
                    )
                elif plugin == SCALARS_PLUGIN:
                    records.append(
                        _tensor_scalar(value.tensor, run, file, offset, tag, step, wall_time)
                    )
                elif plugin == HPARAMS_PLUGIN and value.HasField("metadata"):
                    self._hparams(value, file, offset, step, decoded)
            elif kind == "histo":
                records.append(
                    _histo_record(value.histo, run, file, offset, value.tag, step, wall_time)
                )
            elif kind == "simple_value":
                records.append(
                    ScalarRecord(
                        run, file, offset, value.tag, step, wall_time, "simple_value",
                        value.simple_value,
                    )
                )  # fmt: skip
            elif kind is None and value.metadata.plugin_data.plugin_name == HPARAMS_PLUGIN:
                self._hparams(value, file, offset, step, decoded)  # torch writes no tensor

    def _hparams(
        self, value: summary_pb2.Summary.Value, file: str, offset: int, step: int, decoded: Decoded
    ) -> None:
        """The hyperparameters of an HParams plugin value (session start only: the experiment
        and the session's end hold none), or a ``Damage`` when its content is not the
        plugin's data."""
        from google.protobuf.message import DecodeError
        from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

        try:
            data = HParamsPluginData.FromString(value.metadata.plugin_data.content)
        except DecodeError as error:
            why = f"not HParams plugin data ({error or 'undecodable'})"
            decoded.records.append(_bad_value(self.run, file, offset, value.tag, step, why))
            return
        if data.WhichOneof("data") != "session_start_info":
            return
        found = data.session_start_info.hparams
        values = [(name, hparam_value(found[name])) for name in sorted(found)]
        decoded.hparams.append(
            HParamsRecord(self.run, file, offset, tuple((n, v) for n, v in values if v is not None))
        )

    def _plugin_of(self, value: summary_pb2.Summary.Value, tag: str) -> str | None:
        """The value's plugin name, or the one remembered from ``tag``'s first value."""
        if value.HasField("metadata"):
            name = value.metadata.plugin_data.plugin_name
            if name:
                self.plugin_by_tag[tag] = name
                return name
        return self.plugin_by_tag.get(tag)


def hparam_value(value: Any) -> HParamValue | None:
    """A ``google.protobuf.Value`` as a number, string or bool (None for a list, struct or
    null, which no hyperparameter relation reads)."""
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        return float(value.number_value)
    if kind == "string_value":
        return str(value.string_value)
    if kind == "bool_value":
        return bool(value.bool_value)
    return None


def _blob_field(payload: bytes) -> str | None:
    """The oneof name when the Event is a graph/metadata blob (skipped unparsed), else None."""
    head = event_head(payload, first=True)
    return None if head is None else _BLOB_FIELDS.get(head[1])


def _histo_record(
    proto: summary_pb2.HistogramProto,
    run: str,
    file: str,
    offset: int,
    tag: str,
    step: int,
    wall_time: float,
) -> HistogramRecord | Damage:
    """A ``HistogramProto`` with every field kept; left edges derived from ``min``."""
    right = np.array(proto.bucket_limit, dtype=np.float64)
    counts = np.array(proto.bucket, dtype=np.float64)
    if right.size != counts.size:
        return _bad_value(
            run, file, offset, tag, step,
            f"{right.size} bucket limits but {counts.size} bucket counts",
        )  # fmt: skip
    left = np.empty_like(right)
    if right.size:
        left[0] = _first_left_edge(proto.min, right[0], counts[0])
        left[1:] = right[:-1]
    return HistogramRecord(
        run, file, offset, tag, 0, step, wall_time, "histo", left, right, counts,
        proto.min, proto.max, proto.num, proto.sum, proto.sum_squares,
    )  # fmt: skip


def _first_left_edge(minimum: float, first_right: float, first_count: float) -> float:
    """Left edge of a ``HistogramProto``'s first bucket (see :func:`first_left_edges`)."""
    return float(first_left_edges(np.float64(minimum), first_right, first_count))


def first_left_edges(
    minimum: np.ndarray | np.floating[Any],
    first_right: np.ndarray | float,
    first_count: np.ndarray | float,
) -> np.ndarray:
    """Left edges of ``HistogramProto`` first buckets, which the proto does not store.

    The proto's ``min`` when it lies at or below the first right edge. TF1 and PyTorch start
    with an *empty* bucket whose right edge is below ``min`` (the collapsed run of empty buckets
    before the data): it becomes zero-width at its right edge, so no infinite or NaN edge
    reaches arithmetic (a NaN ``min`` stays visible in ``record.min``). A non-empty first
    bucket with ``min`` above it means ``min`` was not written (proto3 reads it as 0): ``-inf``.
    Element-wise, for both readers (one record here, a batch in ``gradcheck.engine.fastpath``).
    """
    with np.errstate(invalid="ignore"):
        below = minimum <= first_right
    return np.where(below, minimum, np.where(first_count == 0, first_right, -np.inf))


def _tensor_histogram(
    tensor: tensor_pb2.TensorProto,
    run: str,
    file: str,
    offset: int,
    tag: str,
    step: int,
    wall_time: float,
) -> HistogramRecord | Damage:
    """A TF2 ``[k, 3]`` histogram tensor (rows ``left, right, count``)."""
    dims = tensor.tensor_shape.dim
    content = tensor.tensor_content
    if tensor.dtype == DT_DOUBLE and len(dims) == 2 and content:
        # The common case, without the generic checks: float64 rows in tensor_content.
        rows = dims[0].size
        if dims[1].size == 3 and rows >= 0 and len(content) == rows * 24:
            flat = np.frombuffer(content, dtype=_FLOAT64)
            return HistogramRecord(
                run, file, offset, tag, 0, step, wall_time, "tensor",
                flat[0::3], flat[1::3], flat[2::3],
            )  # fmt: skip
    array = tensor_values(tensor)
    if isinstance(array, str):
        return _bad_value(run, file, offset, tag, step, array)
    if array.ndim != 2 or array.shape[1] != 3:
        if array.size:
            return _bad_value(
                run, file, offset, tag, step,
                f"histogram tensor of shape {list(array.shape)}, expected [k, 3]",
            )  # fmt: skip
        array = array.reshape(0, 3)
    return HistogramRecord(
        run, file, offset, tag, 0, step, wall_time, "tensor",
        array[:, 0], array[:, 1], array[:, 2],
    )  # fmt: skip


def _tensor_scalar(
    tensor: tensor_pb2.TensorProto,
    run: str,
    file: str,
    offset: int,
    tag: str,
    step: int,
    wall_time: float,
) -> ScalarRecord | Damage:
    """A TF2 scalar tensor (plugin ``scalars``): one float, half or double."""
    array = tensor_values(tensor)
    if isinstance(array, str):
        return _bad_value(run, file, offset, tag, step, array)
    if array.size != 1:
        return _bad_value(
            run, file, offset, tag, step, f"scalar tensor of shape {list(array.shape)}"
        )
    return ScalarRecord(run, file, offset, tag, step, wall_time, "tensor", float(array.flat[0]))


def tensor_values(tensor: tensor_pb2.TensorProto) -> np.ndarray | str:
    """A float tensor's values as float64 in its shape, or a sentence saying why not.

    Reads ``tensor_content`` (little-endian, no per-element Python objects) or the typed
    fields; TensorFlow's convention applies to typed fields: fewer values than elements means
    the last one repeats, none means zeros.
    """
    dtype = _NUMPY_DTYPES.get(tensor.dtype)
    if dtype is None:
        from tensorboard.compat.proto.types_pb2 import DataType

        return f"tensor of dtype {DataType.Name(tensor.dtype)} is not read"
    shape = tuple([dim.size for dim in tensor.tensor_shape.dim])
    if shape and min(shape) < 0:
        return f"tensor of unknown shape {list(shape)}"
    size = math.prod(shape)
    content = tensor.tensor_content
    if content:
        if len(content) != size * dtype.itemsize:
            return f"tensor_content of {len(content)} bytes does not hold shape {list(shape)}"
        flat = np.frombuffer(content, dtype=dtype)
    else:
        flat = _typed_values(tensor, dtype, size)
    if dtype.itemsize != 8:
        flat = flat.astype(np.float64)
    return flat.reshape(shape)


def _typed_values(tensor: tensor_pb2.TensorProto, dtype: np.dtype[Any], size: int) -> np.ndarray:
    if dtype.itemsize == 2:
        values = np.array(tensor.half_val, dtype=np.uint16).view(np.float16)
    elif dtype.itemsize == 4:
        values = np.array(tensor.float_val, dtype=np.float32)
    else:
        values = np.array(tensor.double_val, dtype=np.float64)
    if values.size >= size:
        return values[:size]
    if values.size == 0:
        return np.zeros(size, dtype=dtype)
    return np.concatenate([values, np.full(size - values.size, values[-1])])


def _bad_value(run: str, file: str, offset: int, tag: str, step: int, why: str) -> Damage:
    return Damage(
        run=run,
        file=file,
        offset=offset,
        kind="undecodable",
        lost_bytes=0,
        message=f"value of tag {tag!r} at step {step} (record at byte {offset}) not read: {why}",
    )
