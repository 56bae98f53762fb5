"""Output formats: one module per format behind :class:`~gradcheck.report.interface.Formatter`.

``FORMATS`` maps each ``--format`` choice to its formatter class; the CLI offers exactly these
names, and a test checks that every choice has a working formatter.
"""

from __future__ import annotations

from gradcheck.report.csv import CsvFormatter
from gradcheck.report.interface import Env, FormatOptions, Formatter
from gradcheck.report.json_format import JsonFormatter
from gradcheck.report.markdown import MarkdownFormatter
from gradcheck.report.table import TableFormatter

FORMATS: dict[str, type[Formatter]] = {
    "table": TableFormatter,
    "json": JsonFormatter,
    "markdown": MarkdownFormatter,
    "csv": CsvFormatter,
}
DEFAULT_FORMAT = "table"

__all__ = ["DEFAULT_FORMAT", "FORMATS", "Env", "FormatOptions", "Formatter", "formatter_for"]


def formatter_for(name: str, options: FormatOptions | None = None) -> Formatter:
    """The formatter for ``--format name`` (``KeyError`` for a name not in ``FORMATS``)."""
    return FORMATS[name](options)
