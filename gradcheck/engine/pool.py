"""Read a run's files on every core: big files cut in byte ranges, tasks on a process pool.

Each file is a task (:func:`gradcheck.engine.parts.reduce_file`); a file of at least
:data:`SPLIT_SIZE` bytes that holds more than a process's share of all the bytes becomes
several tasks, byte ranges of about that share (:func:`plan_pieces`, each estimated from the
records in the file's first few MB to read for :data:`PIECE_SECONDS` at least) that meet at
records starting a new step (:func:`gradcheck.engine.fastpath.split_offsets`), joined back with
:func:`gradcheck.engine.fastpath.join_ranges` (or read again in one piece when they cannot be
joined exactly).

The tasks go to a :class:`concurrent.futures.Executor` held by :class:`Workers`: a
``ProcessPoolExecutor`` started on first use, or one given (a Dask client's executor). Less
than :data:`POOL_MIN_BYTES` in all is read here alone: starting workers and sending results
back cost more than the second core saves. :func:`map_shared` shares other work out on the
same workers (the verdicts of several runs). A task that fails raises here as it would have
raised here; a task whose worker died is run again here.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from gradcheck.engine import fastpath
from gradcheck.engine.parts import FilePart, file_part, reduce_file, reduce_range
from gradcheck.events.steps import StepWindow
from gradcheck.events.storage import NO_OPTIONS, StorageOptions, file_size, is_url

if TYPE_CHECKING:  # at run time only with a pool: concurrent.futures brings logging
    from concurrent.futures import Executor, Future

SPLIT_SIZE = 64 << 20
"""Files at least this large may be read in byte ranges by several processes (when their
reading is also estimated long enough, :func:`plan_pieces`): below, starting a worker, the
transfer and the join cost about what the second core saves (``bench/README.md``)."""
REMOTE_WHOLE = True
"""A URL is read whole by one process, never cut in byte ranges: each range costs a worker
its own requests (the cut's search, the head, a GET from the range's start) and, with
forkserver workers, the storage library's import (several times slower in ranges:
``bench/README.md``)."""
POOL_MIN_BYTES = 64 << 20
"""Less than this in all is read in this process alone (same reason as :data:`SPLIT_SIZE`)."""


SECONDS_PER_BYTE = 1.1e-9
SECONDS_PER_RECORD = 8e-7
"""The C engine's reading time of a file, in one process: per byte and per record (from the
160 MB bench logs, ``bench/README.md``)."""
PIECE_SECONDS = 0.125
"""Each byte range of a file is estimated to take at least this long to read: below, planning
the cut and the worker's start cost about what the second core saves."""


def estimated_seconds(size: int, records: int, scanned: int) -> float | None:
    """The reading time of a file of ``size`` bytes with ``records`` records in its first
    ``scanned`` bytes (None when nothing was scanned)."""
    if scanned <= 0:
        return None
    return size * (SECONDS_PER_BYTE + SECONDS_PER_RECORD * records / scanned)


def plan_pieces(size: int, share: float, estimate: float | None) -> int:
    """In how many byte ranges to read a file of ``size`` bytes when each process's share of
    all the bytes is ``share``: about ``size / share`` (a file bigger than a share would keep
    one process busy after the others are done), each estimated to take
    :data:`PIECE_SECONDS` at least (``estimate``: the whole file's reading time, None when
    unknown); 1: whole."""
    pieces = max(1, round(size / share)) if share > 0 else 1
    if estimate is not None:
        pieces = min(pieces, int(estimate / PIECE_SECONDS))
    return max(1, pieces)


class Progress(Protocol):
    """What the pipeline's progress tracker offers (see ``pipeline._ProgressTracker``)."""

    def reporter(self) -> Callable[[int], None] | None: ...

    def advance(self, size: int) -> None: ...


@dataclass(frozen=True)
class _Task:
    """One file, or one of its byte ranges (``limit`` -1: to the end)."""

    file: int
    path: str
    run: str
    start: int = 0
    limit: int = -1
    split: bool = False
    assumed: Mapping[str, str] | None = None  # a range after the first: plugins known before it
    storage: StorageOptions = NO_OPTIONS  # the options for a URL


ABORT_JOIN_SECONDS = 5
"""How long to wait for a killed worker to be reaped (SIGKILL: at once, unless the kernel is
busy freeing its memory)."""

DEFAULT_JOBS_MAX = 8
"""The default takes at most this many processes (``--jobs`` may ask for more): each holds
its own buffers and series (~30-35 MB on the 1 GB bench log), and reading more at once gains
little once memory bandwidth is shared out."""


