"""TFRecord framing: split an event file's bytes into verified payloads, and survive damage.

A TFRecord is ``uint64 length | uint32 masked_crc32c(length) | payload | uint32
masked_crc32c(payload)`` (little-endian). TensorBoard's loaders stop at the first bad CRC; this
module recovers everything that can be verified:

- a half-written final record (training still running) is reported as ``incomplete_tail``;
- a record that does not verify (``bad_length_crc``, ``bad_payload_crc``; ``bad_length``: the
  length CRC verifies but the length is over 2 GiB or runs past the end of the file) is
  resynchronised: scan forward for the next offset whose header *and* payload CRCs verify,
  whatever the bad record's length says, and report the skipped bytes. A record whose length
  runs past the end is the incomplete tail only when no verifiable record follows it;
- a file that shrinks while it is read ends early with one ``changed_while_read`` damage.

The file is read in large chunks and CRCs are computed in C (``google_crc32c``), so framing
costs little next to protobuf parsing.
"""

from __future__ import annotations

import errno
import functools
import io
import os
import struct
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, Literal, NamedTuple

from gradcheck.events.storage import stream_size
from gradcheck.model import DamageKind

HEADER_SIZE = 12  # uint64 length + uint32 length CRC
FOOTER_SIZE = 4  # uint32 payload CRC
DEFAULT_CHUNK_SIZE = 8 << 20
MAX_PLAUSIBLE_LENGTH = 1 << 31  # protobuf messages cannot exceed 2 GiB
RESYNC_CHECK_BYTES = 1 << 30
"""Payload bytes one resynchronisation may checksum for candidates whose length CRC verifies
but whose payload CRC fails. Random bytes give such a candidate once in 2**32 offsets, so an
honest file never comes near; a crafted one (a verified header claiming a long length at every
offset) would otherwise cost quadratic time. Past it the rest of the file is reported lost."""

_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8
_UINT32 = 0xFFFFFFFF
# A plausible length (< 2 GiB) has its four high bytes zero: resync only tries such offsets.
_HIGH_ZERO = b"\x00\x00\x00\x00"
_ZERO_HEADER = bytes(HEADER_SIZE)  # fails the length CRC: no header is all zeros


@functools.cache
def _crc32c() -> Callable[[bytes], int]:
    """google-crc32c's CRC32C, imported on first use: the C engine (``gradcheck.native._scan``) has
    its own, so a run it reads whole never pays for the import."""
    import google_crc32c

    if google_crc32c.implementation != "c":  # pragma: no cover - depends on the wheel
        warnings.warn(
            "google-crc32c has no C extension on this platform: reading event files will be slow",
            RuntimeWarning,
            stacklevel=2,
        )
    value: Callable[[bytes], int] = google_crc32c.value
    return value


class Frame(NamedTuple):
    """A record whose length and payload CRCs both verified (a tuple: cheap to build)."""

    offset: int  # byte offset of the record's header
    payload: bytes


@dataclass(eq=False, slots=True)
class FrameDamage:
    """Bytes that could not be framed, and why."""

    offset: int
    kind: DamageKind
    lost_bytes: int
    detail: str  # what was lost, for a human


