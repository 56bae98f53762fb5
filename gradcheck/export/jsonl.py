"""JSON Lines: one object per row, keys the table's columns in order.

Every string is kept exactly, written with ``\\uXXXX`` escapes for anything outside ASCII, so
that no control character, escape sequence or bidi override from a tag name reaches a terminal
the lines are printed on (a JSON parser gives the name back unchanged). Numbers are written
exactly (the shortest text that reads back as the same float64); NaN and infinities as
``NaN``, ``Infinity`` and ``-Infinity``, which Python's ``json``, pandas and pyarrow read back
(strict JSON has no such numbers, and writing ``null`` would lose whether a gradient was NaN
or infinite). A column without meaning on a row is ``null``: ``value`` on a histogram row,
the statistics on a scalar row, ``num``, ``sum`` and ``sum_squares`` of a TF2 tensor
histogram, ``limits`` and ``counts`` (arrays) on a scalar row.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, BinaryIO

from gradcheck.export.table import BUCKET_COLUMNS, TABLE_COLUMNS, applicable

if TYPE_CHECKING:
    import pandas as pd

LINES_PER_WRITE = 256
_ENCODER = json.JSONEncoder(ensure_ascii=True, allow_nan=True, separators=(",", ":"))


class JsonLinesWriter:
    def __init__(self, stream: BinaryIO, *, terminal: bool = False) -> None:
        self.stream = stream

    def write(self, table: pd.DataFrame) -> None:
        columns = [plain_column(table, name) for name in TABLE_COLUMNS]
        lines: list[str] = []
        for row in zip(*columns, strict=True):
            line = dict(zip(TABLE_COLUMNS, row, strict=True))
            for name in BUCKET_COLUMNS:  # made lists a row at a time: a chunk's are many
                line[name] = None if line[name] is None else line[name].tolist()
            lines.append(_ENCODER.encode(line))
            if len(lines) >= LINES_PER_WRITE:
                self._write(lines)
        self._write(lines)

    def _write(self, lines: list[str]) -> None:
        if lines:
            self.stream.write(("\n".join(lines) + "\n").encode("ascii"))
            lines.clear()

    def close(self) -> None:
        self.stream.flush()


def plain_column(table: pd.DataFrame, name: str) -> list[Any]:
    """A column as Python values (floats, ints, bools, strings; bucket arrays as they are),
    None where it has no meaning (:func:`~gradcheck.export.table.applicable`)."""
    if name in BUCKET_COLUMNS:
        return list(table[name])
    values: list[Any] = table[name].tolist()
    meaningful = applicable(table, name)
    if meaningful is None:
        return values
    keep = meaningful.tolist()
    return [value if kept else None for value, kept in zip(values, keep, strict=True)]
