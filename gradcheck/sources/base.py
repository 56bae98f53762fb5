"""What the log formats share: records built the same way, damage and file infos.

Every format yields the reader's records (``model.ScalarRecord``, ``HistogramRecord``,
``Damage``, ``FileInfo``), so the series, verdicts and reports downstream cannot tell a run of
another format from a run of event files holding the same numbers. ``offset`` is where in its
file a value was found, in the format's own unit (a byte, a line, an entry, a row: each
format's docstring says which); a ``Damage`` says what was lost in words.
"""

from __future__ import annotations

import os

from gradcheck.model import Damage, DamageKind, FileInfo, ScalarRecord


def scalar(
    run: str, file: str, offset: int, tag: str, step: int, wall_time: float, value: float
) -> ScalarRecord:
    """A scalar value as the event reader would give a ``simple_value``."""
    return ScalarRecord(run, file, offset, tag, step, wall_time, "simple_value", value)


def damage(
    run: str, file: str, offset: int, kind: DamageKind, lost_bytes: int, message: str
) -> Damage:
    """A stretch of ``file`` that could not be read; ``message``: what and what it cost."""
    return Damage(run, file, offset, kind, lost_bytes, message)


def unreadable(run: str, file: str, error: OSError) -> Damage:
    """The file could not be opened or read at all."""
    return damage(run, file, 0, "unreadable", 0, f"cannot read {file!r}: {_reason(error)}")


def file_info(run: str, file: str, records: int, writer: str) -> FileInfo:
    """What was read from ``file``: ``records`` entries (lines, rows, records) decoded."""
    try:
        size = os.path.getsize(file)
    except OSError:
        size = 0
    return FileInfo(run, file, size, records, records, writer)


def number(value: object) -> float | None:
    """A logged value as a float: numbers and their text (``nan``, ``inf`` included); None for
    anything else (a bool, a string that is no number, a list)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _reason(error: OSError) -> str:
    return error.strerror or str(error)
