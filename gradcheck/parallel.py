"""Read a run's files on every core: big files split in two, files shared between processes.

Each file is a task (:func:`gradcheck.parts.reduce_file`); a file of at least
:data:`SPLIT_SIZE` bytes whose reading is estimated to take :data:`SPLIT_SECONDS` or more
(from the records in its first few MB) becomes two tasks, byte ranges that meet at a record
starting a new step (:func:`gradcheck.fastpath.split_offset`), joined back with
:func:`gradcheck.fastpath.merge_ranges` (or read again in one piece when they cannot be joined
exactly). On two processes (or with two tasks) this process reads about half the bytes and one
forked child the rest (:func:`in_two_processes`); with more, a process pool. Less than
:data:`POOL_MIN_BYTES` in all is read here alone: forking and sending back cost more than the
second core saves. :func:`map_two` shares other work out the same way (the verdicts of
several runs).
"""

from __future__ import annotations

import io
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn, Protocol, TypeVar

from gradcheck import fastpath
from gradcheck.parts import FilePart, file_part, reduce_file, reduce_range
from gradcheck.steps import StepWindow
from gradcheck.storage import file_size

if TYPE_CHECKING:  # imported where used: a run read by one or two processes needs none
    import multiprocessing.context
    from concurrent.futures import Executor, Future

SPLIT_SIZE = 64 << 20
"""Files at least this large may be read by two processes (byte ranges), when their reading
is also estimated long enough (:func:`worth_splitting`): below, the fork, the transfer and
the join cost about what the second core saves (measured 2026-11-30 in process, nearly idle:
tensor-40MB 0.089 s on one process against 0.099 s on two, tensor-160MB 0.333 against
0.257 s; break-even near 55 MB)."""
POOL_MIN_BYTES = 64 << 20
"""Less than this in all is read in this process alone (same measurements as
:data:`SPLIT_SIZE`: end to end, two processes were 0.89-0.91x of one on the 40 MB logs)."""


SECONDS_PER_BYTE = 1.1e-9
SECONDS_PER_RECORD = 8e-7
"""The C engine's reading time of a file, in one process: per byte and per record (measured
2026-11-30 in process: a 160 MB TF2 log of ~1,250 records a MB took 0.33 s, a 160 MB PyTorch
log of ~160 records a MB, 0.19 s)."""
SPLIT_SECONDS = 0.25
"""A big file is read by two processes when its estimated reading takes this long: below,
planning the split, forking and the child's slower start cost about what the second core
saves (from the command line, two processes were 0.85-0.93x of one on the 160 MB PyTorch
log, estimated 0.19 s, and 1.05-1.24x on the 160 MB TF2 log, estimated 0.33 s)."""


def worth_splitting(size: int, records: int, scanned: int) -> bool:
    """Whether a file of ``size`` bytes, with ``records`` records in its first ``scanned``
    bytes, reads long enough (:data:`SPLIT_SECONDS`) to be worth two processes."""
    if scanned <= 0:
        return True  # nothing to estimate from: the split path checks what it reads
    estimate = size * (SECONDS_PER_BYTE + SECONDS_PER_RECORD * records / scanned)
    return estimate >= SPLIT_SECONDS


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
    assumed: Mapping[str, str] | None = None  # a second range: plugins known before it


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
    tasks = _plan(files, sizes, jobs)
    if len(tasks) < 2:
        return [reduce_file(path, run, window, progress.reporter()) for path, run in files]
    if (len(tasks) == 2 or jobs == 2) and hasattr(os, "fork"):  # half here, half in a child
        return _assemble(_parent_and_child(tasks, window, progress), tasks, files, window)
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    try:
        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=_context()) as pool:
            return _gather(pool, tasks, files, window, progress)
    except (BrokenProcessPool, OSError):  # no worker could start, or one died: read here
        return [reduce_file(path, run, window, progress.reporter()) for path, run in files]


