"""The Python API: ``gradcheck.read(path)`` (typed records) and ``gradcheck.frame(path)``.

``frame`` is the long format (one row per histogram or scalar value) that pandas users expect,
the table of :mod:`gradcheck.export.table`: each histogram's statistics from
:mod:`gradcheck.series.stats`, computed in batches while the records stream past, and its
bucket arrays.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gradcheck.events.discover import discover
from gradcheck.events.reader import read_run
from gradcheck.events.storage import StorageOptions
from gradcheck.export.table import TABLE_COLUMNS, TableBuilder, table_chunks
from gradcheck.model import Record

if TYPE_CHECKING:  # pandas is imported only by frame(): ``gradcheck.read`` stays light
    import pandas as pd

FRAME_COLUMNS: tuple[str, ...] = TABLE_COLUMNS
"""Columns of :func:`frame`, in order (docs/reference/export.md says what each holds).
Statistics are NaN on scalar rows, ``value`` is NaN on histogram rows; ``num``, ``sum`` and
``sum_squares`` are the proto's (NaN for TF2 tensor histograms); ``limits`` and ``counts``
are each histogram's bucket arrays as tbparse gives them (None on scalar rows)."""


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
    paths: str | Sequence[str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    bucket_arrays: bool = True,
) -> pd.DataFrame:
    """All histogram and scalar values under ``paths`` as one long-format DataFrame, the
    table ``gradcheck export`` writes (:data:`FRAME_COLUMNS`).

    ``frame.attrs["warnings"]`` holds one line per damage or notice found while reading.
    ``bucket_arrays=False`` leaves ``limits`` and ``counts`` None: the frame of a long
    histogram log then holds its statistics without every bucket.
    """
    path_list = [paths] if isinstance(paths, str) else list(paths)
    storage = StorageOptions.of(storage_options)
    runs = discover(path_list, storage)
    builder = TableBuilder(bucket_arrays=bucket_arrays)
    read = lambda run: read_run(run, storage)  # noqa: E731
    (table,) = table_chunks(runs, read, path_list, builder, sys.maxsize, sys.maxsize)
    table.attrs["warnings"] = tuple(builder.warnings)
    return table


def records_frame(records: Iterable[Record]) -> pd.DataFrame:
    """The long-format DataFrame of any record stream (see :data:`FRAME_COLUMNS`; ``format``
    and ``dir_name`` are empty: they are the runs', which records do not carry)."""
    builder = TableBuilder()
    for record in records:
        builder.add(record)
    table = builder.take()
    table.attrs["warnings"] = tuple(builder.warnings)
    return table
