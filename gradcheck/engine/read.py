"""The one door from runs to their series: every run's files read (event files and the other
log formats alike), on the cores the work is worth, and what is to be done with each run's
data applied where it was read.

:func:`read_runs` gives each run's parts (:class:`~gradcheck.engine.parts.FilePart`, one per
event file, in file order); :func:`map_runs` gives ``then(run, parts)`` of each run as well
(its verdicts), computed where that costs least. The tasks are chosen here: a sweep's many
runs a batch of whole runs at a time (only ``then``'s results travel back), else a file at a
time, a big file in byte ranges (``engine.ranges``), or all in this process when the input is
too small to share (``engine.plan``, ``bench/README.md``). Results never depend on the choice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from gradcheck.engine import fastpath, plan, ranges
from gradcheck.engine.parts import FilePart, reduce_file, run_parts, source_part
from gradcheck.engine.pool import Workers, map_shared
from gradcheck.events.steps import StepWindow
from gradcheck.events.storage import NO_OPTIONS, StorageOptions, file_size
from gradcheck.model import Run, RunData
from gradcheck.sources import is_source

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(bytes_done, bytes_total)`` while files are read."""

_T = TypeVar("_T")

POOL_MIN_BYTES = 64 << 20
"""Less than this in all is read in this process alone: starting workers and sending results
back cost more than the second core saves (``bench/README.md``)."""
WHOLE_RUNS_MIN_BYTES = 4 << 20
"""Runs are each read and judged in one task, on the workers, when there are several, none
has a file big enough to be cut in ranges, and they hold this much in all (a sweep): only
their reports travel back (``bench/README.md``, "Worker processes")."""
TASKS_PER_WORKER = 8
"""A sweep's runs go to the workers in about this many tasks a worker, each of neighbouring
runs of about equal bytes: enough for a faster worker to take more, few enough that a task's
own cost (a few ms through a Dask scheduler) is shared by many small runs."""


@contextmanager
def using(workers: Workers | None, jobs: int | None) -> Iterator[Workers]:
    """The ``workers`` given (left open), or this command's own, for ``jobs``."""
    if workers is not None:
        yield workers
        return
    with Workers(jobs) as own:
        yield own


def map_runs(
    runs: Sequence[Run],
    window: StepWindow,
    then: Callable[[Run, Sequence[FilePart]], _T],
    progress: ProgressCallback | None = None,
    workers: Workers | None = None,
    storage: StorageOptions = NO_OPTIONS,
) -> list[tuple[_T, list[FilePart]]]:
    """``then(run, parts)`` of every run, in order, with the run's parts (without their
    series where ``then`` ran in a worker: they stayed there). ``then`` must be picklable (a
    ``partial`` of a module-level function); its cost is estimated as judging's
    (``engine.plan``)."""
    sizes = _whole_runs(runs, workers, storage)
    if sizes is not None and workers is not None:
        return _read_and_then(runs, sizes, window, then, progress, workers, storage)
    parts_by_run = read_runs(runs, window, progress, workers, storage)
    weights = [plan.verdict_seconds([part.data for part in parts]) for parts in parts_by_run]
    results = map_shared(
        partial(_applied, then=then),
        list(zip(runs, parts_by_run, strict=True)),
        weights,
        plan.VERDICT_SPLIT_SECONDS,
        workers,
    )
    return list(zip(results, parts_by_run, strict=True))


def _applied(item: tuple[Run, Sequence[FilePart]], then: Callable[..., _T]) -> _T:
    return then(*item)


def read_runs(
    runs: Sequence[Run],
    window: StepWindow,
    progress: ProgressCallback | None = None,
    workers: Workers | None = None,
    storage: StorageOptions = NO_OPTIONS,
) -> list[list[FilePart]]:
    """Every file of ``runs`` reduced (one task per file, or byte range of a big file),
    grouped by run, in file order; a run of another log format is read here, whole, as one
    part."""
    event_runs = [run for run in runs if not is_source(run)]
    tracker = _ProgressTracker(event_runs, progress, storage)
    files = [(path, run.path) for run in event_runs for path in run.files]
    parts = iter(read_files(files, window, tracker, workers, storage))
    parts_by_run = [
        [source_part(run, window)] if is_source(run) else [next(parts) for _ in run.files]
        for run in runs
    ]
    tracker.finish()
    return parts_by_run


