"""Read event files into one stream of typed records: the reader stage of the pipeline.

``read_run`` yields, for each file of a run in name order: its ``HistogramRecord``s and
``ScalarRecord``s in file order, a ``Damage`` for every stretch that could not be read (with
file and byte offset), ``Notice``s, then one ``FileInfo``. Every record is read (no sampling)
and nothing is kept but small per-tag state, so memory does not grow with file size.

Contract with the stages downstream (``gradcheck/series/reduce.py`` reduces this stream):

- **Collisions.** ``HistogramRecord.index`` is the k-th value with the same tag at the same step
  (0 normally). Keras 3.0-3.13 write every layer's kernel under one tag (``kernel/histogram``)
  at the same step, giving indexes 0, 1, 2...; ``(tag, index)`` identifies a series and
  :func:`series_name` names it. One ``Notice(kind="tag_collision")`` per colliding tag names
  the element counts seen, which tell the layers apart; it follows the records of the file
  where the collision first shows, just before that file's ``FileInfo``.
- **Restarts.** When a tag's step goes back (a resumed training), the record is yielded as is,
  its index restarts at 0, and one ``Notice(kind="restart")`` is emitted per restart point of
  the run (not once per tag). The reader does not purge, as it streams: a reducer must, for
  each series whose step goes back to ``s``, drop what it kept at steps ``>= s`` and keep the
  newer data, as TensorBoard purges orphaned steps.
- State (plugin names, steps, indexes, restarts) carries across the files of a run in
  ``read_run``; ``read_file`` starts afresh, so a restart across two files is only seen there.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from gradcheck import sources
from gradcheck.events.decode import Decoded, EventDecoder, UndecodableEvent
from gradcheck.events.framing import Frame, FrameDamage, iter_frames
from gradcheck.events.storage import NO_OPTIONS, StorageOptions, file_size, open_binary
from gradcheck.model import (
    TENSORBOARD,
    Damage,
    FileInfo,
    HistogramRecord,
    Notice,
    Record,
    Run,
    ScalarRecord,
)

MAX_COUNTS_KEPT = 64  # element counts remembered per tag and step, for collision notices
# PyTorch and recent tensorboardX end file names in ``.<pid>.<sequence>``.
_PID_SEQUENCE_SUFFIX = re.compile(r"\.\d+\.\d+$")


def read_run(run: Run, storage: StorageOptions = NO_OPTIONS) -> Iterator[Record]:
    """Every record of ``run``'s files, in file-name order, with state carried across files
    (``storage``: the options for URLs). A run of another log format yields its format's
    records (``gradcheck.sources``)."""
    if run.format != TENSORBOARD:
        yield from sources.records(run)
        return
    state = _RunState(run.path)
    for path in run.files:
        yield from _read_file(path, state, storage)


def read_file(path: str, run: str, storage: StorageOptions = NO_OPTIONS) -> Iterator[Record]:
    """Every record of one event file, read on its own (``run`` names its run)."""
    yield from _read_file(path, _RunState(run), storage)


def series_name(tag: str, index: int) -> str:
    """A distinct display name for series ``index`` of ``tag`` (``tag`` itself for index 0)."""
    return tag if index == 0 else f"{tag}#{index}"


def element_count(record: HistogramRecord) -> int | None:
    """How many values a histogram summarises (``num``, else the bucket total); None if unknown."""
    total = record.num if record.num is not None else float(record.counts.sum())
    return int(total) if total == total and abs(total) != float("inf") else None


@dataclass(eq=False, slots=True)
class _TagSteps:
    """Step bookkeeping for one tag: last step, values at it, and restarts seen.

    ``first_at_step`` is the tag's index-0 histogram at the current step: its element count is
    only computed when a collision shows up (``counts_at_step``), off the hot path.
    """

    last_step: int
    values_at_step: int = 1
    first_at_step: HistogramRecord | None = None
    counts_at_step: list[int | None] | None = None
    restarts: int = 0


@dataclass(eq=False, slots=True)
class FileTally:
    """What one file held, for its ``FileInfo``."""

    records: int = 0
    events: int = 0
    file_version: str | None = None
    writer: str | None = None
    whats: set[str] = field(default_factory=set)
    encodings: set[str] = field(default_factory=set)


class _RunState:
    """Per-run state: the decoder's plugin memory, per-tag steps, reported collisions."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.decoder = EventDecoder(run)
        self.histogram_steps: dict[str, _TagSteps] = {}
        self.scalar_steps: dict[str, _TagSteps] = {}
        self.restarts = 0
        self.collisions: dict[str, tuple[str, int, list[int | None]]] = {}
        self.reported_collisions: set[str] = set()

    def place(self, record: HistogramRecord | ScalarRecord) -> tuple[int, Notice | None]:
        """The record's index among values at its step, and a restart notice if it is one."""
        is_histogram = isinstance(record, HistogramRecord)
        steps = self.histogram_steps if is_histogram else self.scalar_steps
        tag, step = record.tag, record.step
        state = steps.get(tag)
        if state is None:
            state = steps[tag] = _TagSteps(step)
            index, notice = 0, None
        elif step == state.last_step:
            index, notice = state.values_at_step, None
            state.values_at_step += 1
        else:
            notice = self._restart(record, state) if step < state.last_step else None
            state.last_step, state.values_at_step, state.counts_at_step = step, 1, None
            index = 0
        if isinstance(record, HistogramRecord):
            self._remember_count(record, state, index)
        return index, notice

    def _remember_count(self, record: HistogramRecord, state: _TagSteps, index: int) -> None:
        """Keep the step's first histogram; on a collision, the element counts at the step."""
        if index == 0:
            state.first_at_step = record
            return
        if state.counts_at_step is None:
            first = state.first_at_step
            state.counts_at_step = [element_count(first) if first is not None else None]
            if record.tag not in self.reported_collisions:
                self.collisions.setdefault(
                    record.tag, (record.file, record.step, state.counts_at_step)
                )
        if index < MAX_COUNTS_KEPT:
            state.counts_at_step.append(element_count(record))

    def _restart(self, record: HistogramRecord | ScalarRecord, state: _TagSteps) -> Notice | None:
        """Count a step going back; a notice only for the first tag to reveal a restart."""
        state.restarts += 1
        if state.restarts <= self.restarts:
            return None
        self.restarts = state.restarts
        return restart_notice(self.run, record.file, record.tag, state.last_step, record.step)

    def collision_notices(self) -> Iterator[Notice]:
        """One notice per tag newly found to hold several series per step."""
        for tag, (file, step, counts) in self.collisions.items():
            self.reported_collisions.add(tag)
            yield collision_notice(self.run, file, tag, step, counts)
        self.collisions.clear()


