"""Stream, then reduce: reader records -> per-series arrays of per-step statistics (one run).

:func:`reduce_records` consumes the reader's stream once. Histograms are buffered in batches of
:data:`BATCH_SIZE` and reduced with :func:`gradcheck.series.stats.histogram_stats_batch` (one numpy
pass per batch instead of a dozen small numpy calls per histogram); bucket arrays are dropped
when their batch is reduced. The reduced rows of all series are pooled and handed to their
series several at a time (:meth:`Reducer.settle`), so the Python work per series is paid per
settling, not per batch. Per step a series keeps its step (int64), wall time (float64), a
64-bit fingerprint of the histogram (equal fingerprints: bit-identical histograms) and the
float32 statistics of :data:`gradcheck.model.STAT_NAMES`: 88 bytes a step, whatever the number
of buckets. Finite values beyond float32's range are stored as +-float32 max, so only a
non-finite input is stored as non-finite.

Restarts (see ``gradcheck.events.reader``): when a series' step goes back to ``s`` (or repeats),
the steps ``>= s`` kept so far are dropped and the newer data kept, as TensorBoard purges
orphaned steps (``series.merge`` applies the same rule across files). Long series are thinned
as they stream (``series.thin``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import numpy as np

from gradcheck.model import (
    STAT_NAMES,
    Damage,
    FileInfo,
    HistogramRecord,
    HistogramSeries,
    HParamsRecord,
    HParamValue,
    Notice,
    Record,
    RunData,
    ScalarRecord,
    ScalarSeries,
    SeriesKey,
)
from gradcheck.series import thin
from gradcheck.series.batch import reduce_histograms
from gradcheck.series.thin import HistogramBlock, rows_before, thinned, thinning_notices

BATCH_SIZE = 4096
"""Histograms reduced together (fewer when they are wide: see ``BATCH_BUCKETS``)."""
BATCH_BUCKETS = 1 << 19
"""Buckets held pending at most (about 12 MB of edges and counts)."""

SETTLE_ROWS = 4096
SETTLE_ROWS_PER_SERIES = 8
"""Reduced rows are pooled (96 bytes each) and handed to their series once the pool holds
``max(SETTLE_ROWS, SETTLE_ROWS_PER_SERIES * series)``: a series then gets several rows at a
time however many series share a batch (issue 22: with one row per series and batch, the
per-series work of every batch was paid per histogram)."""

_PooledRows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Series numbers, steps, wall times, statistics and fingerprints of reduced histograms."""

_K = TypeVar("_K")
_V = TypeVar("_V")
_B = TypeVar("_B")

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
            size = rows_before(steps[:size], first_step)
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


_JOIN_BLOCKS = 32
"""Small blocks of a series joined into one once there are this many (a block holds one
settling's rows of the series, at least ``SETTLE_ROWS_PER_SERIES`` on average: four numpy
arrays each)."""


def _joined_blocks(blocks: list[HistogramBlock]) -> HistogramBlock:
    """Blocks as one (the block itself when there is one)."""
    if len(blocks) == 1:
        return blocks[0]
    columns = zip(*blocks, strict=True)
    steps, walls, stats, fingerprints = (np.concatenate(column) for column in columns)
    return steps, walls, stats, fingerprints


def build_all(builders: dict[_K, _B], build: Callable[[_B], _V]) -> dict[_K, _V]:
    """Build every series in order, emptying ``builders``: each builder is dropped (its buffers
    released) before the next is built, for peak memory. Histograms and scalars alike. (The
    keys are listed first: ``next(iter(builders))`` after popping the first keys walks over
    their deleted slots each time, quadratic in the number of series.)"""
    built = {}
    for key in list(builders):
        built[key] = build(builders.pop(key))
    return built


class _HistogramBuilder:
    """A histogram series' rows as the blocks they came in (one settling's rows of the series
    each), joined once at the end: no per-append growth or copying. Past ``2 * MAX_ROWS``
    rows the blocks are joined and thinned to at most ``MAX_ROWS`` (see :func:`thinned`)."""

    __slots__ = ("blocks", "encoding", "joined", "key", "last_step", "read", "size", "window")

    def __init__(self, key: SeriesKey, encoding: str) -> None:
        self.key = key
        self.encoding = encoding
        self.blocks: list[HistogramBlock] = []
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
        if self.size > 2 * thin.MAX_ROWS:
            self._thin(thin.MAX_ROWS)
        elif len(self.blocks) - self.joined >= _JOIN_BLOCKS:  # bounded per-array overhead
            self.blocks[self.joined :] = [_joined_blocks(self.blocks[self.joined :])]
            self.joined = len(self.blocks)

    def _purge_from(self, step: int) -> None:
        """Drop the kept rows at steps >= ``step`` (a restart). When none is left, the window
        goes back to 1: the rows that needed it are gone (a run logged again from its start)."""
        kept = _joined_blocks(self.blocks)
        size = rows_before(kept[0], step)
        self.blocks = [(kept[0][:size], kept[1][:size], kept[2][:size], kept[3][:size])]
        self.joined = 1
        if self.window == 1:  # one histogram a row: the purged ones no longer count as read
            self.read -= self.size - size
        self.size = size
        if size == 0:
            self.window = 1

    def _thin(self, limit: int) -> None:
        """Keep at most ``limit`` rows, one per window (the window doubled as needed)."""
        block, self.window = thinned(_joined_blocks(self.blocks), self.window, limit)
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
        if self.window > 1 or self.size > thin.MAX_ROWS:
            self._thin(thin.MAX_ROWS)  # rows since the last thinning: selected at the window too
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
# Reduction
# --------------------------------------------------------------------------------------------


