"""Records: what a reader gives, one per summary value, damage, notice or file (the reference
reader of ``events/``, each log format of ``sources/``, the C scanner's driver alike), and the
runs they are read from. Plain frozen dataclasses, no I/O; ``gradcheck.model`` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # annotations only: `gradcheck --version` / `--help` need no numpy
    import numpy as np


HistogramEncoding = Literal["histo", "tensor"]
"""``histo``: ``Summary.Value.histo`` (HistogramProto: TF1, Keras on TF1 / TF 2.0-2.1, PyTorch,
tensorboardX). ``tensor``: TF2 ``tf.summary.histogram`` ``[k, 3]`` tensor (plugin
``histograms``)."""

ScalarEncoding = Literal["simple_value", "tensor"]


@dataclass(frozen=True, slots=True, eq=False)
class HistogramRecord:
    """One histogram value at one step.

    Buckets are given as ``left``/``right`` edges and ``counts`` (float64 arrays, same length).
    For ``histo`` records ``right`` is exactly ``bucket_limit`` and ``counts`` exactly ``bucket``,
    and ``left[i] = bucket_limit[i-1]``. ``left[0]``: TF1 and PyTorch start with an empty bucket
    whose right edge lies below ``min``; it is made zero-width (``left[0] = right[0]``) so no
    infinite edge reaches arithmetic. ``-inf`` only when a non-empty first bucket has no ``min``
    to bound it. ``min, max, num, sum, sum_squares`` are the proto's fields
    (``None`` for ``tensor`` records, which carry no such fields).
    """

    run: str  # run directory (the directory that directly holds the event file)
    file: str  # event file path
    offset: int  # byte offset of the TFRecord holding this value
    tag: str
    index: int  # k-th value with this tag at this step (Keras 3 tag collisions); 0 normally
    step: int
    wall_time: float
    encoding: HistogramEncoding
    left: np.ndarray
    right: np.ndarray
    counts: np.ndarray
    min: float | None = None
    max: float | None = None
    num: float | None = None
    sum: float | None = None
    sum_squares: float | None = None


@dataclass(frozen=True, slots=True)
class ScalarRecord:
    """One scalar value at one step (TF1 ``simple_value`` or TF2 scalar tensor)."""

    run: str
    file: str
    offset: int
    tag: str
    step: int
    wall_time: float
    encoding: ScalarEncoding
    value: float


DamageKind = Literal[
    "incomplete_tail",  # half-written final record (training still running): not an error
    "bad_length_crc",  # length CRC failed: bytes skipped until the next verifiable record
    "bad_length",  # length verifies but is over 2 GiB or runs past the end, records follow
    "bad_payload_crc",  # payload CRC failed: that one record lost
    "undecodable",  # CRCs fine but the payload is not an Event: that one record lost
    "unreadable",  # the file could not be opened or read at all
    "changed_while_read",  # the file shrank while it was read (truncated, rewritten)
]


@dataclass(frozen=True, slots=True)
class Damage:
    """A stretch of an event file that could not be read, and what it cost."""

    run: str
    file: str
    offset: int  # byte offset where the damage starts
    kind: DamageKind
    lost_bytes: int  # bytes skipped
    message: str  # one line for a human: "<what>, at byte <offset>: <what was lost>"


NoticeKind = Literal["tag_collision", "restart", "thinned", "other"]
"""``tag_collision``: one tag written several times at a step (Keras 3), told apart by index.
``restart``: a series' step went back; the older steps from there on are dropped.
``thinned``: histogram series longer than ``thin.MAX_ROWS`` steps keep the first and the worst
step of each W-step window (one notice per run, saying how many steps were read and kept).
``other``: anything else the reader handled."""


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the reader handled but the user should know (tag collisions, restarts)."""

    run: str
    file: str
    kind: NoticeKind
    tag: str | None
    step: int | None
    message: str


@dataclass(frozen=True, slots=True)
class FileInfo:
    """Emitted once per event file, after its last record: what was read from it."""

    run: str
    file: str
    size: int
    records: int  # TFRecords whose CRCs verified
    events: int  # records decoded as Event
    writer: str | None  # best guess of the writer (source_metadata.writer, file_version, ...)


HParamValue = float | str | bool
"""A hyperparameter's value: the HParams plugin's ``google.protobuf.Value`` (number, string or
bool), or a part of a run's directory name (a number when it reads as one)."""


@dataclass(frozen=True, slots=True)
class HParamsRecord:
    """A run's hyperparameters as the TensorBoard HParams plugin logged them: the
    ``session_start_info.hparams`` map of a summary value of plugin ``hparams`` (what
    ``SummaryWriter.add_hparams`` and ``torch.utils.tensorboard.summary.hparams`` write), in
    name order. Values that are neither number, string nor bool (a list, a null) are left out."""

    run: str
    file: str
    offset: int
    values: tuple[tuple[str, HParamValue], ...]


Record = HistogramRecord | ScalarRecord | Damage | Notice | FileInfo | HParamsRecord


TENSORBOARD = "tensorboard"
"""``Run.format`` of a run of TensorBoard event files."""


@dataclass(frozen=True, slots=True)
class Run:
    """One run: a directory that directly holds event files (``files`` sorted: merged in this
    order), or a run of another log format (``gradcheck.sources``: ``format`` names it, its
    ``files`` are what it reads, ``key`` is the format's name for the run inside them, as an
    MLflow run id in a SQLite store)."""

    path: str
    files: tuple[str, ...]
    format: str = TENSORBOARD
    key: str = ""
