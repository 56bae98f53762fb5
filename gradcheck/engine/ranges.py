"""Byte-range splitting: one big event file read by several processes, in ranges joined back.

A file of at least :data:`SPLIT_SIZE` bytes that holds more than a process's share of all the
bytes is read in byte ranges of about that share (:func:`cuts`, each estimated from the
records in the file's first few MB to read for :data:`PIECE_SECONDS` at least), that meet at
records starting a new step (:func:`split_offsets`); a range after the first assumes the
plugins its tags had before it (:func:`head_plugins`). The ranges are joined back exactly
(:func:`joined`, with ``engine.join``), or the file is read again in one piece.

Only ``engine.read`` uses this module (:func:`cuts`, :func:`read_range`, :func:`joined` and
:data:`SPLIT_SIZE`): without it every file is read whole, with the same results. It buys
speed only on single files of 64 MB or more (``bench/README.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gradcheck.engine import fastpath
from gradcheck.engine.fastpath import RangeReader, RangeResult
from gradcheck.engine.join import join_ranges
from gradcheck.engine.parts import FilePart, file_part, reduce_file
from gradcheck.events.framing import Frame, Window, frame_at
from gradcheck.events.steps import StepWindow
from gradcheck.events.storage import NO_OPTIONS, StorageOptions, file_size, is_url, open_binary
from gradcheck.events.wire import EVENT_SUMMARY, event_head
from gradcheck.model import Record

SPLIT_SIZE = 64 << 20
"""Files at least this large may be read in byte ranges by several processes (when their
reading is also estimated long enough, :func:`plan_pieces`): below, starting a worker, the
transfer and the join cost about what the second core saves (``bench/README.md``)."""
REMOTE_WHOLE = True
"""A URL is read whole by one process, never cut in byte ranges: each range costs a worker
its own requests (the cut's search, the head, a GET from the range's start) and, with
forkserver workers, the storage library's import (several times slower in ranges:
``bench/README.md``)."""
SECONDS_PER_BYTE = 1.1e-9
SECONDS_PER_RECORD = 8e-7
"""The C engine's reading time of a file, in one process: per byte and per record (from the
160 MB bench logs, ``bench/README.md``)."""
PIECE_SECONDS = 0.125
"""Each byte range of a file is estimated to take at least this long to read: below, planning
the cut and the worker's start cost about what the second core saves."""


def estimated_seconds(size: int, records: int, scanned: int) -> float | None:
    """The reading time of a file of ``size`` bytes with ``records`` records in its first
    ``scanned`` bytes (None when nothing was scanned)."""
    if scanned <= 0:
        return None
    return size * (SECONDS_PER_BYTE + SECONDS_PER_RECORD * records / scanned)


def plan_pieces(size: int, share: float, estimate: float | None) -> int:
    """In how many byte ranges to read a file of ``size`` bytes when each process's share of
    all the bytes is ``share``: about ``size / share`` (a file bigger than a share would keep
    one process busy after the others are done), each estimated to take
    :data:`PIECE_SECONDS` at least (``estimate``: the whole file's reading time, None when
    unknown); 1: whole."""
    pieces = max(1, round(size / share)) if share > 0 else 1
    if estimate is not None:
        pieces = min(pieces, int(estimate / PIECE_SECONDS))
    return max(1, pieces)


def cuts(
    path: str, run: str, size: int, share: float, storage: StorageOptions = NO_OPTIONS
) -> list[tuple[int, int, Mapping[str, str] | None]]:
    """The byte ranges to read ``path`` in, as ``(start, limit, assumed)`` (``limit`` -1: to
    the end; ``assumed``: the plugins of tags before ``start``, None for the first), when each
    process's share of all the bytes is ``share``; [] to read it whole."""
    if size < SPLIT_SIZE or (REMOTE_WHOLE and is_url(path)):
        return []
    if plan_pieces(size, share, None) <= 1:
        return []
    plugins, records, scanned = scan_head(path, run, HEAD_BYTES, storage)
    pieces = plan_pieces(size, share, estimated_seconds(size, records, scanned))
    boundaries = split_offsets(path, size, pieces, storage) if pieces > 1 else []
    if not boundaries:
        return []
    return [
        (
            start,
            limit,
            None  # the head read above, unless the range starts inside it
            if start == 0
            else plugins
            if start >= HEAD_BYTES
            else head_plugins(path, run, start, storage),
        )
        for start, limit in zip([0, *boundaries], [*boundaries, -1], strict=True)
    ]


