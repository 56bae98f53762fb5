"""Read a run's files on every core: big files cut in byte ranges, tasks shared by processes.

Each file is a task (:func:`gradcheck.engine.parts.reduce_file`); a file of at least
:data:`SPLIT_SIZE` bytes that holds more than a process's share of all the bytes becomes
several tasks, byte ranges of about that share (:func:`plan_pieces`, each estimated from the
records in the file's first few MB to read for :data:`PIECE_SECONDS` at least) that meet at
records starting a new step (:func:`gradcheck.engine.fastpath.split_offsets`), joined back with
:func:`gradcheck.engine.fastpath.join_ranges` (or read again in one piece when they cannot be joined
exactly). This process and forked children take the tasks from one queue, the longest first,
until none is left (:func:`in_processes`; a pool of started workers where there is no
``fork``). Less than :data:`POOL_MIN_BYTES` in all is read here alone: forking and sending
back cost more than the second core saves. :func:`map_shared` shares other work out the same
way (the verdicts of several runs).
"""

from __future__ import annotations

import io
import os
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn, Protocol, TypeVar

from gradcheck.engine import fastpath
from gradcheck.engine.parts import FilePart, file_part, reduce_file, reduce_range
from gradcheck.events.steps import StepWindow
from gradcheck.events.storage import NO_OPTIONS, StorageOptions, file_size

if TYPE_CHECKING:  # imported where used: a run read by one or two processes needs none
    import multiprocessing.context
    from concurrent.futures import Executor, Future

SPLIT_SIZE = 64 << 20
"""Files at least this large may be read in byte ranges by several processes, when their
reading is also estimated long enough (:func:`plan_pieces`): below, the fork, the transfer and
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
PIECE_SECONDS = 0.125
"""Each byte range of a file is estimated to take at least this long to read: a file is cut
in no more ranges than its estimate allows. Below, planning the cut, forking and the child's
slower start cost about what the second core saves (from the command line, a file in two
ranges read by two processes was 0.85-0.93x of one process on the 160 MB PyTorch log,
estimated 0.19 s in all, and 1.05-1.24x on the 160 MB TF2 log, estimated 0.33 s)."""


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


DEFAULT_JOBS_MAX = 8
"""The default takes at most this many processes (``--jobs`` may ask for more): each holds
its own buffers and series, ~30-35 MB (tensor-1GB, peak of the tree's summed Pss: 111 MB on
one process, 174 on two, 236 on four, 350 on eight), and reading more at once gains little
once memory bandwidth is shared out."""


def default_jobs() -> int:
    """One process per CPU this process may use, :data:`DEFAULT_JOBS_MAX` at most."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, DEFAULT_JOBS_MAX))


def read_files(
    files: Sequence[tuple[str, str]],
    window: StepWindow,
    progress: Progress,
    jobs: int | None,
    storage: StorageOptions = NO_OPTIONS,
) -> list[FilePart]:
    """The :class:`FilePart` of every ``(path, run)``, in order, on up to ``jobs`` processes
    (``storage``: the options for URLs, sent with each task)."""
    jobs = default_jobs() if jobs is None else jobs
    sizes = [_size(path, storage) for path, _ in files]
    if jobs <= 1 or sum(sizes) < POOL_MIN_BYTES:
        return _read_here(files, window, progress, storage)
    tasks = _plan(files, sizes, jobs, storage)
    if len(tasks) < 2:
        return _read_here(files, window, progress, storage)
    if _forks():  # this process and forked children
        return _assemble(_forked(tasks, window, progress, jobs), tasks, files, window)
    return _in_pool(files, tasks, window, progress, jobs)


def _read_here(
    files: Sequence[tuple[str, str]],
    window: StepWindow,
    progress: Progress,
    storage: StorageOptions = NO_OPTIONS,
) -> list[FilePart]:
    """Every file read in this process, one after the other."""
    return [reduce_file(path, run, window, progress.reporter(), storage) for path, run in files]


