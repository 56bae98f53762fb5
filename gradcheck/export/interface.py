"""What every export format's writer is: chunks of the table in, bytes out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pandas as pd


class TableWriter(Protocol):
    """Writes the table's chunks (:func:`gradcheck.export.table.table_chunks`) to a binary
    stream as they come; :meth:`close` ends the document (a parquet footer) and leaves the
    stream open."""

    def write(self, table: pd.DataFrame) -> None: ...

    def close(self) -> None: ...
