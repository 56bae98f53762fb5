"""``gradcheck export``: every scalar and histogram of every run, as one long table in a file.

The runs are found as ``analyze`` finds them (event files and the other log formats of
:mod:`gradcheck.sources`), their records read by the reference reader (every value: nothing
thinned) and turned into the rows of :mod:`gradcheck.export.table`, a chunk at a time, which
the format's writer writes as it comes: memory holds one chunk, whatever the size of the
sweep. One module per format (``csv``, ``jsonl``, ``parquet``), each a
:class:`~gradcheck.export.interface.TableWriter`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from gradcheck.events.discover import discover
from gradcheck.events.reader import read_run
from gradcheck.events.storage import StorageOptions
from gradcheck.export.interface import TableWriter
from gradcheck.export.table import CHUNK_BUCKETS, CHUNK_ROWS, TableBuilder, table_chunks

FORMATS: dict[str, tuple[str, str]] = {
    "csv": ("gradcheck.export.csv", "CsvWriter"),
    "jsonl": ("gradcheck.export.jsonl", "JsonLinesWriter"),
    "parquet": ("gradcheck.export.parquet", "ParquetWriter"),
}
"""Each format: the module and class of its writer (imported only when chosen)."""
SUFFIXES: dict[str, str] = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
"""The file name endings that say the format of ``-o FILE``."""
BINARY = frozenset({"parquet"})
"""Formats that are not text (not printed on a terminal)."""


def format_of(path: str) -> str | None:
    """The format a file name's ending says (``None``: no known ending)."""
    return SUFFIXES.get(os.path.splitext(path)[1].lower())


def writer_for(format_name: str, stream: BinaryIO, *, terminal: bool = False) -> TableWriter:
    """The writer of ``format_name`` on ``stream`` (``terminal``: the stream is a terminal)."""
    module_name, class_name = FORMATS[format_name]
    writer: TableWriter = getattr(importlib.import_module(module_name), class_name)(
        stream, terminal=terminal
    )
    return writer


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote: runs, rows of each kind, and the damage and notices met while
    reading (one line each)."""

    runs: int
    scalars: int
    histograms: int
    warnings: tuple[str, ...]

    @property
    def rows(self) -> int:
        return self.scalars + self.histograms


def export(
    paths: Sequence[str],
    stream: BinaryIO,
    format_name: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    terminal: bool = False,
    chunk_rows: int = CHUNK_ROWS,
    chunk_buckets: int = CHUNK_BUCKETS,
) -> ExportSummary:
    """Write the table of every run under ``paths`` to ``stream`` in ``format_name``.

    Raises ``InputError`` before anything is written when no run is found, and the format's
    ``MissingDependencyError`` (parquet without pyarrow) before anything is read."""
    storage = StorageOptions.of(storage_options)
    runs = discover(list(paths), storage)
    writer = writer_for(format_name, stream, terminal=terminal)
    builder = TableBuilder()
    scalars = histograms = 0
    chunks = table_chunks(
        runs, lambda run: read_run(run, storage), paths, builder, chunk_rows, chunk_buckets
    )
    for chunk in chunks:
        histogram_rows = int((chunk["kind"] == "histogram").sum())
        histograms += histogram_rows
        scalars += len(chunk) - histogram_rows
        writer.write(chunk)
    writer.close()
    return ExportSummary(len(runs), scalars, histograms, tuple(builder.warnings))
