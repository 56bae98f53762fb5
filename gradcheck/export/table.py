"""The long table of a log's values: one row per scalar or histogram value, built from records.

:func:`gradcheck.frame` returns it whole; ``gradcheck export`` writes it in chunks of at most
:data:`CHUNK_ROWS` rows as the records stream past, so that an export holds one chunk, not the
sweep. Histogram statistics (:mod:`gradcheck.series.stats`) are computed in batches of
histograms with the same number of buckets.

Column names follow tbparse's where the two overlap (``dir_name``, ``tag``, ``step``,
``wall_time``, ``value``, ``min``, ``max``, ``num``, ``sum``, ``sum_squares``, ``limits``,
``counts``), with tbparse's meaning: ``limits`` are the buckets' right edges and ``counts``
their counts, the proto's ``bucket_limit`` and ``bucket`` exactly for a ``histo`` histogram;
a TF2 ``tensor`` histogram (``[k, 3]`` left, right, count) is given as tbparse's
``tensor_to_histogram`` gives it, its first left edge as a first limit with count 0, so that
``limits`` still hold every edge.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from gradcheck.model import (
    STAT_NAMES,
    Damage,
    HistogramRecord,
    Notice,
    Record,
    Run,
    ScalarRecord,
)
from gradcheck.series.stats import FIELD_NAMES, histogram_stats_batch

if TYPE_CHECKING:  # pandas is imported when a table is built: ``gradcheck.read`` stays light
    import pandas as pd

BATCH_SIZE = 512
"""Histograms reduced per vectorised statistics call."""
CHUNK_ROWS = 65_536
"""Rows per chunk of an export (a parquet row group) at most: ~20 MB of scalar rows."""
CHUNK_BUCKETS = 1 << 20
"""Histogram buckets per chunk at most (a chunk of PyTorch's ~600-bucket histograms holds
~1,800 rows): ~17 MB of bucket arrays, ~40 MB more while a text format writes them."""

ID_COLUMNS = (
    "run",
    "dir_name",
    "format",
    "file",
    "tag",
    "index",
    "step",
    "wall_time",
    "kind",
    "encoding",
    "value",
)
PROTO_COLUMNS = ("num", "sum", "sum_squares")
BUCKET_COLUMNS = ("limits", "counts")
TABLE_COLUMNS: tuple[str, ...] = (
    *ID_COLUMNS,
    *STAT_NAMES,
    *PROTO_COLUMNS,
    "l2_norm_exact",
    "buckets",
    *BUCKET_COLUMNS,
)
"""The table's columns, in order (the meaning of each: docs/reference/export.md)."""
TEXT_COLUMNS = ("run", "dir_name", "format", "file", "tag", "kind", "encoding")
"""The columns holding text; ``run``, ``dir_name``, ``file`` and ``tag`` come from the logs."""


class TableBuilder:
    """Rows added record by record; :meth:`take` gives those added since the last take."""

    def __init__(self, *, bucket_arrays: bool = True) -> None:
        self.bucket_arrays = bucket_arrays
        self.warnings: list[str] = []
        self._reset()

    def _reset(self) -> None:
        names = (*ID_COLUMNS, *PROTO_COLUMNS, "l2_norm_exact", "buckets", *BUCKET_COLUMNS)
        self.columns: dict[str, list[Any]] = {name: [] for name in names}
        self.rows = 0
        self.bucket_count = 0
        self.pending: list[tuple[int, HistogramRecord]] = []
        self.blocks: list[tuple[list[int], np.ndarray]] = []  # (rows, their statistics)

    def add(self, record: Record, format_name: str = "", dir_name: str = "") -> None:
        """A row for a histogram or scalar (``format_name``: its run's ``Run.format``,
        ``dir_name``: its run's directory relative to the path given); a damage or notice
        becomes a warning line."""
        where = (format_name, dir_name)
        if isinstance(record, HistogramRecord):
            self._add_row(record, where, "histogram", record.index, float("nan"))
            self._add_histogram_fields(record)
            self.pending.append((self.rows - 1, record))
            if len(self.pending) >= BATCH_SIZE:
                self._flush()
        elif isinstance(record, ScalarRecord):
            self._add_row(record, where, "scalar", 0, record.value)
            for name in PROTO_COLUMNS:
                self.columns[name].append(np.nan)
            self.columns["l2_norm_exact"].append(False)
            self.columns["buckets"].append(0)
            self.columns["limits"].append(None)
            self.columns["counts"].append(None)
        elif isinstance(record, (Damage, Notice)):
            self.warnings.append(f"{record.file}: {record.message}")

    def _add_row(
        self,
        record: HistogramRecord | ScalarRecord,
        where: tuple[str, str],
        kind: str,
        index: int,
        value: float,
    ) -> None:
        format_name, dir_name = where
        row = (
            *(record.run, dir_name, format_name, record.file, record.tag, index),
            *(record.step, record.wall_time, kind, record.encoding, value),
        )
        for name, item in zip(ID_COLUMNS, row, strict=True):
            self.columns[name].append(item)
        self.rows += 1

    def _add_histogram_fields(self, record: HistogramRecord) -> None:
        for name in PROTO_COLUMNS:
            self.columns[name].append(_nan_if_none(getattr(record, name)))
        self.columns["l2_norm_exact"].append(_exact_norm(record))
        self.columns["buckets"].append(int(record.counts.size))
        self.bucket_count += int(record.counts.size)
        limits, counts = tbparse_buckets(record) if self.bucket_arrays else (None, None)
        self.columns["limits"].append(limits)
        self.columns["counts"].append(counts)

    def _flush(self) -> None:
        """Statistics of the pending histograms: one vectorised call per bucket count."""
        by_size: dict[int, list[tuple[int, HistogramRecord]]] = {}
        for row, record in self.pending:
            by_size.setdefault(int(record.counts.size), []).append((row, record))
        for group in by_size.values():
            self.blocks.append(([row for row, _ in group], _stats_of([r for _, r in group])))
        self.pending.clear()

    def take(self) -> pd.DataFrame:
        """The rows added since the last take, as a DataFrame of :data:`TABLE_COLUMNS`."""
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
        for name in BUCKET_COLUMNS:
            data[name] = _object_array(self.columns[name])
        table = pd.DataFrame(data, columns=list(TABLE_COLUMNS))
        types = {"index": "int64", "step": "int64", "wall_time": "float64", "value": "float64"}
        table = table.astype(types)
        self._reset()
        return table


