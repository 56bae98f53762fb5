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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import BinaryIO, Protocol

import numpy as np

from gradcheck.engine.native import _scan, extension
from gradcheck.events.decode import EventDecoder, first_left_edges
from gradcheck.events.framing import FOOTER_SIZE, HEADER_SIZE, Frame, Window, frame_at
from gradcheck.events.reader import (
    FileTally,
    collision_notice,
    element_count,
    frame_damage,
    guess_writer,
    records_of_frame,
    restart_notice,
    unreadable,
)
from gradcheck.events.steps import StepWindow
from gradcheck.events.storage import NO_OPTIONS, StorageOptions, file_size, open_binary
from gradcheck.events.wire import EVENT_SUMMARY, event_head
from gradcheck.model import (
    STAT_NAMES,
    FileInfo,
    HistogramRecord,
    Notice,
    Record,
    Run,
    RunData,
    ScalarRecord,
)
from gradcheck.series.merge import merge
from gradcheck.series.reduce import FINGERPRINT_WEIGHTS, BucketMatrices, Reducer, reduce_by_width

ROWS = 8192
"""Values per batch at most: fewer, larger batches are faster, but hold more memory
(``bench/README.md``; the reducer pools the rows of several batches: ``reduce.SETTLE_ROWS``)."""
DATA = 3 << 19  # float64 bucket numbers per batch (12 MB): wide histograms fill it first
CHUNK = 16 << 20  # bytes read at a time

FRAMING_BYTES = HEADER_SIZE + FOOTER_SIZE  # a record's bytes around its payload
_STOP_FULL, _STOP_MORE, _STOP_DAMAGE, _STOP_FALLBACK, _STOP_LIMIT = range(5)
_K_HISTO, _K_TENSOR_HIST, _K_SIMPLE, _K_TENSOR_SCALAR = range(4)
_FLAG_RESTART, _FLAG_PENDING = 1, 2
_WHATS = {0: "", 3: "file_version", 5: "summary"}
_ENCODINGS = {0: "histo", 1: "tensor", 2: "simple_value"}


def available() -> bool:
    """Whether the C engine can be used (built, and not disabled by ``GRADCHECK_NO_EXT=1``)."""
    return extension() is not None


@dataclass
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


@dataclass
class Pending:
    """Tensor values of a tag whose plugin a range starting mid-file did not know: kept as
    histograms (``[k, 3]``) or scalars until the merge learns the plugin from earlier ranges."""

    kinds: set[str] = field(default_factory=set)  # "histogram", "scalar"
    read: int = 0
    kept: int = 0


class _Columns:
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

    def grown(self) -> _Columns:
        return _Columns(self.offsets.size * 2, self.data.size * 2)


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


class _ScannerState:
    """The reader state (``reader._RunState``'s interface) backed by the scanner, so that the
    records the reference decoder reads are placed with the same state as the scanned ones."""

    def __init__(self, run: str, keep_unknown: bool) -> None:
        self.run = run
        self.decoder = EventDecoder(run)
        self.scanner = _scan.Scanner(self.decoder.plugin_by_tag, keep_unknown)

    def place(self, record: HistogramRecord | ScalarRecord) -> tuple[int, Notice | None]:
        histogram = isinstance(record, HistogramRecord)
        count = element_count(record) if isinstance(record, HistogramRecord) else None
        index, went_back_from = self.scanner.place(histogram, record.tag, record.step, count)
        if went_back_from is None:
            return index, None
        return index, restart_notice(self.run, record.file, record.tag, went_back_from, record.step)