class Reducer:
    """The state of one :func:`reduce_records` pass."""

    def __init__(self) -> None:
        self.run = ""
        self.files: dict[str, None] = {}
        self.file_infos: list[FileInfo] = []
        self.damages: list[Damage] = []
        self.notices: list[Notice] = []
        self.histograms: dict[SeriesKey, _HistogramBuilder] = {}
        self.numbers: dict[SeriesKey, int] = {}  # a series' number: its builder's position
        self.builders: list[_HistogramBuilder] = []
        self.pool: list[_PooledRows] = []  # reduced rows not yet handed to their series
        self.pooled = 0
        self.scalars: dict[str, _ScalarBuilder] = {}
        self.pending: list[HistogramRecord] = []
        self.pending_buckets = 0
        self.hparams: dict[str, HParamValue] = {}

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
        elif isinstance(record, HParamsRecord):
            self.hparams.update(record.values)

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
        """Reduce the pending histogram records and pool their rows, in stream order."""
        if not self.pending:
            return
        records, self.pending, self.pending_buckets = self.pending, [], 0
        rows, fingerprints = reduce_histograms(records)
        numbers = np.fromiter(
            (self.series_number((r.tag, r.index), r.encoding) for r in records),
            dtype=np.int64,
            count=len(records),
        )
        steps = np.fromiter((r.step for r in records), dtype=np.int64, count=len(records))
        walls = np.fromiter((r.wall_time for r in records), dtype=np.float64, count=len(records))
        self.run = self.run or records[0].run
        self._pool((numbers, steps, walls, rows, fingerprints))

    def series_number(self, key: SeriesKey, encoding: str) -> int:
        """The number of ``key``'s series (numbered in order of first appearance), its builder
        made with ``encoding`` when the series is new."""
        number = self.numbers.get(key)
        if number is None:
            number = self.numbers[key] = len(self.builders)
            builder = self.histograms[key] = _HistogramBuilder(key, encoding)
            self.builders.append(builder)
        return number

    def add_histogram_rows(
        self,
        numbers: np.ndarray,
        steps: np.ndarray,
        walls: np.ndarray,
        rows: np.ndarray,
        fingerprints: np.ndarray,
    ) -> None:
        """Append reduced histograms to their series (``numbers``: from :meth:`series_number`),
        in stream order, after any pending records. The arrays are kept: the caller must not
        change them afterwards."""
        self.flush()
        self._pool((numbers, steps, walls, rows, fingerprints))

    def _pool(self, rows: _PooledRows) -> None:
        self.pool.append(rows)
        self.pooled += int(rows[0].size)
        if self.pooled >= max(SETTLE_ROWS, SETTLE_ROWS_PER_SERIES * len(self.builders)):
            self.settle()

    def settle(self) -> None:
        """Hand the pooled rows to their series: grouped by series with one stable sort, so
        the Python work is per series and settling, not per series and batch."""
        if not self.pool:
            return
        pool, self.pool, self.pooled = self.pool, [], 0
        columns = [np.concatenate(column) for column in zip(*pool, strict=True)]
        del pool
        numbers = columns.pop(0)
        order = np.argsort(numbers, kind="stable")  # by series, stream order within each
        counts = np.bincount(numbers, minlength=len(self.builders))
        del numbers
        steps, walls, rows, fingerprints = (column[order] for column in columns)
        del columns
        present = np.flatnonzero(counts)
        stops = np.cumsum(counts)[present]
        starts = stops - counts[present]
        back = np.zeros(steps.size, dtype=np.int64)  # steps not rising, counted up to each row
        np.cumsum(steps[1:] <= steps[:-1], out=back[1:])
        rising = (back[stops - 1] - back[starts] == 0).tolist()
        builders = self.builders
        for number, start, stop, up in zip(
            present.tolist(), starts.tolist(), stops.tolist(), rising, strict=True
        ):
            builders[number].append(
                steps[start:stop].copy(),  # copies: a view would keep the whole pool alive
                walls[start:stop].copy(),
                rows[start:stop].copy(),
                fingerprints[start:stop].copy(),
                rising=up,
            )

    def finish(self) -> RunData:
        self.flush()
        self.settle()
        self.builders = []
        histograms = build_all(self.histograms, _HistogramBuilder.build)
        files = tuple(self.files)
        return RunData(
            run=self.run,
            files=files,
            file_infos=tuple(self.file_infos),
            damages=tuple(self.damages),
            notices=thinning_notices(self.notices, self.run, files, histograms.values()),
            histograms=histograms,
            scalars=build_all(self.scalars, _ScalarBuilder.build),
            hparams=dict(self.hparams),
        )


def reduce_records(records: Iterable[Record]) -> RunData:
    """Reduce one run's record stream (or one file's) to per-series arrays."""
    reducer = Reducer()
    for record in records:
        reducer.add(record)
    return reducer.finish()
