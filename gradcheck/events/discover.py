"""Find runs and their event files under the paths a user gives.

A run is a directory that directly holds event files (TensorBoard's convention); directories
are searched recursively. An event file is any file whose name contains ``tfevents``: real
names include ``events.out.tfevents.<time>.<host>.<pid>.<n>.v2``, ``events.out.tfevents.resnet``,
``...profile-empty`` and ``2gpu_big%2Fevents.out.tfevents...``, so no stricter glob is used. A
file given explicitly is read whatever its name. Files of a run are sorted by name, which is
TensorBoard's order (the timestamp in the name sorts them). Only regular files are read: a
FIFO or a device given as a path is an error that says what it is, and one with an event
file's name inside a directory is passed over (reading it could block or never end). A URL
(``s3://bucket/logs``) is listed in one recursive listing (``storage.list_url``), its runs in
the order ``os.walk`` would give.

Every directory walked (and a file named) is also offered to the log formats of
``gradcheck.sources`` (HF Trainer state, Lightning CSV, MLflow stores, W&B run files), whose
runs join the event-file runs in walk order. URLs are searched for event files only.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import replace

from gradcheck.errors import InputError
from gradcheck.events.storage import NO_OPTIONS, StorageOptions, file_kind, is_url, list_url
from gradcheck.model import TENSORBOARD, Run
from gradcheck.sources import FORMATS, find_runs, runs_of_file

EVENT_FILE_MARKER = "tfevents"


def is_event_file_name(name: str) -> bool:
    """True when a file name marks a TensorBoard event file."""
    return EVENT_FILE_MARKER in name


def discover(paths: Sequence[str], storage: StorageOptions = NO_OPTIONS) -> list[Run]:
    """The runs under ``paths`` (files, directories or URLs of either), in the order the paths
    were given (``storage``: the options for URLs).

    Raises ``InputError`` for a path that does not exist or is neither a regular file nor a
    directory, and when no event file is found.
    """
    if isinstance(paths, str):
        paths = [paths]
    runs = merged(
        run
        for path in paths
        for run in (
            [Run(path=run, files=tuple(files)) for run, files in _url_runs(path, storage)]
            if is_url(path)
            else _runs_under(path)
        )
    )
    if not runs:
        shown = ", ".join(repr(path) for path in paths) or "(no path given)"
        formats = ", ".join(module.LABEL for module in FORMATS)
        raise InputError(
            f"no event file found in {shown}: looked for files whose name contains "
            f"{EVENT_FILE_MARKER!r} (e.g. events.out.tfevents.*) and for {formats}, "
            "searching directories recursively. Point gradcheck at a log directory."
        )
    return runs


def merged(runs: Iterable[Run]) -> list[Run]:
    """``runs`` with a run found twice (under two of the paths given) made one, its files
    sorted, in order of first appearance. A run of another format keeps its own files and
    their order (its format reads them so); where it shares its directory with event files
    (two loggers of one training), it is named by its file so that the two runs differ."""
    files_by_run: dict[str, set[str]] = {}
    others: dict[tuple[str, str, str], Run] = {}
    order: list[tuple[str, str, str]] = []
    for run in runs:
        identity = (run.path, run.format, run.key)
        if run.format == TENSORBOARD:
            if run.path not in files_by_run:
                order.append(identity)
            files_by_run.setdefault(run.path, set()).update(run.files)
        elif identity not in others:
            others[identity] = run
            order.append(identity)
    return [
        Run(path=path, files=tuple(sorted(files_by_run[path])))
        if run_format == TENSORBOARD
        else _apart(others[path, run_format, key], files_by_run)
        for path, run_format, key in order
    ]


def _apart(run: Run, event_runs: dict[str, set[str]]) -> Run:
    """``run`` named by its file when an event-file run has its name."""
    if run.path not in event_runs:
        return run
    path = run.files[0] if len(run.files) == 1 else f"{run.path} ({run.format})"
    return replace(run, path=path)


def _runs_under(path: str) -> list[Run]:
    """The runs under one user-given path: event-file runs and the log formats' runs."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise _missing(path) from None
    except OSError as error:
        raise InputError(f"cannot access {path!r}: {error.strerror}.") from None
    if stat.S_ISREG(mode):
        named = os.path.normpath(path)
        return runs_of_file(named) or [Run(os.path.dirname(named) or ".", (named,))]
    if not stat.S_ISDIR(mode):
        raise InputError(
            f"{path!r} is {file_kind(mode)}, not an event file or a log directory: "
            "gradcheck reads regular files only."
        )
    runs = []
    root = os.path.normpath(path)
    for directory, subdirectories, names in os.walk(root, onerror=_raise):
        subdirectories.sort()
        events = sorted(name for name in names if is_event_file_name(name))
        files = [os.path.join(directory, name) for name in events]
        files = [file for file in files if os.path.isfile(file)]
        if files:
            runs.append(Run(path=directory, files=tuple(files)))
        runs.extend(find_runs(directory, subdirectories, names, top=directory == root))
    return runs


def _url_runs(root: str, storage: StorageOptions) -> list[tuple[str, list[str]]]:
    """``(run, event files)`` pairs under a URL: the file itself and its directory when
    ``root`` is a file, else the directories holding event files, parents first and
    siblings by name (the order of ``os.walk`` with sorted subdirectories)."""
    try:
        listed = list_url(root, storage)
    except FileNotFoundError:
        raise _missing(root) from None
    except OSError as error:
        raise InputError(f"cannot list {root!r}: {error}.") from None
    if listed is None:
        return [(root.rpartition("/")[0], [root])]
    by_directory: dict[str, list[str]] = {}
    for url, _ in listed:
        directory, _, name = url.rpartition("/")
        if is_event_file_name(name):
            by_directory.setdefault(directory, []).append(url)
    order = sorted(by_directory, key=lambda directory: directory.split("/"))
    return [(directory, sorted(by_directory[directory])) for directory in order]


def _raise(error: OSError) -> None:
    raise InputError(f"cannot list {error.filename!r}: {error.strerror}.")


def _missing(path: str) -> InputError:
    return InputError(f"{path!r} does not exist: give an event file or a log directory.")
