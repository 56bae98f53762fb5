"""CSV: a header row, then one row per value; ``\\n`` line ends, text cells quoted (RFC 4180),
numbers not.

Text from the logs (``run``, ``dir_name``, ``file``, ``tag``) goes through
:func:`~gradcheck.report.escape.csv_text`, as in the CSV report: a cell that a spreadsheet would
run as a formula (starting with ``= + - @``, a tab or a carriage return) gets a leading ``'``.
That is the one change made to the data; the exact names are in the JSON Lines and parquet
exports. Printed on a terminal, the text cells also go through
:func:`~gradcheck.report.escape.terminal`. Numbers are written exactly (the shortest text that
reads back as the same float64), NaN and infinities as ``nan``, ``inf``, ``-inf`` (which
``pandas.read_csv`` reads as such); a column without meaning on a row is an empty cell (see
:func:`~gradcheck.export.table.applicable`); booleans ``True``/``False``; ``limits`` and
``counts`` as JSON arrays (``json.loads`` each cell), empty on scalar rows.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, BinaryIO

from gradcheck.export.jsonl import plain_column
from gradcheck.export.table import BUCKET_COLUMNS, TABLE_COLUMNS, TEXT_COLUMNS
from gradcheck.report.escape import csv_text, terminal

if TYPE_CHECKING:
    import pandas as pd

_ARRAY = json.JSONEncoder(allow_nan=True, separators=(",", ":"))


ROWS_PER_WRITE = 256


class CsvWriter:
    """Rows made as text a few hundred at a time, written to the stream as UTF-8 (the stream
    stays the caller's: nothing here closes it, even on an error)."""

    def __init__(self, stream: BinaryIO, *, terminal: bool = False) -> None:
        self.stream = stream
        self.buffer = io.StringIO()
        self.rows = csv.writer(self.buffer, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)
        self.escape: Callable[[str], str] = _on_terminal if terminal else csv_text
        self.rows.writerow(TABLE_COLUMNS)
        self._write()

    def write(self, table: pd.DataFrame) -> None:
        columns = [self._column(table, name) for name in TABLE_COLUMNS]
        for count, row in enumerate(zip(*columns, strict=True), start=1):
            self.rows.writerow(row)
            if count % ROWS_PER_WRITE == 0:
                self._write()
        self._write()

    def _write(self) -> None:
        self.stream.write(self.buffer.getvalue().encode("utf-8"))
        self.buffer.seek(0)
        self.buffer.truncate()

    def _column(self, table: pd.DataFrame, name: str) -> Iterable[Any]:
        values = plain_column(table, name)
        if name in TEXT_COLUMNS:
            return [self.escape(value) for value in values]
        if name in BUCKET_COLUMNS:  # made text a row at a time: a chunk's are many
            return (None if value is None else _ARRAY.encode(value.tolist()) for value in values)
        return values

    def close(self) -> None:
        self.stream.flush()


def _on_terminal(text: str) -> str:
    return csv_text(terminal(text))
