"""The CSV format: one row per (run, parameter) with its statistics, for pandas or a spreadsheet.

Fixed columns first, then one column per statistic (the union over all parameters, in order
of first appearance), then the evidence and hint. A missing or non-finite number is an empty
cell, which ``pandas.read_csv`` reads as NaN. Every parameter appears, healthy ones included.

Text cells (run, name, tags, evidence, hint) go through
:func:`~gradcheck.report.escape.csv_text`: one starting like a formula gets a leading ``'``.
Numbers are written by this formatter, never copied from the log's text, so a negative number
stays ``-1.5``, a number to a spreadsheet and to pandas.

With the sweep view on (``Report.sweep``), CSV stays one table: after the fixed columns come
``run_verdict`` and ``run_rank`` (the run's worst verdict and its place in the sweep's
ranking) and one ``hparam.<name>`` column per hyperparameter that varies, so that the counts
and relations are a ``groupby`` away.
"""

from __future__ import annotations

import csv
import io
import math
import numbers
from collections.abc import Iterable, Iterator

from gradcheck.model import HParamValue, LayerResult, Report, RunReport, Sweep
from gradcheck.report.escape import csv_text
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
    "activation_tag",
)
TRAILING = ("evidence", "notes", "hint")


class CsvFormatter(Formatter):
    """Comma-separated values with a header row, ``\\n`` line ends; every text cell quoted
    (RFC 4180 quoting), numbers not. Quoting only where the csv module must would leave a
    carriage return in a name unquoted, and readers take it for the end of the row."""

    def format(self, report: Report) -> str:
        return "".join(self.chunks(report))

    def chunks(self, report: Report) -> Iterator[str]:
        """The header row, then each run's rows (a large sweep's table held whole as text
        costs memory: ``bench/README.md``)."""
        stat_keys = _stat_keys(layer for run in report.runs for layer in run.layers)
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)
        sweep = _SweepColumns(report.sweep)
        writer.writerow([*LEADING, *sweep.header, *stat_keys, *TRAILING])
        yield _taken(buffer)
        for run in report.runs:
            extra = sweep.cells(run)
            for layer in sorted(run.layers, key=lambda layer: -layer.severity):
                row = _row(run, layer, stat_keys)
                writer.writerow([*row[: len(LEADING)], *extra, *row[len(LEADING) :]])
            yield _taken(buffer)


def _taken(buffer: io.StringIO) -> str:
    """What ``buffer`` holds, which it then no longer does."""
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


class _SweepColumns:
    """The sweep's columns (none without a sweep): each run's verdict, rank and values."""

    def __init__(self, sweep: Sweep | None) -> None:
        self.names = list(sweep.hparams) if sweep is not None else []
        self.header = (
            ["run_verdict", "run_rank", *(csv_text(f"hparam.{name}") for name in self.names)]
            if sweep is not None
            else []
        )
        self.ranked = {
            entry.run: (rank, entry)
            for rank, entry in enumerate(sweep.ranking if sweep is not None else (), 1)
        }

    def cells(self, run: RunReport) -> list[float | int | str]:
        if not self.header:
            return []
        found = self.ranked.get(run.run)
        if found is None:  # a run the sweep does not hold (a report built by hand)
            return [""] * len(self.header)
        rank, entry = found
        values = [_hparam_cell(entry.hparams.get(name)) for name in self.names]
        return [entry.verdict, rank, *values]


def _hparam_cell(value: HParamValue | None) -> float | int | str:
    if isinstance(value, str):
        return csv_text(value)
    return cell(value)


def _stat_keys(layers: Iterable[LayerResult]) -> list[str]:
    """Every statistic name, in order of first appearance, minus names the fixed columns use."""
    keys: dict[str, None] = {}
    for layer in layers:
        keys.update(dict.fromkeys(str(key) for key in layer.stats))
    return [key for key in keys if key not in LEADING and key not in TRAILING]


def _text(value: str | None) -> str:
    """A text cell from the log (empty for None), neutralised for spreadsheets."""
    return "" if value is None else csv_text(value)


def _row(run: RunReport, layer: LayerResult, stat_keys: list[str]) -> list[float | int | str]:
    leading = [
        _text(run.run),
        _text(layer.name),
        layer.verdict,
        ";".join(layer.flags),
        cell(layer.severity),
        cell(layer.first_bad_step),
        cell(layer.depth),
        _text(layer.weight_tag),
        _text(layer.grad_tag),
        _text(layer.activation_tag),
    ]
    stats = [cell(layer.stats.get(key)) for key in stat_keys]
    return [
        *leading,
        *stats,
        _text(layer.evidence),
        _text("; ".join(layer.notes)),
        _text(layer.hint),
    ]


def cell(value: float | int | None) -> float | int | str:
    """A number as a number (the writer leaves it unquoted, as ``repr`` writes it, so that it
    round-trips); an empty text cell when absent or non-finite."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, numbers.Integral):  # int and numpy integers
        return int(value)
    number = float(value)
    return number if math.isfinite(number) else ""