def _forks() -> bool:
    """Whether children can be forked (not on Windows)."""
    return hasattr(os, "fork")


def _in_pool(
    files: Sequence[tuple[str, str]],
    tasks: Sequence[_Task],
    window: StepWindow,
    progress: Progress,
    jobs: int,
) -> list[FilePart]:
    """The tasks in a pool of started worker processes, where none can be forked; read here
    when no worker can start, or one dies."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    try:
        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=_context()) as pool:
            return _gather(pool, tasks, files, window, progress)
    except (BrokenProcessPool, OSError):  # no worker could start, or one died: read here
        return _read_here(files, window, progress, tasks[0].storage)


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
        if split and size >= SPLIT_SIZE and plan_pieces(size, share, None) > 1:
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
    pool: Executor,
    tasks: Sequence[_Task],
    files: Sequence[tuple[str, str]],
    window: StepWindow,
    progress: Progress,
) -> list[FilePart]:
    """Submit every task, the longest first, then collect the parts in file order (ranges
    joined)."""
    futures: list[Any] = [None] * len(tasks)
    for at in longest_first([_task_bytes(task) for task in tasks]):
        futures[at] = pool.submit(_run, tasks[at], window)
        futures[at].add_done_callback(partial(_advance, progress, _task_bytes(tasks[at])))
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
        end = at + 1
        while end < len(tasks) and tasks[end].file == number:
            end += 1
        assert tasks[at].file == number
        if tasks[at].split:
            ranges = [future.result() for future in futures[at:end]]
            boundaries = [task.start for task in tasks[at + 1 : end]]
            parts.append(_joined(ranges, boundaries, path, run, window, tasks[at].storage))
        else:
            parts.append(futures[at].result())
        at = end
    return parts


def _run(task: _Task, window: StepWindow) -> fastpath.RangeResult | FilePart:
    """One task's result (in this process, the forked child or a pool worker)."""
    if task.split:
        return reduce_range(
            task.path, task.run, window, task.start, task.limit, task.assumed, task.storage
        )
    return reduce_file(task.path, task.run, window, storage=task.storage)


class _Result(Protocol):
    """A task's outcome: its value, or the exception it raised (as ``Future.result``)."""

    def result(self) -> Any: ...


class _Outcome:
    """:class:`_Result` of a task run here or in the child (no ``concurrent.futures``): its
    value, or the exception it raised, kept for :meth:`result`."""

    __slots__ = ("error", "value")

    def __init__(self, value: object = None, error: BaseException | None = None) -> None:
        self.value = value
        self.error = error

    @classmethod
    def of(cls, compute: Callable[[], object]) -> _Outcome:
        """Run ``compute`` now and keep what it gives."""
        try:
            return cls(compute())
        except Exception as error:  # noqa: BLE001 - raised again by result()
            return cls(error=error)

    @classmethod
    def sent(cls, ok: bool, value: object) -> _Outcome:
        """The outcome the child sent: its result, or the exception it raised."""
        return cls(value) if ok else cls(error=value)  # type: ignore[arg-type]  # an exception

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


def _forked(
    tasks: Sequence[_Task], window: StepWindow, progress: Progress, processes: int
) -> list[_Outcome]:
    """The reading tasks on ``processes`` processes (see :func:`in_processes`), by bytes."""
    return in_processes(
        partial(_run, window=window),
        tasks,
        [_task_bytes(task) for task in tasks],
        lambda task: progress.advance(_task_bytes(task)),
        processes,
    )


_T = TypeVar("_T")
_V = TypeVar("_V")


