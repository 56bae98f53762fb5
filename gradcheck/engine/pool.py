"""Where tasks run: :class:`Workers` (this process, a process pool, or an executor given) and
:func:`map_shared`, which shares items out on them only when each worker gets enough.

The tasks go to a :class:`concurrent.futures.Executor` held by :class:`Workers`: a
``ProcessPoolExecutor`` started on first use, or one given (a Dask client's executor). A task
that fails raises here as it would have raised here; a task whose worker died is run again
here. What the tasks are (files, byte ranges, whole runs) is ``engine.read``'s choice.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
from collections.abc import Callable, Sequence
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # at run time only with a pool: concurrent.futures brings logging
    from concurrent.futures import Executor, Future

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
    When the items are no more than the pool's workers, this process takes the lightest
    itself instead of waiting idle (:func:`takes_one_here`). ``work`` must be picklable (a
    module-level function, or a ``partial`` of one); ``done`` is called here with each item's
    position as it is done."""
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

    order = longest_first(weights)
    here = order.pop() if takes_one_here(workers, len(items)) else None
    futures = {workers.submit(work, items[at]): at for at in order}
    mine: dict[int, _V] = {}
    if here is not None:
        mine[here] = work(items[here])
        if done is not None:
            done(here)
    if done is not None:
        for future in as_completed(futures):
            done(futures[future])
    for future, at in futures.items():
        mine[at] = _result(future, partial(work, items[at]), workers.lost)
    return [mine[at] for at in range(len(items))]


def takes_one_here(workers: Workers, items: int) -> bool:
    """Whether this process works on one of ``items`` itself while its own pool's workers do
    the rest: when each gets one item at most (no process then has two items to share a core
    with), e.g. a big file's two byte ranges on two CPUs. It would otherwise wait idle for
    the results, and one result less crosses the pipe: a range of the 160 MB bench log is
    ~12 MB pickled, tens of ms of the command's time after the workers are done
    (``bench/README.md``). Never with an executor given: its user wants the work there."""
    return not workers.given and 2 <= items <= workers.jobs


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
