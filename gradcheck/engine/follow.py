"""Following event files while a trainer appends to them: each poll reads only the new bytes.

Per file the follower keeps how far it has read (``end``: just past the last complete record)
and the C engine's result for the bytes before it (a ``fastpath.RangeResult``). A poll reads the
appended bytes as one more range (``fastpath.reduce_file_range`` from ``end``) and joins it onto
the old result with ``join.join_ranges``, which gives what one reading of the whole file
gives, or None when the ranges cannot be joined exactly (a restart, a step whose values straddle
the boundary): then the file is read again whole. A record still being written (the bytes after
``end``) is left for the next poll, so each poll's parts are those of the log cut at its last
complete record; :meth:`Follower.poll` with ``final`` reads a tail that stayed half-written as
``gradcheck analyze`` reads it (an ``incomplete_tail`` damage).

A file that shrank, or whose first bytes changed (replaced, rotated), is read again from the
start, with a warning (the first bytes are compared when the size changed: a file replaced by
one of the same size is seen when it next grows). Files and runs that appear are found by
``events.discover`` at every poll; bytes are reached only through ``events.storage`` (so
remote paths work by polling too).
Without the C engine (``GRADCHECK_NO_EXT=1``) a file that grew is read again whole with the
reference reader: the same parts, at a cost that grows with the file.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from gradcheck.engine import fastpath
from gradcheck.engine.join import join_ranges
from gradcheck.engine.parts import FilePart, file_part, reduce_file, source_part
from gradcheck.errors import InputError
from gradcheck.events.discover import discover, merged
from gradcheck.events.steps import StepWindow
from gradcheck.events.storage import NO_OPTIONS, StorageOptions, file_size, open_binary
from gradcheck.model import Run
from gradcheck.sources import is_source

IDENTITY_BYTES = 64
"""Bytes at the start of a file remembered to tell a replaced file from a grown one: the first
record (the ``file_version`` event with its wall time, ~40 bytes) and the start of the next."""


@dataclass(frozen=True)
class Poll:
    """What the event files under the followed paths give now."""

    runs: tuple[Run, ...]
    parts: tuple[tuple[FilePart, ...], ...]  # per run, one per file, in file order
    changed: frozenset[str]  # paths of the runs whose parts changed since the previous poll
    new_bytes: int  # bytes read by this poll (a file read again whole counts whole)
    bytes_read: int  # bytes of complete records under the paths
    waiting: str = ""  # why there is nothing to read yet (no event file under the paths)
    warnings: tuple[str, ...] = ()  # files read again from the start, and why


@dataclass
class _File:
    """The follower's state of one event file."""

    path: str
    run: str
    storage: StorageOptions = NO_OPTIONS  # for a URL
    end: int = 0  # offset just past the last complete record read
    seen_size: int = -1  # the file's size at the previous poll (-1: never looked)
    head: bytes = b""
    result: fastpath.RangeResult | None = None  # C engine: the records before ``end``
    part: FilePart | None = None
    tail: bool = False  # bytes after ``end`` (a record being written)