def _plan(files: Sequence[tuple[str, str]], sizes: Sequence[int], jobs: int) -> list[_Task]:
    """One task per file; two (byte ranges) for a big file, when the C engine can read them
    and there are fewer files than processes (else splitting only adds a join per file)."""
    split = len(files) < jobs and fastpath.available()
    tasks = []
    for number, ((path, run), size) in enumerate(zip(files, sizes, strict=True)):
        boundary = None
        if split and size >= SPLIT_SIZE:
            plugins, records, scanned = fastpath.scan_head(path, run, fastpath.HEAD_BYTES)
            if worth_splitting(size, records, scanned):
                boundary = fastpath.split_offset(path, size)
        if boundary is None:
            tasks.append(_Task(number, path, run))
        else:
            assumed = (  # the head read above, unless the boundary falls inside it
                plugins
                if boundary >= fastpath.HEAD_BYTES
                else fastpath.head_plugins(path, run, boundary)
            )
            tasks.append(_Task(number, path, run, 0, boundary, split=True))
            tasks.append(_Task(number, path, run, boundary, -1, split=True, assumed=assumed))
    return tasks


def _gather(
    pool: Executor,
    tasks: Sequence[_Task],
    files: Sequence[tuple[str, str]],
    window: StepWindow,
    progress: Progress,
) -> list[FilePart]:
    """Submit every task, then collect the parts in file order (ranges joined)."""
    futures = [pool.submit(_run, task, window) for task in tasks]
    for task, future in zip(tasks, futures, strict=True):
        future.add_done_callback(partial(_advance, progress, _task_bytes(task)))
    return _assemble(futures, tasks, files, window)


def _assemble(
    futures: Sequence[_Result],
    tasks: Sequence[_Task],
    files: Sequence[tuple[str, str]],
    window: StepWindow,
) -> list[FilePart]:
    """The parts in file order from the tasks' results (a split file's ranges joined)."""
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


def _run(task: _Task, window: StepWindow) -> fastpath.RangeResult | FilePart:
    """One task's result (in this process, the forked child or a pool worker)."""
    if task.split:
        return reduce_range(task.path, task.run, window, task.start, task.limit, task.assumed)
    return reduce_file(task.path, task.run, window)


class _Result(Protocol):
    """A task's outcome: its value, or the exception it raised (as ``Future.result``)."""

    def result(self) -> Any: ...


class _Outcome:
    """:class:`_Result` of a task run here or in the child (no ``concurrent.futures``):
    ``compute`` runs at once, its value or exception kept for :meth:`result`."""

    __slots__ = ("error", "value")

    def __init__(self, compute: Callable[[], object]) -> None:
        self.value: object = None
        self.error: Exception | None = None
        try:
            self.value = compute()
        except Exception as error:  # noqa: BLE001 - raised again by result()
            self.error = error

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


def _parent_and_child(
    tasks: Sequence[_Task], window: StepWindow, progress: Progress
) -> list[_Outcome]:
    """The reading tasks on two processes (see :func:`in_two_processes`), by their bytes."""
    return in_two_processes(
        partial(_run, window=window),
        tasks,
        [_task_bytes(task) for task in tasks],
        lambda task: progress.advance(_task_bytes(task)),
    )


_T = TypeVar("_T")
_V = TypeVar("_V")


