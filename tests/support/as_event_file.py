"""A run of any log format written again as a TensorBoard event file, the same numbers in
the same order: for the tests that an event file holding what another format holds gets the
same verdicts (``test_sources_real.py``, ``test_sources.py``).

Scalars become float64 scalar tensors (a ``simple_value`` is float32: it would round them);
a histogram read from buckets alone (``encoding`` ``tensor``) a TF2 ``[k, 3]`` histogram
tensor, one with the proto's fields a ``HistogramProto`` with the same fields.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
from tensorboard.compat.proto import summary_pb2, types_pb2

from gradcheck.model import HistogramRecord, Record, ScalarRecord
from tests.support.eventfiles import Event, file_version, histo, tensor_value, write_events


def event_of(record: HistogramRecord | ScalarRecord, first: bool) -> Event:
    """The event holding ``record``'s value (``first``: its tag's first, with the plugin)."""
    if isinstance(record, ScalarRecord):
        value = tensor_value(
            record.tag, np.array(record.value), plugin="scalars" if first else None,
            dtype=types_pb2.DT_DOUBLE, as_content=False,
        )  # fmt: skip
    elif record.encoding == "tensor":
        buckets = np.stack([record.left, record.right, record.counts], axis=1)
        value = tensor_value(
            record.tag, buckets, plugin="histograms" if first else None, dtype=types_pb2.DT_DOUBLE
        )
    else:
        fields = (record.min, record.max, record.num, record.sum, record.sum_squares)
        assert None not in fields, "a HistogramProto has every field"
        low, high, num, total, squares = (float(f) for f in fields)  # type: ignore[arg-type]
        value = histo(
            record.tag, record.right.tolist(), record.counts.tolist(),
            min=low, max=high, num=num, sum=total, sum_squares=squares,
        )  # fmt: skip
    summary = summary_pb2.Summary(value=[value])
    return Event(wall_time=record.wall_time, step=record.step, summary=summary)


def write_as_event_file(records: Iterable[Record], path: Path) -> int:
    """Write the values of ``records`` to the event file ``path``; how many were written."""
    seen: set[tuple[str, str]] = set()
    events = [file_version()]
    for record in records:
        if isinstance(record, (HistogramRecord, ScalarRecord)):
            kind = type(record).__name__
            events.append(event_of(record, (kind, record.tag) not in seen))
            seen.add((kind, record.tag))
    write_events(path, events)
    return len(events) - 1
