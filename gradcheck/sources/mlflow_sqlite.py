"""MLflow's SQLite store (``mlflow.db``, ``sqlite:///...`` tracking URIs), read with sqlite3.

The ``runs`` table names each run (``name``) and its experiment (``experiments.name``); the
``metrics`` table holds one row per logged value (``key``, ``value``, ``timestamp`` in ms,
``step``, ``run_uuid``, ``is_nan``). MLflow stores a NaN as ``value`` 0 with ``is_nan`` 1 and
an infinity as +-1.7976931348623157e308 (``sys.float_info.max``): read back as NaN and +-inf.
Rows are read in insertion order (``rowid``: the logging order), a record's ``offset`` being
its row id and its wall time the timestamp. A run is named
``<database>/<experiment name>/<run name>`` (``mlflow_names``); deleted runs are left out.

The database is opened read-only (a training may still be writing it). A damaged database
costs the rows SQLite cannot give: those read before the error are kept, with a warning.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import closing
from typing import TYPE_CHECKING

from gradcheck.model import Record, Run
from gradcheck.sources.base import damage, file_info, scalar
from gradcheck.sources.mlflow_names import run_paths

if TYPE_CHECKING:  # sqlite3 and urllib are imported when a database is read (start-up time)
    import sqlite3

NAME = "mlflow-sqlite"
LABEL = "MLflow SQLite store (mlflow.db)"
WRITER = "MLflow SQLite store"
SUFFIXES = (".db", ".sqlite", ".sqlite3")
SQLITE_HEADER = b"SQLite format 3\x00"
_MAX = sys.float_info.max
_RUNS = """
    SELECT runs.run_uuid, runs.name, experiments.name
    FROM runs LEFT JOIN experiments ON runs.experiment_id = experiments.experiment_id
    WHERE runs.lifecycle_stage IS NOT 'deleted'
    ORDER BY runs.experiment_id, runs.start_time, runs.run_uuid
"""
_METRICS = """
    SELECT rowid, key, value, timestamp, step, is_nan FROM metrics
    WHERE run_uuid = ? ORDER BY rowid
"""


def find(directory: str, subdirectories: list[str], names: list[str], top: bool) -> list[Run]:
    """The runs of every MLflow SQLite database in ``directory``."""
    runs = []
    for name in names:
        path = os.path.join(directory, name)
        if name.endswith(SUFFIXES) and _is_sqlite(path):
            runs.extend(_runs(path))
    return runs


def _is_sqlite(path: str) -> bool:
    try:
        with open(path, "rb") as stream:
            return stream.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def connect(path: str) -> sqlite3.Connection:
    """A read-only connection to the database at ``path``."""
    import sqlite3
    import urllib.request

    uri = "file:" + urllib.request.pathname2url(os.path.abspath(path)) + "?mode=ro"
    return sqlite3.connect(uri, uri=True)


def _runs(path: str) -> list[Run]:
    """The runs of one database; none when it is not an MLflow store (or cannot be read)."""
    import sqlite3

    try:
        with closing(connect(path)) as connection:
            rows = connection.execute(_RUNS).fetchall()
    except sqlite3.Error:
        return []  # not MLflow's schema, or unreadable: not a run of this format
    described = [(experiment or "", name or "", run_id) for run_id, name, experiment in rows]
    paths = run_paths(path, described)
    return [
        Run(path=named, files=(path,), format=NAME, key=run_id)
        for named, (_, _, run_id) in zip(paths, described, strict=True)
    ]


def records(run: Run) -> Iterator[Record]:
    """Every logged value of the run, in logging order (see the module docstring)."""
    import sqlite3

    path = run.files[0]
    read = 0
    try:
        with closing(connect(path)) as connection:
            for row_id, key, value, timestamp, step, is_nan in connection.execute(
                _METRICS, (run.key,)
            ):
                read += 1
                yield scalar(
                    run.path,
                    path,
                    row_id,
                    str(key),
                    int(step),
                    timestamp / 1000.0,
                    _value(value, is_nan),
                )
    except sqlite3.Error as error:
        message = f"{path}: SQLite stopped after {read} values of run {run.key}: {error}"
        yield damage(run.path, path, 0, "unreadable", 0, message)
    yield file_info(run.path, path, read, WRITER)


def _value(value: float, is_nan: int) -> float:
    if is_nan:
        return float("nan")
    if abs(value) == _MAX:
        return float("inf") if value > 0 else float("-inf")
    return float(value)