def read_range(
    path: str,
    run: str,
    window: StepWindow,
    start: int,
    limit: int,
    assumed: Mapping[str, str] | None = None,
    storage: StorageOptions = NO_OPTIONS,
) -> RangeResult:
    """The records of ``path`` starting in ``[start, limit)``, with the C engine (a pool task);
    ``assumed``: the plugin names of tags before ``start`` (see :func:`head_plugins`)."""
    return fastpath.reduce_file_range(path, run, window, None, start, limit, assumed, storage)


def joined(
    ranges: Sequence[RangeResult],
    boundaries: Sequence[int],
    path: str,
    run: str,
    window: StepWindow,
    storage: StorageOptions = NO_OPTIONS,
) -> FilePart:
    """The ranges of one file joined, or the file read again when they cannot be exactly."""
    result = join_ranges(ranges, boundaries)
    if result is None:
        return reduce_file(path, run, window, storage=storage)
    return file_part(result, path, run)


HEAD_BYTES = 4 << 20
"""Bytes read by :func:`head_plugins` (TF2 names a tag's plugin on its first value only, and
every tag is written at the first step: a few hundred kB)."""


def head_plugins(
    path: str, run: str, limit: int, storage: StorageOptions = NO_OPTIONS
) -> dict[str, str]:
    """The plugin names of tags learnt from the records of ``path`` that start before
    ``min(limit, HEAD_BYTES)``: what a range starting at ``limit`` may assume (TF2 histograms
    of known tags are then read at once, not kept pending: a slower path)."""
    return scan_head(path, run, limit, storage)[0]


def scan_head(
    path: str, run: str, limit: int, storage: StorageOptions = NO_OPTIONS
) -> tuple[dict[str, str], int, int]:
    """:func:`head_plugins`, with how many records start in the bytes read and how many
    bytes that is (the density of records, for an estimate of the whole file's reading)."""
    reader = _PluginReader(path, run, StepWindow(), keep_unknown=False)
    end = min(limit, HEAD_BYTES)
    try:
        with open_binary(path, storage) as stream:
            reader.read_range(stream, 0, end)
        end = min(end, file_size(path, storage))
    except OSError:
        pass  # the ranges will say what cannot be read; assume what was learnt
    reader.take_tally()
    return dict(reader.state.decoder.plugin_by_tag), reader.tally.records, end


class _PluginReader(RangeReader):
    """A range reader that only learns plugin names: the scanner and the reference decoder
    remember them as they read; no statistics are computed and no series are built."""

    def _consume(self, rows: int) -> None:
        pass

    def _add_record(self, record: Record) -> None:
        pass


SPLIT_SEARCH = 8 << 20  # bytes searched after a cut for a step boundary


def split_offsets(
    path: str, size: int, pieces: int, storage: StorageOptions = NO_OPTIONS
) -> list[int]:
    """Where to cut a file in ``pieces`` ranges of about equal bytes: after each
    ``i / pieces`` of it, the first record (by the resync rule: both CRCs verify) that starts
    a new, higher step, so that no index group of a step is cut. Rising offsets; fewer when
    there is no such record near a cut (damage, no summary steps) or two cuts find the same;
    none when the file cannot be read."""
    found: list[int] = []
    try:
        with open_binary(path, storage) as stream:
            for number in range(1, pieces):
                at = max(size * number // pieces, found[-1] + 1 if found else 0)
                stream.seek(at)
                window = Window(stream, 1 << 20)
                window.base = at
                boundary = _step_boundary(window, at + SPLIT_SEARCH)
                if boundary is not None and boundary < size:
                    found.append(boundary)
    except OSError:
        return []
    return found


def _step_boundary(window: Window, give_up: int) -> int | None:
    previous: int | None = None
    pos = 0
    while pos >= 0 and window.base + pos < give_up:
        items, pos = frame_at(window, pos)
        for item in items:
            head = event_head(item.payload) if isinstance(item, Frame) else None
            step = head[0] if head is not None and head[1] == EVENT_SUMMARY else None
            if step is not None and previous is not None and step > previous:
                return item.offset
            previous = step
    return None
