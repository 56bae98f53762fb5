"""Log formats besides TensorBoard's event files, behind one seam.

A format is a module here with:

- ``NAME``: the ``Run.format`` of its runs; ``LABEL``: what it reads, for people;
  ``WRITER``: the ``FileInfo.writer`` of its files;
- ``find(directory, subdirectories, names, top) -> list[Run]``: its runs in ``directory``
  (``subdirectories`` and file ``names`` as ``os.walk`` lists them; ``top``: the directory
  the user gave). Discovery asks every format about every directory it walks, beside
  looking for event files, and about a file the user names;
- ``records(run) -> Iterator[Record]``: the run's values as the event reader's records
  (``model.ScalarRecord``, ``HistogramRecord``, with the format's own step numbers, and
  ``Damage`` for what could not be read, ``FileInfo`` once per file read), so the series,
  verdicts and reports downstream are those of event files holding the same numbers.

Formats read their files with the standard library (JSON, CSV, SQLite) and
``events.wire``; none needs its framework installed. Sources are read from local paths.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from types import ModuleType

from gradcheck.model import TENSORBOARD, Record, Run
from gradcheck.sources import (
    hf_trainer,
    lightning_csv,
    mlflow_files,
    mlflow_sqlite,
    wandb_run,
)

FORMATS: tuple[ModuleType, ...] = (
    hf_trainer,
    lightning_csv,
    mlflow_files,
    mlflow_sqlite,
    wandb_run,
)
"""Every format, in the order discovery asks them about a directory."""
_BY_NAME = {module.NAME: module for module in FORMATS}
WRITERS = frozenset(module.WRITER for module in FORMATS)
"""The ``FileInfo.writer`` of the files each format reads."""


def find_runs(
    directory: str, subdirectories: Sequence[str], names: Sequence[str], top: bool
) -> list[Run]:
    """The runs of every format in ``directory`` (see the module docstring)."""
    return [
        run
        for module in FORMATS
        for run in module.find(directory, list(subdirectories), list(names), top)
    ]


def runs_of_file(path: str) -> list[Run]:
    """The runs a file the user named holds when it is a file of some format (a
    ``trainer_state.json``, a ``metrics.csv``, an MLflow database, a ``.wandb`` file)."""
    directory, name = os.path.split(os.path.normpath(path))
    directory = directory or "."
    found = find_runs(directory, [], [name], top=True)
    named = os.path.normpath(path)
    return [run for run in found if any(os.path.normpath(file) == named for file in run.files)]


def is_source(run: Run) -> bool:
    """Whether ``run`` is read by a format here (not from event files)."""
    return run.format != TENSORBOARD


def records(run: Run) -> Iterator[Record]:
    """The records of a run of one of the formats here."""
    module = _BY_NAME.get(run.format)
    if module is None:
        raise ValueError(f"no log format named {run.format!r}")
    records_of: Iterator[Record] = module.records(run)
    return records_of


def label(run: Run) -> str:
    """What kind of log ``run`` is, for people."""
    module = _BY_NAME.get(run.format)
    return module.LABEL if module is not None else "TensorBoard event files"
