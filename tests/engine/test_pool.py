"""The worker processes (``gradcheck.engine.pool``): files and byte ranges read on a
``concurrent.futures`` executor give what one process gives; a failing task raises here; a
worker that dies costs only a second reading of its tasks here; leaving on an exception
leaves no worker behind."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest

from gradcheck.engine import pool, ranges, read
from gradcheck.engine.parts import reduce_file, reduce_file_reference
from gradcheck.events.steps import StepWindow
from tests.support import eventfiles as ef
from tests.support.twins import assert_same, tf2_steps

PARENT = os.getpid()


class _CountingProgress:
    """A progress tracker that only adds up the bytes it is told of."""

    def __init__(self) -> None:
        self.done = 0

    def reporter(self) -> None:
        return None

    def advance(self, size: int) -> None:
        self.done += size


def _files(tmp_path: Path, count: int, steps: int = 12) -> list[tuple[str, str]]:
    files = []
    for number in range(count):
        path = tmp_path / f"events.out.tfevents.{number}.v2"
        first = number * 10
        ef.write_events(path, tf2_steps(range(first, first + steps), first_plugin_step=first))
        files.append((str(path), str(tmp_path)))
    return files


@pytest.fixture
def split_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small files shared out and cut in ranges, as big ones are."""
    monkeypatch.setattr(ranges, "SPLIT_SIZE", 1)
    monkeypatch.setattr(ranges, "PIECE_SECONDS", 1e-12)  # any estimate long enough
    monkeypatch.setattr(read, "POOL_MIN_BYTES", 1)


@pytest.mark.usefixtures("split_everything")
@pytest.mark.parametrize(
    ("file_count", "jobs"),
    [
        (1, 2),  # one file in two ranges
        (2, 2),  # two whole files
        (3, 2),  # whole files (as many files as workers or more: no split)
        (3, 8),  # files split in ranges over more workers than files
        (1, 5),  # one file in five ranges
    ],
)
@pytest.mark.parametrize("start", ["fork", "forkserver"])
def test_workers_over_files_and_ranges_match_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, file_count: int, jobs: int, start: str
) -> None:
    """Workers forked (this process runs one thread), or started by a fork server (it runs
    several): the same series as the reference reader, every byte counted once."""
    import multiprocessing

    monkeypatch.setattr(pool, "_context", lambda: multiprocessing.get_context(start))
    files = _files(tmp_path, file_count)
    progress = _CountingProgress()
    with pool.Workers(jobs) as workers:
        parts = read.read_files(files, StepWindow(), progress, workers)
        assert workers._pool is not None  # the work did go to processes
    assert progress.done == sum(Path(path).stat().st_size for path, _ in files)
    for (path, run), part in zip(files, parts, strict=True):
        reference = reduce_file_reference(path, run, StepWindow())
        assert_same(reference.data, part.data)
        assert part.values_read == reference.values_read
        assert part.values_kept == reference.values_kept


def test_the_start_method_is_fork_unless_a_thread_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted, not started here: other tests leave threads behind (a Dask client's loop)."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert pool._context().get_start_method() == "fork"
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert pool._context().get_start_method() == "forkserver"


def test_little_to_read_or_one_job_starts_no_worker(tmp_path: Path) -> None:
    files = _files(tmp_path, 3)
    for workers in (pool.Workers(1), pool.Workers(2)):  # one job; under POOL_MIN_BYTES
        with workers:
            parts = read.read_files(files, StepWindow(), _CountingProgress(), workers)
            assert workers._pool is None
        assert [p.values_read for p in parts] == [
            reduce_file(path, run, StepWindow()).values_read for path, run in files
        ]


def _dying_run(task: read._Task, window: StepWindow) -> object:
    """``read._run``, but a worker given the second file dies (killed for memory, say)."""
    if os.getpid() != PARENT and task.file == 1:
        os._exit(9)
    return _RUN(task, window)


_RUN = read._run


@pytest.mark.usefixtures("split_everything")
def test_a_worker_that_dies_leaves_its_tasks_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read, "_run", _dying_run)  # forked workers have it too
    files = _files(tmp_path, 4)
    with pool.Workers(2) as workers:
        parts = read.read_files(files, StepWindow(), _CountingProgress(), workers)
    for (path, run), part in zip(files, parts, strict=True):
        assert_same(reduce_file(path, run, StepWindow()).data, part.data)


def _failing(item: int) -> int:
    if item == 3:
        raise ArithmeticError("bad run")
    return item * 2


def _pid(_: object) -> int:
    time.sleep(0.05)  # both workers take some items
    return os.getpid()


def test_an_error_in_a_worker_is_raised_here() -> None:
    with pool.Workers(2) as workers, pytest.raises(ArithmeticError, match="bad run"):
        pool.map_shared(_failing, [0, 1, 2, 3], [1.0] * 4, 0.0, workers)