class Follower:
    """Follows the event files under ``paths`` (runs matching ``run_glob``, values inside
    ``window``); :meth:`poll` brings their parts up to date."""

    def __init__(
        self,
        paths: Sequence[str],
        window: StepWindow | None = None,
        run_glob: str | None = None,
        storage: StorageOptions = NO_OPTIONS,
    ) -> None:
        self.paths = list(paths)
        self.window = window if window is not None else StepWindow()
        self.run_glob = run_glob
        self.storage = storage
        self._files: dict[str, _File] = {}
        self._found: dict[str, list[Run]] = {}  # each path's runs at its last listing
        self._waited: set[str] = set()  # missing paths' messages, said once
        self._sources: dict[Run, tuple[tuple[tuple[int, int], ...], FilePart]] = {}

    def poll(self, final: bool = False) -> Poll:
        """Read what was appended since the previous poll (every file, the first time).

        ``final``: the training is over; a half-written last record is read as damage, as
        ``gradcheck analyze`` reads it, so that the last poll's parts are analyze's."""
        found, missing, warnings = self._discovered()
        runs = [run for run in found if self._selected(run)]
        if runs:
            waiting = ""
        elif found:
            waiting = f"no run matches --run {self.run_glob!r} yet"
        else:  # no event file yet: the trainer has not started
            waiting = " ".join(missing)
        changed: set[str] = set()
        new_bytes = 0
        wanted = {path for run in runs if not is_source(run) for path in run.files}
        for path in [path for path in self._files if path not in wanted]:
            warnings.append(f"{path}: no longer there; its records are no longer counted")
            changed.add(self._files.pop(path).run)
        parts_by_run: list[tuple[FilePart, ...]] = []
        for run in runs:
            if is_source(run):
                part, read = self._source_part(run)
                if read:
                    changed.add(run.path)
                new_bytes += read
                parts_by_run.append((part,))
                continue
            parts = []
            for path in run.files:
                state = self._files.setdefault(path, _File(path, run.path, self.storage))
                fresh = state.part is None
                read = _advance(state, self.window, warnings)
                if final and state.tail:  # as analyze reads it: the tail is damage
                    state.part, state.tail = (
                        reduce_file(path, run.path, self.window, storage=self.storage),
                        False,
                    )
                    fresh = True
                if read or fresh:
                    changed.add(run.path)
                new_bytes += read
                assert state.part is not None  # every file has a part once advanced
                parts.append(state.part)
            parts_by_run.append(tuple(parts))
        return Poll(
            runs=tuple(runs),
            parts=tuple(parts_by_run),
            changed=frozenset(changed),
            new_bytes=new_bytes,
            bytes_read=sum(state.end for state in self._files.values())
            + sum(size for run in runs if is_source(run) for size, _ in self._sources[run][0]),
            waiting=waiting,
            warnings=tuple(warnings),
        )

    def _source_part(self, run: Run) -> tuple[FilePart, int]:
        """The part of a run of another log format, read again whole when one of its files
        changed size or time (their formats rewrite files: a CSV, a JSON state, a database);
        the bytes read (0: unchanged)."""
        signature = tuple(_size_and_time(path) for path in run.files)
        known = self._sources.get(run)
        if known is not None and known[0] == signature:
            return known[1], 0
        part = source_part(run, self.window)
        self._sources[run] = (signature, part)
        return part, max(1, sum(size for size, _ in signature))

    def _discovered(self) -> tuple[list[Run], list[str], list[str]]:
        """The runs under the paths now, each path listed on its own: one that does not exist
        yet is waited for (said once) while the others are followed, and one that cannot be
        listed now (a network blip) keeps the runs it had. Also what is missing, and
        warnings."""
        listed: list[Run] = []
        missing: list[str] = []
        warnings: list[str] = []
        for path in self.paths:
            try:
                runs = discover([path], self.storage)
            except InputError as error:
                known = self._found.get(path)
                if known is None:  # not there yet
                    missing.append(str(error))
                    continue
                runs = known
                warnings.append(f"{path}: {error} (what was read there is kept)")
            self._found[path] = runs
            listed += runs
        found = merged(listed)  # a run under two of the paths, once
        for line in missing:
            if found and line not in self._waited:  # the others are followed meanwhile
                self._waited.add(line)
                warnings.append(f"waiting: {line}")
        return found, missing, warnings

    def _selected(self, run: Run) -> bool:
        if self.run_glob is None:
            return True
        names = (run.path, os.path.basename(run.path))
        return any(fnmatch.fnmatchcase(name, self.run_glob) for name in names)


def _size_and_time(path: str) -> tuple[int, int]:
    try:
        status = os.stat(path)
    except OSError:
        return -1, 0
    return status.st_size, status.st_mtime_ns


