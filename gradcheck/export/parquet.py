"""Parquet (pyarrow): one row group per chunk of the table, the names exactly as logged.

Column types: text as ``string``, ``index``, ``step`` and ``buckets`` as ``int64``,
``l2_norm_exact`` as ``bool``, every other number as ``double`` (NaN and infinities kept as
such; null where a column has no meaning on a row: see
:func:`~gradcheck.export.table.applicable`), ``limits`` and ``counts`` as ``list<double>``
(null on scalar rows).
Needs pyarrow (``pip install pyarrow``, gradcheck's ``parquet`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, BinaryIO

from gradcheck._optional import require
from gradcheck.export.table import BUCKET_COLUMNS, TABLE_COLUMNS, TEXT_COLUMNS, applicable

if TYPE_CHECKING:
    import pandas as pd

INTEGERS = ("index", "step", "buckets")


class ParquetWriter:
    def __init__(self, stream: BinaryIO, *, terminal: bool = False) -> None:
        self.arrow: Any = require("pyarrow", "parquet", "gradcheck export to parquet")
        parquet: Any = require("pyarrow.parquet", "parquet", "gradcheck export to parquet")
        self.schema = self.arrow.schema([(name, self._type(name)) for name in TABLE_COLUMNS])
        self.writer = parquet.ParquetWriter(_Borrowed(stream), self.schema)

    def _type(self, name: str) -> Any:
        arrow = self.arrow
        if name in TEXT_COLUMNS:
            return arrow.string()
        if name in INTEGERS:
            return arrow.int64()
        if name == "l2_norm_exact":
            return arrow.bool_()
        if name in BUCKET_COLUMNS:
            return arrow.list_(arrow.float64())
        return arrow.float64()

    def write(self, table: pd.DataFrame) -> None:
        arrays = [self._array(table, field) for field in self.schema]
        self.writer.write_table(self.arrow.Table.from_arrays(arrays, schema=self.schema))

    def _array(self, table: pd.DataFrame, field: Any) -> Any:
        if field.name in BUCKET_COLUMNS or field.name in TEXT_COLUMNS:
            return self.arrow.array(table[field.name].tolist(), type=field.type)
        meaningful = applicable(table, field.name)
        mask = None if meaningful is None else ~meaningful
        return self.arrow.array(table[field.name].to_numpy(), type=field.type, mask=mask)

    def close(self) -> None:
        self.writer.close()


class _Borrowed:
    """The caller's stream, which pyarrow may close (when its writer is closed, or collected
    after an error such as a reader gone from a pipe) without closing the stream itself."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.closed = False

    def write(self, data: bytes) -> int:
        return self.stream.write(data)

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        self.closed = True
