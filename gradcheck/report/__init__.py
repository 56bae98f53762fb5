"""Output formats: one module per format behind :class:`~gradcheck.report.interface.Formatter`.

``FORMATS`` maps each ``--format`` choice to the ``module:Class`` of its formatter; the CLI
offers exactly these names, and a test checks that every choice has a working formatter. Only
the chosen formatter's module is imported (the table's needs rich, which costs start-up time
that a JSON or CSV report does not have to pay).

``COMPARE_FORMATS`` does the same for ``gradcheck compare``'s document (a
:class:`~gradcheck.report.interface.ComparisonFormatter` per format).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from gradcheck.report.interface import ComparisonFormatter, Env, FormatOptions, Formatter

FORMATS: dict[str, str] = {
    "table": "gradcheck.report.table:TableFormatter",
    "json": "gradcheck.report.json_format:JsonFormatter",
    "markdown": "gradcheck.report.markdown:MarkdownFormatter",
    "csv": "gradcheck.report.csv:CsvFormatter",
    "github": "gradcheck.report.github:GithubFormatter",
    "junit": "gradcheck.report.junit:JunitFormatter",
    "html": "gradcheck.report.html:HtmlFormatter",
}
DEFAULT_FORMAT = "table"
COMPARE_FORMATS: dict[str, str] = {
    "table": "gradcheck.report.compare_table:ComparisonTableFormatter",
    "json": "gradcheck.report.compare_json:ComparisonJsonFormatter",
    "markdown": "gradcheck.report.compare_markdown:ComparisonMarkdownFormatter",
    "html": "gradcheck.report.compare_html:ComparisonHtmlFormatter",
}

__all__ = [
    "COMPARE_FORMATS",
    "DEFAULT_FORMAT",
    "FORMATS",
    "ComparisonFormatter",
    "Env",
    "FormatOptions",
    "Formatter",
    "comparison_formatter_for",
    "formatter_class",
    "formatter_for",
]


def formatter_class(name: str) -> type[Formatter]:
    """The formatter class for ``--format name``, importing its module only now."""
    formatter: type[Formatter] = _imported(FORMATS[name])
    return formatter


def _imported(spec: str) -> Any:
    """The object ``module:name`` names, importing its module only now."""
    module_name, class_name = spec.split(":")
    return getattr(import_module(module_name), class_name)


def formatter_for(name: str, options: FormatOptions | None = None) -> Formatter:
    """The formatter for ``--format name`` (``KeyError`` for a name not in ``FORMATS``)."""
    return formatter_class(name)(options)


def comparison_formatter_for(
    name: str, options: FormatOptions | None = None
) -> ComparisonFormatter:
    """The comparison formatter for ``gradcheck compare --format name`` (``KeyError`` for a
    name not in ``COMPARE_FORMATS``)."""
    formatter: type[ComparisonFormatter] = _imported(COMPARE_FORMATS[name])
    return formatter(options)