def in_two_processes(
    work: Callable[[_T], object],
    items: Sequence[_T],
    weights: Sequence[float],
    done: Callable[[_T], None] | None = None,
) -> list[_Outcome]:
    """``work`` of every item on two processes: the items cut in two runs of about equal
    ``weights``, the later run in one forked child, the earlier here meanwhile; outcomes in
    item order (``done`` called as each is here). At least two items.

    No pool to start, the parent works too, and each result crosses once with its arrays out
    of band; the whole tree holds two processes' memory, not three (parent and two workers).
    A plain ``os.fork``: ``multiprocessing`` and ``concurrent.futures`` cost 18-25 ms to
    import and start, serial time before the work.

    The child writes each result, as soon as it has it, to a file in memory shared by both
    (:func:`_results_file`), and then where it ends down a pipe; this process maps the
    result from there, with no copy. A write to that file never waits for this process (busy
    with its own items), and a result the child finished early is taken at once: through a
    pipe alone, each 20 MB result of a 250 MB log took ~25 ms of waking both processes every
    64 KB and one more copy, all after the child's last task (the serial tail). An item whose
    result the child could not send (it died) is worked here; so is every item when there is
    no file for the results or no child can be forked.
    """
    cut = _balanced_cut(weights)
    try:
        results = _results_file()
    except OSError:  # no memory file and no temporary one: all here
        return _outcomes(work, items, done, len(items))
    with results:
        read_end, write_end = os.pipe()
        try:
            child = os.fork()
        except OSError:  # at the process limit, or out of memory: all here
            os.close(read_end)
            os.close(write_end)
            return _outcomes(work, items, done, len(items))
        if child == 0:
            _child(work, items[cut:], results, read_end, write_end)
        os.close(write_end)
        try:
            with open(read_end, "rb", buffering=0) as ends:
                return _outcomes(work, items, done, cut, _Mailbox(results, ends))
        except BaseException:  # Ctrl-C, or a bug: do not wait for the child's work
            os.kill(child, signal.SIGKILL)
            raise
        finally:
            os.waitpid(child, 0)


def map_two(
    work: Callable[[_T], _V],
    items: Sequence[_T],
    weights: Sequence[float],
    least: float,
    jobs: int | None,
) -> list[_V]:
    """``work`` of every item, in order: on two processes (:func:`in_two_processes`) when
    ``jobs`` (None: one per CPU) allows it, ``os.fork`` exists, and each of the two halves
    weighs at least ``least``; else here, one after the other."""
    jobs = default_jobs() if jobs is None else jobs
    if jobs >= 2 and len(items) >= 2 and hasattr(os, "fork"):
        cut = _balanced_cut(weights)
        if min(sum(weights[:cut]), sum(weights[cut:])) >= least:
            return [outcome.result() for outcome in in_two_processes(work, items, weights)]
    return [work(item) for item in items]


def _outcomes(
    work: Callable[[_T], object],
    items: Sequence[_T],
    done: Callable[[_T], None] | None,
    cut: int,
    box: _Mailbox | None = None,
) -> list[_Outcome]:
    """The outcome of every item, in order (``done`` called after each): worked here before
    ``cut``, taken from the child's ``box`` from there on."""
    outcomes = []
    for at, item in enumerate(items):
        if at < cut or box is None:
            outcomes.append(_Outcome(partial(work, item)))
        else:
            outcomes.append(_Outcome(partial(_received, box, work, item)))
        if done is not None:
            done(item)
    return outcomes


def _results_file() -> io.FileIO:
    """An anonymous file in memory for the forked child's results: a ``memfd`` (Linux), or
    an unlinked temporary file where there is none (or a sandbox refuses it)."""
    if hasattr(os, "memfd_create"):
        try:
            return open(os.memfd_create("gradcheck-results"), "w+b", buffering=0)
        except OSError:
            pass
    import tempfile

    return tempfile.TemporaryFile(buffering=0)


def _child(
    work: Callable[[_T], object],
    items: Sequence[_T],
    results: io.FileIO,
    read_end: int,
    write_end: int,
) -> NoReturn:
    """The forked child: ``work`` each item, append its result to ``results`` as soon as it
    has it (``(True, result)`` or ``(False, error)``, see :func:`_send`) and send where it
    ends down the pipe, then leave without the parent's clean-up (its buffered output, its
    exit handlers), whatever happens. A result is dropped once written: the child never
    holds more than one."""
    status = 1
    try:
        os.close(read_end)
        with (
            open(results.fileno(), "wb", closefd=False) as sender,
            open(write_end, "wb", buffering=0) as ends,
        ):
            for item in items:
                try:
                    message: tuple[bool, object] = (True, work(item))
                except BaseException as error:  # noqa: BLE001 - re-raised in the parent
                    message = (False, error)
                end = _send(sender, message)
                del message
                ends.write(end.to_bytes(8, "little"))
        status = 0
    finally:
        os._exit(status)