def in_processes(
    work: Callable[[_T], object],
    items: Sequence[_T],
    weights: Sequence[float],
    done: Callable[[_T], None] | None = None,
    processes: int = 2,
) -> list[_Outcome]:
    """``work`` of every item on ``processes`` processes, this one and forked children,
    which take the items from one queue, the heaviest by ``weights`` first, until none is
    left; outcomes in item order (``done`` called as each is here).

    A queue, not shares fixed in advance: the CPUs of a virtual machine may run at speeds
    1.4x apart from one moment to the next, and a faster process then takes more items.
    The queue is a pipe holding every item's number (:func:`_queue`), written before the
    forks: each process reads the next number from it, and a read of a few bytes from a
    pipe is atomic, so each item is taken once. Heaviest first, so that the last items
    taken, which decide who waits for whom at the end, are the lightest.

    No pool to start, this process works too, and each result crosses once with its arrays
    out of band; two processes hold two processes' memory, not three (a parent and two
    pool workers). A plain ``os.fork``: ``multiprocessing`` and ``concurrent.futures`` cost
    18-25 ms to import and start, serial time before the work, and a pool's workers send
    their results through pipes, pickled whole.

    Each child writes each result, as soon as it has it, to a file in memory of its own
    (:func:`_results_file`), and then its item's number and where it ends down a pipe; this
    process maps the result from there, with no copy, between its own items and at the end.
    A write to that file never waits for this process (busy with its own items): through a
    pipe alone, each 20 MB result of a 250 MB log took ~25 ms of waking both processes every
    64 KB and one more copy, all after the child's last task (the serial tail). An item whose
    result a child could not send (it died) is worked here; so is every item when there is
    no file for the results or no child can be forked.
    """
    if not items:
        return []
    batches = _batches(longest_first(weights))
    try:
        queue = _queue(len(batches))
    except OSError:  # out of file descriptors: all here
        return _outcomes_here(work, items, done)
    boxes: list[_Mailbox] = []  # one a child
    try:
        for _ in range(min(processes, len(items)) - 1):
            box = _fork_child(work, items, batches, queue)
            if box is None:  # no file for the results, at the process limit, out of memory
                break
            boxes.append(box)
        return _shared(work, items, done, batches, queue, boxes)
    except BaseException:  # Ctrl-C, or a bug: do not wait for the children's work
        for box in boxes:
            os.kill(box.child, signal.SIGKILL)
        raise
    finally:
        os.close(queue)
        for box in boxes:
            box.close()
            os.waitpid(box.child, 0)


def _fork_child(
    work: Callable[[_T], object],
    items: Sequence[_T],
    batches: Sequence[Sequence[int]],
    queue: int,
) -> _Mailbox | None:
    """A forked child working items from the ``queue`` (:func:`_child`), and the mailbox of
    its results; None when there is no file for them or no child can be forked."""
    try:
        results = _results_file()
    except OSError:
        return None
    try:
        read_end, write_end = os.pipe()
    except OSError:
        results.close()
        return None
    try:
        child = os.fork()
    except OSError:
        for fd in (read_end, write_end):
            os.close(fd)
        results.close()
        return None
    if child == 0:
        _child(work, items, batches, queue, results, read_end, write_end)
    os.close(write_end)  # before the next fork: the pipe ends when this child does
    return _Mailbox(results, open(read_end, "rb", buffering=0), len(items), child)


def _shared(
    work: Callable[[_T], object],
    items: Sequence[_T],
    done: Callable[[_T], None] | None,
    batches: Sequence[Sequence[int]],
    queue: int,
    boxes: Sequence[_Mailbox],
) -> list[_Outcome]:
    """This process's side of :func:`in_processes`: the items it takes from the ``queue``
    worked here, the children's outcomes taken from their ``boxes`` as they come, and at the
    end whatever a child took and could not send worked here."""
    outcomes: list[_Outcome | None] = [None] * len(items)

    def settle(at: int, outcome: _Outcome) -> None:
        outcomes[at] = outcome
        if done is not None:
            done(items[at])

    for batch in _taken(queue):
        for at in batches[batch]:
            settle(at, _Outcome.of(partial(work, items[at])))
            for box in boxes:
                for sent, outcome in box.ready():
                    settle(sent, outcome)
    for sent, outcome in _rest(boxes):
        settle(sent, outcome)
    for at, item in enumerate(items):
        if outcomes[at] is None:  # taken by a child, which died before sending it
            settle(at, _Outcome.of(partial(work, item)))
    return outcomes  # type: ignore[return-value]  # every one settled


