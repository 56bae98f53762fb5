"""The CSV format: one row per (run, parameter) with its statistics, for pandas or a spreadsheet.

Fixed columns first, then one column per statistic (the union over all parameters, in order
of first appearance), then the evidence and hint. A missing or non-finite number is an empty
cell, which ``pandas.read_csv`` reads as NaN. Every parameter appears, healthy ones included.
"""

from __future__ import annotations

import csv
import io
import math
import numbers
from collections.abc import Iterable

from gradcheck.model import LayerResult, Report, RunReport
from gradcheck.report.interface import Formatter

LEADING = (
    "run",
    "name",
    "verdict",
    "flags",
    "severity",
    "first_bad_step",
    "depth",
    "weight_tag",
    "grad_tag",
)
TRAILING = ("evidence", "notes", "hint")


class CsvFormatter(Formatter):
    """Comma-separated values with a header row (RFC 4180 quoting, ``\\n`` line ends)."""

    def format(self, report: Report) -> str:
        stat_keys = _stat_keys(layer for run in report.runs for layer in run.layers)
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([*LEADING, *stat_keys, *TRAILING])
        for run in report.runs:
            for layer in sorted(run.layers, key=lambda layer: -layer.severity):
                writer.writerow(_row(run, layer, stat_keys))
        return buffer.getvalue()


def _stat_keys(layers: Iterable[LayerResult]) -> list[str]:
    """Every statistic name, in order of first appearance, minus names the fixed columns use."""
    keys: dict[str, None] = {}
    for layer in layers:
        keys.update(dict.fromkeys(str(key) for key in layer.stats))
    return [key for key in keys if key not in LEADING and key not in TRAILING]


def _row(run: RunReport, layer: LayerResult, stat_keys: list[str]) -> list[str]:
    leading = [
        run.run,
        layer.name,
        layer.verdict,
        ";".join(layer.flags),
        cell(layer.severity),
        cell(layer.first_bad_step),
        cell(layer.depth),
        layer.weight_tag or "",
        layer.grad_tag or "",
    ]
    stats = [cell(layer.stats.get(key)) for key in stat_keys]
    return [*leading, *stats, layer.evidence, "; ".join(layer.notes), layer.hint]


def cell(value: float | int | None) -> str:
    """A number as text that round-trips (``repr``), empty when absent or non-finite."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, numbers.Integral):  # int and numpy integers
        return str(int(value))
    number = float(value)
    return repr(number) if math.isfinite(number) else ""
