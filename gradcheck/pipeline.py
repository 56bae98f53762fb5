"""The analysis pipeline: paths -> runs -> records -> per-file series -> run verdicts -> Report.

``analyze`` is what ``gradcheck analyze`` runs, and what a notebook can call. Each event file
is reduced on its own by :func:`reduce_file` (module level and picklable, so a process pool can
map it over files), the parts of a run are merged in file order, and the merged series are
judged by ``detect.analyze_run``. The step window is applied to the records before any
statistic, so verdicts are about that window; the layer glob only filters what is reported.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from gradcheck import __version__
from gradcheck.config import DEFAULT_CONFIG, Config
from gradcheck.detect import analyze_run
from gradcheck.discover import discover
from gradcheck.errors import InputError
from gradcheck.model import (
    FileInfo,
    HistogramRecord,
    Record,
    Report,
    Run,
    RunReport,
    ScalarRecord,
)
from gradcheck.reader import read_file
from gradcheck.series import RunData, merge, reduce_records
from gradcheck.steps import StepWindow
from gradcheck.storage import file_size
from gradcheck.tags import DEFAULT_RULES, TagRules

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(bytes_done, bytes_total)`` while event files are read."""

PROGRESS_EVERY = 256  # records between two progress reports within a file (cheap: rich throttles)


@dataclass(frozen=True)
class FilePart:
    """What one event file contributed: its reduced series and how many values were read."""

    data: RunData
    values_read: int  # histogram and scalar values decoded from the file
    values_kept: int  # of those, values inside the step window


def analyze(
    paths: Sequence[str],
    *,
    config: Config = DEFAULT_CONFIG,
    rules: TagRules = DEFAULT_RULES,
    layer_glob: str | None = None,
    run_glob: str | None = None,
    steps: StepWindow | None = None,
    progress: ProgressCallback | None = None,
) -> Report:
    """Analyse the event files under ``paths`` and return the report of every run.

    Raises ``InputError`` for a missing path, no event file, no run or parameter matching the
    globs, or when no histogram or scalar can be read at all (exit status 2 in the CLI).
    """
    window = steps if steps is not None else StepWindow()
    runs = select_runs(discover(paths), run_glob)
    tracker = _ProgressTracker(runs, progress)
    # The map step: one independent task per file (a process pool can take it over).
    parts_by_run = [
        [reduce_file(path, run.path, window, tracker.reporter()) for path in run.files]
        for run in runs
    ]
    tracker.finish()
    _check_readable(paths, [part for parts in parts_by_run for part in parts], window)
    reports = [
        analyze_parts(run, parts, config, rules)
        for run, parts in zip(runs, parts_by_run, strict=True)
    ]
    return Report(version=__version__, runs=tuple(filter_layers(reports, layer_glob)))


def analyze_parts(
    run: Run, parts: Sequence[FilePart], config: Config, rules: TagRules
) -> RunReport:
    """Merge a run's per-file parts (in file order) and judge its parameters."""
    report = analyze_run(merge([part.data for part in parts]), config, rules)
    warnings = report.warnings
    if not any(part.values_kept for part in parts):
        warnings += ("no histogram or scalar could be read in this run",)
    return replace(report, run=run.path, warnings=warnings)


def reduce_file(
    path: str, run: str, window: StepWindow, on_offset: Callable[[int], None] | None = None
) -> FilePart:
    """Read one event file, keep the values inside ``window``, reduce them to series."""
    counter = _ValueCounter()
    records = counter.count(read_file(path, run), window)
    if on_offset is not None:
        records = _report_offsets(records, on_offset)
    data = reduce_records(records)
    return FilePart(data=data, values_read=counter.read, values_kept=counter.kept)


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


class _ProgressTracker:
    """Turns per-file byte offsets into overall ``(bytes_done, bytes_total)`` reports."""

    def __init__(self, runs: Sequence[Run], progress: ProgressCallback | None) -> None:
        self._progress = progress
        self._sizes = [_size(path) for run in runs for path in run.files]
        self._total = sum(self._sizes)
        self._finished = 0  # bytes of files completely read
        self._file = -1

    def reporter(self) -> Callable[[int], None] | None:
        """The offset callback for the next file (``None`` when nobody listens)."""
        if self._progress is None:
            return None
        if self._file >= 0:
            self._finished += self._sizes[self._file]
        self._file += 1
        self._progress(self._finished, self._total)
        return self._at_offset

    def finish(self) -> None:
        """Report that every byte has been read."""
        if self._progress is not None:
            self._progress(self._total, self._total)

    def _at_offset(self, offset: int) -> None:
        if self._progress is not None:
            self._progress(self._finished + offset, self._total)


def _size(path: str) -> int:
    """File size in bytes, 0 when it cannot be read (the reader reports why)."""
    try:
        return file_size(path)
    except OSError:
        return 0


def select_runs(runs: Sequence[Run], run_glob: str | None) -> list[Run]:
    """Runs whose path or directory name matches ``run_glob`` (all runs without one)."""
    if run_glob is None:
        return list(runs)
    selected = [run for run in runs if _matches(run_glob, run.path, os.path.basename(run.path))]
    if not selected:
        names = ", ".join(run.path for run in runs)
        raise InputError(f"no run matches --run {run_glob!r} (runs found: {names})")
    return selected


def filter_layers(reports: Sequence[RunReport], layer_glob: str | None) -> list[RunReport]:
    """Keep the parameters whose name or tags match ``layer_glob``; recount verdicts."""
    if layer_glob is None:
        return list(reports)
    filtered = []
    for report in reports:
        layers = tuple(
            layer
            for layer in report.layers
            if _matches(layer_glob, layer.name, layer.weight_tag, layer.grad_tag)
        )
        counts = {verdict: 0 for verdict in report.counts}
        for layer in layers:
            counts[layer.verdict] = counts.get(layer.verdict, 0) + 1
        filtered.append(replace(report, layers=layers, counts=counts))
    if not any(report.layers for report in filtered):
        raise InputError(f"no parameter matches --layer {layer_glob!r}")
    return filtered


def _matches(pattern: str, *names: str | None) -> bool:
    """True when ``pattern`` (a shell glob, case-sensitive) matches one of ``names``."""
    return any(name is not None and fnmatch.fnmatchcase(name, pattern) for name in names)


def _check_readable(paths: Sequence[str], parts: Sequence[FilePart], window: StepWindow) -> None:
    """Nothing to analyse is an input error that says why, not an empty report."""
    where = ", ".join(paths)
    if not any(part.values_read for part in parts):
        infos = [info for part in parts for info in part.data.file_infos]
        raise InputError(f"no TensorBoard records could be read from {where}: {_why(infos)}")
    if not any(part.values_kept for part in parts):
        raise InputError(f"no histogram or scalar in steps {window} under {where}")


def _why(infos: Sequence[FileInfo]) -> str:
    """Why event files gave no histogram or scalar, from what the reader saw in them."""
    files = plural(len(infos), "event file")
    if all(info.size == 0 for info in infos):
        return f"{files}, {'empty' if len(infos) == 1 else 'all empty'} (0 bytes)"
    if not any(info.records for info in infos):
        return f"no valid TFRecord in {files} (not event files, or damaged beyond repair)"
    events = sum(info.events for info in infos)
    return f"{events} events in {files} but no histogram or scalar (graphs or metadata only)"


def plural(count: int, noun: str) -> str:
    """``1 event file``, ``2 event files``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
