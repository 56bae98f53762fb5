"""Stream, then reduce: reader records -> per-series arrays of per-step statistics (one run).

:func:`reduce_records` consumes the reader's stream once. Histograms are buffered in batches of
:data:`BATCH_SIZE` and reduced with :func:`gradcheck.series.stats.histogram_stats_batch` (one numpy
pass per batch instead of a dozen small numpy calls per histogram); bucket arrays are dropped
when their batch is reduced. Per step a series keeps its step (int64), wall time (float64), a
64-bit fingerprint of the histogram (equal fingerprints: bit-identical histograms) and the
float32 statistics of :data:`.stats.STAT_NAMES`: 88 bytes a step, whatever the number
of buckets. Finite values beyond float32's range are stored as +-float32 max, so only a
non-finite input is stored as non-finite.

Restarts (see ``gradcheck.events.reader``): when a series' step goes back to ``s`` (or repeats), the
steps ``>= s`` kept so far are dropped and the newer data kept, as TensorBoard purges orphaned
steps. :func:`merge` applies the same rule across per-file parts, so reducing files separately
and merging them gives the same result as reducing the run's stream.

Thinning (memory flat in log size): a histogram series keeps at most :data:`MAX_ROWS` rows
(``2 * MAX_ROWS`` while streaming): the first and the worst row of each window of ``W`` steps
(``step // W`` equal), ``W`` the smallest power of two that fits; see :func:`_kept_rows`.
Scalars are kept complete. A restart inside a window of a thinned series also drops the older
rows of that window that were not kept (rows between its first and the restart step).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from gradcheck.engine.native import extension
from gradcheck.model import Damage, FileInfo, HistogramRecord, Notice, Record, ScalarRecord
from gradcheck.series.stats import (
    COLUMN,
    FIELD_NAMES,
    PERCENTILES,
    STAT_NAMES,
    histogram_stats_batch,
)

BATCH_SIZE = 4096
"""Histograms reduced together (fewer when they are wide: see ``BATCH_BUCKETS``)."""
BATCH_BUCKETS = 1 << 19
"""Buckets held pending at most (about 12 MB of edges and counts)."""

MAX_ROWS = 2048
"""Rows a histogram series keeps at most once built or merged, plus one (``2 * MAX_ROWS``
while streaming, plus the batch being appended): 180 KB a series at 88 bytes a row, whatever
the log's length (the one: see :func:`_fits`). Longer series keep the first and the worst
row of each ``W``-step window (see :func:`_kept_rows`), and the run gets one ``thinned``
notice."""

SeriesKey = tuple[str, int]
"""``(tag, index)``: ``index`` tells apart series written under one tag at one step."""

_K = TypeVar("_K")
_V = TypeVar("_V")
_B = TypeVar("_B")

_FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True, eq=False)
class HistogramSeries:
    """One histogram series of a run: per-step statistics, in step order."""

    tag: str
    index: int
    encoding: str
    steps: np.ndarray  # int64 [n]
    wall_times: np.ndarray  # float64 [n]
    stats: np.ndarray  # float32 [n, len(STAT_NAMES)]
    fingerprints: np.ndarray  # uint64 [n]
    window: int = 1  # 1, or W when thinned (the first and worst rows of each W-step window)
    rows_read: int | None = None  # histograms behind the rows (None: ``len(self)``)

    def __len__(self) -> int:
        return int(self.steps.size)

    @property
    def histograms_read(self) -> int:
        """Histograms behind the series' rows: its length, more once thinned. Histograms a
        restart purged are not counted, except those a thinned window stood for (how many of
        a window's histograms a kept row stands for is not kept)."""
        return len(self) if self.rows_read is None else self.rows_read

    def column(self, name: str) -> np.ndarray:
        """One statistic over the steps, as float64 (see :data:`.stats.STAT_NAMES`)."""
        return self.stats[:, COLUMN[name]].astype(np.float64)

    def quantile_grid(self) -> np.ndarray:
        """``[n, 9]`` float64: min, p1, p5, p25, p50, p75, p95, p99, max per step."""
        columns = ["min", *(f"p{int(p):02d}" for p in PERCENTILES), "max"]
        return self.stats[:, [COLUMN[c] for c in columns]].astype(np.float64)


@dataclass(frozen=True, eq=False)
class ScalarSeries:
    """One scalar tag of a run, in step order."""

    tag: str
    steps: np.ndarray  # int64 [n]
    values: np.ndarray  # float64 [n]

    def __len__(self) -> int:
        return int(self.steps.size)


@dataclass(frozen=True, eq=False)
class RunData:
    """Everything analysis needs from one run; series in order of first appearance."""

    run: str
    files: tuple[str, ...]
    file_infos: tuple[FileInfo, ...]
    damages: tuple[Damage, ...]
    notices: tuple[Notice, ...]
    histograms: Mapping[SeriesKey, HistogramSeries]
    scalars: Mapping[str, ScalarSeries]

    @property
    def steps(self) -> tuple[int, int] | None:
        """First and last step of any histogram or scalar, or None when there is none."""
        all_steps = [s.steps for s in self.histograms.values()]
        all_steps += [s.steps for s in self.scalars.values()]
        firsts = [int(steps[0]) for steps in all_steps if steps.size]
        lasts = [int(steps[-1]) for steps in all_steps if steps.size]
        return (min(firsts), max(lasts)) if firsts else None


# --------------------------------------------------------------------------------------------
# Growable per-series buffers (purge on restart)
# --------------------------------------------------------------------------------------------


class _Columns:
    """Append-only columns with amortised growth; a step that goes back purges newer rows."""

    __slots__ = ("arrays", "size")

    def __init__(self, dtypes: Sequence[tuple[np.dtype, tuple[int, ...]]]) -> None:
        self.arrays = [np.empty((8, *shape), dtype=dtype) for dtype, shape in dtypes]
        self.size = 0

    def prepare(self, step: int) -> int:
        """Make room for a row at ``step`` (purging kept rows at steps >= it); its position."""
        return self.prepare_block(step, 1)

    def prepare_block(self, first_step: int, rows: int) -> int:
        """Room for ``rows`` rows whose steps rise from ``first_step``; the first's position."""
        size = self.size
        steps = self.arrays[0]
        if size and first_step <= steps[size - 1]:
            size = _rows_before(steps[:size], first_step)
        if size + rows > steps.shape[0]:
            self.arrays = [_grown(array, size, size + rows) for array in self.arrays]
        self.size = size + rows
        return size

    def finish(self) -> list[np.ndarray]:
        """The columns trimmed to their rows; the buffers are released."""
        arrays, self.arrays = self.arrays, []
        return [array[: self.size].copy() for array in arrays]


def _grown(array: np.ndarray, size: int, needed: int) -> np.ndarray:
    """A buffer 1.5x as large (amortised appends, at most a third of it unused)."""
    bigger = np.empty((max(16, size * 3 // 2, needed), *array.shape[1:]), dtype=array.dtype)
    bigger[:size] = array[:size]
    return bigger


_SCALAR_COLUMNS = ((np.dtype(np.int64), ()), (np.dtype(np.float64), ()))


_HistogramBlock = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Rows of one series appended together: steps, wall times, statistics, fingerprints."""


_JOIN_BLOCKS = 32
"""Small blocks of a series joined into one once there are this many (a block holds one
batch's rows of the series, ~32 for 128 TF2 series: four numpy arrays each)."""


def _joined_blocks(blocks: list[_HistogramBlock]) -> _HistogramBlock:
    """Blocks as one (the block itself when there is one)."""
    if len(blocks) == 1:
        return blocks[0]
    columns = zip(*blocks, strict=True)
    steps, walls, stats, fingerprints = (np.concatenate(column) for column in columns)
    return steps, walls, stats, fingerprints


def _built(builders: dict[_K, _B], build: Callable[[_B], _V]) -> dict[_K, _V]:
    """Build every series in order, emptying ``builders``: each builder is dropped (its buffers
    released) before the next is built, for peak memory. Histograms and scalars alike. (The
    keys are listed first: ``next(iter(builders))`` after popping the first keys walks over
    their deleted slots each time, quadratic in the number of series.)"""
    built = {}
    for key in list(builders):
        built[key] = build(builders.pop(key))
    return built


class _HistogramBuilder:
    """A histogram series' rows as the blocks they came in (one batch's rows of the series
    each), joined once at the end: no per-append growth or copying. Past ``2 * MAX_ROWS``
    rows the blocks are joined and thinned to at most ``MAX_ROWS`` (see :func:`_thinned`)."""

    __slots__ = ("blocks", "encoding", "joined", "key", "last_step", "read", "size", "window")

    def __init__(self, key: SeriesKey, encoding: str) -> None:
        self.key = key
        self.encoding = encoding
        self.blocks: list[_HistogramBlock] = []
        self.joined = 0  # blocks before this one are joined runs of small blocks
        self.last_step: int | None = None
        self.size = 0  # rows kept in the blocks
        self.read = 0  # histograms behind the kept rows (see HistogramSeries.histograms_read)
        self.window = 1  # steps per kept row (thinning)

    def append(
        self,
        steps: np.ndarray,
        wall_times: np.ndarray,
        rows: np.ndarray,
        fingerprints: np.ndarray,
        rising: bool | None = None,
    ) -> None:
        """Append rows in stream order (steps that go back purge, as documented above);
        ``rising``: whether the steps rise inside the block, when the caller knows."""
        if rising is None:
            rising = steps.size < 2 or not bool((steps[1:] <= steps[:-1]).any())
        if not rising:
            for i in range(steps.size):  # a restart inside the block: one row at a time
                self.append(
                    steps[i : i + 1],
                    wall_times[i : i + 1],
                    rows[i : i + 1],
                    fingerprints[i : i + 1],
                )
            return
        first = int(steps[0])
        if self.last_step is not None and first <= self.last_step:
            self._purge_from(first)
        self.blocks.append((steps, wall_times, rows, fingerprints))
        self.last_step = int(steps[-1])
        self.size += int(steps.size)
        self.read += int(steps.size)
        if self.size > 2 * MAX_ROWS:
            self._thin(MAX_ROWS)
        elif len(self.blocks) - self.joined >= _JOIN_BLOCKS:  # bounded per-array overhead
            self.blocks[self.joined :] = [_joined_blocks(self.blocks[self.joined :])]
            self.joined = len(self.blocks)

    def _purge_from(self, step: int) -> None:
        """Drop the kept rows at steps >= ``step`` (a restart). When none is left, the window
        goes back to 1: the rows that needed it are gone (a run logged again from its start)."""
        kept = _joined_blocks(self.blocks)
        size = _rows_before(kept[0], step)
        self.blocks = [(kept[0][:size], kept[1][:size], kept[2][:size], kept[3][:size])]
        self.joined = 1
        if self.window == 1:  # one histogram a row: the purged ones no longer count as read
            self.read -= self.size - size
        self.size = size
        if size == 0:
            self.window = 1

    def _thin(self, limit: int) -> None:
        """Keep at most ``limit`` rows, one per window (the window doubled as needed)."""
        block, self.window = _thinned(_joined_blocks(self.blocks), self.window, limit)
        self.blocks = [block]
        self.joined = 1
        self.size = int(block[0].size)

    def build(self) -> HistogramSeries:
        tag, index = self.key
        if not self.blocks:
            return HistogramSeries(
                tag, index, self.encoding, np.empty(0, np.int64), np.empty(0, np.float64),
                np.empty((0, len(STAT_NAMES)), np.float32), np.empty(0, np.uint64),
                rows_read=self.read,
            )  # fmt: skip
        if self.window > 1 or self.size > MAX_ROWS:
            self._thin(MAX_ROWS)  # rows since the last thinning: selected at the window too
        single = len(self.blocks) == 1  # else joined into new arrays already
        steps, walls, stats, fingerprints = (
            column.copy() if single else column for column in _joined_blocks(self.blocks)
        )  # owned, trimmed arrays (a purged block is a view)
        self.blocks = []
        return HistogramSeries(
            tag, index, self.encoding, steps, walls, stats, fingerprints, self.window, self.read
        )


class _ScalarBuilder:
    __slots__ = ("columns", "tag")

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.columns = _Columns(_SCALAR_COLUMNS)

    def append(self, step: int, value: float) -> None:
        at = self.columns.prepare(step)
        steps, values = self.columns.arrays
        steps[at] = step
        values[at] = value

    def build(self) -> ScalarSeries:
        steps, values = self.columns.finish()
        return ScalarSeries(self.tag, steps, values)


# --------------------------------------------------------------------------------------------
# Thinning: at most MAX_ROWS (+ 1) rows a series, the first and worst rows of each W-step window
# --------------------------------------------------------------------------------------------

_L2 = COLUMN["l2_norm"]
_NONFINITE = COLUMN["nonfinite_share"]


def _window_starts(steps: np.ndarray, window: int) -> np.ndarray:
    """Whether each of the sorted ``steps`` is the first of its ``window``-step window."""
    windows = steps // window
    starts = np.empty(steps.size, dtype=bool)
    starts[:1] = True
    np.not_equal(windows[1:], windows[:-1], out=starts[1:])
    return starts


def _kept_rows(steps: np.ndarray, stats: np.ndarray, window: int) -> np.ndarray:
    """Positions of the rows kept of each ``window``-step window of the sorted ``steps``: its
    first row and its worst row (one row when they are the same).

    The first rows are the same steps in every series logged together, so series can still be
    compared step by step (the global norm, gradient to weight ratios). The worst row: the
    earliest with a non-finite value (so the NaN onset step stays exact), else the largest L2
    norm (so a one-step spike survives), ties to the earliest. Both are picked by one order
    over rows, so a window's picks are its sub-windows' picks' picks: thinning in stages, or
    parts thinned apart then merged, keep the same rows.
    """
    starts = _window_starts(steps, window)
    if not steps.size:
        return np.empty(0, dtype=np.int64)
    norms = stats[:, _L2]
    bad = ~(stats[:, _NONFINITE] == 0) | ~np.isfinite(norms)
    badness = np.where(bad, np.inf, norms)  # no NaN left: a non-finite norm is bad
    group = np.cumsum(starts) - 1  # each row's window, 0..windows-1
    worst = np.flatnonzero(badness == np.maximum.reduceat(badness, np.flatnonzero(starts))[group])
    first_worst = np.empty(worst.size, dtype=bool)
    first_worst[0] = True
    np.not_equal(group[worst[1:]], group[worst[:-1]], out=first_worst[1:])
    starts[worst[first_worst]] = True  # the earliest worst row of each window joins its first
    return np.flatnonzero(starts)


def _thinned(block: _HistogramBlock, window: int, limit: int) -> tuple[_HistogramBlock, int]:
    """``block`` (steps rising) with at most ``limit`` rows: the first and the worst row of
    each window (:func:`_kept_rows`), the window doubled from ``window`` until they fit. Kept
    as is when ``window`` is 1 and the rows fit already.

    The window is the smallest of the ladder that fits: rows at a given window only grow as a
    stream goes on, so a window too small earlier stays too small, and thinning in stages or
    merging parts ends at the same window as thinning once."""
    steps = block[0]
    if window == 1 and steps.size <= limit:
        return block, window
    kept, window = _thinned_rows(steps, block[2], window, limit)
    steps, walls, stats, fingerprints = block
    return (steps[kept], walls[kept], stats[kept], fingerprints[kept]), window


def _thinned_rows(
    steps: np.ndarray, stats: np.ndarray, window: int, limit: int
) -> tuple[np.ndarray, int]:
    """The rows :func:`_thinned` keeps, and its window: in C when the extension is there (a
    loop over the rows instead of a dozen numpy calls a window tried), else in numpy."""
    scan = extension()
    if scan is not None:
        kept = np.empty(steps.size, dtype=np.int64)
        count, window = scan.thin(
            np.ascontiguousarray(steps, dtype=np.int64),
            np.ascontiguousarray(stats, dtype=np.float32),
            _L2, _NONFINITE, window, limit, kept,
        )  # fmt: skip
        return kept[:count], window
    while True:
        if window > 1 and int(np.count_nonzero(_window_starts(steps, window))) <= limit:
            kept = _kept_rows(steps, stats, window)  # windows <= rows <= 2 * windows
            if _fits(steps[kept], window, limit):
                return kept, window
        window *= 2


def _fits(kept_steps: np.ndarray, window: int, limit: int) -> bool:
    """Whether rows kept at ``window`` fit ``limit``, the first window counting one row.

    A part of a stream (a later file, the second byte range of one) may start inside a
    window: alone it keeps that window's first row of its own as well as its worst, a row the
    whole stream does not keep (its first row there comes from the earlier part). Counted,
    that row could make the part choose a larger window than the whole stream needs, and
    thinned rows cannot come back at the merge. Not counting it keeps every part's window at
    most the whole's, so a merge ends at the same window as one reading; a series may then
    keep ``limit + 1`` rows."""
    first_window_has_two = (
        kept_steps.size > 1 and kept_steps[1] // window == kept_steps[0] // window
    )
    return kept_steps.size - int(first_window_has_two) <= limit


def _thinning_notices(
    notices: Iterable[Notice], run: str, files: Sequence[str], series: Iterable[HistogramSeries]
) -> tuple[Notice, ...]:
    """``notices`` without any earlier ``thinned`` notice, then this run's, if it was thinned:
    one per run, recomputed on every merge so that it describes the merged series."""
    others = tuple(notice for notice in notices if notice.kind != "thinned")
    thinned = [s for s in series if s.window > 1]
    if not thinned:
        return others
    read = max(s.histograms_read for s in thinned)
    kept = max(len(s) for s in thinned)
    windows = sorted({s.window for s in thinned})
    window = f"{windows[0]}" if len(windows) == 1 else f"{windows[0]} to {windows[-1]}"
    message = (
        f"{len(thinned)} histogram series thinned to bound memory: up to {read:,} steps read"
        f" per series, at most {kept:,} kept: the first and the worst step of each window of"
        f" {window} steps (worst: its first NaN/Inf step, else its largest L2 norm); scalars are"
        " complete"
    )
    notice = Notice(run, files[0] if files else "", "thinned", None, None, message)
    return (*others, notice)


# --------------------------------------------------------------------------------------------
# Reduction
# --------------------------------------------------------------------------------------------


class _Reducer:
    """The state of one :func:`reduce_records` pass."""

    def __init__(self) -> None:
        self.run = ""
        self.files: dict[str, None] = {}
        self.file_infos: list[FileInfo] = []
        self.damages: list[Damage] = []
        self.notices: list[Notice] = []
        self.histograms: dict[SeriesKey, _HistogramBuilder] = {}
        self.scalars: dict[str, _ScalarBuilder] = {}
        self.pending: list[HistogramRecord] = []
        self.pending_buckets = 0

    def add(self, record: Record) -> None:
        if isinstance(record, HistogramRecord):
            self.pending.append(record)
            self.pending_buckets += record.counts.size
            if len(self.pending) >= BATCH_SIZE or self.pending_buckets >= BATCH_BUCKETS:
                self.flush()
        elif isinstance(record, ScalarRecord):
            self._scalar(record)
        elif isinstance(record, FileInfo):
            self.file_infos.append(record)
            self._saw_file(record.run, record.file)
        elif isinstance(record, Damage):
            self.damages.append(record)
            self._saw_file(record.run, record.file)
        elif isinstance(record, Notice):
            self.notices.append(record)

    def _saw_file(self, run: str, file: str) -> None:
        self.run = self.run or run
        self.files.setdefault(file, None)

    def _scalar(self, record: ScalarRecord) -> None:
        self.add_scalar(record.tag, record.step, record.value)

    def add_scalar(self, tag: str, step: int, value: float) -> None:
        """Append one scalar value (records and the C reader's rows both come here)."""
        builder = self.scalars.get(tag)
        if builder is None:
            builder = self.scalars[tag] = _ScalarBuilder(tag)
        builder.append(step, value)

    def flush(self) -> None:
        """Reduce the pending histograms and append their rows, in stream order."""
        if not self.pending:
            return
        records, self.pending, self.pending_buckets = self.pending, [], 0
        rows, fingerprints = reduce_histograms(records)
        members: dict[SeriesKey, tuple[str, list[int]]] = {}
        for i, record in enumerate(records):
            key = (record.tag, record.index)
            found = members.get(key)
            if found is None:
                members[key] = found = (record.encoding, [])
            found[1].append(i)
        steps = np.fromiter((r.step for r in records), dtype=np.int64, count=len(records))
        walls = np.fromiter((r.wall_time for r in records), dtype=np.float64, count=len(records))
        groups = [(key, enc, np.array(at), None) for key, (enc, at) in members.items()]
        self.run = self.run or records[0].run
        self.add_histogram_rows(groups, steps, walls, rows, fingerprints)

    def add_histogram_rows(
        self,
        groups: Sequence[tuple[SeriesKey, str, np.ndarray | slice, bool | None]],
        steps: np.ndarray,
        walls: np.ndarray,
        rows: np.ndarray,
        fingerprints: np.ndarray,
    ) -> None:
        """Append reduced histograms to their series, after any pending records.

        ``groups``: ``(key, encoding, at, rising)`` per series in order of first appearance;
        ``at`` its positions in the other arrays, in stream order, or a slice of them (copied:
        a view would keep the whole arrays alive as long as the series holds it); ``rising``
        whether its steps rise there (None: not known, checked).
        """
        self.flush()
        for key, encoding, at, rising in groups:
            builder = self.histograms.get(key)
            if builder is None:
                builder = self.histograms[key] = _HistogramBuilder(key, encoding)
            picked = (steps[at], walls[at], rows[at], fingerprints[at])
            if isinstance(at, slice):
                picked = tuple(column.copy() for column in picked)
            builder.append(*picked, rising=rising)

    def finish(self) -> RunData:
        self.flush()
        histograms = _built(self.histograms, _HistogramBuilder.build)
        files = tuple(self.files)
        return RunData(
            run=self.run,
            files=files,
            file_infos=tuple(self.file_infos),
            damages=tuple(self.damages),
            notices=_thinning_notices(self.notices, self.run, files, histograms.values()),
            histograms=histograms,
            scalars=_built(self.scalars, _ScalarBuilder.build),
        )


def reduce_records(records: Iterable[Record]) -> RunData:
    """Reduce one run's record stream (or one file's) to per-series arrays."""
    reducer = _Reducer()
    for record in records:
        reducer.add(record)
    return reducer.finish()


def reduce_histograms(records: Sequence[HistogramRecord]) -> tuple[np.ndarray, np.ndarray]:
    """float32 statistics ``[B, len(STAT_NAMES)]`` and uint64 fingerprints ``[B]`` of records."""
    sizes = np.fromiter((r.counts.size for r in records), dtype=np.int64, count=len(records))

    def matrices(members: np.ndarray, width: int) -> BucketMatrices:
        group = [records[i] for i in members.tolist()]
        left, right, counts = _stacked(group, sizes[members], width)
        fields, present = _proto_fields(group)
        return left, right, counts, fields, present

    return reduce_by_width(sizes, matrices)


BucketMatrices = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""``left, right, counts`` ``[B, width]`` (zero-padded) and the proto ``fields, present``."""


def reduce_by_width(
    sizes: np.ndarray, matrices: Callable[[np.ndarray, int], BucketMatrices]
) -> tuple[np.ndarray, np.ndarray]:
    """Statistics and fingerprints of B histograms of ``sizes`` buckets, both engines' core.

    Histograms are grouped by bucket count rounded up (:func:`_width_class`) so that each group
    is one vectorised call; ``matrices(members, width)`` gives a group's zero-padded arrays.
    """
    widths = _width_class(sizes)
    rows = np.empty((sizes.size, len(STAT_NAMES)), dtype=np.float32)
    fingerprints = np.empty(sizes.size, dtype=np.uint64)
    for width in np.unique(widths).tolist():
        members = np.flatnonzero(widths == width)
        left, right, counts, fields, present = matrices(members, int(width))
        stats, group_fingerprints = _reduce_group(
            left, right, counts, fields, present, sizes[members]
        )
        rows[members] = _to_float32(stats)
        fingerprints[members] = group_fingerprints
    return rows, fingerprints


def _width_class(sizes: np.ndarray) -> np.ndarray:
    """Bucket counts up to 64 as they are (TF2 writes 30); wider ones (PyTorch's trimmed
    exponential bins vary per step) rounded up to an eighth of a power of two."""
    sizes = np.maximum(sizes, 1)
    step = np.left_shift(1, np.maximum(np.ceil(np.log2(sizes)).astype(np.int64) - 3, 0))
    return np.where(sizes <= 64, sizes, -(-sizes // step) * step)


def _stacked(
    records: list[HistogramRecord], sizes: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The records' buckets as zero-padded ``[B, width]`` matrices."""
    if bool((sizes == width).all()):  # the common case (TF2's 30 buckets): one C-level stack
        left = np.stack([r.left for r in records]).astype(np.float64, copy=False)
        right = np.stack([r.right for r in records]).astype(np.float64, copy=False)
        counts = np.stack([r.counts for r in records]).astype(np.float64, copy=False)
        return left, right, counts
    left, right, counts = (np.zeros((len(records), width)) for _ in range(3))
    for i, record in enumerate(records):
        size = record.counts.size
        left[i, :size] = record.left
        right[i, :size] = record.right
        counts[i, :size] = record.counts
    return left, right, counts


def _reduce_group(
    left: np.ndarray,
    right: np.ndarray,
    counts: np.ndarray,
    fields: np.ndarray,
    present: np.ndarray,
    sizes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Statistics (float64) and fingerprints of one width group's zero-padded matrices."""
    count, width = left.shape
    fingerprints = _fingerprints(left, right, counts, fields, sizes)
    if not bool((sizes == width).all()):
        padding = np.arange(width)[None, :] >= sizes[:, None]
        last_edge = right[np.arange(count), np.maximum(sizes - 1, 0)][:, None]
        left = np.where(padding, last_edge, left)
        right = np.where(padding, last_edge, right)
    return histogram_stats_batch(left, right, counts, fields, present), fingerprints


def _proto_fields(records: list[HistogramRecord]) -> tuple[np.ndarray, np.ndarray]:
    """The HistogramProto fields (:data:`FIELD_NAMES`) and whether each is present."""
    fields = np.zeros((len(records), len(FIELD_NAMES)))
    present = np.zeros((len(records), len(FIELD_NAMES)), dtype=bool)
    for i, record in enumerate(records):
        if record.encoding != "histo":
            continue
        values = (record.min, record.max, record.num, record.sum, record.sum_squares)
        if None in values:
            present[i] = [value is not None for value in values]
            fields[i] = [0.0 if value is None else value for value in values]
        else:
            present[i] = True
            fields[i] = values
    return fields, present


def _to_float32(stats: np.ndarray) -> np.ndarray:
    """float64 -> float32, finite values clipped to float32's range (only inf stays inf)."""
    finite = np.isfinite(stats)
    clipped = np.where(finite, np.clip(stats, -_FLOAT32_MAX, _FLOAT32_MAX), stats)
    return clipped.astype(np.float32)


_MIX = np.uint64(0x9E3779B97F4A7C15)


def _odd_weights(seed: int, width: int) -> np.ndarray:
    """``[4, width]`` odd pseudo-random uint64 (SplitMix64 of ``seed`` and the position): odd,
    so that a change in one element always changes the sum. Not ``np.random``, whose import
    (hashlib, secrets, bz2, lzma, ...) costs ~10 ms of start-up."""
    with np.errstate(over="ignore"):
        z = np.arange(1, 4 * width + 1, dtype=np.uint64) * _MIX + np.uint64(seed)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return (z | np.uint64(1)).reshape(4, width)


_WEIGHTS = _odd_weights(20240917, 8192)


def _fingerprints(
    left: np.ndarray,
    right: np.ndarray,
    counts: np.ndarray,
    fields: np.ndarray,
    sizes: np.ndarray,
) -> np.ndarray:
    """64-bit fingerprints of histograms (zero-padded): equal for bit-identical histograms."""
    width = left.shape[1]
    weights = _WEIGHTS if width <= _WEIGHTS.shape[1] else _odd_weights(width, width)
    total = np.zeros(left.shape[0], dtype=np.uint64)
    with np.errstate(over="ignore"):
        for row, values in enumerate((left, right, counts)):
            total += (_mixed(values) * weights[row, :width]).sum(axis=1, dtype=np.uint64)
        total += (_mixed(fields) * weights[3, : fields.shape[1]]).sum(axis=1, dtype=np.uint64)
        total += sizes.astype(np.uint64) * _MIX
    return total


def _mixed(values: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    with np.errstate(over="ignore"):
        mixed = bits * _MIX
    return mixed ^ (mixed >> np.uint64(29))


# --------------------------------------------------------------------------------------------
# Merge of per-file parts
# --------------------------------------------------------------------------------------------


def merge(parts: Sequence[RunData], consume: bool = False) -> RunData:
    """Merge the reductions of a run's files (in file order) into one, purging restarts.

    With ``consume``, each part's series are taken out of its (dict) mappings as they are
    joined, so that a part's series is freed as soon as the joined one exists, instead of both
    halves and the joined result living until the end (the parts are left empty: only for
    parts nothing else reads afterwards).
    """
    if not parts:
        return reduce_records(())
    if len(parts) == 1:
        return _with_thinning_notice(parts[0])
    pieces: dict[SeriesKey, list[HistogramSeries]] = {}
    scalars: dict[str, ScalarSeries] = {}
    for part in parts:
        for key, series in _items(part.histograms, consume):
            pieces.setdefault(key, []).append(series)
        for tag, scalar in _items(part.scalars, consume):
            kept_scalar = scalars.get(tag)
            scalars[tag] = scalar if kept_scalar is None else _joined_scalars(kept_scalar, scalar)
    restarts = _restarts_across(parts)  # before the pieces are joined (and purged)
    histograms = _built(pieces, _joined_histograms)
    files = tuple(dict.fromkeys(file for part in parts for file in part.files))
    run = next((part.run for part in parts if part.run), "")
    notices = [*(notice for part in parts for notice in part.notices), *restarts]
    return RunData(
        run=run,
        files=files,
        file_infos=tuple(info for part in parts for info in part.file_infos),
        damages=tuple(damage for part in parts for damage in part.damages),
        notices=_thinning_notices(notices, run, files, histograms.values()),
        histograms=histograms,
        scalars=scalars,
    )


def _restarts_across(parts: Sequence[RunData]) -> list[Notice]:
    """A restart notice for each file whose series go back to steps an earlier file of the run
    already held (a resumed training writing a new file), first seen on one tag: the reader
    sees restarts within a file; this is the same notice across files."""
    from gradcheck.events.reader import restart_notice  # the reader's wording, one definition

    last: dict[object, int] = {}
    found = []
    for part in parts:
        went_back: tuple[str, int, int] | None = None
        keyed: list[tuple[object, str, np.ndarray]] = [
            *((key, key[0], series.steps) for key, series in part.histograms.items()),
            *((tag, tag, series.steps) for tag, series in part.scalars.items()),
        ]
        for key, tag, steps in keyed:
            if not steps.size:
                continue
            first = int(steps[0])
            if went_back is None and key in last and first <= last[key]:
                went_back = (tag, last[key], first)
            last[key] = max(last.get(key, first), int(steps[-1]))
        if went_back is not None and part.files:
            tag, before, step = went_back
            found.append(restart_notice(part.run, part.files[0], tag, before, step))
    return found


def _with_thinning_notice(data: RunData) -> RunData:
    """``data`` with its ``thinned`` notice last and naming its first file (a part's notice
    may precede the notices added after its reduction, and name no file)."""
    notices = _thinning_notices(data.notices, data.run, data.files, data.histograms.values())
    return data if notices == data.notices else replace(data, notices=notices)


def _items(mapping: Mapping[_K, _V], consume: bool) -> Iterator[tuple[_K, _V]]:
    """The mapping's items in order; popped one by one from a dict when ``consume``."""
    if not consume or not isinstance(mapping, dict):
        yield from mapping.items()
        return
    for key in list(mapping):
        yield key, mapping.pop(key)


def _kept_before(kept_steps: np.ndarray, newer_steps: np.ndarray) -> int:
    """How many kept rows survive newer data starting at ``newer_steps[0]``."""
    return _rows_before(kept_steps, int(newer_steps[0])) if newer_steps.size else kept_steps.size


def _joined_histograms(pieces: Sequence[HistogramSeries]) -> HistogramSeries:
    """One series from its pieces in file order, each purging the rows of the ones before it
    from its first step on, then thinned once at the largest window of the pieces with rows
    left, doubled while over :data:`MAX_ROWS`: as if one stream had been reduced (thinning once
    or in stages keeps the same rows: see :func:`_thinned`)."""
    first = pieces[0]
    if len(pieces) == 1:
        return first
    ends = [0] * len(pieces)  # rows of each piece that survive the pieces after it
    later_first: int | None = None
    for at in range(len(pieces) - 1, -1, -1):
        steps = pieces[at].steps
        ends[at] = steps.size if later_first is None else _rows_before(steps, later_first)
        if steps.size:
            later_first = int(steps[0]) if later_first is None else min(later_first, int(steps[0]))
    columns = [
        np.concatenate(
            [getattr(piece, name)[:end] for piece, end in zip(pieces, ends, strict=True)]
        )
        for name in ("steps", "wall_times", "stats", "fingerprints")
    ]
    # a piece purged whole by a later one (a run logged again from its start) sets no window
    surviving = (piece.window for piece, end in zip(pieces, ends, strict=True) if end)
    (steps, walls, stats, fingerprints), window = _thinned(
        (columns[0], columns[1], columns[2], columns[3]), max(surviving, default=1), MAX_ROWS
    )
    return HistogramSeries(
        tag=first.tag,
        index=first.index,
        encoding=first.encoding,
        steps=steps,
        wall_times=walls,
        stats=stats,
        fingerprints=fingerprints,
        window=window,
        rows_read=sum(
            piece.histograms_read - (len(piece) - end if piece.window == 1 else 0)
            for piece, end in zip(pieces, ends, strict=True)
        ),
    )


def _rows_before(steps: np.ndarray, step: int) -> int:
    """How many of the rising ``steps`` come before ``step``: the rows a restart at ``step``
    leaves (the purge rule of streams, parts and merges alike)."""
    if not steps.size or step > steps[-1]:
        return int(steps.size)
    return int(np.searchsorted(steps, step, side="left"))


def _joined_scalars(kept: ScalarSeries, newer: ScalarSeries) -> ScalarSeries:
    n = _kept_before(kept.steps, newer.steps)
    return ScalarSeries(
        tag=kept.tag,
        steps=np.concatenate([kept.steps[:n], newer.steps]),
        values=np.concatenate([kept.values[:n], newer.values]),
    )


def join_renamed(data: RunData) -> RunData:
    """``data`` with series that changed name mid-run joined under their newer name.

    A Keras model reloaded from a checkpoint (``keras.models.load_model``) and fitted on in
    the same log directory names its variables without the model's own name:
    ``sequential/dense/kernel/histogram`` until the checkpoint, ``dense/kernel/histogram``
    after it. Two series are one when their tags differ by one path component, the same one
    for every such pair of the run (at least two pairs, or the run's only series), and their
    steps do not overlap; a notice says so."""
    histograms = dict(data.histograms)
    scalars = dict(data.scalars)
    pairs = _renamed_pairs([k[0] for k in histograms] + list(scalars), data)
    if not pairs:
        return data
    joined: list[int] = []  # the first step of each joined series under its new name
    for old, new in pairs:
        newer: HistogramSeries | ScalarSeries
        if (old, 0) in histograms and (new, 0) in histograms:
            newer = histograms[(new, 0)]
            series = replace(_joined_histograms([histograms[(old, 0)], newer]), tag=new, index=0)
            _replace_key(histograms, (old, 0), (new, 0), series)
        elif old in scalars and new in scalars:
            newer = scalars[new]
            _replace_key(scalars, old, new, _joined_scalars(scalars[old], newer))
        else:
            continue
        joined.append(int(newer.steps[0]))
    step = min(joined)
    component = _dropped_component(*pairs[0])
    notice = Notice(
        run=data.run,
        file=data.files[-1] if data.files else "",
        kind="other",
        tag=pairs[0][1],
        step=step,
        message=(
            f"{len(joined)} series changed name at step {step}: their tags lost the path component "
            f"'{component}' (as a Keras model reloaded from a checkpoint names its variables); "
            "each is joined with its earlier name into one parameter"
        ),
    )
    return replace(data, histograms=histograms, scalars=scalars, notices=(*data.notices, notice))


def _replace_key(mapping: dict[Any, Any], old_key: object, new_key: object, value: object) -> None:
    """Put ``value`` at ``old_key``'s position under ``new_key`` (the order is depth)."""
    items = [(new_key if k == old_key else k, value if k == old_key else v)
             for k, v in mapping.items() if k != new_key]  # fmt: skip
    mapping.clear()
    mapping.update(items)


def _dropped_component(old: str, new: str) -> str:
    parts = old.split("/")
    for at in range(len(parts)):
        if "/".join(parts[:at] + parts[at + 1 :]) == new:
            return parts[at]
    return ""


def _renamed_pairs(tags: list[str], data: RunData) -> list[tuple[str, str]]:
    """``(old, new)`` tag pairs: ``new`` is ``old`` without one path component, the same
    component for all pairs, the steps of ``old`` all before those of ``new``."""
    present = set(tags)
    by_component: dict[str, list[tuple[str, str]]] = {}
    for tag in tags:
        parts = tag.split("/")
        for at in range(len(parts) - 1):
            shorter = "/".join(parts[:at] + parts[at + 1 :])
            if shorter in present and _before(data, tag, shorter):
                by_component.setdefault(parts[at], []).append((tag, shorter))
    if len(by_component) != 1:
        return []
    (pairs,) = by_component.values()
    return pairs if len(pairs) >= 2 or len(tags) == 2 else []


def _before(data: RunData, old: str, new: str) -> bool:
    """Whether every step of ``old``'s series precedes every step of ``new``'s."""

    def steps(tag: str) -> np.ndarray | None:
        series = data.histograms.get((tag, 0)) or data.scalars.get(tag)
        return None if series is None or not len(series) else series.steps

    a, b = steps(old), steps(new)
    return a is not None and b is not None and int(a[-1]) < int(b[0])
