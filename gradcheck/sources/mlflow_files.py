"""MLflow's file store: ``mlruns/<experiment id>/<run id>/metrics/<key>``.

Each metric of a run is a text file (a key holding ``/`` is a subdirectory), one line per
logged value: ``<timestamp ms> <value> <step>`` (MLflow before 1.0 wrote no step: 0); values
are Python's text for floats (``nan``, ``inf``). The run's ``meta.yaml`` holds its name, the
experiment's ``meta.yaml`` (one directory up) the experiment's name. A run is named
``<store>/<experiment name>/<run name>`` (``mlflow_names``); runs in ``.trash`` or marked
deleted are left out.

The metrics of a run are merged in time order (timestamp, then step; keys logged in one
``log_metrics`` call share a timestamp and are taken in key order), a record's ``offset``
being its line's byte offset in its file and its wall time the timestamp. A line that does not
parse costs that value; a last line without its line end was being written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from gradcheck.model import Record, Run
from gradcheck.sources.base import damage, file_info, number, scalar, unreadable
from gradcheck.sources.mlflow_names import run_paths

NAME = "mlflow-files"
LABEL = "MLflow file store (mlruns/)"
WRITER = "MLflow file store (mlruns/)"
META = "meta.yaml"
METRICS = "metrics"
TRASH = ".trash"


def find(directory: str, subdirectories: list[str], names: list[str], top: bool) -> list[Run]:
    """The runs of the experiment ``directory`` (one holding ``meta.yaml`` and run
    directories), or the run ``directory`` itself when the user gave it (``top``)."""
    if META not in names or os.path.basename(directory) == TRASH:
        return []
    if _is_run(directory):
        if not top:
            return []  # found with its experiment
        return _runs(os.path.dirname(directory), [directory])
    candidates = [os.path.join(directory, name) for name in subdirectories]
    return _runs(directory, [path for path in candidates if _is_run(path)])


def _is_run(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, META)) and os.path.isdir(
        os.path.join(directory, METRICS)
    )


def _runs(experiment_dir: str, run_dirs: list[str]) -> list[Run]:
    experiment = read_meta(os.path.join(experiment_dir, META))
    metas = [(path, read_meta(os.path.join(path, META))) for path in run_dirs]
    live = [(path, meta) for path, meta in metas if meta.get("lifecycle_stage") != "deleted"]
    live.sort(key=lambda item: (_start(item[1]), item[0]))
    described = [
        (experiment.get("name", ""), meta.get("run_name", ""), os.path.basename(path))
        for path, meta in live
    ]
    paths = run_paths(os.path.dirname(experiment_dir) or ".", described)
    return [
        Run(path=named, files=tuple(_metric_files(path)), format=NAME)
        for named, (path, _) in zip(paths, live, strict=True)
    ]


def _start(meta: dict[str, str]) -> int:
    start = meta.get("start_time", "")
    return int(start) if start.isdigit() else 0


def read_meta(path: str) -> dict[str, str]:
    """The top-level ``key: value`` scalars of an MLflow ``meta.yaml`` (quotes removed); empty
    when it cannot be read. MLflow writes these files flat, with PyYAML's plain or quoted
    scalars; nested values (``tags: []``) are kept as their text."""
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            lines = stream.read().splitlines()
    except OSError:
        return {}
    meta = {}
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key and not key[0].isspace():
            meta[key.strip()] = _unquoted(value.strip())
    return meta


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1].encode().decode("unicode_escape", errors="replace")
    return value


def _metric_files(run_dir: str) -> list[str]:
    files: list[str] = []
    for directory, subdirectories, names in os.walk(os.path.join(run_dir, METRICS)):
        subdirectories.sort()
        files.extend(os.path.join(directory, name) for name in sorted(names))
    return sorted(files)


def records(run: Run) -> Iterator[Record]:
    """Every logged value of every metric, merged in time order (see the module docstring)."""
    import heapq  # only for an MLflow run: discovery asks every directory (start-up)

    streams = [_metric_lines(run.path, path) for path in run.files]
    for _, _, _, record in heapq.merge(*streams, key=lambda item: item[:3]):
        yield record


def metric_key(path: str) -> str:
    """The metric key of a metric file: its path under ``metrics/``, with ``/``."""
    parts = os.path.normpath(path).split(os.sep)
    at = len(parts) - 1 - parts[::-1].index(METRICS)
    return "/".join(parts[at + 1 :])


def _metric_lines(run: str, path: str) -> Iterator[tuple[int, int, int, Record]]:
    """``(timestamp, step, order, record)`` of each line of one metric file, then its info."""
    key = metric_key(path)
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as error:
        yield 0, 0, 0, unreadable(run, path, error)
        yield 0, 0, 0, file_info(run, path, 0, WRITER)
        return
    offset = timestamp = step = read = 0
    for line in data.splitlines(keepends=True):
        at, offset = offset, offset + len(line)
        parsed = _parsed(line)
        if parsed is None or not line.endswith(b"\n"):
            yield timestamp, step, 0, _bad_line(run, path, at, line)
            continue
        timestamp, value, step = parsed
        read += 1
        yield timestamp, step, 1, scalar(run, path, at, key, step, timestamp / 1000.0, value)
    yield timestamp, step, 2, file_info(run, path, read, WRITER)


def _parsed(line: bytes) -> tuple[int, float, int] | None:
    """``(timestamp, value, step)`` of a metric line; None when it is not one."""
    fields = line.decode("ascii", "replace").split()
    if len(fields) not in (2, 3):
        return None
    value = number(fields[1])
    timestamp = _integer(fields[0])
    step = _integer(fields[2]) if len(fields) == 3 else 0
    if value is None or timestamp is None or step is None:
        return None
    return timestamp, value, step


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _bad_line(run: str, path: str, at: int, line: bytes) -> Record:
    if not line.endswith(b"\n"):
        message = f"half-written last line, at byte {at}: that value lost ({len(line)} bytes)"
        return damage(run, path, at, "incomplete_tail", len(line), message)
    message = f"damaged line, at byte {at}: not '<timestamp> <value> <step>': that value lost"
    return damage(run, path, at, "undecodable", len(line), message)
