"""Lightning ``CSVLogger`` runs: ``lightning_logs/version_*/metrics.csv``.

One row per logging call, one column per metric and a ``step`` column (the trainer's global
step); a metric not logged in a row is an empty cell. Each non-empty cell becomes a scalar of
its column's name at the row's step (a record's ``offset`` is its row's byte offset; no wall
time is logged: 0). The tags keep Lightning's names, which gradcheck reads by their role:
``grad_norm(module, norm_type)``'s ``grad_<p>_norm/<param>`` columns are per-parameter
gradient norms and ``grad_<p>_norm_total`` the global one; a loss column (``train_loss``,
``loss_step``) is the loss. One run per ``metrics.csv`` (its directory).

``CSVLogger`` writes rows ending in ``\\r\\n`` and rewrites the whole file when a new metric
appears: a last row without its line end was being written (lost, as an event file's
half-written record); a row of the wrong width, or with a step that is not a number, costs that
row; a cell that is not a number, that value.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator

from gradcheck.model import Record, Run
from gradcheck.sources.base import damage, file_info, number, scalar, unreadable

NAME = "lightning-csv"
LABEL = "Lightning CSVLogger metrics.csv"
METRICS_FILE = "metrics.csv"
WRITER = "Lightning CSVLogger (metrics.csv)"
STEP = "step"


def find(directory: str, subdirectories: list[str], names: list[str], top: bool) -> list[Run]:
    """``directory`` as a run when it holds a ``metrics.csv`` whose header has a ``step``
    column (Lightning's; other tools' ``metrics.csv`` are left alone)."""
    path = os.path.join(directory, METRICS_FILE)
    if METRICS_FILE not in names or STEP not in _header(path):
        return []
    return [Run(path=directory, files=(path,), format=NAME)]


def _header(path: str) -> list[str]:
    import csv  # only for a metrics.csv: discovery asks every directory (start-up)

    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as stream:
            return next(csv.reader([stream.readline()]), [])
    except OSError:
        return []


def records(run: Run) -> Iterator[Record]:
    """Every cell of every row, in row order (see the module docstring)."""
    for path in run.files:
        try:
            with open(path, "rb") as stream:
                data = stream.read()
        except OSError as error:
            yield unreadable(run.path, path, error)
            yield file_info(run.path, path, 0, WRITER)
            continue
        rows = 0
        for item in _rows(run.path, path, data):
            if isinstance(item, int):
                rows += 1
            else:
                yield item
        yield file_info(run.path, path, rows, WRITER)


def _rows(run: str, path: str, data: bytes) -> Iterator[Record | int]:
    """The records of each row, and 1 after each row read whole."""
    import csv

    lines = data.splitlines(keepends=True)
    if not lines:
        return
    columns = next(csv.reader([lines[0].decode("utf-8", errors="replace")]), [])
    if STEP not in columns:
        message = f"{path}: no {STEP!r} column in the header: nothing read"
        yield damage(run, path, 0, "undecodable", len(data), message)
        return
    step_at = columns.index(STEP)
    offset = len(lines[0])
    for line in lines[1:]:
        at, offset = offset, offset + len(line)
        if not line.endswith(b"\n"):
            message = f"half-written last row, at byte {at}: that row lost ({len(line)} bytes)"
            yield damage(run, path, at, "incomplete_tail", len(line), message)
            break
        cells = next(csv.reader([line.decode("utf-8", errors="replace")]), [])
        if not cells:
            continue
        step = number(cells[step_at]) if len(cells) == len(columns) else None
        if step is None or not math.isfinite(step) or step != int(step):
            message = (
                f"damaged row, at byte {at}: {len(cells)} cells for {len(columns)} columns "
                f"or no step: that row lost ({len(line)} bytes)"
            )
            yield damage(run, path, at, "undecodable", len(line), message)
            continue
        yield from _cells(run, path, at, int(step), columns, cells)
        yield 1


def _cells(
    run: str, path: str, at: int, step: int, columns: list[str], cells: list[str]
) -> Iterator[Record]:
    for column, cell in zip(columns, cells, strict=True):
        if column == STEP or not cell:
            continue
        value = number(cell)
        if value is None:
            message = f"{column!r} at byte {at} is {cell[:40]!r}, not a number: that value lost"
            yield damage(run, path, at, "undecodable", len(cell), message)
            continue
        yield scalar(run, path, at, column, step, 0.0, value)