class _RangeReader:
    """Reads one byte range of one file into a reducer."""

    def __init__(
        self,
        path: str,
        run: str,
        window: StepWindow,
        keep_unknown: bool,
        assumed: Mapping[str, str] | None = None,
        state: _ScannerState | None = None,
    ) -> None:
        self.path = path
        self.run = run
        self.window = window
        self.keep_unknown = keep_unknown
        # a state given is carried across files (the files of a run, as ``reader.read_run``)
        self.state = state if state is not None else _ScannerState(run, keep_unknown)
        self.assumed = dict(assumed or {})
        self.state.decoder.plugin_by_tag.update(self.assumed)
        self.reducer = Reducer()
        self.reducer.run = run
        self.series = _SeriesNumbers()
        self.tally = FileTally()
        self.columns = _Columns()
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
        window = Window(stream, CHUNK)
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
            if stop == _STOP_FULL:
                if not rows:
                    self.columns = columns.grown()
            elif stop == _STOP_LIMIT:
                self.stopped_at = self.end = window.base + pos
                return
            elif stop == _STOP_MORE and not window.eof and window.holds(pos, needed):
                pos = window.fill(pos, max(CHUNK, needed))
            else:  # damage, a record for the reference decoder, a length past the end, the end
                self._take_tally()
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

    def _take_tally(self) -> None:
        """Fold what the scanner read since the last call into the file's tally, in order."""
        records, events, whats, encodings, file_version, writer = self.state.scanner.take_tally()
        tally = self.tally
        tally.records += records
        tally.events += events
        tally.whats.update(name for bit, name in _WHATS.items() if whats >> bit & 1)
        tally.encodings.update(name for bit, name in _ENCODINGS.items() if encodings >> bit & 1)
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
            for i in np.flatnonzero(flags & _FLAG_RESTART).tolist():
                self.restarts = True
                tag = tags[c.tag_ids[i]]
                self.reducer.add(
                    restart_notice(self.run, self.path, tag, int(c.aux[i]), int(steps[i]))
                )
        keep = _in_window(steps, self.window)
        self.read += rows
        kept = np.flatnonzero(keep) if keep is not None else np.arange(rows)
        self.kept += kept.size
        if self.keep_unknown and (flags & _FLAG_PENDING).any():
            self._note_pending(rows, keep, tags)
        kinds = c.kinds[kept]
        scalar = kept[kinds >= _K_SIMPLE]
        for tag_id, step, value in zip(
            c.tag_ids[scalar].tolist(), steps[scalar].tolist(), c.values[scalar].tolist(),
            strict=True,
        ):  # fmt: skip
            self.reducer.add_scalar(tags[tag_id], step, value)
        histograms = kept[kinds < _K_SIMPLE]
        if histograms.size:
            self._histograms(histograms, tags)
        if self.on_offset is not None:
            self.on_offset(int(c.offsets[rows - 1]))

    def _note_pending(self, rows: int, keep: np.ndarray | None, tags: list[str]) -> None:
        """Count the batch's pending values per tag and kind (vectorised: in a range that
        starts mid-file, every TF2 histogram is pending)."""
        c = self.columns
        pending = (c.flags[:rows] & _FLAG_PENDING) != 0
        scalar = c.kinds[:rows] >= _K_SIMPLE
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
        return self.reducer.series_number(key, "histo" if c.kinds[row] == _K_HISTO else "tensor")

    def result(self, size: int | None) -> RangeResult:
        """What the range gave; ``size`` None when the file could not be opened."""
        self._take_tally()
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


