"""The core of ``gradcheck inspect``: what is in the event files, without verdicts.

:func:`inspect_paths` (or :func:`inspect_records` on any record stream) returns an
:class:`InspectReport`: runs -> files (size, records, writer guess, damage) -> tags (kind,
encoding, step range, value count, element counts). Nothing here prints; ``gradcheck.cli``
renders it. Memory grows with the number of tags, not with file size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from gradcheck.engine import fastpath
from gradcheck.engine.fastpath import ValueGroups
from gradcheck.events.discover import discover
from gradcheck.events.reader import element_count, read_run, series_name
from gradcheck.events.storage import StorageOptions
from gradcheck.model import (
    TENSORBOARD,
    Damage,
    FileInfo,
    HistogramRecord,
    HParamsRecord,
    Notice,
    Record,
    ScalarRecord,
)
from gradcheck.tags import DEFAULT_RULES, Role, TagRules

TagKind = Literal[
    "weight histogram", "gradient histogram", "activation histogram", "other histogram", "scalar"
]
MAX_ELEMENT_COUNTS = 32  # distinct element counts kept per tag

_KIND_OF_ROLE: dict[Role, TagKind] = {
    "weight": "weight histogram",
    "gradient": "gradient histogram",
    "activation": "activation histogram",
    "other": "other histogram",
}


@dataclass(frozen=True)
class TagSummary:
    """One series in one file: a histogram tag (and collision index) or a scalar tag."""

    tag: str
    index: int  # collision index (Keras 3 writes several layers under one tag); 0 normally
    name: str  # distinct display name: ``tag``, or ``tag#index`` for index > 0
    kind: TagKind
    role: Role | None  # weight/gradient/other for histograms, None for scalars
    encoding: str  # histo / tensor (histograms), simple_value / tensor (scalars)
    first_step: int  # smallest step read
    last_step: int  # largest step read
    count: int  # values read
    element_counts: tuple[int, ...] = ()  # distinct values per histogram, sorted (histograms)
    parameter: str | None = None  # normalised parameter name it pairs under (histograms)


@dataclass(frozen=True)
class FileSummary:
    """One event file: what it held and every damage found in it."""

    path: str
    size: int
    records: int  # TFRecords whose CRCs verified
    events: int  # records that decoded as an Event
    writer: str | None  # best guess (see ``gradcheck.events.reader.guess_writer``)
    tags: tuple[TagSummary, ...]  # in order of first appearance
    damages: tuple[Damage, ...]  # offset, kind, lost bytes, one-line message each


@dataclass(frozen=True)
class RunSummary:
    """One run (a directory holding event files) and the reader's notices about it."""

    path: str
    files: tuple[FileSummary, ...]
    notices: tuple[Notice, ...]  # tag collisions and restarts, one line each

    @property
    def steps(self) -> tuple[int, int] | None:
        """First and last step of any value in the run."""
        tags = [tag for file in self.files for tag in file.tags]
        if not tags:
            return None
        return min(t.first_step for t in tags), max(t.last_step for t in tags)

    @property
    def damages(self) -> tuple[Damage, ...]:
        return tuple(damage for file in self.files for damage in file.damages)


@dataclass(frozen=True)
class InspectReport:
    """Everything ``gradcheck inspect`` shows, for any renderer."""

    runs: tuple[RunSummary, ...]

    @property
    def damages(self) -> tuple[Damage, ...]:
        return tuple(damage for run in self.runs for damage in run.damages)

    @property
    def notices(self) -> tuple[Notice, ...]:
        return tuple(notice for run in self.runs for notice in run.notices)


def inspect_paths(
    paths: Sequence[str],
    rules: TagRules | None = None,
    storage_options: Mapping[str, object] | None = None,
) -> InspectReport:
    """Inspect the runs under ``paths`` (``storage_options``: fsspec options for URLs);
    ``InputError`` when none is found.

    With the C engine, values are counted per series and batch as the scanner reads them
    (``fastpath.census_run``); else, and as the reference, from the reader's records.
    """
    storage = StorageOptions.of(storage_options)
    runs = discover(list(paths), storage)
    if not fastpath.available():
        records = (record for run in runs for record in read_run(run, storage))
        return inspect_records(records, rules)
    tally = _Tally()
    for run in runs:
        if run.format != TENSORBOARD:  # another log format: its records, as the reference
            for record in read_run(run, storage):
                tally.add(record)
            continue
        fastpath.census_run(run, tally, storage)
    return tally.report(rules)


def inspect_records(records: Iterable[Record], rules: TagRules | None = None) -> InspectReport:
    """Summarise a record stream (as ``gradcheck.read`` yields it) by run, file and tag."""
    tally = _Tally()
    for record in records:
        tally.add(record)
    return tally.report(rules)


