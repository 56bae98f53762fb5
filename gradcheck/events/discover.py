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
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence

from gradcheck.errors import InputError
from gradcheck.events.storage import NO_OPTIONS, StorageOptions, file_kind, is_url, list_url
from gradcheck.model import Run

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
        Run(path=run, files=tuple(files))
        for path in paths
        for run, files in (_url_runs(path, storage) if is_url(path) else _runs_under(path))
    )
    if not runs:
        shown = ", ".join(repr(path) for path in paths) or "(no path given)"
        raise InputError(
            f"no event file found in {shown}: looked for files whose name contains "
            f"{EVENT_FILE_MARKER!r} (e.g. events.out.tfevents.*), searching directories "
            "recursively. Point gradcheck at a TensorBoard log directory."
        )
    return runs


def merged(runs: Iterable[Run]) -> list[Run]:
    """``runs`` with a run found twice (under two of the paths given) made one, its files
    sorted, in order of first appearance."""
    files_by_run: dict[str, set[str]] = {}
    for run in runs:
        files_by_run.setdefault(run.path, set()).update(run.files)
    return [Run(path=run, files=tuple(sorted(files))) for run, files in files_by_run.items()]


def _runs_under(path: str) -> list[tuple[str, list[str]]]:
    """``(run directory, event files)`` pairs for one user-given path."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise _missing(path) from None
    except OSError as error:
        raise InputError(f"cannot access {path!r}: {error.strerror}.") from None
    if stat.S_ISREG(mode):
        return [(os.path.dirname(os.path.normpath(path)) or ".", [os.path.normpath(path)])]
    if not stat.S_ISDIR(mode):
        raise InputError(
            f"{path!r} is {file_kind(mode)}, not an event file or a log directory: "
            "gradcheck reads regular files only."
        )
    runs = []
    for directory, subdirectories, names in os.walk(os.path.normpath(path), onerror=_raise):
        subdirectories.sort()
        events = sorted(name for name in names if is_event_file_name(name))
        files = [os.path.join(directory, name) for name in events]
        files = [file for file in files if os.path.isfile(file)]
        if files:
            runs.append((directory, files))
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