def restart_notice(run: str, file: str, tag: str, last_step: int, step: int) -> Notice:
    """The notice that steps went back (a resumed training), first seen on ``tag``."""
    return Notice(
        run=run,
        file=file,
        kind="restart",
        tag=tag,
        step=step,
        message=(
            f"steps go back from {last_step} to {step} (first seen on tag {tag!r}): training "
            f"was restarted; data at steps >= {step} from before the restart is superseded "
            "by the newer data, as TensorBoard does"
        ),
    )


def collision_notice(
    run: str, file: str, tag: str, step: int, counts: Sequence[int | None]
) -> Notice:
    """The notice that ``tag`` holds several series per step (element ``counts`` at ``step``)."""
    shown = ", ".join("?" if count is None else str(count) for count in counts)
    names = [series_name(tag, index) for index in range(min(len(counts), 4))]
    more = ", ..." if len(counts) > 4 else ""
    return Notice(
        run=run,
        file=file,
        kind="tag_collision",
        tag=tag,
        step=step,
        message=(
            f"tag {tag!r} is written {len(counts)} times at step {step} (element "
            f"counts {shown}): kept as {len(counts)} series ({', '.join(names)}{more}); "
            "Keras 3.0-3.13 write all layers' kernels (biases, ...) under one tag like this"
        ),
    )


