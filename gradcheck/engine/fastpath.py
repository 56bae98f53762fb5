"""The fast reading engine: the C scanner (``gradcheck.native._scan``) feeding batched reduction.

One semantics, two engines. ``reader.read_file`` + ``series.reduce_records`` (pure Python,
record objects) is the reference; :func:`reduce_file_range` gives the same ``RunData`` from
columns that the C scanner fills in batches: offsets, steps, wall times, tag ids, indexes and
bucket data, turned into numpy arrays without one Python object per value. Whatever the
scanner does not handle itself (damage, resynchronisation, a record it does not fully
understand) goes through the reference code (``framing.frame_at``, ``reader.records_of_frame``)
with the same state, so damage and odd records read exactly as in the reference.

Without the compiled extension, or with ``GRADCHECK_NO_EXT=1``, :func:`available` is False and
the pipeline uses the reference engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import BinaryIO

import numpy as np

from gradcheck.events.decode import EventDecoder, first_left_edges
from gradcheck.events.framing import FOOTER_SIZE, HEADER_SIZE, Frame, Window, frame_at
from gradcheck.events.reader import (
    FileTally,
    element_count,
    frame_damage,
    records_of_frame,
    restart_notice,
    unreadable,
)
from gradcheck.events.steps import StepWindow
from gradcheck.events.storage import NO_OPTIONS, StorageOptions, file_size, is_url, open_binary
from gradcheck.model import (
    STAT_NAMES,
    HistogramRecord,
    Notice,
    Record,
    RunData,
    ScalarRecord,
)
from gradcheck.native import extension, shared
from gradcheck.series.batch import FINGERPRINT_WEIGHTS, BucketMatrices, reduce_by_width
from gradcheck.series.reduce import Reducer

ROWS = 8192
"""Values per batch at most: fewer, larger batches are faster, but hold more memory
(``bench/README.md``; the reducer pools the rows of several batches: ``reduce.SETTLE_ROWS``)."""
DATA = 3 << 19  # float64 bucket numbers per batch (12 MB): wide histograms fill it first
CHUNK = 4 << 20
"""Bytes read at a time from a local file: a process holds ~3 at its peak (``bench/README.md``)."""
REMOTE_CHUNK = 16 << 20  # from a URL: each read is one ranged GET (S3's stream aside)
LIMIT_SLACK = 1 << 16  # bytes read past a range's limit (the record across it, most often)

FRAMING_BYTES = HEADER_SIZE + FOOTER_SIZE  # a record's bytes around its payload


def available() -> bool:
    """Whether the C engine can be used (built, and not disabled by ``GRADCHECK_NO_EXT=1``)."""
    return extension() is not None


def _c() -> ModuleType:
    """The C extension, for an engine that runs only when :func:`available`."""
    scan = extension()
    assert scan is not None, "the C engine runs only when available()"
    return scan


@dataclass(eq=False)
class RangeResult:
    """What one byte range of an event file gave (the whole file when the range is)."""

    data: RunData
    values_read: int
    values_kept: int
    tally: FileTally = field(default_factory=FileTally)
    size: int | None = None  # None: the file could not be opened
    restarts: bool = False  # a restart notice was due (range merging needs the whole file)
    collisions: list[tuple[str, int, list[int | None]]] = field(default_factory=list)
    plugins: dict[str, str] = field(default_factory=dict)  # plugin names known at the end
    steps: dict[str, tuple[tuple[int | None, int | None], ...]] = field(default_factory=dict)
    pending: dict[str, Pending] = field(default_factory=dict)  # tensors of unknown plugin
    unsure: set[str] = field(default_factory=set)  # tags of unknown plugin the C path skipped
    stopped_at: int = -1  # offset of the record at or after the range's limit (-1: none)
    assumed: dict[str, str] = field(default_factory=dict)  # plugins taken as known at the start
    end: int = 0
    """Offset just past the last record framed (verified, or damage followed by a verified
    record): where a reading of bytes appended later resumes. Damage from here on ran into the
    end of the file (a half-written record, or bytes that the rest of the file may resolve)."""


@dataclass(eq=False)
class Pending:
    """Tensor values of a tag whose plugin a range starting mid-file did not know: kept as
    histograms (``[k, 3]``) or scalars until the merge learns the plugin from earlier ranges."""

    kinds: set[str] = field(default_factory=set)  # "histogram", "scalar"
    read: int = 0
    kept: int = 0


class Columns:
    """The arrays the scanner fills (one batch), grown when one record does not fit."""

    def __init__(self, rows: int = ROWS, data: int = DATA) -> None:
        self.offsets = np.empty(rows, np.int64)
        self.tag_ids = np.empty(rows, np.int32)
        self.indexes = np.empty(rows, np.int32)
        self.steps = np.empty(rows, np.int64)
        self.walls = np.empty(rows, np.float64)
        self.kinds = np.empty(rows, np.uint8)
        self.flags = np.empty(rows, np.uint8)
        self.aux = np.empty(rows, np.int64)
        self.values = np.empty(rows, np.float64)
        self.starts = np.empty(rows, np.int64)
        self.sizes = np.empty(rows, np.int32)
        self.fields = np.empty((rows, 5), np.float64)
        self.data = np.empty(data, np.float64)
        self.all = (
            self.offsets, self.tag_ids, self.indexes, self.steps, self.walls, self.kinds,
            self.flags, self.aux, self.values, self.starts, self.sizes, self.fields, self.data,
        )  # fmt: skip

    def grown(self) -> Columns:
        return Columns(self.offsets.size * 2, self.data.size * 2)


class _SeriesNumbers:
    """The reducer's series numbers of scanned ``tag_id << 32 | index`` keys: a sorted table,
    looked up for a batch at once (Python work per new series only, not per series and
    batch)."""

    def __init__(self) -> None:
        self.keys = np.empty(0, np.int64)  # sorted
        self.found = np.empty(0, np.int64)  # the number of each key

    def numbers(self, keys: np.ndarray, new: Callable[[int], int]) -> np.ndarray:
        """The numbers of ``keys``; ``new(row)`` numbers a key first seen at ``keys[row]``,
        called in order of first appearance."""
        at = np.searchsorted(self.keys, keys)
        known = at < self.keys.size
        known[known] = self.keys[at[known]] == keys[known]
        if not known.all():
            missing = np.flatnonzero(~known)
            unseen, first = np.unique(keys[missing], return_index=True)
            order = np.argsort(first)
            numbers = np.empty(unseen.size, np.int64)
            for i in order.tolist():
                numbers[i] = new(int(missing[first[i]]))
            keys_now = np.concatenate([self.keys, unseen])
            sorted_keys = np.argsort(keys_now, kind="stable")
            self.keys = keys_now[sorted_keys]
            self.found = np.concatenate([self.found, numbers])[sorted_keys]
            at = np.searchsorted(self.keys, keys)
        return self.found[at]


class ScannerState:
    """The reader state (``reader._RunState``'s interface) backed by the scanner, so that the
    records the reference decoder reads are placed with the same state as the scanned ones."""

    def __init__(self, run: str, keep_unknown: bool) -> None:
        self.run = run
        self.decoder = EventDecoder(run)
        self.scanner = _c().Scanner(self.decoder.plugin_by_tag, keep_unknown)

    def place(self, record: HistogramRecord | ScalarRecord) -> tuple[int, Notice | None]:
        histogram = isinstance(record, HistogramRecord)
        count = element_count(record) if isinstance(record, HistogramRecord) else None
        index, went_back_from = self.scanner.place(histogram, record.tag, record.step, count)
        if went_back_from is None:
            return index, None
        return index, restart_notice(self.run, record.file, record.tag, went_back_from, record.step)


class RangeReader:
    """Reads one byte range of one file into a reducer."""

    def __init__(
        self,
        path: str,
        run: str,
        window: StepWindow,
        keep_unknown: bool,
        assumed: Mapping[str, str] | None = None,
        state: ScannerState | None = None,
    ) -> None:
        self.path = path
        self.run = run
        self.window = window
        self.chunk = REMOTE_CHUNK if is_url(path) else CHUNK
        self.keep_unknown = keep_unknown
        # a state given is carried across files (the files of a run, as ``reader.read_run``)
        self.state = state if state is not None else ScannerState(run, keep_unknown)
        self.assumed = dict(assumed or {})
        self.state.decoder.plugin_by_tag.update(self.assumed)
        self.reducer = Reducer()
        self.reducer.run = run
        self.series = _SeriesNumbers()
        self.tally = FileTally()
        self.columns = Columns()
        self.read = 0
        self.kept = 0
        self.restarts = False
        self.unsure: set[str] = set()
        self.pending: dict[str, Pending] = {}
        self.stopped_at = -1  # file offset of the first record at or after the limit
        self.end = 0  # file offset just past the last record framed
        self.on_offset: Callable[[int], None] | None = None

    def read_range(self, stream: BinaryIO, start: int, limit: int) -> None:
        """Read records starting in ``[start, limit)`` (``limit`` -1: to the end).

        The file is read in chunks, not memory-mapped: a mapped file that shrinks while it
        is read (rotated, copied over) kills the process with SIGBUS, a read just ends early.
        """
        window = Window(stream, self.chunk)
        self.end = start
        try:
            stream.seek(start)
            window.base = start
            self._scan(window, 0, limit)
        except OSError as error:
            self._add_record(unreadable(self.run, self.path, window.base, error))

    def _scan(self, window: Window, pos: int, limit: int) -> None:
        scanner = self.state.scanner
        while pos >= 0:
            columns = self.columns
            rows, pos, stop, needed = scanner.scan(
                window.data, pos, window.base, limit, columns.all
            )
            if rows:
                self._consume(rows)
            self.end = window.base + pos  # the scanner stops at a record's start
            if stop == shared.STOP_FULL:
                if not rows:
                    self.columns = columns.grown()
            elif stop == shared.STOP_LIMIT:
                self.stopped_at = self.end = window.base + pos
                return
            elif stop == shared.STOP_MORE and not window.eof and window.holds(pos, needed):
                ahead = self.chunk if limit < 0 else limit - window.base - pos + LIMIT_SLACK
                window.chunk_size = max(LIMIT_SLACK, min(self.chunk, ahead))  # a short range
                pos = window.fill(pos, max(window.chunk_size, needed))
            else:  # damage, a record for the reference decoder, a length past the end, the end
                self.take_tally()
                items, pos = frame_at(window, pos)
                for item in items:
                    if limit >= 0 and item.offset >= limit:
                        self.stopped_at = self.end = item.offset
                        return
                    if isinstance(item, Frame):
                        self._reference(item)
                        self.end = item.offset + FRAMING_BYTES + len(item.payload)
                    else:
                        self._add_record(frame_damage(self.run, self.path, item))
                if pos >= 0:
                    self.end = window.base + pos

    def _reference(self, frame: Frame) -> None:
        """A record the scanner left to the reference decoder, read with the same state."""
        for record in records_of_frame(frame, self.path, self.state, self.tally):  # type: ignore[arg-type]
            self._add_record(record)
        self.state.scanner.plugins_changed()
        if self.keep_unknown:
            self.unsure.update(_unknown_tensor_tags(frame.payload, self.state.decoder))

    def _add_record(self, record: Record) -> None:
        if isinstance(record, (HistogramRecord, ScalarRecord)):
            self.read += 1
            if not self.window.contains(record.step):
                return
            self.kept += 1
        elif isinstance(record, Notice) and record.kind == "restart":
            self.restarts = True
        self.reducer.add(record)

    def take_tally(self) -> None:
        """Fold what the scanner read since the last call into the file's tally, in order."""
        records, events, whats, encodings, file_version, writer = self.state.scanner.take_tally()
        tally = self.tally
        tally.records += records
        tally.events += events
        tally.whats.update(name for bit, name in shared.WHATS.items() if whats >> bit & 1)
        tally.encodings.update(
            name for bit, name in shared.ENCODINGS.items() if encodings >> bit & 1
        )
        if file_version is not None and tally.file_version is None:
            tally.file_version = file_version
        if writer is not None and tally.writer is None:
            tally.writer = writer

    def _consume(self, rows: int) -> None:
        """Hand one batch of scanned rows to the reducer."""
        c = self.columns
        steps = c.steps[:rows]
        flags = c.flags[:rows]
        tags = self.state.scanner.tags
        if flags.any():
            for i in np.flatnonzero(flags & shared.FLAG_RESTART).tolist():
                self.restarts = True
                tag = tags[c.tag_ids[i]]
                self.reducer.add(
                    restart_notice(self.run, self.path, tag, int(c.aux[i]), int(steps[i]))
                )
        keep = _in_window(steps, self.window)
        self.read += rows
        kept = np.flatnonzero(keep) if keep is not None else np.arange(rows)
        self.kept += kept.size
        if self.keep_unknown and (flags & shared.FLAG_PENDING).any():
            self._note_pending(rows, keep, tags)
        kinds = c.kinds[kept]
        scalar = kept[kinds >= shared.K_SIMPLE]
        for tag_id, step, value in zip(
            c.tag_ids[scalar].tolist(), steps[scalar].tolist(), c.values[scalar].tolist(),
            strict=True,
        ):  # fmt: skip
            self.reducer.add_scalar(tags[tag_id], step, value)
        histograms = kept[kinds < shared.K_SIMPLE]
        if histograms.size:
            self._histograms(histograms, tags)
        if self.on_offset is not None:
            self.on_offset(int(c.offsets[rows - 1]))

    def _note_pending(self, rows: int, keep: np.ndarray | None, tags: list[str]) -> None:
        """Count the batch's pending values per tag and kind (vectorised: in a range that
        starts mid-file, every TF2 histogram is pending)."""
        c = self.columns
        pending = (c.flags[:rows] & shared.FLAG_PENDING) != 0
        scalar = c.kinds[:rows] >= shared.K_SIMPLE
        inside = np.ones(rows, dtype=bool) if keep is None else keep
        codes = c.tag_ids[:rows].astype(np.int64) * 2 + scalar
        for code in np.unique(codes[pending]).tolist():
            members = pending & (codes == code)
            entry = self.pending.setdefault(tags[code // 2], Pending())
            entry.kinds.add("scalar" if code % 2 else "histogram")
            entry.read += int(members.sum())
            entry.kept += int((members & inside).sum())

    def _histograms(self, at: np.ndarray, tags: list[str]) -> None:
        """Reduce the batch's histograms ``at`` and hand them to the reducer in stream order,
        with their series' numbers (looked up for the whole batch at once)."""
        c = self.columns
        self.reducer.flush()  # records pending before the batch: their series are older
        keys = c.tag_ids[at].astype(np.int64) << 32 | c.indexes[at].astype(np.int64)
        numbers = self.series.numbers(keys, lambda row: self._new_series(at[row], tags))
        rows, fingerprints = _reduced(c, at, c.sizes[at].astype(np.int64))
        self.reducer.add_histogram_rows(numbers, c.steps[at], c.walls[at], rows, fingerprints)

    def _new_series(self, row: int, tags: list[str]) -> int:
        """The reducer's number of the new series whose first value is scanned row ``row``."""
        c = self.columns
        key = (tags[c.tag_ids[row]], int(c.indexes[row]))
        encoding = "histo" if c.kinds[row] == shared.K_HISTO else "tensor"
        return self.reducer.series_number(key, encoding)

    def result(self, size: int | None) -> RangeResult:
        """What the range gave; ``size`` None when the file could not be opened."""
        self.take_tally()
        collisions = self.state.scanner.take_collisions()
        return RangeResult(
            data=self.reducer.finish(),
            values_read=self.read,
            values_kept=self.kept,
            tally=self.tally,
            size=size,
            restarts=self.restarts,
            collisions=collisions,
            plugins=dict(self.state.decoder.plugin_by_tag),
            steps=self.state.scanner.steps(),
            pending=self.pending,
            unsure=self.unsure,
            stopped_at=self.stopped_at,
            assumed=self.assumed,
            end=self.end,
        )


def _unknown_tensor_tags(payload: bytes, decoder: EventDecoder) -> set[str]:
    """Tags of the payload's tensor values whose plugin is still unknown (skipped as such).

    A range that starts mid-file does not know the plugins named before it: the merge checks
    these tags against what the earlier range learnt.
    """
    from google.protobuf.message import DecodeError  # lazy: start-up of the C engine
    from tensorboard.compat.proto.event_pb2 import Event

    try:
        event = Event.FromString(payload)
    except DecodeError:
        return set()
    return {
        value.tag
        for value in event.summary.value
        if value.WhichOneof("value") == "tensor" and value.tag not in decoder.plugin_by_tag
    }


def _in_window(steps: np.ndarray, window: StepWindow) -> np.ndarray | None:
    """Which steps lie inside the window (None: all of them)."""
    if window.first is None and window.last is None:
        return None
    keep = np.ones(steps.size, dtype=bool)
    if window.first is not None:
        keep &= steps >= window.first
    if window.last is not None:
        keep &= steps <= window.last
    return keep


def _reduced(c: Columns, at: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Statistics and fingerprints of the scanned histograms ``at``: in C (``_scan.reduce``,
    the numpy code's twin) up to 8192 buckets, else with numpy
    (``series.batch.reduce_by_width``)."""
    if sizes.size and int(sizes.max()) > FINGERPRINT_WEIGHTS.shape[1]:
        return reduce_by_width(sizes, _matrices_of(c, at, sizes))
    rows = np.empty((at.size, len(STAT_NAMES)), dtype=np.float32)
    fingerprints = np.empty(at.size, dtype=np.uint64)
    _c().reduce(
        c.data, at, c.starts, c.sizes, c.kinds, c.fields, FINGERPRINT_WEIGHTS, rows, fingerprints
    )
    return rows, fingerprints


def _matrices_of(
    c: Columns, at: np.ndarray, sizes: np.ndarray
) -> Callable[[np.ndarray, int], BucketMatrices]:
    """The bucket matrices of a width group, gathered from the scanned data column.

    Tensor rows hold ``left, right, count`` triples; ``histo`` rows hold the bucket limits then
    the counts, and their left edges are derived as the reference decoder derives them.
    """

    def matrices(members: np.ndarray, width: int) -> BucketMatrices:
        rows = at[members]
        if bool((c.kinds[rows] == shared.K_TENSOR_HIST).all() and (sizes[members] == width).all()):
            return _tensor_matrices(c, rows, width)
        left, right, counts = (np.zeros((rows.size, width)) for _ in range(3))
        _c().gather(c.data, rows, c.starts, c.sizes, c.kinds, left, right, counts)
        fields = c.fields[rows]
        histo = c.kinds[rows] == shared.K_HISTO
        if histo.any():
            first = first_left_edges(fields[histo, 0], right[histo, 0], counts[histo, 0])
            left[histo, 0] = first
        present = np.repeat(histo[:, None], fields.shape[1], axis=1)
        return left, right, counts, np.where(present, fields, 0.0), present

    return matrices


def _tensor_matrices(c: Columns, rows: np.ndarray, width: int) -> BucketMatrices:
    """The common case: tensor histograms of one bucket count (TF2 writes 30)."""
    starts = c.starts[rows]
    triples = 3 * width
    if bool((np.diff(starts) == triples).all()):  # back to back in the data column
        flat = c.data[starts[0] : starts[0] + triples * rows.size]
    else:
        flat = c.data[(starts[:, None] + np.arange(triples)[None, :]).ravel()]
    buckets = flat.reshape(rows.size, width, 3)
    left, right, counts = (np.ascontiguousarray(buckets[:, :, i]) for i in range(3))
    fields = np.zeros((rows.size, 5))
    return left, right, counts, fields, np.zeros(fields.shape, dtype=bool)


def reduce_file_range(
    path: str,
    run: str,
    window: StepWindow,
    on_offset: Callable[[int], None] | None = None,
    start: int = 0,
    limit: int = -1,
    assumed: Mapping[str, str] | None = None,
    storage: StorageOptions = NO_OPTIONS,
) -> RangeResult:
    """Read the records of ``path`` that start in ``[start, limit)`` with the C engine
    (``storage``: the options for a URL).

    The whole file (``start`` 0, ``limit`` -1) gives the same ``RunData`` as
    ``series.reduce_records(reader.read_file(path, run))`` with the window applied.
    ``assumed``: for a range starting mid-file, the plugin names its tags had before it
    (:func:`head_plugins`), so their values are read at once instead of kept pending;
    :func:`join_ranges` checks the assumption against what the earlier ranges learnt.
    """
    reader = RangeReader(path, run, window, keep_unknown=start > 0, assumed=assumed)
    reader.on_offset = on_offset
    try:
        size = file_size(path, storage)
        stream = open_binary(path, storage)
    except OSError as error:
        reader.reducer.add(unreadable(run, path, 0, error))
        return reader.result(None)
    with stream:
        reader.read_range(stream, start, limit)
    return reader.result(size)