class _Tally:
    """The runs seen so far, in order (a ``fastpath.Census``)."""

    def __init__(self) -> None:
        self.runs: dict[str, _RunTally] = {}

    def run(self, path: str) -> _RunTally:
        run = self.runs.get(path)
        if run is None:
            run = self.runs[path] = _RunTally()
        return run

    def add(self, record: Record) -> None:
        run = self.run(record.run)
        if isinstance(record, Notice):
            run.notices.append(record)
        elif not isinstance(record, HParamsRecord):  # hyperparameters: the sweep view's
            run.file(record.file).add(record)

    def add_values(self, run: str, file: str, values: ValueGroups) -> None:
        self.run(run).file(file).add_values(values)

    def report(self, rules: TagRules | None) -> InspectReport:
        return InspectReport(tuple(run.summary(path, rules) for path, run in self.runs.items()))


@dataclass
class _TagTally:
    encoding: str
    first_step: int
    last_step: int
    count: int = 1
    element_counts: set[int] = field(default_factory=set)

    def add(self, step: int) -> None:
        self.first_step = min(self.first_step, step)
        self.last_step = max(self.last_step, step)
        self.count += 1


@dataclass
class _FileTally:
    info: FileInfo | None = None
    tags: dict[tuple[str, int, bool], _TagTally] = field(default_factory=dict)
    damages: list[Damage] = field(default_factory=list)

    def add(self, record: HistogramRecord | ScalarRecord | Damage | FileInfo) -> None:
        if isinstance(record, FileInfo):
            self.info = record
        elif isinstance(record, Damage):
            self.damages.append(record)
        else:
            self._add_value(record)

    def _add_value(self, record: HistogramRecord | ScalarRecord) -> None:
        is_histogram = isinstance(record, HistogramRecord)
        index = record.index if isinstance(record, HistogramRecord) else 0
        key = (record.tag, index, is_histogram)
        tally = self.tags.get(key)
        if tally is None:
            tally = self.tags[key] = _TagTally(record.encoding, record.step, record.step, 0)
        tally.add(record.step)
        if isinstance(record, HistogramRecord) and len(tally.element_counts) < MAX_ELEMENT_COUNTS:
            count = element_count(record)
            if count is not None:
                tally.element_counts.add(count)

    def add_values(self, values: ValueGroups) -> None:
        """A batch of values counted per series (the same tally as ``add`` of each)."""
        tallies = []
        for key, encoding, first, last, count in zip(
            values.series, values.encodings, values.first_steps, values.last_steps,
            values.counts, strict=True,
        ):  # fmt: skip
            tally = self.tags.get(key)
            if tally is None:
                tally = self.tags[key] = _TagTally(encoding, first, last, count)
            else:
                tally.first_step = min(tally.first_step, first)
                tally.last_step = max(tally.last_step, last)
                tally.count += count
            tallies.append(tally)
        for group, size in values.element_counts:
            sizes = tallies[group].element_counts
            if len(sizes) < MAX_ELEMENT_COUNTS:
                sizes.add(size)

    def summary(self, path: str, rules: TagRules | None) -> FileSummary:
        """The file's summary; a stream without its ``FileInfo`` gives zeros there."""
        info = self.info or FileInfo("", path, 0, 0, 0, None)
        tags = tuple(_tag_summary(key, tally, rules) for key, tally in self.tags.items())
        return FileSummary(
            path, info.size, info.records, info.events, info.writer, tags, tuple(self.damages)
        )


@dataclass
class _RunTally:
    files: dict[str, _FileTally] = field(default_factory=dict)
    notices: list[Notice] = field(default_factory=list)

    def file(self, path: str) -> _FileTally:
        tally = self.files.get(path)
        if tally is None:
            tally = self.files[path] = _FileTally()
        return tally

    def summary(self, path: str, rules: TagRules | None) -> RunSummary:
        files = tuple(tally.summary(name, rules) for name, tally in self.files.items())
        return RunSummary(path, files, tuple(self.notices))


def _tag_summary(
    key: tuple[str, int, bool], tally: _TagTally, rules: TagRules | None
) -> TagSummary:
    tag, index, is_histogram = key
    role: Role | None = None
    parameter: str | None = None
    if is_histogram:
        role, parameter = (rules or DEFAULT_RULES).classify(tag)
        parameter = series_name(parameter, index)
    return TagSummary(
        tag=tag,
        index=index,
        name=series_name(tag, index),
        kind=_KIND_OF_ROLE[role] if role is not None else "scalar",
        role=role,
        encoding=tally.encoding,
        first_step=tally.first_step,
        last_step=tally.last_step,
        count=tally.count,
        element_counts=tuple(sorted(tally.element_counts)),
        parameter=parameter,
    )
