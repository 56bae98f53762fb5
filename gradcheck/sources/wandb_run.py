"""W&B run files: ``wandb/run-*/run-*.wandb`` and ``wandb/offline-run-*/run-*.wandb``.

Read from the file format itself (the W&B SDK is not needed): the framing in
``wandb_framing``, each record a protobuf ``wandb_internal.Record`` (W&B's public
``wandb/proto/wandb_internal.proto``) walked with ``events.wire.message_fields``. Only its
``history`` (field 2, a ``HistoryRecord``) is read: one row of ``wandb.log`` per step, its
``item``s (field 1) each a ``HistoryItem``: ``key`` (1) or ``nested_key`` (2, the path of a
nested value), and ``value_json`` (16), the value as JSON. ``_step`` is the row's step and
``_timestamp`` its wall time; other keys starting with ``_`` are W&B's own. A run a trainer
logs through W&B holds the trainer's step in every row it logs (``train/global_step``: the HF
Trainer's ``WandbCallback``; ``trainer/global_step``: Lightning's ``WandbLogger``), which W&B
plots against (``define_metric(step_metric=...)``), while ``_step`` counts ``wandb.log``
calls: from the first row holding one, that trainer step is the step, and a row without one is
at the last trainer step seen (W&B's ``step_sync``).

- A numeric value is a scalar of its key (a nested one: its path joined with ``/``).
- A value of ``_type`` ``histogram`` (``wandb.Histogram``: ``values`` are the counts, ``bins``
  the ``len(values) + 1`` edges, or ``packedBins`` ``{min, size, count}``) is a histogram.
  ``wandb.watch(model, log="all")`` logs ``gradients/<param>`` and ``parameters/<param>``,
  64 bins from the tensor's finite minimum to its maximum (one bin when they are equal).

A histogram is read as a TF2 histogram tensor of the same buckets is (``encoding`` ``tensor``:
buckets only, no exact sum). But ``wandb.watch`` drops NaN and Inf elements before binning,
and a tensor with no finite element is not logged at all. So a ``gradients/`` or
``parameters/`` histogram holding fewer elements than its parameter has (its largest count so
far: a parameter's size does not change) held that many non-finite ones: it is read as the
HistogramProto of such a tensor (``min``/``max`` its finite range, ``num`` the parameter's
size, a NaN ``sum`` and ``sum_squares``), and gradcheck counts the missing elements as
non-finite. A tensor that is non-finite throughout leaves its series stopped, which gradcheck
reads as NaN when the loss turns NaN at that step.

A record's ``offset`` is the byte offset of its record; a record that is not a well-formed
``Record`` costs that record, and damaged framing what ``wandb_framing`` says.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gradcheck.events.wire import message_fields
from gradcheck.model import HistogramRecord, Record, Run
from gradcheck.sources.base import damage, file_info, number, scalar, unreadable

if TYPE_CHECKING:  # imported when a run is read: discovery (every directory) stays light
    import numpy as np

    from gradcheck.sources import wandb_framing

NAME = "wandb"
LABEL = "W&B run files (run-*.wandb)"
WRITER = "W&B run file (.wandb)"
SUFFIX = ".wandb"
RECORD_HISTORY = 2
HISTORY_ITEM = 1
ITEM_KEY, ITEM_NESTED_KEY, ITEM_VALUE_JSON = 1, 2, 16
STEP, TIMESTAMP = "_step", "_timestamp"
TRAINER_STEPS = (("train/global_step",), ("trainer/global_step",))
"""The key paths of the HF Trainer's and Lightning's step in the rows they log."""
WATCHED = ("gradients/", "parameters/")
Path = tuple[str, ...]


def find(directory: str, subdirectories: list[str], names: list[str], top: bool) -> list[Run]:
    """``directory`` as one run when it holds ``.wandb`` files (checked by their header)."""
    files = [
        os.path.join(directory, name)
        for name in sorted(names)
        if name.endswith(SUFFIX) and _has_header(os.path.join(directory, name))
    ]
    return [Run(path=directory, files=tuple(files), format=NAME)] if files else []


def _has_header(path: str) -> bool:
    from gradcheck.sources import wandb_framing

    try:
        with open(path, "rb") as stream:
            return wandb_framing.has_header(stream.read(wandb_framing.HEADER.size))
    except OSError:
        return False


@dataclass(eq=False)
class _State:
    """What a run's rows carry over: the largest element count seen per watched parameter,
    the last trainer step (see the module docstring)."""

    elements: dict[str, float] = field(default_factory=dict)
    trainer_step: float | None = None  # the last trainer step of a row (see the docstring)

    def seen(self, tag: str, count: float) -> float | None:
        """The parameter's size when ``tag``'s histogram holds fewer than it (else None)."""
        name = next((tag[len(p) :] for p in WATCHED if tag.startswith(p)), None)
        if name is None:
            return None
        known = self.elements.get(name, 0.0)
        if count >= known:
            self.elements[name] = count
            return None
        return known


def records(run: Run) -> Iterator[Record]:
    """The scalars and histograms of every history row, in file order."""
    from gradcheck.sources import wandb_framing

    sizes = _State()
    for path in run.files:
        read = 0
        try:
            with open(path, "rb") as stream:
                for item in wandb_framing.payloads(stream):
                    if isinstance(item, wandb_framing.Lost):
                        yield _lost(run.path, path, item)
                        continue
                    read += 1
                    yield from _record(run.path, path, item, sizes)
        except OSError as error:
            yield unreadable(run.path, path, error)
        yield file_info(run.path, path, read, WRITER)


def _lost(run: str, path: str, lost: wandb_framing.Lost) -> Record:
    message = f"{lost.detail}, at byte {lost.offset} ({lost.lost_bytes} bytes)"
    return damage(run, path, lost.offset, lost.kind, lost.lost_bytes, message)


def _record(run: str, path: str, payload: wandb_framing.Payload, sizes: _State) -> Iterator[Record]:
    try:
        row = _history_row(payload.data)
    except (ValueError, UnicodeDecodeError) as error:
        message = f"record at byte {payload.offset} is not a W&B Record ({error}): that record lost"
        yield damage(run, path, payload.offset, "undecodable", len(payload.data), message)
        return
    if row is not None:
        yield from _row_records(run, path, payload.offset, row, sizes)


def _history_row(data: bytes) -> dict[Path, object] | None:
    """The values of a ``history`` record by key path; None for any other record."""
    import json

    history = [value for number_, value in message_fields(data) if number_ == RECORD_HISTORY]
    if not history:
        return None
    row: dict[Path, object] = {}
    for number_, item in message_fields(_as_bytes(history[-1])):
        if number_ != HISTORY_ITEM:
            continue
        key, nested, text = "", [], ""
        for field_number, value in message_fields(_as_bytes(item)):
            if field_number == ITEM_KEY:
                key = _as_bytes(value).decode()
            elif field_number == ITEM_NESTED_KEY:
                nested.append(_as_bytes(value).decode())
            elif field_number == ITEM_VALUE_JSON:
                text = _as_bytes(value).decode()
        item_path: Path = (key,) if key else tuple(nested)
        if item_path and text:
            _flatten(item_path, json.loads(text), row)
    return row


def _as_bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise ValueError("a length-delimited field expected")
    return value


def _flatten(path: Path, value: object, row: dict[Path, object]) -> None:
    """``value`` under ``path``, a JSON object's members under their own paths (W&B SDKs
    before the nested keys wrote a histogram as one object)."""
    if isinstance(value, dict):
        for key, member in value.items():
            _flatten((*path, str(key)), member, row)
    else:
        row[path] = value


def _row_records(
    run: str, path: str, offset: int, row: dict[Path, object], sizes: _State
) -> Iterator[Record]:
    step = number(row.get((STEP,)))
    for key in TRAINER_STEPS:
        trainer_step = number(row.get(key))
        if trainer_step is not None and math.isfinite(trainer_step):
            sizes.trainer_step = trainer_step
    if sizes.trainer_step is not None:
        step = sizes.trainer_step
    if step is None or step != step or abs(step) == float("inf"):
        return  # a row without its step (W&B writes one in each): nothing to place it at
    wall = number(row.get((TIMESTAMP,))) or 0.0
    groups: dict[str, dict[Path, object]] = {}
    for key_path, value in row.items():
        groups.setdefault(key_path[0], {})[key_path[1:]] = value
    for name, members in groups.items():
        if name.startswith("_"):
            continue
        if members.get(("_type",)) == "histogram":
            yield _histogram(run, path, offset, name, int(step), wall, members, sizes)
            continue
        for rest, value in members.items():
            if (converted := number(value)) is not None:
                yield scalar(run, path, offset, "/".join((name, *rest)), int(step), wall, converted)


def _histogram(
    run: str,
    path: str,
    offset: int,
    tag: str,
    step: int,
    wall: float,
    members: dict[Path, object],
    sizes: _State,
) -> Record:
    counts = _floats(members.get(("values",)))
    edges = _edges(members, counts)
    if counts is None or edges is None or edges.size != counts.size + 1 or not counts.size:
        message = f"histogram {tag!r} at byte {offset} has no counts and edges that match"
        return damage(run, path, offset, "undecodable", 0, message + ": that histogram lost")
    size = sizes.seen(tag, float(counts.sum()))
    left, right = edges[:-1].copy(), edges[1:].copy()
    if size is None:  # buckets only, as a TF2 histogram tensor of the same buckets is read
        return HistogramRecord(run, path, offset, tag, 0, step, wall, "tensor", left, right, counts)
    nan = float("nan")  # non-finite elements dropped: the HistogramProto of such a tensor
    minimum, maximum = float(edges[0]), float(edges[-1])
    return HistogramRecord(
        run,
        path,
        offset,
        tag,
        0,
        step,
        wall,
        "histo",
        left,
        right,
        counts,
        min=minimum,
        max=maximum,
        num=size,
        sum=nan,
        sum_squares=nan,
    )


def _floats(value: object) -> np.ndarray | None:
    import numpy as np

    if not isinstance(value, list):
        return None
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None


def _edges(members: dict[Path, object], counts: np.ndarray | None) -> np.ndarray | None:
    """The bin edges: ``bins``, or ``packedBins`` ``{min, size, count}``."""
    bins = _floats(members.get(("bins",)))
    if bins is not None:
        return bins
    import numpy as np

    low = number(members.get(("packedBins", "min")))
    width = number(members.get(("packedBins", "size")))
    count = number(members.get(("packedBins", "count")))
    if low is None or width is None or count is None or count != int(count):
        return None
    return low + width * np.arange(int(count) + 1, dtype=np.float64)