def _whole_runs(
    runs: Sequence[Run], workers: Workers | None, storage: StorageOptions = NO_OPTIONS
) -> list[int] | None:
    """The bytes of each run when each is better read and judged in one task (see
    :data:`WHOLE_RUNS_MIN_BYTES`; an executor given takes every run so), else None."""
    if workers is None or len(runs) < 2 or not (workers.jobs >= 2 or workers.given):
        return None
    sizes = [[_size(path, storage) for path in run.files] for run in runs]
    if not workers.given:
        biggest = max((size for files in sizes for size in files), default=0)
        if biggest >= ranges.SPLIT_SIZE or sum(map(sum, sizes)) < WHOLE_RUNS_MIN_BYTES:
            return None
    return [sum(files) for files in sizes]


def _read_and_then(
    runs: Sequence[Run],
    sizes: Sequence[int],
    window: StepWindow,
    then: Callable[[Run, Sequence[FilePart]], _T],
    progress: ProgressCallback | None,
    workers: Workers,
    storage: StorageOptions = NO_OPTIONS,
) -> list[tuple[_T, list[FilePart]]]:
    """Every run read and ``then`` applied in one task on the ``workers`` (a sweep's many
    small runs), batches of neighbouring runs at a time; ``sizes``: each run's bytes."""
    total = sum(sizes)
    done = 0

    def advance(batch: int) -> None:
        nonlocal done
        done += sum(sizes[at] for at in batches[batch])
        if progress is not None:
            progress(done, total)

    if progress is not None:
        progress(0, total)
    batches = _batches(sizes, workers.jobs * TASKS_PER_WORKER)
    done_runs = map_shared(
        partial(_read_then, window=window, then=then, storage=storage),
        [[runs[at] for at in batch] for batch in batches],
        [float(sum(sizes[at] for at in batch)) for batch in batches],
        0.0,
        workers,
        advance,
    )
    return [result for batch in done_runs for result in batch]


def _batches(sizes: Sequence[int], tasks: int) -> list[list[int]]:
    """The positions of ``sizes`` cut into at most about ``tasks`` runs of neighbours, each
    of ``sum(sizes) / tasks`` bytes or more (the last one may hold less)."""
    if not sizes:
        return []
    share = sum(sizes) / max(tasks, 1)
    batches: list[list[int]] = [[]]
    held = 0
    for at, size in enumerate(sizes):
        if batches[-1] and held >= share:
            batches.append([])
            held = 0
        batches[-1].append(at)
        held += size
    return batches


def _read_then(
    runs: Sequence[Run],
    window: StepWindow,
    then: Callable[[Run, Sequence[FilePart]], _T],
    storage: StorageOptions = NO_OPTIONS,
) -> list[tuple[_T, list[FilePart]]]:
    """Runs read and ``then`` applied, one after the other (a task of :func:`map_runs`)."""
    done = []
    for run in runs:
        parts = run_parts(run, window, storage)
        done.append(
            (then(run, parts), [replace(part, data=_without_series(part.data)) for part in parts])
        )
    return done


def _without_series(data: RunData) -> RunData:
    return replace(data, histograms={}, scalars={})


@dataclass(eq=False)
class _Task:
    """One file, or one of its byte ranges (``limit`` -1: to the end)."""

    file: int
    path: str
    run: str
    start: int = 0
    limit: int = -1
    split: bool = False
    assumed: Any = None  # a range after the first: the plugins known before it
    storage: StorageOptions = NO_OPTIONS  # the options for a URL


def read_files(
    files: Sequence[tuple[str, str]],
    window: StepWindow,
    progress: _ProgressTracker,
    workers: Workers | None = None,
    storage: StorageOptions = NO_OPTIONS,
) -> list[FilePart]:
    """The :class:`FilePart` of every ``(path, run)``, in order, on the ``workers`` (None:
    this process alone; ``storage``: the options for URLs, sent with each task)."""
    jobs = 1 if workers is None else workers.jobs
    sizes = [_size(path, storage) for path, _ in files]
    if workers is None or (not workers.given and (jobs <= 1 or sum(sizes) < POOL_MIN_BYTES)):
        return _read_here(files, window, progress, storage)
    tasks = _plan(files, sizes, max(jobs, 2), storage)
    if len(tasks) < 2:
        return _read_here(files, window, progress, storage)
    return _gather(workers, tasks, files, window, progress)


