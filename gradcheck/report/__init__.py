"""Output formats: one module per format behind :class:`~gradcheck.report.interface.Formatter`.

``FORMATS`` maps each ``--format`` choice to the ``module:Class`` of its formatter; the CLI
offers exactly these names, and a test checks that every choice has a working formatter. Only
the chosen formatter's module is imported (the table's needs rich, which costs start-up time
that a JSON or CSV report does not have to pay).
"""

from __future__ import annotations

from importlib import import_module

from gradcheck.report.interface import Env, FormatOptions, Formatter

FORMATS: dict[str, str] = {
    "table": "gradcheck.report.table:TableFormatter",
    "json": "gradcheck.report.json_format:JsonFormatter",
    "markdown": "gradcheck.report.markdown:MarkdownFormatter",
    "csv": "gradcheck.report.csv:CsvFormatter",
}
DEFAULT_FORMAT = "table"

__all__ = [
    "DEFAULT_FORMAT",
    "FORMATS",
    "Env",
    "FormatOptions",
    "Formatter",
    "formatter_class",
    "formatter_for",
]


def formatter_class(name: str) -> type[Formatter]:
    """The formatter class for ``--format name``, importing its module only now."""
    module_name, class_name = FORMATS[name].split(":")
    formatter: type[Formatter] = getattr(import_module(module_name), class_name)
    return formatter


def formatter_for(name: str, options: FormatOptions | None = None) -> Formatter:
    """The formatter for ``--format name`` (``KeyError`` for a name not in ``FORMATS``)."""
    return formatter_class(name)(options)
