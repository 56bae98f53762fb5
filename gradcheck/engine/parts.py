"""One event file (or one byte range of it) -> its reduced series: the map step's task.

:func:`reduce_file` is module level and picklable, so a process pool can map it over files;
:func:`reduce_range` reads one byte range of a big file, for processes to share it.
Both use the C engine (``gradcheck.engine.fastpath``) when it is built, else the reference reader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from gradcheck.engine import fastpath
from gradcheck.events.reader import read_file
from gradcheck.events.steps import StepWindow
from gradcheck.events.storage import NO_OPTIONS, StorageOptions
from gradcheck.model import HistogramRecord, Record, RunData, ScalarRecord
from gradcheck.series.reduce import reduce_records

PROGRESS_EVERY = 256  # records between two progress reports within a file (cheap: rich throttles)


@dataclass(frozen=True)
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


def reduce_range(
    path: str,
    run: str,
    window: StepWindow,
    start: int,
    limit: int,
    assumed: Mapping[str, str] | None = None,
    storage: StorageOptions = NO_OPTIONS,
) -> fastpath.RangeResult:
    """The records of ``path`` starting in ``[start, limit)``, with the C engine (a pool task);
    ``assumed``: the plugin names of tags before ``start`` (see ``fastpath.head_plugins``)."""
    return fastpath.reduce_file_range(path, run, window, None, start, limit, assumed, storage)


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


def file_part(result: fastpath.RangeResult, path: str, run: str) -> FilePart:
    """A whole file's range result as a :class:`FilePart` (its notices and ``FileInfo`` added)."""
    data = fastpath.finish_file(result, path, run)
    return FilePart(data=data, values_read=result.values_read, values_kept=result.values_kept)


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