def map_shared(
    work: Callable[[_T], _V],
    items: Sequence[_T],
    weights: Sequence[float],
    least: float,
    jobs: int | None,
) -> list[_V]:
    """``work`` of every item, in order, on several processes (:func:`in_processes`): as many
    as ``jobs`` allows (None: one per CPU) while each would still get items weighing
    ``least`` or more (:func:`loads`); here when that is one, or ``os.fork`` is missing."""
    processes = min(default_jobs() if jobs is None else jobs, len(items))
    while processes >= 2 and min(loads(weights, processes)) < least:
        processes -= 1
    if processes >= 2 and _forks():
        return [outcome.result() for outcome in in_processes(work, items, weights, None, processes)]
    return [work(item) for item in items]


def _outcomes_here(
    work: Callable[[_T], object], items: Sequence[_T], done: Callable[[_T], None] | None
) -> list[_Outcome]:
    """The outcome of every item, worked here in order (``done`` called after each)."""
    outcomes = []
    for item in items:
        outcomes.append(_Outcome.of(partial(work, item)))
        if done is not None:
            done(item)
    return outcomes


def longest_first(weights: Sequence[float]) -> list[int]:
    """The items' positions, the heaviest first (ties in item order)."""
    return sorted(range(len(weights)), key=lambda at: -weights[at])


def loads(weights: Sequence[float], processes: int) -> list[float]:
    """What each of ``processes`` equal processes would get, each taking the heaviest item
    left when it is free (as from :func:`in_processes`' queue), lightest first."""
    totals = [0.0] * processes
    for at in longest_first(weights):
        totals[totals.index(min(totals))] += weights[at]
    return sorted(totals)


QUEUE_ENTRIES = 1024
"""The queue holds at most this many entries (4 bytes each: one write of at most
``PIPE_BUF``, which fits in any pipe); more items are taken in batches of neighbours."""


