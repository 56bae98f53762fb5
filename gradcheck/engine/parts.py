"""A run's files -> their reduced series (:class:`FilePart`): the map step's task, for event
files and the other log formats (``gradcheck.sources``) alike.

:func:`reduce_file` is module level and picklable, so a process pool can map it over files; it
uses the C engine (``gradcheck.engine.fastpath``) when it is built, else the reference reader.
A run of another log format is read whole, as one part (:func:`source_part`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from gradcheck.engine import fastpath
from gradcheck.events.reader import FileTally, collision_notice, guess_writer, read_file
from gradcheck.events.steps import StepWindow
from gradcheck.events.storage import NO_OPTIONS, StorageOptions
from gradcheck.model import FileInfo, HistogramRecord, Record, Run, RunData, ScalarRecord
from gradcheck.series.reduce import reduce_records
from gradcheck.sources import is_source
from gradcheck.sources import records as source_records

PROGRESS_EVERY = 256  # records between two progress reports within a file (cheap: rich throttles)


@dataclass(eq=False)
class FilePart:
    """What one event file contributed: its reduced series and how many values were read."""

    data: RunData
    values_read: int  # histogram and scalar values decoded from the file
    values_kept: int  # of those, values inside the step window


def reduce_file(
    path: str,
    run: str,
    window: StepWindow,
    on_offset: Callable[[int], None] | None = None,
    storage: StorageOptions = NO_OPTIONS,
) -> FilePart:
    """Read one event file, keep the values inside ``window``, reduce them to series
    (``storage``: the options for a URL).

    With the C engine when it is built, else the reference reader; both give the same result.
    """
    if fastpath.available():
        result = fastpath.reduce_file_range(path, run, window, on_offset, storage=storage)
        return file_part(result, path, run)
    return reduce_file_reference(path, run, window, on_offset, storage)


def reduce_file_reference(
    path: str,
    run: str,
    window: StepWindow,
    on_offset: Callable[[int], None] | None = None,
    storage: StorageOptions = NO_OPTIONS,
) -> FilePart:
    """:func:`reduce_file` with the pure-Python reader (record objects): the reference."""
    counter = _ValueCounter()
    records = counter.count(read_file(path, run, storage), window)
    if on_offset is not None:
        records = _report_offsets(records, on_offset)
    data = reduce_records(records)
    return FilePart(data=data, values_read=counter.read, values_kept=counter.kept)


def reduce_stream(records: Iterable[Record], window: StepWindow) -> FilePart:
    """A record stream that is not one event file's (a run of another log format,
    ``gradcheck.sources``) reduced as :func:`reduce_file_reference` reduces a file's."""
    counter = _ValueCounter()
    data = reduce_records(counter.count(records, window))
    return FilePart(data=data, values_read=counter.read, values_kept=counter.kept)


def source_part(run: Run, window: StepWindow) -> FilePart:
    """A run of another log format (``gradcheck.sources``), read whole as one part."""
    return reduce_stream(source_records(run), window)


def run_parts(run: Run, window: StepWindow, storage: StorageOptions = NO_OPTIONS) -> list[FilePart]:
    """Every part of ``run``, read here: one per event file in file order, or its one part
    (another log format)."""
    if is_source(run):
        return [source_part(run, window)]
    return [reduce_file(path, run.path, window, storage=storage) for path in run.files]


def file_part(result: fastpath.RangeResult, path: str, run: str) -> FilePart:
    """A whole file's range result as a :class:`FilePart` (its notices and ``FileInfo`` added)."""
    data = finish_file(result, path, run)
    return FilePart(data=data, values_read=result.values_read, values_kept=result.values_kept)


def finish_file(result: fastpath.RangeResult, path: str, run: str) -> RunData:
    """The collision notices and ``FileInfo`` that end a file's records, added to its data."""
    notices = tuple(
        collision_notice(run, path, tag, step, counts) for tag, step, counts in result.collisions
    )
    info = file_info(run, path, result.size, result.tally)
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


def file_info(run: str, path: str, size: int | None, tally: FileTally) -> FileInfo:
    """What a file held, once read (``size`` None: it could not be opened)."""
    if size is None:
        return FileInfo(run, path, 0, 0, 0, None)
    return FileInfo(run, path, size, tally.records, tally.events, guess_writer(path, tally))


class _ValueCounter:
    """Counts values as they stream past and drops those outside the step window."""

    def __init__(self) -> None:
        self.read = 0
        self.kept = 0

    def count(self, records: Iterable[Record], window: StepWindow) -> Iterator[Record]:
        for record in records:
            if isinstance(record, (HistogramRecord, ScalarRecord)):
                self.read += 1
                if not window.contains(record.step):
                    continue
                self.kept += 1
            yield record


def _report_offsets(
    records: Iterable[Record], on_offset: Callable[[int], None]
) -> Iterator[Record]:
    """Pass records through, reporting the byte offset reached every ``PROGRESS_EVERY``."""
    for number, record in enumerate(records, 1):
        if number % PROGRESS_EVERY == 0 and hasattr(record, "offset"):
            on_offset(record.offset)
        yield record