def _advance(state: _File, window: StepWindow, warnings: list[str]) -> int:
    """Bring one file's part up to date; the bytes read (0: nothing new)."""
    try:
        size = file_size(state.path, state.storage)
    except OSError:
        size = -1  # cannot be read now: its part says why (damage), read again when it can
    if size == state.seen_size and state.part is not None:
        return 0
    state.seen_size = size
    if size >= 0 and state.end and _replaced(state, size, warnings):
        state.end, state.head, state.result, state.part = 0, b"", None, None
    if size < 0:
        state.end, state.head, state.result = 0, b"", None
        state.part, state.tail = (
            reduce_file(state.path, state.run, window, storage=state.storage),
            False,
        )
        return 0
    if not fastpath.available():
        return _read_whole_reference(state, window, size)
    start = state.end
    assumed = state.result.plugins if state.result is not None else None
    appended = _complete(
        fastpath.reduce_file_range(
            state.path, state.run, window, None, start, -1, assumed, storage=state.storage
        )
    )
    state.tail = size > appended.end
    if state.result is None:
        joined, read = appended, appended.end - start
    elif appended.end == start:
        return 0  # only part of a record was appended
    else:
        previous = replace(state.result, stopped_at=state.result.end)
        joined_or_none = join_ranges([previous, appended], [start])
        read = appended.end - start
        if joined_or_none is None:  # not exactly joinable: read the file again in one piece
            joined_or_none = _complete(
                fastpath.reduce_file_range(state.path, state.run, window, storage=state.storage)
            )
            state.tail = size > joined_or_none.end
            read = joined_or_none.end
        joined = joined_or_none
    state.result, state.end = joined, joined.end
    _remember_head(state)
    sized = replace(joined, size=None if joined.size is None else joined.end)
    state.part = _detached(file_part(sized, state.path, state.run))
    return read


def _complete(result: fastpath.RangeResult) -> fastpath.RangeResult:
    """``result`` without the damage from its ``end`` on (a record still being written: read
    at the next poll, whole)."""
    damages = result.data.damages
    kept = tuple(damage for damage in damages if damage.offset < result.end)
    if len(kept) == len(damages):
        return result
    return replace(result, data=replace(result.data, damages=kept))


def _detached(part: FilePart) -> FilePart:
    """``part`` with mappings of its own: the next join consumes the result's."""
    data = part.data
    data = replace(data, histograms=dict(data.histograms), scalars=dict(data.scalars))
    return replace(part, data=data)


def _read_whole_reference(state: _File, window: StepWindow, size: int) -> int:
    """The reference engine's poll: the file read again whole, its tail left out."""
    part = reduce_file(state.path, state.run, window, storage=state.storage)
    tails = [damage for damage in part.data.damages if damage.kind == "incomplete_tail"]
    end = tails[0].offset if tails else size
    state.tail = bool(tails)
    data = part.data
    if tails:
        data = replace(
            data,
            damages=tuple(d for d in data.damages if d.kind != "incomplete_tail"),
            file_infos=tuple(replace(info, size=end) for info in data.file_infos),
        )
    state.part = replace(part, data=data)
    read = end if end != state.end else 0
    state.end = end
    _remember_head(state)
    return read


def _replaced(state: _File, size: int, warnings: list[str]) -> bool:
    """Whether the file must be read again from the start: it shrank, or its first bytes are
    not those read before (replaced by another file, or rotated)."""
    if size < state.end:
        warnings.append(
            f"{state.path}: shrank from {state.end} to {size} bytes (truncated or rewritten): "
            "read again from the start"
        )
        return True
    head = _head(state.path, len(state.head), state.storage)
    if head is not None and head != state.head:
        warnings.append(
            f"{state.path}: its first record changed (the file was replaced or rotated): "
            "read again from the start"
        )
        return True
    return False


def _remember_head(state: _File) -> None:
    if len(state.head) < IDENTITY_BYTES:
        state.head = _head(state.path, min(state.end, IDENTITY_BYTES), state.storage) or b""


def _head(path: str, size: int, storage: StorageOptions) -> bytes | None:
    """The first ``size`` bytes of ``path`` (None when it cannot be read now)."""
    try:
        with open_binary(path, storage) as stream:
            return stream.read(size)
    except OSError:
        return None