def _pid_met(meeting: Path, _: object) -> int:
    """This process' id, once two processes have each taken an item: a worker that starts
    late on a loaded machine still gets its share (the other waits for it, at most 60 s)."""
    (meeting / str(os.getpid())).touch()
    deadline = time.monotonic() + 60.0
    while len(list(meeting.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    return os.getpid()


def test_work_is_shared_only_while_each_worker_gets_enough(tmp_path: Path) -> None:
    items, here = list(range(4)), [os.getpid()] * 4
    with pool.Workers(2) as workers:
        assert pool.map_shared(_pid, items, [1.0] * 4, 2.5, workers) == here  # 2 each < 2.5
        pids = pool.map_shared(partial(_pid_met, tmp_path), items, [1.0] * 4, 2.0, workers)
    assert os.getpid() not in pids and len(set(pids)) == 2
    with pool.Workers(1) as workers:
        assert pool.map_shared(_pid, items, [1.0] * 4, 0.0, workers) == here
    assert pool.map_shared(_pid, items, [1.0] * 4, 0.0, None) == here


def test_an_executor_given_is_used_and_left_open(tmp_path: Path) -> None:
    """An executor from elsewhere (a Dask client's): the tasks go to it, and it is not shut
    down with the command's workers."""
    submitted: list[object] = []

    class Noting(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def, override]
            submitted.append(fn)
            return super().submit(fn, *args, **kwargs)

    executor: Executor = Noting(2)
    with pool.Workers(2, executor=executor) as workers:
        assert pool.map_shared(abs, [-1, -2, 3], [1.0] * 3, 0.0, workers) == [1, 2, 3]
    assert submitted == [abs, abs, abs]
    assert executor.submit(abs, -4).result() == 4  # still open
    executor.shutdown()


def _sleep(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def test_leaving_on_an_exception_kills_the_workers_at_once() -> None:
    """Ctrl-C (or SIGTERM, raised as an exception) while workers are busy: none is waited
    for, and none outlives the block."""
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), pool.Workers(2) as workers:
        futures = [workers.executor().submit(_sleep, 30) for _ in range(4)]
        pids = set()
        while len(pids) < 2:  # both workers alive and busy
            pids = {p.pid for p in workers._pool._processes.values()}
            time.sleep(0.01)
        raise KeyboardInterrupt
    assert time.monotonic() - started < 20
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    assert all(future.done() for future in futures)


def test_a_worker_ignores_ctrl_c_left_to_the_command() -> None:
    """A terminal sends Ctrl-C to the whole process group: workers leave it to the command,
    which kills them, instead of printing tracebacks of their own."""
    import signal

    with pool.Workers(2) as workers:
        handlers = workers.executor().submit(_handlers).result()
    assert handlers == (signal.SIG_IGN, signal.SIG_DFL)


def _handlers() -> tuple[object, object]:
    import signal

    return signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)


def _dying(item: int) -> int:
    """``item``, but the worker given 1 dies (killed for memory, say)."""
    if os.getpid() != PARENT and item == 1:
        os._exit(9)
    return item


def test_after_a_worker_died_the_next_work_gets_a_new_pool() -> None:
    """The reading's pool lost a worker (its tasks ran here); the verdicts' tasks then go to
    a fresh pool, not to the broken one (which takes no more tasks)."""
    with pool.Workers(2) as workers:
        assert pool.map_shared(_dying, [0, 1, 2, 3], [1.0] * 4, 0.0, workers) == [0, 1, 2, 3]
        broken = workers._pool
        pids = pool.map_shared(_pid, [0, 1, 2, 3], [1.0] * 4, 0.0, workers)
        assert workers._pool is not broken
    assert os.getpid() not in pids  # the workers of the new pool did the work


def test_forked_workers_leave_what_they_share_with_this_process_to_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The objects of this process at the fork are frozen in its workers (their collections
    never write to the pages they share with it: copy-on-write), not here once they forked."""
    import gc
    import multiprocessing

    monkeypatch.setattr(pool, "_context", lambda: multiprocessing.get_context("fork"))
    assert gc.get_freeze_count() == 0
    with pool.Workers(2) as workers:
        frozen_there = workers.submit(gc.get_freeze_count).result()
        assert gc.get_freeze_count() == 0
        later = workers.submit(gc.get_freeze_count).result()  # no second fork, no freeze
    assert frozen_there > 1000 and later == frozen_there


def test_this_process_takes_one_item_when_each_process_gets_one_at_most() -> None:
    """Two byte ranges on two workers: one is read here (its result need not cross the pipe)
    while a worker reads the other; with more items than workers, every one goes to them."""
    with pool.Workers(2) as workers:
        pids = pool.map_shared(_pid, [0, 1], [2.0, 1.0], 0.0, workers)
        assert pids[1] == os.getpid() and pids[0] != os.getpid()  # the lightest here
        assert os.getpid() not in pool.map_shared(_pid, [0, 1, 2], [1.0] * 3, 0.0, workers)
    assert pool.takes_one_here(pool.Workers(2), 2) and not pool.takes_one_here(pool.Workers(2), 3)
    with ThreadPoolExecutor(2) as executor:  # a cluster given: its user wants the work there
        assert not pool.takes_one_here(pool.Workers(2, executor=executor), 2)