def table_chunks(
    runs: Sequence[Run],
    records_of: Any,
    roots: Sequence[str],
    builder: TableBuilder,
    chunk_rows: int = CHUNK_ROWS,
    chunk_buckets: int = CHUNK_BUCKETS,
) -> Iterator[pd.DataFrame]:
    """The table of ``runs`` in chunks of at most ``chunk_rows`` rows and about
    ``chunk_buckets`` histogram buckets (a run's rows may span chunks). ``records_of(run)``
    gives a run's records; ``roots`` are the paths the runs were found under (for
    ``dir_name``); warnings gather in ``builder.warnings``. An empty table gives one empty
    chunk, so that its columns are known."""
    given = 0
    for run in runs:
        dir_name = relative_dir(run.path, roots)
        for record in records_of(run):
            builder.add(record, run.format, dir_name)
            if builder.rows >= chunk_rows or builder.bucket_count >= chunk_buckets:
                given += 1
                yield builder.take()
    if builder.rows or not given:
        yield builder.take()


def relative_dir(run_path: str, roots: Sequence[str]) -> str:
    """tbparse's ``dir_name``: the run's directory relative to the path it was found under,
    with ``/`` between parts; ``""`` for the path itself (or a file in it). Under none of
    ``roots`` (it cannot happen for a discovered run), the run's own path."""
    for root in roots:
        if "://" in root:
            base = root.rstrip("/")
            if run_path == base or run_path.startswith(base + "/"):
                return run_path[len(base) :].lstrip("/")
            continue
        base = os.path.normpath(root)
        if os.path.isfile(base):
            base = os.path.dirname(base) or "."
        relative = os.path.relpath(run_path, base) if run_path else "."
        if relative == os.curdir:
            return ""
        if relative != os.pardir and not relative.startswith(os.pardir + os.sep):
            return relative.replace(os.sep, "/")
    return run_path


def tbparse_buckets(record: HistogramRecord) -> tuple[np.ndarray, np.ndarray]:
    """``(limits, counts)`` as tbparse gives them (see the module docstring)."""
    if record.encoding == "histo" or record.counts.size == 0:
        return record.right.copy(), record.counts.copy()
    limits = np.concatenate((record.left[:1], record.right))
    counts = np.concatenate(([0.0], record.counts))
    return limits, counts


def applicable(table: pd.DataFrame, name: str) -> np.ndarray | None:
    """The rows where column ``name`` has a meaning (None: every row): ``value`` on scalar
    rows, the statistics on histogram rows, ``num``, ``sum`` and ``sum_squares`` on ``histo``
    histograms (a TF2 tensor histogram has none). The exports write the others as null or an
    empty cell, and NaN where a value is NaN; in a DataFrame both are NaN."""
    if name == "value":
        return np.asarray(table["kind"] == "scalar")
    if name in STAT_NAMES:
        return np.asarray(table["kind"] == "histogram")
    if name in PROTO_COLUMNS:
        return np.asarray((table["kind"] == "histogram") & (table["encoding"] == "histo"))
    return None


def _object_array(items: list[Any]) -> np.ndarray:
    """A column of arrays (or None): numpy must not try to stack them into a matrix."""
    column = np.empty(len(items), dtype=object)
    for position, item in enumerate(items):
        column[position] = item
    return column


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