def _read_file(path: str, state: _RunState, storage: StorageOptions) -> Iterator[Record]:
    """The records of one file, then its collision notices and ``FileInfo``."""
    tally = FileTally()
    try:
        size = file_size(path, storage)
        stream = open_binary(path, storage)
    except OSError as error:
        yield unreadable(state.run, path, 0, error)
        yield FileInfo(state.run, path, 0, 0, 0, None)
        return
    with stream:
        offset = 0
        try:
            for item in iter_frames(stream):
                offset = item.offset
                if isinstance(item, Frame):
                    yield from records_of_frame(item, path, state, tally)
                else:
                    yield frame_damage(state.run, path, item)
        except OSError as error:
            yield unreadable(state.run, path, offset, error)
    yield from state.collision_notices()
    yield FileInfo(state.run, path, size, tally.records, tally.events, guess_writer(path, tally))


def records_of_frame(
    frame: Frame, path: str, state: _RunState, tally: FileTally
) -> Iterator[Record]:
    tally.records += 1
    try:
        decoded = state.decoder.decode(frame.payload, path, frame.offset)
    except UndecodableEvent as error:
        yield Damage(
            run=state.run,
            file=path,
            offset=frame.offset,
            kind="undecodable",
            lost_bytes=len(frame.payload) + 16,
            message=(
                f"record at byte {frame.offset} has valid CRCs but is not an Event ({error}): "
                "that one record lost"
            ),
        )
        return
    tally.events += 1
    _tally_event(decoded, tally)
    yield from decoded.hparams
    for record in decoded.records:
        if isinstance(record, Damage):
            yield record
            continue
        tally.encodings.add(record.encoding)
        index, notice = state.place(record)
        if notice is not None:
            yield notice
        if index and isinstance(record, HistogramRecord):
            record = dataclasses.replace(record, index=index)
        yield record


def _tally_event(decoded: Decoded, tally: FileTally) -> None:
    tally.whats.add(decoded.what)
    if decoded.file_version is not None and tally.file_version is None:
        tally.file_version = decoded.file_version
    if decoded.writer is not None and tally.writer is None:
        tally.writer = decoded.writer


def frame_damage(run: str, path: str, damage: FrameDamage) -> Damage:
    names = {
        "incomplete_tail": "incomplete final record",
        "bad_length_crc": "bad length CRC",
        "bad_payload_crc": "bad payload CRC",
        "bad_length": "bad record length",
        "changed_while_read": "file changed while read",
    }
    what = names.get(damage.kind, damage.kind)
    return Damage(
        run=run,
        file=path,
        offset=damage.offset,
        kind=damage.kind,
        lost_bytes=damage.lost_bytes,
        message=f"{what}, at byte {damage.offset}: {damage.detail} ({damage.lost_bytes} bytes)",
    )


def unreadable(run: str, path: str, offset: int, error: OSError) -> Damage:
    return Damage(
        run=run,
        file=path,
        offset=offset,
        kind="unreadable",
        lost_bytes=0,
        message=f"cannot read {path!r} at byte {offset}: {error.strerror or error}",
    )


def guess_writer(path: str, tally: FileTally) -> str | None:
    """Best guess of what wrote a file: a hint for humans, not a fact.

    ``source_metadata.writer`` when present; else inferred from the encodings seen, the file
    name (TF2 writers end it in ``.v2``) and the event kinds (graph events come from TF).
    """
    if tally.writer:
        return tally.writer
    name = os.path.basename(path)
    if "tensor" in tally.encodings:
        return "tensorflow (TF2 summary ops)"
    if "histo" in tally.encodings:
        if name.endswith(".v2"):
            return "tensorflow 2.0-2.1 Keras callback (HistogramProto)"
        if tally.whats & {"graph_def", "meta_graph_def"}:
            return "TF1 (HistogramProto)"
        return "pytorch/tensorboardX (HistogramProto)"
    if tally.whats & {"meta_graph_def", "session_log"}:
        return "TF1"
    if name.endswith(".v2"):
        return "tensorflow 2"
    if _PID_SEQUENCE_SUFFIX.search(name):
        return "pytorch/tensorboardX"
    if tally.events and tally.file_version is None:
        return "old tensorboardX (no file_version)"
    if tally.file_version:
        return f"unknown ({tally.file_version})"
    return None