def _read_here(
    files: Sequence[tuple[str, str]],
    window: StepWindow,
    progress: _ProgressTracker,
    storage: StorageOptions = NO_OPTIONS,
) -> list[FilePart]:
    """Every file read in this process, one after the other."""
    return [reduce_file(path, run, window, progress.reporter(), storage) for path, run in files]


def _plan(
    files: Sequence[tuple[str, str]],
    sizes: Sequence[int],
    jobs: int,
    storage: StorageOptions = NO_OPTIONS,
) -> list[_Task]:
    """One task per file; a big file in byte ranges (``ranges.cuts``), when the C engine
    can read them."""
    split = fastpath.available()
    share = sum(sizes) / jobs
    tasks = []
    for number, ((path, run), size) in enumerate(zip(files, sizes, strict=True)):
        pieces = ranges.cuts(path, run, size, share, storage) if split else []
        if not pieces:
            tasks.append(_Task(number, path, run, storage=storage))
        for start, limit, assumed in pieces:
            tasks.append(_Task(number, path, run, start, limit, True, assumed, storage))
    return tasks


def _gather(
    workers: Workers,
    tasks: Sequence[_Task],
    files: Sequence[tuple[str, str]],
    window: StepWindow,
    progress: _ProgressTracker,
) -> list[FilePart]:
    """Every task on the ``workers`` (:func:`map_shared`, the longest first), then the parts
    in file order (a split file's ranges joined)."""
    sizes = [_task_bytes(task) for task in tasks]
    results: list[Any] = map_shared(  # a FilePart a whole file, a RangeResult a range
        partial(_run, window=window),
        tasks,
        [float(size) for size in sizes],
        0.0,
        workers,
        lambda at: progress.advance(sizes[at]),  # here, not in the executor's thread
    )
    parts: list[FilePart] = []
    at = 0
    for number, (path, run) in enumerate(files):
        end = at + 1
        while end < len(tasks) and tasks[end].file == number:
            end += 1
        if tasks[at].split:
            boundaries = [task.start for task in tasks[at + 1 : end]]
            storage = tasks[at].storage
            parts.append(ranges.joined(results[at:end], boundaries, path, run, window, storage))
        else:
            parts.append(results[at])
        at = end
    return parts


def _run(task: _Task, window: StepWindow) -> fastpath.RangeResult | FilePart:
    """One task's result (in a worker, or here)."""
    if task.split:
        return ranges.read_range(
            task.path, task.run, window, task.start, task.limit, task.assumed, task.storage
        )
    return reduce_file(task.path, task.run, window, storage=task.storage)


def _task_bytes(task: _Task) -> int:
    end = task.limit if task.limit >= 0 else _size(task.path, task.storage)
    return max(0, end - task.start)


class _ProgressTracker:
    """Turns per-file byte offsets into overall ``(bytes_done, bytes_total)`` reports."""

    def __init__(
        self,
        runs: Sequence[Run],
        progress: ProgressCallback | None,
        storage: StorageOptions = NO_OPTIONS,
    ) -> None:
        self._progress = progress
        self._sizes = [_size(path, storage) for run in runs for path in run.files]
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

    def advance(self, size: int) -> None:
        """A part of ``size`` bytes was read (by a pool worker, which does not report offsets)."""
        self._finished += size
        if self._progress is not None:
            self._progress(min(self._finished, self._total), self._total)

    def finish(self) -> None:
        """Report that every byte has been read."""
        if self._progress is not None:
            self._progress(self._total, self._total)

    def _at_offset(self, offset: int) -> None:
        if self._progress is not None:
            self._progress(self._finished + offset, self._total)


def _size(path: str, storage: StorageOptions = NO_OPTIONS) -> int:
    """File size in bytes, 0 when it cannot be read (the reader reports why)."""
    try:
        return file_size(path, storage)
    except OSError:
        return 0