def _reduced(c: _Columns, at: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Statistics and fingerprints of the scanned histograms ``at``: in C (``_scan.reduce``,
    the numpy code's twin) up to 8192 buckets, else with numpy (``series.reduce_by_width``)."""
    if sizes.size and int(sizes.max()) > FINGERPRINT_WEIGHTS.shape[1]:
        return reduce_by_width(sizes, _matrices_of(c, at, sizes))
    rows = np.empty((at.size, len(STAT_NAMES)), dtype=np.float32)
    fingerprints = np.empty(at.size, dtype=np.uint64)
    _scan.reduce(
        c.data, at, c.starts, c.sizes, c.kinds, c.fields, FINGERPRINT_WEIGHTS, rows, fingerprints
    )
    return rows, fingerprints


def _matrices_of(
    c: _Columns, at: np.ndarray, sizes: np.ndarray
) -> Callable[[np.ndarray, int], BucketMatrices]:
    """The bucket matrices of a width group, gathered from the scanned data column.

    Tensor rows hold ``left, right, count`` triples; ``histo`` rows hold the bucket limits then
    the counts, and their left edges are derived as the reference decoder derives them.
    """

    def matrices(members: np.ndarray, width: int) -> BucketMatrices:
        rows = at[members]
        if bool((c.kinds[rows] == _K_TENSOR_HIST).all() and (sizes[members] == width).all()):
            return _tensor_matrices(c, rows, width)
        left, right, counts = (np.zeros((rows.size, width)) for _ in range(3))
        _scan.gather(c.data, rows, c.starts, c.sizes, c.kinds, left, right, counts)
        fields = c.fields[rows]
        histo = c.kinds[rows] == _K_HISTO
        if histo.any():
            first = first_left_edges(fields[histo, 0], right[histo, 0], counts[histo, 0])
            left[histo, 0] = first
        present = np.repeat(histo[:, None], fields.shape[1], axis=1)
        return left, right, counts, np.where(present, fields, 0.0), present

    return matrices


def _tensor_matrices(c: _Columns, rows: np.ndarray, width: int) -> BucketMatrices:
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
    reader = _RangeReader(path, run, window, keep_unknown=start > 0, assumed=assumed)
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


def finish_file(result: RangeResult, path: str, run: str) -> RunData:
    """The collision notices and ``FileInfo`` that end a file's records, added to its data."""
    notices = tuple(
        collision_notice(run, path, tag, step, counts) for tag, step, counts in result.collisions
    )
    info = _file_info(run, path, result.size, result.tally)
    data = result.data
    return RunData(
        run=data.run,
        files=tuple(dict.fromkeys((*data.files, path))),
        file_infos=(*data.file_infos, info),
        damages=data.damages,
        notices=data.notices + notices,
        histograms=data.histograms,
        scalars=data.scalars,
        hparams=data.hparams,
    )


def _file_info(run: str, path: str, size: int | None, tally: FileTally) -> FileInfo:
    """What a file held, once read (``size`` None: it could not be opened)."""
    if size is None:
        return FileInfo(run, path, 0, 0, 0, None)
    return FileInfo(run, path, size, tally.records, tally.events, guess_writer(path, tally))


def join_ranges(ranges: Sequence[RangeResult], boundaries: Sequence[int]) -> RangeResult | None:
    """Join the results of consecutive byte ranges of one file, as one reading would give;
    ``boundaries[i]`` is where ``ranges[i + 1]`` starts.

    Each range's pending tensors are settled with the plugins the ranges before it learnt
    (kept, or dropped as the reference would have skipped them). None when the ranges cannot
    be joined exactly (a restart, a tag whose reading depends on what came before a
    boundary): then the file is read again in one piece. Joined, the ranges' series are
    consumed (moved into the joined result, each piece freed as it is joined).
    """
    first = ranges[0]
    if first.restarts or len(boundaries) != len(ranges) - 1:
        return None
    if len(ranges) == 1:
        return first
    plugins = dict(first.plugins)  # known at the next boundary
    last = {tag: (hist[1], scalar[1]) for tag, (hist, scalar) in first.steps.items()}
    firsts = {tag: (hist[0], scalar[0]) for tag, (hist, scalar) in first.steps.items()}
    collisions = list(first.collisions)
    collided = {tag for tag, _, _ in collisions}
    read, kept, tally = first.values_read, first.values_kept, first.tally
    pieces = [first.data]
    previous = first
    for second, boundary in zip(ranges[1:], boundaries, strict=True):
        if second.restarts or previous.stopped_at != boundary:
            return None
        if any(plugins.get(tag) != name for tag, name in second.assumed.items()):
            return None  # the plugins assumed were not those at the boundary: read in one piece
        if any(plugins.get(tag) in _READ_PLUGINS for tag in second.unsure):
            return None
        dropped = _settle_pending(plugins, second)
        if dropped is None or _crosses_boundary(last, second, dropped):
            return None
        read += second.values_read - sum(second.pending[tag].read for tag in dropped)
        kept += second.values_kept - sum(second.pending[tag].kept for tag in dropped)
        later = [c for c in second.collisions if c[0] not in collided and c[0] not in dropped]
        collisions += later
        collided.update(tag for tag, _, _ in later)
        tally = _joined_tally(tally, second.tally)
        if len(dropped) < len(second.pending):
            tally.encodings.add("tensor")
        pieces.append(_without_tags(second.data, dropped))
        plugins.update(second.plugins)
        for tag, ((hist_first, hist_last), (scalar_first, scalar_last)) in second.steps.items():
            if tag not in dropped:
                before_hist, before_scalar = last.get(tag, (None, None))
                last[tag] = (
                    before_hist if hist_last is None else hist_last,
                    before_scalar if scalar_last is None else scalar_last,
                )
                first_hist, first_scalar = firsts.get(tag, (None, None))
                firsts[tag] = (
                    hist_first if first_hist is None else first_hist,
                    scalar_first if first_scalar is None else first_scalar,
                )
        previous = second
    return RangeResult(
        data=merge(pieces, consume=True),
        values_read=read,
        values_kept=kept,
        tally=tally,
        size=first.size,
        collisions=collisions,
        plugins=plugins,
        steps={  # so that the joined result can be joined again (a file followed as it grows)
            tag: ((hist_first, last[tag][0]), (scalar_first, last[tag][1]))
            for tag, (hist_first, scalar_first) in firsts.items()
        },
        stopped_at=previous.stopped_at,
        end=previous.end,
    )


_READ_PLUGINS = ("histograms", "scalars")
_PENDING_KIND = {"histograms": "histogram", "scalars": "scalar"}


def _settle_pending(plugins: Mapping[str, str], second: RangeResult) -> set[str] | None:
    """Tags whose pending values the reference would have skipped, given the ``plugins``
    known at the range's start; None if one cannot tell."""
    dropped = set()
    for tag, pending in second.pending.items():
        plugin = plugins.get(tag)
        if tag in second.plugins:
            return None  # the plugin is named again later in the range: values of both kinds
        if plugin in _PENDING_KIND:
            if pending.kinds != {_PENDING_KIND[plugin]}:
                return None  # e.g. a scalar-shaped tensor under "histograms": reference damage
        else:
            dropped.add(tag)
    return dropped


def _crosses_boundary(
    last: Mapping[str, tuple[int | None, int | None]], second: RangeResult, dropped: set[str]
) -> bool:
    """Whether a tag's steps do not rise across the boundary (restart or collision group),
    from the ``last`` histogram and scalar step of each tag before it."""
    for tag, ((hist_first, _), (scalar_first, _)) in second.steps.items():
        before = last.get(tag)
        if before is None or tag in dropped:
            continue
        hist_last, scalar_last = before
        if hist_first is not None and hist_last is not None and hist_first <= hist_last:
            return True
        if scalar_first is not None and scalar_last is not None and scalar_first <= scalar_last:
            return True
    return False


def _without_tags(data: RunData, tags: set[str]) -> RunData:
    if not tags:
        return data
    return replace(
        data,
        histograms={key: s for key, s in data.histograms.items() if key[0] not in tags},
        scalars={tag: s for tag, s in data.scalars.items() if tag not in tags},
    )


def _joined_tally(first: FileTally, second: FileTally) -> FileTally:
    return FileTally(
        records=first.records + second.records,
        events=first.events + second.events,
        file_version=first.file_version if first.file_version is not None else second.file_version,
        writer=first.writer if first.writer is not None else second.writer,
        whats=first.whats | second.whats,
        encodings=first.encodings | second.encodings,
    )


HEAD_BYTES = 4 << 20
"""Bytes read by :func:`head_plugins` (TF2 names a tag's plugin on its first value only, and
every tag is written at the first step: a few hundred kB)."""


def head_plugins(
    path: str, run: str, limit: int, storage: StorageOptions = NO_OPTIONS
) -> dict[str, str]:
    """The plugin names of tags learnt from the records of ``path`` that start before
    ``min(limit, HEAD_BYTES)``: what a range starting at ``limit`` may assume (TF2 histograms
    of known tags are then read at once, not kept pending: that path is ~25% slower)."""
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
    reader._take_tally()
    return dict(reader.state.decoder.plugin_by_tag), reader.tally.records, end


class _PluginReader(_RangeReader):
    """A range reader that only learns plugin names: the scanner and the reference decoder
    remember them as they read; no statistics are computed and no series are built."""

    def _consume(self, rows: int) -> None:
        pass

    def _add_record(self, record: Record) -> None:
        pass


# --------------------------------------------------------------------------------------------
# A census: what the files of a run hold, per series, without statistics (``gradcheck inspect``)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ValueGroups:
    """One batch of scanned values, grouped by series in order of first appearance.

    ``series[i]`` is ``(tag, index, histogram)`` (index 0 for scalars, as ``gradcheck.inspect``
    keys them); ``encodings[i]`` is the encoding of the group's first value, then its smallest
    and largest step and how many values it holds. ``element_counts`` holds ``(i, count)`` for
    each distinct ``reader.element_count`` of a group's histograms (None ones left out), in
    order of first appearance.
    """

    series: list[tuple[str, int, bool]]
    encodings: list[str]
    first_steps: list[int]
    last_steps: list[int]
    counts: list[int]
    element_counts: list[tuple[int, int]]


class Census(Protocol):
    """What :func:`census_run` tells, in the order ``reader.read_run`` would yield it."""

    def add(self, record: Record) -> None:
        """A damage, a notice, a value the reference decoder read, or a file's ``FileInfo``."""

    def add_values(self, run: str, file: str, values: ValueGroups) -> None:
        """A batch of values the scanner read from ``file`` (no object per value)."""


def census_run(run: Run, census: Census, storage: StorageOptions = NO_OPTIONS) -> None:
    """Tell ``census`` what ``run``'s files hold, as ``reader.read_run(run, storage)`` would
    (state carried across the files), but with values counted per series and batch by the
    scanner."""
    state = _ScannerState(run.path, keep_unknown=False)
    for path in run.files:
        reader = _CensusReader(path, run.path, state, census)
        try:
            size = file_size(path, storage)
            stream = open_binary(path, storage)
        except OSError as error:
            census.add(unreadable(run.path, path, 0, error))
            census.add(_file_info(run.path, path, None, reader.tally))
            continue
        with stream:
            reader.read_range(stream, 0, -1)
        reader._take_tally()
        for tag, step, counts in state.scanner.take_collisions():
            census.add(collision_notice(run.path, path, tag, step, counts))
        census.add(_file_info(run.path, path, size, reader.tally))


class _CensusReader(_RangeReader):
    """A range reader that counts values per series for a :class:`Census`: no statistics
    and no series are built (``reducer`` stays empty)."""

    def __init__(self, path: str, run: str, state: _ScannerState, census: Census) -> None:
        super().__init__(path, run, StepWindow(), keep_unknown=False, state=state)
        self.census = census

    def _add_record(self, record: Record) -> None:
        self.census.add(record)

    def _consume(self, rows: int) -> None:
        c = self.columns
        tags = self.state.scanner.tags
        if c.flags[:rows].any():
            for i in np.flatnonzero(c.flags[:rows] & _FLAG_RESTART).tolist():
                tag = tags[c.tag_ids[i]]
                self.census.add(
                    restart_notice(self.run, self.path, tag, int(c.aux[i]), int(c.steps[i]))
                )
        self.census.add_values(self.run, self.path, _value_groups(c, rows, tags))


_ENCODING_OF_KIND = ("histo", "tensor", "simple_value", "tensor")


def _value_groups(c: _Columns, rows: int, tags: list[str]) -> ValueGroups:
    """The batch's values grouped by series (see :class:`ValueGroups`)."""
    kinds = c.kinds[:rows]
    histogram = kinds < _K_SIMPLE
    indexes = np.where(histogram, c.indexes[:rows].astype(np.int64) + 1, 0)  # scalars: 0
    keys = c.tag_ids[:rows].astype(np.int64) << 32 | indexes
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(first, kind="stable")  # groups in order of first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    groups = rank[inverse]  # each row's group, numbered by first appearance
    by_group = np.argsort(groups, kind="stable")
    counts = np.bincount(groups, minlength=order.size)
    starts = np.cumsum(counts) - counts
    steps = c.steps[:rows][by_group]
    heads = first[order]
    series = [
        (tags[tag_id], index if is_histogram else 0, is_histogram)
        for tag_id, index, is_histogram in zip(
            c.tag_ids[heads].tolist(), c.indexes[heads].tolist(), histogram[heads].tolist(),
            strict=True,
        )
    ]  # fmt: skip
    return ValueGroups(
        series=series,
        encodings=[_ENCODING_OF_KIND[kind] for kind in kinds[heads].tolist()],
        first_steps=np.minimum.reduceat(steps, starts).tolist(),
        last_steps=np.maximum.reduceat(steps, starts).tolist(),
        counts=counts.tolist(),
        element_counts=_element_counts(c.values[:rows], groups, histogram),
    )


def _element_counts(
    totals: np.ndarray, groups: np.ndarray, histogram: np.ndarray
) -> list[tuple[int, int]]:
    """``(group, count)`` for each distinct finite histogram total of each group, in order of
    first appearance (``reader.element_count``: the total as an int)."""
    rows = np.flatnonzero(histogram & np.isfinite(totals))
    if not rows.size:
        return []
    pairs = np.stack([groups[rows].astype(np.float64), totals[rows]], axis=1)
    _, first = np.unique(pairs, axis=0, return_index=True)
    first.sort()
    at = rows[first]
    return [
        (group, int(total))
        for group, total in zip(groups[at].tolist(), totals[at].tolist(), strict=True)
    ]


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
