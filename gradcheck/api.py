"""The Python API: ``gradcheck.read(path)`` (typed records) and ``gradcheck.frame(path)``.

``frame`` is the long format (one row per histogram or scalar value) that pandas users expect,
with each histogram's statistics from :mod:`gradcheck.series.stats` computed in batches while the
records stream past, so bucket arrays are never all held at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from gradcheck.events.discover import discover
from gradcheck.events.reader import read_run
from gradcheck.events.storage import StorageOptions
from gradcheck.model import STAT_NAMES, Damage, HistogramRecord, Notice, Record, ScalarRecord
from gradcheck.series.stats import FIELD_NAMES, histogram_stats_batch

if TYPE_CHECKING:  # pandas is imported only by frame(): ``gradcheck.read`` stays light
    import pandas as pd

BATCH_SIZE = 512  # histograms reduced per vectorised statistics call

ID_COLUMNS = ("run", "file", "tag", "index", "step", "wall_time", "kind", "encoding", "value")
PROTO_COLUMNS = ("sum", "sum_squares")
FRAME_COLUMNS: tuple[str, ...] = (
    *ID_COLUMNS,
    *STAT_NAMES,
    *PROTO_COLUMNS,
    "l2_norm_exact",
    "buckets",
)
"""Columns of :func:`frame`, in order. Statistics are NaN on scalar rows, ``value`` is NaN on
histogram rows; ``sum``/``sum_squares`` are the proto's (NaN for TF2 tensor histograms)."""


def read(
    paths: str | Sequence[str], storage_options: Mapping[str, Any] | None = None
) -> Iterator[Record]:
    """Every record (histograms, scalars, damage, notices, file infos) under ``paths``
    (local paths or URLs; ``storage_options``: fsspec options for URLs).

    Runs are found first, so a missing path or a folder without event files raises
    ``InputError`` here, before any record is read.
    """
    storage = StorageOptions.of(storage_options)
    runs = discover([paths] if isinstance(paths, str) else list(paths), storage)
    return (record for run in runs for record in read_run(run, storage))


def frame(
    paths: str | Sequence[str], storage_options: Mapping[str, Any] | None = None
) -> pd.DataFrame:
    """All histogram and scalar values under ``paths`` as one long-format DataFrame.

    ``frame.attrs["warnings"]`` holds one line per damage or notice found while reading.
    """
    return records_frame(read(paths, storage_options))


def records_frame(records: Iterable[Record]) -> pd.DataFrame:
    """The long-format DataFrame of any record stream (see :data:`FRAME_COLUMNS`)."""
    builder = _FrameBuilder()
    for record in records:
        builder.add(record)
    return builder.build()


class _FrameBuilder:
    """Accumulates columns row by row; histogram statistics are computed per batch."""

    def __init__(self) -> None:
        names = (*ID_COLUMNS, *PROTO_COLUMNS, "l2_norm_exact", "buckets")
        self.columns: dict[str, list[Any]] = {name: [] for name in names}
        self.rows = 0
        self.pending: list[tuple[int, HistogramRecord]] = []
        self.blocks: list[tuple[list[int], np.ndarray]] = []  # (rows, their statistics)
        self.warnings: list[str] = []

    def add(self, record: Record) -> None:
        if isinstance(record, HistogramRecord):
            self._add_row(record, "histogram", record.index, float("nan"))
            self._add_histogram_fields(record)
            self.pending.append((self.rows - 1, record))
            if len(self.pending) >= BATCH_SIZE:
                self._flush()
        elif isinstance(record, ScalarRecord):
            self._add_row(record, "scalar", 0, record.value)
            self.columns["sum"].append(np.nan)
            self.columns["sum_squares"].append(np.nan)
            self.columns["l2_norm_exact"].append(False)
            self.columns["buckets"].append(0)
        elif isinstance(record, (Damage, Notice)):
            self.warnings.append(f"{record.file}: {record.message}")

    def _add_row(
        self, record: HistogramRecord | ScalarRecord, kind: str, index: int, value: float
    ) -> None:
        row = (record.run, record.file, record.tag, index, record.step, record.wall_time)
        for name, item in zip(ID_COLUMNS[:6], row, strict=True):
            self.columns[name].append(item)
        self.columns["kind"].append(kind)
        self.columns["encoding"].append(record.encoding)
        self.columns["value"].append(value)
        self.rows += 1

    def _add_histogram_fields(self, record: HistogramRecord) -> None:
        self.columns["sum"].append(_nan_if_none(record.sum))
        self.columns["sum_squares"].append(_nan_if_none(record.sum_squares))
        self.columns["l2_norm_exact"].append(_exact_norm(record))
        self.columns["buckets"].append(int(record.counts.size))

    def _flush(self) -> None:
        """Statistics of the pending histograms: one vectorised call per bucket count."""
        by_size: dict[int, list[tuple[int, HistogramRecord]]] = {}
        for row, record in self.pending:
            by_size.setdefault(int(record.counts.size), []).append((row, record))
        for group in by_size.values():
            self.blocks.append(([row for row, _ in group], _stats_of([r for _, r in group])))
        self.pending.clear()

    def build(self) -> pd.DataFrame:
        import pandas as pd

        self._flush()
        stats = np.full((self.rows, len(STAT_NAMES)), np.nan)
        for rows, block in self.blocks:
            stats[rows] = block
        data: dict[str, Any] = {name: self.columns[name] for name in ID_COLUMNS}
        data.update({name: stats[:, i] for i, name in enumerate(STAT_NAMES)})
        for name in PROTO_COLUMNS:
            data[name] = np.asarray(self.columns[name], dtype=np.float64)
        data["l2_norm_exact"] = np.asarray(self.columns["l2_norm_exact"], dtype=bool)
        data["buckets"] = np.asarray(self.columns["buckets"], dtype=np.int64)
        result = pd.DataFrame(data, columns=list(FRAME_COLUMNS))
        types = {"index": "int64", "step": "int64", "wall_time": "float64", "value": "float64"}
        result = result.astype(types)
        result.attrs["warnings"] = tuple(self.warnings)
        return result


def _stats_of(records: list[HistogramRecord]) -> np.ndarray:
    """``histogram_stats_batch`` over histograms that all have the same number of buckets."""
    if records[0].counts.size == 0:  # empty tensors: one empty bucket keeps shapes valid
        zeros = np.zeros((len(records), 1))
        left = right = counts = zeros
    else:
        left = np.stack([r.left for r in records])
        right = np.stack([r.right for r in records])
        counts = np.stack([r.counts for r in records])
    values = [[getattr(r, name) for name in FIELD_NAMES] for r in records]
    present = np.array([[v is not None for v in row] for row in values], dtype=bool)
    fields = np.array([[np.nan if v is None else v for v in row] for row in values])
    return histogram_stats_batch(left, right, counts, fields.reshape(-1, 5), present.reshape(-1, 5))


def _exact_norm(record: HistogramRecord) -> bool:
    """Whether ``sqrt(sum_squares)`` is the exact L2 norm (proto fields present and finite)."""
    exact_fields = (record.num, record.sum, record.sum_squares)
    return all(v is not None and np.isfinite(v) for v in exact_fields)


def _nan_if_none(value: float | None) -> float:
    return float("nan") if value is None else float(value)
