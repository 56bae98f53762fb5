"""Read a run's files on every core: a process pool over files, big files split in two.

Each file is a task (:func:`gradcheck.parts.reduce_file`); a file of at least
:data:`SPLIT_SIZE` bytes becomes two tasks, byte ranges that meet at a record starting a new
step (:func:`gradcheck.fastpath.split_offset`), joined back with
:func:`gradcheck.fastpath.merge_ranges` (or read again in one piece when they cannot be joined
exactly). A pool starts only when there are several tasks and enough bytes to pay its start-up.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from gradcheck import fastpath
from gradcheck.parts import FilePart, file_part, reduce_file, reduce_range
from gradcheck.steps import StepWindow
from gradcheck.storage import file_size

SPLIT_SIZE = 32 << 20
"""Files at least this large are read by two processes (byte ranges)."""
POOL_MIN_BYTES = 24 << 20
"""Less than this in all is read in this process: a pool costs more than it saves."""


class Progress(Protocol):
    """What the pipeline's progress tracker offers (see ``pipeline._ProgressTracker``)."""

    def reporter(self) -> Callable[[int], None] | None: ...

    def advance(self, size: int) -> None: ...


@dataclass(frozen=True)
class _Task:
    """One file, or one of its two byte ranges (``limit`` -1: to the end)."""

    file: int
    path: str
    run: str
    start: int = 0
    limit: int = -1
    split: bool = False


def default_jobs() -> int:
    """One process per CPU this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def read_files(
    files: Sequence[tuple[str, str]], window: StepWindow, progress: Progress, jobs: int | None
) -> list[FilePart]:
    """The :class:`FilePart` of every ``(path, run)``, in order, on up to ``jobs`` processes."""
    jobs = default_jobs() if jobs is None else jobs
    sizes = [_size(path) for path, _ in files]
    if jobs <= 1 or sum(sizes) < POOL_MIN_BYTES:
        return [reduce_file(path, run, window, progress.reporter()) for path, run in files]
    tasks = _plan(files, sizes)
    if len(tasks) < 2:
        return [reduce_file(path, run, window, progress.reporter()) for path, run in files]
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=_context()) as pool:
        return _gather(pool, tasks, files, window, progress)


def _plan(files: Sequence[tuple[str, str]], sizes: Sequence[int]) -> list[_Task]:
    """One task per file; two (byte ranges) for a big file, when the C engine can read them."""
    tasks = []
    for number, ((path, run), size) in enumerate(zip(files, sizes, strict=True)):
        boundary = None
        if size >= SPLIT_SIZE and fastpath.available():
            boundary = fastpath.split_offset(path, size)
        if boundary is None:
            tasks.append(_Task(number, path, run))
        else:
            tasks.append(_Task(number, path, run, 0, boundary, split=True))
            tasks.append(_Task(number, path, run, boundary, -1, split=True))
    return tasks


def _gather(
    pool: Executor,
    tasks: Sequence[_Task],
    files: Sequence[tuple[str, str]],
    window: StepWindow,
    progress: Progress,
) -> list[FilePart]:
    """Submit every task, then collect the parts in file order (ranges joined)."""
    futures = [_submit(pool, task, window) for task in tasks]
    for task, future in zip(tasks, futures, strict=True):
        future.add_done_callback(partial(_advance, progress, _task_bytes(task)))
    parts: list[FilePart] = []
    at = 0
    for number, (path, run) in enumerate(files):
        if tasks[at].split:
            first, second = futures[at].result(), futures[at + 1].result()
            parts.append(_joined(first, second, tasks[at + 1].start, path, run, window))
            at += 2
        else:
            parts.append(futures[at].result())
            at += 1
        assert tasks[at - 1].file == number
    return parts


def _submit(pool: Executor, task: _Task, window: StepWindow) -> Future:  # type: ignore[type-arg]
    if task.split:
        return pool.submit(reduce_range, task.path, task.run, window, task.start, task.limit)
    return pool.submit(reduce_file, task.path, task.run, window)


def _joined(
    first: fastpath.RangeResult,
    second: fastpath.RangeResult,
    boundary: int,
    path: str,
    run: str,
    window: StepWindow,
) -> FilePart:
    """Two ranges of one file joined, or the file read again when they cannot be exactly."""
    joined = fastpath.merge_ranges(first, second, boundary)
    if joined is None:
        return reduce_file(path, run, window)
    return file_part(joined, path, run)


def _advance(progress: Progress, size: int, _: Future) -> None:  # type: ignore[type-arg]
    """Progress per finished part (a pool worker does not report offsets)."""
    progress.advance(size)


def _task_bytes(task: _Task) -> int:
    end = task.limit if task.limit >= 0 else _size(task.path)
    return max(0, end - task.start)


def _size(path: str) -> int:
    """File size in bytes, 0 when it cannot be read (the reader reports why)."""
    try:
        return file_size(path)
    except OSError:
        return 0


def _context() -> multiprocessing.context.BaseContext:
    """``fork`` where there is one: workers start in milliseconds with every module loaded."""
    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()  # pragma: no cover - not on Linux