def _balanced_cut(sizes: Sequence[float]) -> int:
    """Where to cut the items in two runs (both non-empty) of the nearest total weight."""
    total, before = sum(sizes), 0.0
    best, best_gap = 1, None
    for cut in range(1, len(sizes)):
        before += sizes[cut - 1]
        gap = abs(total - 2 * before)
        if best_gap is None or gap < best_gap:
            best, best_gap = cut, gap
    return best


ALIGNMENT = 64
"""Each array's bytes start at a multiple of this offset in the results file (as numpy
allocates them), so that an array mapped from there is aligned."""


def _send(sender: BinaryIO, message: object) -> int:
    """Append ``message`` to ``sender``, a seekable file, with its numpy arrays' buffers out
    of band (pickle protocol 5); return the offset where it ends.

    The pickle holds only the small structure, after its length; each array's memory is then
    written as it stands (at an offset multiple of :data:`ALIGNMENT`), so neither process
    ever holds a pickled copy beside the arrays.
    """
    import pickle

    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    views = [buffer.raw() for buffer in buffers]
    header = pickle.dumps((head, [view.nbytes for view in views]), protocol=5)
    sender.write(len(header).to_bytes(8, "little"))
    sender.write(header)
    for view in views:
        sender.write(bytes(-sender.tell() % ALIGNMENT))
        sender.write(view)
    sender.flush()
    return sender.tell()


def _receive(memory: memoryview, start: int) -> tuple[tuple[bool, object], int]:
    """The message :func:`_send` wrote at ``start`` of ``memory``, and where it ends: each
    array uses its bytes in ``memory`` as its own (no copy; writable if ``memory`` is).
    EOFError when the message does not fit in ``memory``."""
    import pickle

    def span(begin: int, size: int) -> memoryview:
        if begin + size > len(memory):
            raise EOFError(f"a message ends past the {len(memory)} bytes written")
        return memory[begin : begin + size]

    size = int.from_bytes(span(start, 8), "little")
    head, sizes = pickle.loads(span(start + 8, size))
    at = start + 8 + size
    buffers = []
    for size in sizes:
        at += -at % ALIGNMENT
        buffers.append(span(at, size))
        at += size
    message: tuple[bool, object] = pickle.loads(head, buffers=buffers)
    return message, at


class _Mailbox:
    """The parent's side of the child's results: each message is mapped from the results
    file once the pipe says where it ends."""

    def __init__(self, results: io.FileIO, ends: io.RawIOBase) -> None:
        self._results = results
        self._ends = ends
        self._start = 0

    def next(self) -> tuple[bool, object]:
        """The next message; EOFError when the child ended before sending it."""
        import mmap

        end = int.from_bytes(_read_exactly(self._ends, 8), "little")
        offset = self._start - self._start % mmap.ALLOCATIONGRANULARITY
        written = os.fstat(self._results.fileno()).st_size
        if not self._start < end <= written:  # mapped past the end, a read would kill us
            raise EOFError(f"a message said to end at {end}: {self._start}-{written} written")
        # Private: the arrays are writable, and writes stay in this process. Unmapped when
        # the last array using it goes (closing it here would fail while arrays use it).
        mapped = mmap.mmap(
            self._results.fileno(), end - offset, access=mmap.ACCESS_COPY, offset=offset
        )
        message, at = _receive(memoryview(mapped), self._start - offset)
        if at != end - offset:
            raise EOFError(f"a message ends at {at + offset}, not at {end} as said")
        self._start = end
        return message


def _read_exactly(receiver: io.RawIOBase, size: int) -> bytearray:
    """``size`` bytes from the pipe (which gives them in pieces); EOFError when it ends."""
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        read = receiver.readinto(view[got:])
        if not read:
            raise EOFError(f"the pipe ended after {got} of {size} bytes")
        got += read
    return buffer


def _received(box: _Mailbox, work: Callable[[_T], object], item: _T) -> object:
    """The child's result (its error re-raised here); worked here if the child died."""
    try:
        ok, value = box.next()
    except (EOFError, OSError):
        return work(item)
    if not ok:
        raise value  # type: ignore[misc]
    return value


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
    import multiprocessing

    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()  # pragma: no cover - not on Linux