def default_jobs() -> int:
    """One process per CPU this process may use, :data:`DEFAULT_JOBS_MAX` at most."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, DEFAULT_JOBS_MAX))


class Workers:
    """Where tasks run: this process alone (``jobs`` 1), a process pool of ``jobs`` workers
    (None: :func:`default_jobs`) started the first time there is work worth sharing, or the
    ``executor`` given (its ``jobs``: how many tasks it runs at once). A context manager: on
    leaving, a pool it started is shut down, its workers killed when leaving on an exception
    (Ctrl-C, SIGTERM) so that none outlives the command. ``lost``: the exceptions by which
    the ``executor`` says a worker died (Dask's ``KilledWorker``)."""

    def __init__(
        self,
        jobs: int | None = None,
        executor: Executor | None = None,
        lost: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.jobs = default_jobs() if jobs is None else max(1, jobs)
        self._lost = lost
        self._given = executor
        self._pool: Any = None  # a ProcessPoolExecutor, once started

    @property
    def lost(self) -> tuple[type[BaseException], ...]:
        """What a task raises when its worker died, not the task: it then runs again here.
        (``concurrent.futures.process`` is imported only when asked: it brings in
        ``multiprocessing``, start-up time for a run that starts no process.)"""
        from concurrent.futures.process import BrokenProcessPool

        return (BrokenProcessPool, *self._lost)

    @property
    def given(self) -> bool:
        """Whether the executor was given: the user asked for it (a cluster), so work goes to
        it whatever this machine's estimates say."""
        return self._given is not None

    def submit(self, work: Callable[..., _V], *args: Any) -> Future[_V]:
        """``work(*args)`` submitted to the executor; to a new pool when a worker of the
        current one died since (a broken pool takes no more tasks)."""
        from concurrent.futures.process import BrokenProcessPool

        try:
            return self._submitted(work, args)
        except BrokenProcessPool:
            self.close(abort=True)
            return self._submitted(work, args)

    def _submitted(self, work: Callable[..., _V], args: tuple[Any, ...]) -> Future[_V]:
        """``work(*args)`` submitted; a new pool's first task forks its workers, with every
        object of this process frozen out of the cyclic collector's reach meanwhile
        (``gc.freeze``). A forked worker shares this process' pages until it writes to them,
        and a collection writes to every object it walks: tens of MB of copied pages on the 1 GB
        TF2 log (``bench/README.md``). The workers
        keep them frozen; this process collects them again once they are forked."""
        starting = self._given is None and self._pool is None
        executor = self.executor()
        if not starting:
            return executor.submit(work, *args)
        gc.freeze()
        try:
            return executor.submit(work, *args)
        finally:
            gc.unfreeze()

    def executor(self) -> Executor:
        """The executor to submit to (a process pool is started on the first call)."""
        if self._given is not None:
            return self._given
        if self._pool is None:
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(
                self.jobs, mp_context=_context(), initializer=_worker_signals
            )
        return self._pool

    def __enter__(self) -> Workers:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close(abort=kind is not None)

    def close(self, *, abort: bool = False) -> None:
        """Shut a started pool down (``abort``: kill its workers, drop what is queued)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if not abort:
            pool.shutdown(wait=True)
            return
        processes = list((getattr(pool, "_processes", None) or {}).values())
        for process in processes:
            process.kill()  # no public way before Python 3.14's terminate_workers()
        # Not waiting for the pool's own thread: it may be stuck feeding tasks to the dead
        # workers' pipe (CPython issues 94777, 105829); the workers are reaped here instead.
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.join(ABORT_JOIN_SECONDS)


def _worker_signals() -> None:
    """A worker leaves signals to the command: Ctrl-C at a terminal reaches the whole process
    group, and the command kills its workers itself (:meth:`Workers.close`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _context() -> Any:
    """``fork`` while this process runs one thread (workers start in milliseconds with every
    module loaded); ``forkserver`` otherwise, as forking a process with threads can copy a
    lock another thread holds."""
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context()  # pragma: no cover - not on Linux


def read_files(
    files: Sequence[tuple[str, str]],
    window: StepWindow,
    progress: Progress,
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
    progress: Progress,
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
    """One task per file; a big file in byte ranges (:func:`plan_pieces`), when the C engine
    can read them. A range starting after the file's head assumes the plugins learnt there."""
    split = fastpath.available()
    share = sum(sizes) / jobs
    tasks = []
    for number, ((path, run), size) in enumerate(zip(files, sizes, strict=True)):
        boundaries: list[int] = []
        cut = split and size >= SPLIT_SIZE and not (REMOTE_WHOLE and is_url(path))
        if cut and plan_pieces(size, share, None) > 1:
            plugins, records, scanned = fastpath.scan_head(path, run, fastpath.HEAD_BYTES, storage)
            pieces = plan_pieces(size, share, estimated_seconds(size, records, scanned))
            if pieces > 1:
                boundaries = fastpath.split_offsets(path, size, pieces, storage)
        if not boundaries:
            tasks.append(_Task(number, path, run, storage=storage))
            continue
        for start, limit in zip([0, *boundaries], [*boundaries, -1], strict=True):
            assumed = (  # the head read above, unless the range starts inside it
                None
                if start == 0
                else plugins
                if start >= fastpath.HEAD_BYTES
                else fastpath.head_plugins(path, run, start, storage)
            )
            tasks.append(
                _Task(number, path, run, start, limit, True, assumed, storage)  # a range
            )
    return tasks


def _gather(
    workers: Workers,
    tasks: Sequence[_Task],
    files: Sequence[tuple[str, str]],
    window: StepWindow,
    progress: Progress,
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
            parts.append(_joined(results[at:end], boundaries, path, run, window, tasks[at].storage))
        else:
            parts.append(results[at])
        at = end
    return parts


def _run(task: _Task, window: StepWindow) -> fastpath.RangeResult | FilePart:
    """One task's result (in a worker, or here)."""
    if task.split:
        return reduce_range(
            task.path, task.run, window, task.start, task.limit, task.assumed, task.storage
        )
    return reduce_file(task.path, task.run, window, storage=task.storage)


_T = TypeVar("_T")
_V = TypeVar("_V")


def _result(
    future: Future[_V], again: Callable[[], _V], lost: tuple[type[BaseException], ...]
) -> _V:
    """The future's result; ``again()`` here when its worker died before giving one (killed
    by the kernel for memory, say): a process pool is then broken, and each task left runs
    here."""
    try:
        return future.result()
    except lost:
        return again()


def map_shared(
    work: Callable[[_T], _V],
    items: Sequence[_T],
    weights: Sequence[float],
    least: float,
    workers: Workers | None = None,
    done: Callable[[int], None] | None = None,
) -> list[_V]:
    """``work`` of every item, in order, on the ``workers``: as many of them as would each
    still get items weighing ``least`` or more (:func:`loads`); here when that is one.
    ``work`` must be picklable (a module-level function, or a ``partial`` of one); ``done``
    is called here with each item's position as it is done."""
    processes = min(1 if workers is None else workers.jobs, len(items))
    while processes >= 2 and min(loads(weights, processes)) < least:
        processes -= 1
    if workers is None or (processes < 2 and not (workers.given and items)):
        results = []
        for at, item in enumerate(items):
            results.append(work(item))
            if done is not None:
                done(at)
        return results
    from concurrent.futures import as_completed

    futures = {workers.submit(work, items[at]): at for at in longest_first(weights)}
    if done is not None:
        for future in as_completed(futures):
            done(futures[future])
    ordered = sorted(futures, key=futures.__getitem__)
    return [
        _result(future, partial(work, item), workers.lost)
        for future, item in zip(ordered, items, strict=True)
    ]


def longest_first(weights: Sequence[float]) -> list[int]:
    """The items' positions, the heaviest first (ties in item order)."""
    return sorted(range(len(weights)), key=lambda at: -weights[at])


def loads(weights: Sequence[float], processes: int) -> list[float]:
    """What each of ``processes`` equal processes would get, each taking the heaviest item
    left when it is free (as from a queue, the heaviest first), lightest first."""
    totals = [0.0] * processes
    for at in longest_first(weights):
        totals[totals.index(min(totals))] += weights[at]
    return sorted(totals)


def _joined(
    ranges: Sequence[fastpath.RangeResult],
    boundaries: Sequence[int],
    path: str,
    run: str,
    window: StepWindow,
    storage: StorageOptions = NO_OPTIONS,
) -> FilePart:
    """The ranges of one file joined, or the file read again when they cannot be exactly."""
    joined = fastpath.join_ranges(ranges, boundaries)
    if joined is None:
        return reduce_file(path, run, window, storage=storage)
    return file_part(joined, path, run)


def _task_bytes(task: _Task) -> int:
    end = task.limit if task.limit >= 0 else _size(task.path, task.storage)
    return max(0, end - task.start)


def _size(path: str, storage: StorageOptions = NO_OPTIONS) -> int:
    """File size in bytes, 0 when it cannot be read (the reader reports why)."""
    try:
        return file_size(path, storage)
    except OSError:
        return 0