def _batches(order: Sequence[int]) -> list[list[int]]:
    """``order`` in at most :data:`QUEUE_ENTRIES` runs of neighbours (one item each when it
    fits), in order."""
    count = min(len(order), QUEUE_ENTRIES)
    bounds = [len(order) * number // count for number in range(count + 1)]
    return [list(order[begin:end]) for begin, end in zip(bounds, bounds[1:], strict=False)]


def _queue(count: int) -> int:
    """The read end of a pipe holding the numbers ``0 .. count - 1`` (4 bytes each) and
    closed for writing: each read of 4 bytes takes the next, until the pipe is empty."""
    read_end, write_end = os.pipe()
    try:
        data = memoryview(b"".join(number.to_bytes(4, "little") for number in range(count)))
        while data:
            data = data[os.write(write_end, data) :]
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return read_end


def _taken(queue: int) -> Iterator[int]:
    """The numbers this process takes from the ``queue`` (:func:`_queue`), until it is empty."""
    while entry := os.read(queue, 4):
        if len(entry) != 4:  # never: reads of the pipe's 4-byte entries are whole
            raise RuntimeError(f"the work queue gave {len(entry)} bytes of an entry")
        yield int.from_bytes(entry, "little")


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
    batches: Sequence[Sequence[int]],
    queue: int,
    results: io.FileIO,
    read_end: int,
    write_end: int,
) -> NoReturn:
    """The forked child: ``work`` each item it takes from the ``queue``, append its result to
    ``results`` as soon as it has it (``(True, result)`` or ``(False, error)``, see
    :func:`_send`) and send the item's number and where the result ends down the pipe, then
    leave without the parent's clean-up (its buffered output, its exit handlers), whatever
    happens. A result is dropped once written: the child never holds more than one."""
    status = 1
    try:
        os.close(read_end)
        with (
            open(results.fileno(), "wb", closefd=False) as sender,
            open(write_end, "wb", buffering=0) as ends,
        ):
            for batch in _taken(queue):
                for at in batches[batch]:
                    try:
                        message: tuple[bool, object] = (True, work(items[at]))
                    except BaseException as error:  # noqa: BLE001 - re-raised in the parent
                        message = (False, error)
                    end = _send(sender, message)
                    del message
                    ends.write(at.to_bytes(8, "little") + end.to_bytes(8, "little"))
        status = 0
    finally:
        os._exit(status)


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
    """This process's side of a child's results: each message is mapped from the results
    file once the pipe says which item it is for and where it ends. Closed when the child
    ends, or sends something damaged: what it did not send is then worked here."""

    def __init__(self, results: io.FileIO, ends: io.RawIOBase, count: int, child: int) -> None:
        self._results = results
        self._ends = ends
        self._count = count  # items: a message is for one of them
        self._start = 0
        self.child = child  # its process id
        self.closed = False

    def fileno(self) -> int:
        """The pipe's (for ``select``)."""
        return self._ends.fileno()

    def close(self) -> None:
        """Close the pipe and the results file (the results mapped stay readable)."""
        self.closed = True
        self._ends.close()
        self._results.close()

    def next(self) -> tuple[int, tuple[bool, object]]:
        """The next message and its item; EOFError when the child ended before sending it."""
        import mmap

        head = _read_exactly(self._ends, 16)
        at, end = int.from_bytes(head[:8], "little"), int.from_bytes(head[8:], "little")
        offset = self._start - self._start % mmap.ALLOCATIONGRANULARITY
        written = os.fstat(self._results.fileno()).st_size
        if not self._start < end <= written:  # mapped past the end, a read would kill us
            raise EOFError(f"a message said to end at {end}: {self._start}-{written} written")
        if at >= self._count:
            raise EOFError(f"a message for item {at} of {self._count}")
        # Private: the arrays are writable, and writes stay in this process. Unmapped when
        # the last array using it goes (closing it here would fail while arrays use it).
        mapped = mmap.mmap(
            self._results.fileno(), end - offset, access=mmap.ACCESS_COPY, offset=offset
        )
        message, stop = _receive(memoryview(mapped), self._start - offset)
        if stop != end - offset:
            raise EOFError(f"a message ends at {stop + offset}, not at {end} as said")
        self._start = end
        return at, message

    def ready(self) -> Iterator[tuple[int, _Outcome]]:
        """The outcomes sent so far and not yet taken, without waiting for more."""
        import select

        while not self.closed and select.select([self._ends], [], [], 0)[0]:
            yield from self.take()

    def take(self) -> Iterator[tuple[int, _Outcome]]:
        """The next outcome (waiting for it), or none when the child has ended."""
        try:
            at, (ok, value) = self.next()
        except (EOFError, OSError):
            self.closed = True
            return
        yield at, _Outcome.sent(ok, value)


def _rest(boxes: Sequence[_Mailbox]) -> Iterator[tuple[int, _Outcome]]:
    """Every outcome still to come in ``boxes``, as each comes, until every child ends."""
    import select

    waiting = [box for box in boxes if not box.closed]
    while waiting:
        for box in select.select(waiting, [], [])[0]:
            yield from box.take()
        waiting = [box for box in waiting if not box.closed]


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


def _advance(progress: Progress, size: int, _: Future) -> None:  # type: ignore[type-arg]
    """Progress per finished part (a pool worker does not report offsets)."""
    progress.advance(size)


def _task_bytes(task: _Task) -> int:
    end = task.limit if task.limit >= 0 else _size(task.path, task.storage)
    return max(0, end - task.start)


def _size(path: str, storage: StorageOptions = NO_OPTIONS) -> int:
    """File size in bytes, 0 when it cannot be read (the reader reports why)."""
    try:
        return file_size(path, storage)
    except OSError:
        return 0


def _context() -> multiprocessing.context.BaseContext:
    """``fork`` where there is one: workers start in milliseconds with every module loaded."""
    import multiprocessing

    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()  # pragma: no cover - not on Linux