def masked_crc32c(data: bytes) -> int:
    """The TFRecord checksum: CRC32C rotated right by 15 bits plus a constant."""
    crc = _crc32c()(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & _UINT32


class Window:
    """A sliding window over a binary stream, refilled in big chunks.

    ``data[i]`` is the byte at file offset ``base + i``. Consumed bytes are dropped on refill,
    so memory stays near one chunk plus the largest record. ``opened_size`` is the file's size
    when the window was made (None when the stream has no file behind it): a read that ends
    before it means the file shrank while it was read.
    """

    __slots__ = ("stream", "chunk_size", "data", "base", "eof", "opened_size", "seekable")

    def __init__(self, stream: BinaryIO, chunk_size: int) -> None:
        self.stream = stream
        self.chunk_size = chunk_size
        self.data = b""
        self.base = 0
        self.eof = False
        self.opened_size = self.file_size()
        self.seekable = stream.seekable()

    def fill(self, pos: int, needed: int) -> int:
        """Drop the bytes before ``pos`` and read until ``needed`` bytes follow it (or EOF).

        Returns the new index of ``pos`` (0). Reads at least one chunk when it reads. A
        seekable stream reads the kept bytes again (from the page cache) rather than joining
        them to the new chunk: one copy of the file's bytes, not two.
        """
        kept = len(self.data) - pos
        self.base += pos
        if kept >= needed or self.eof:
            self.data = self.data[pos:]
            return 0
        parts = [self.data[pos:]]
        if self.seekable and kept:
            self.stream.seek(-kept, io.SEEK_CUR)
            parts, kept = [], 0
        while kept < needed:
            chunk = self.stream.read(max(self.chunk_size, needed - kept))
            if not chunk:
                self.eof = True
                break
            parts.append(chunk)
            kept += len(chunk)
        self.data = b"".join(parts) if len(parts) > 1 else parts[0] if parts else b""
        return 0

    def skip_hole(self, pos: int) -> int:
        """Move past the hole (zeros a sparse file does not store) that follows the window,
        whose bytes from index ``pos`` on are zeros too: holes are not read. Returns the new
        index of ``pos``; does nothing where the system cannot say where data is."""
        if not self.seekable or not hasattr(os, "SEEK_DATA"):
            return pos
        here = self.base + len(self.data)
        try:
            fd = self.stream.fileno()
            was = os.lseek(fd, 0, os.SEEK_CUR)  # the buffered stream's, put back below
            try:
                data_at = os.lseek(fd, here, os.SEEK_DATA)
            except OSError as error:
                if error.errno != errno.ENXIO:
                    raise
                data_at = os.fstat(fd).st_size  # nothing but a hole after ``here``
            os.lseek(fd, was, os.SEEK_SET)
        except (OSError, ValueError, io.UnsupportedOperation):
            return pos
        if data_at <= here:
            return pos
        self.stream.seek(data_at)
        kept = len(self.data) - pos
        self.data = bytes(kept)
        self.base = data_at - kept
        return 0

    def file_size(self) -> int | None:
        """The file's size now, or None when the stream is not a file."""
        return stream_size(self.stream)

    def holds(self, pos: int, size: int) -> bool:
        """Whether ``size`` bytes from window index ``pos`` are in the window or the file (a
        stream of unknown size may hold them): a length field is checked against the file's
        size before gigabytes are read for it."""
        if len(self.data) - pos >= size:
            return True
        if self.eof:
            return False
        now = self.file_size()
        return now is None or self.base + pos + size <= now

    def shrunk(self) -> bool:
        """Whether the stream ended before the size the file had when the window was made."""
        end = self.base + len(self.data)
        return self.eof and self.opened_size is not None and end < self.opened_size


def iter_frames(
    stream: BinaryIO, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> Iterator[Frame | FrameDamage]:
    """Yield every verified record of ``stream`` in order, and a ``FrameDamage`` for each gap.

    Never raises on bad data; I/O errors from ``stream.read`` propagate to the caller.
    """
    window = Window(stream, chunk_size)
    pos = 0
    while pos >= 0:
        items, pos = frame_at(window, pos)
        yield from items


def frame_at(window: Window, pos: int) -> tuple[list[Frame | FrameDamage], int]:
    """Frame what starts at window index ``pos``: the items found and the index that follows.

    One record (a ``Frame``), or the damage of a record that does not verify (the index then
    is the next verifiable record's), or the end of the file (an incomplete tail, a file that
    shrank while read). The index is -1 when the stream is done. The window may be refilled:
    the index is into ``window.data``. Both readers call this, so damage is described the same
    way whichever engine reads.
    """
    data = window.data
    if len(data) - pos < HEADER_SIZE:
        pos = window.fill(pos, HEADER_SIZE)
        data = window.data
        left = len(data) - pos
        if left < HEADER_SIZE:
            return _end(window, window.base + pos, left, "a record header"), -1
    length, length_crc = _HEADER.unpack_from(data, pos)
    if masked_crc32c(data[pos : pos + 8]) != length_crc:
        return _resync(window, pos, _Bad("bad_length_crc", length))
    size = HEADER_SIZE + length + FOOTER_SIZE
    if length > MAX_PLAUSIBLE_LENGTH or not window.holds(pos, size):
        return _resync(window, pos, _Bad("bad_length", length))
    if len(data) - pos < size:
        pos = window.fill(pos, size)
        data = window.data
        if len(data) - pos < size:  # the file shrank since ``holds`` looked
            return _resync(window, pos, _Bad("bad_length", length))
    end = pos + size
    payload = data[pos + HEADER_SIZE : end - FOOTER_SIZE]
    if masked_crc32c(payload) == _FOOTER.unpack_from(data, end - FOOTER_SIZE)[0]:
        return [Frame(window.base + pos, payload)], end
    return _resync(window, pos, _Bad("bad_payload_crc", length, window.base + end))


class _Bad(NamedTuple):
    """Why the record at a resynchronisation's start does not verify."""

    kind: DamageKind  # bad_length_crc, bad_length (past the end or over 2 GiB), bad_payload_crc
    length: int  # its length field
    claimed_end: int = -1  # bad_payload_crc: file offset where its length says it ends


def _end(window: Window, offset: int, present: int, what: str) -> list[Frame | FrameDamage]:
    """The stream ends at file offset ``offset + present``, inside ``what``."""
    if window.shrunk():
        opened = window.opened_size or 0
        now = window.base + len(window.data)
        detail = (
            f"the file shrank from {opened} to {now} bytes while it was read (truncated, "
            f"rotated or rewritten in place): records before byte {offset} read, the rest lost"
        )
        return [FrameDamage(offset, "changed_while_read", opened - offset, detail)]
    if not present:
        return []
    return [
        FrameDamage(
            offset,
            "incomplete_tail",
            present,
            f"file ends inside {what} ({present} bytes present): skipped, as a writer may "
            "still be appending",
        )
    ]


def _resync(window: Window, start: int, bad: _Bad) -> tuple[list[Frame | FrameDamage], int]:
    """Scan forward from ``start`` (a record that does not verify) to the next record whose
    length and payload CRCs both verify, whatever the bad record's length field says.

    Returns the damage of the skipped bytes and the window index of that record, or -1 when
    none is left. Random bytes pass both CRCs with odds about 2**-64 per offset. A verified
    header that the end of the file cuts off (the first such) is the incomplete tail when no
    verifiable record follows it, and damage like any other when one does.
    """
    damage_offset = window.base + start
    tail = (damage_offset, bad.length) if bad.kind == "bad_length" else None
    pos, checked = start + 1, 0
    while True:
        pos = _find_candidate(window, pos)
        if pos < 0:
            break
        check, length = _record_check(window, pos)
        if check == "good":
            pos = window.fill(pos, 0)
            return [_skipped(bad, damage_offset, window.base + pos)], pos
        if check == "tail" and tail is None:
            tail = (window.base + pos, length)
        if check == "unverified":
            checked += length
            if checked > RESYNC_CHECK_BYTES:
                return [_given_up(bad, damage_offset, window)], -1
        pos += 1
    end = window.base + len(window.data)
    if tail is None or tail[1] > MAX_PLAUSIBLE_LENGTH:
        if window.shrunk():
            return _end(window, damage_offset, end - damage_offset, "a damaged stretch"), -1
        return [_skipped(bad, damage_offset, -1, end - damage_offset)], -1
    tail_offset, tail_length = tail
    items = [_skipped(bad, damage_offset, tail_offset)] if tail_offset > damage_offset else []
    what = f"a record of {tail_length} payload bytes"
    return items + _end(window, tail_offset, end - tail_offset, what), -1


def _what(bad: _Bad) -> str:
    """What is wrong with the record a resynchronisation starts at, for a human."""
    if bad.kind == "bad_length" and bad.length > MAX_PLAUSIBLE_LENGTH:
        return f"impossible length field of {bad.length} payload bytes (over 2 GiB)"
    return {
        "bad_length_crc": "length CRC mismatch",
        "bad_length": f"length field of {bad.length} payload bytes runs past the end of the file",
        "bad_payload_crc": "payload CRC mismatch",
    }[bad.kind]


def _given_up(bad: _Bad, offset: int, window: Window) -> FrameDamage:
    size = window.file_size() or window.base + len(window.data)
    detail = (
        f"{_what(bad)}, then more than "
        f"{RESYNC_CHECK_BYTES >> 20} MiB of headers whose payload CRC fails (a crafted "
        "file?): the rest of the file is not examined"
    )
    return FrameDamage(offset, bad.kind, size - offset, detail)


def _skipped(bad: _Bad, offset: int, resumed: int, lost: int = 0) -> FrameDamage:
    """The damage of the bytes from ``offset`` to the verifiable record at ``resumed`` (-1:
    none, ``lost`` bytes to the end of the file)."""
    what = _what(bad)
    if resumed < 0:
        detail = f"{what} and no verifiable record after it: rest of the file lost"
        return FrameDamage(offset, bad.kind, lost, detail)
    if resumed == bad.claimed_end:
        detail = f"{what}: one record of {bad.length} payload bytes lost"
    elif bad.kind == "bad_payload_crc":
        detail = (
            f"{what}, and its length does not lead to a verifiable record (bytes removed or "
            "added): bytes skipped up to the next verifiable record, an unknown number of "
            "records lost"
        )
    else:
        detail = f"{what}: bytes skipped up to the next verifiable record"
    return FrameDamage(offset, bad.kind, resumed - offset, detail)


def _find_candidate(window: Window, pos: int) -> int:
    """Window index >= ``pos`` of the next header with a plausible length, or -1 at EOF.

    A plausible length (< 2 GiB) has its four high bytes zero, so ``bytes.find`` skips most
    offsets in C. Inside a run of zero bytes no header can start (twelve zero bytes fail the
    length CRC), so runs of zeros are skipped at memory speed. The returned header's 12 bytes
    are present in the window.
    """
    while True:
        data = window.data
        hit = data.find(_HIGH_ZERO, pos + 4)
        while hit >= 0:
            if data[hit - 1] >= 0x80:  # length >= 2 GiB: implausible
                hit = data.find(_HIGH_ZERO, hit + 1)
            elif data[hit - 4 : hit + 8] == _ZERO_HEADER:
                # A header overlapping the run must end past it: start at most 11 bytes before.
                pos = max(pos, _zeros_end(data, hit + 8) - 11)
                hit = data.find(_HIGH_ZERO, pos + 4)
            else:
                break
        if hit >= 0 and hit - 4 + HEADER_SIZE <= len(data):
            return hit - 4
        if window.eof:
            return -1
        # Keep the unexamined positions (a header may straddle the chunk boundary).
        keep = hit - 4 if hit >= 0 else max(pos, len(data) - 7)
        if not data[keep:].strip(b"\0"):
            keep = window.skip_hole(keep)
            data = window.data
        size = len(data) - keep
        pos = window.fill(keep, size + 1)
        if len(window.data) <= size:
            return -1


def _zeros_end(data: bytes, pos: int) -> int:
    """Index of the first non-zero byte of ``data`` at or after ``pos`` (``len(data)`` if
    none), found with numpy in growing steps: a long run of zeros costs memory speed."""
    import numpy as np

    array = np.frombuffer(data, np.uint8)
    step = 256
    while pos < array.size:
        piece = array[pos : pos + step]
        if piece.any():
            return pos + int(np.flatnonzero(piece)[0])
        pos += step
        step = min(step * 2, 1 << 20)
    return array.size


def _record_check(
    window: Window, pos: int
) -> tuple[Literal["good", "tail", "unverified", "bad"], int]:
    """Whether the record at window index ``pos`` verifies (both CRCs), is a verified header
    that runs past the end of the file (``tail``), a verified header whose payload CRC fails
    (``unverified``: its length was checksummed), or no record (``bad``); and its length.

    May refill the window; index ``pos`` stays valid because the window keeps its start.
    """
    data = window.data
    length, length_crc = _HEADER.unpack_from(data, pos)
    if masked_crc32c(data[pos : pos + 8]) != length_crc:
        return "bad", length
    size = HEADER_SIZE + length + FOOTER_SIZE
    if not window.holds(pos, size):
        return "tail", length
    if len(data) - pos < size:
        window.fill(0, pos + size)  # from index 0: keeps every byte, so ``pos`` stays valid
        data = window.data
        if len(data) - pos < size:
            return "tail", length
    end = pos + size
    payload = data[pos + HEADER_SIZE : end - FOOTER_SIZE]
    verifies = masked_crc32c(payload) == _FOOTER.unpack_from(data, end - FOOTER_SIZE)[0]
    return ("good" if verifies else "unverified"), length
