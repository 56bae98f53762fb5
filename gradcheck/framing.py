"""TFRecord framing: split an event file's bytes into verified payloads, and survive damage.

A TFRecord is ``uint64 length | uint32 masked_crc32c(length) | payload | uint32
masked_crc32c(payload)`` (little-endian). TensorBoard's loaders stop at the first bad CRC; this
module recovers everything that can be verified:

- a half-written final record (training still running) is reported as ``incomplete_tail``;
- a bad payload CRC loses that one record (``bad_payload_crc``);
- a bad length CRC resynchronises: scan forward for the next offset whose header *and* payload
  CRCs verify, and report the skipped bytes (``bad_length_crc``).

The file is read in large chunks and CRCs are computed in C (``google_crc32c``), so framing
costs little next to protobuf parsing.
"""

from __future__ import annotations

import functools
import mmap
import struct
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, Literal, NamedTuple

from gradcheck.model import DamageKind

HEADER_SIZE = 12  # uint64 length + uint32 length CRC
FOOTER_SIZE = 4  # uint32 payload CRC
DEFAULT_CHUNK_SIZE = 8 << 20
MAX_PLAUSIBLE_LENGTH = 1 << 31  # protobuf messages cannot exceed 2 GiB

_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8
_UINT32 = 0xFFFFFFFF
# A plausible length (< 2 GiB) has its four high bytes zero: resync only tries such offsets.
_HIGH_ZERO = b"\x00\x00\x00\x00"


@functools.cache
def _crc32c() -> Callable[[bytes], int]:
    """google-crc32c's CRC32C, imported on first use: the C engine (``gradcheck._scan``) has
    its own, so a run it reads whole never pays for the import (~2 ms)."""
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


@dataclass(frozen=True, slots=True)
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
    so memory stays near one chunk plus the largest record.
    """

    __slots__ = ("stream", "chunk_size", "data", "base", "eof")

    def __init__(self, stream: BinaryIO, chunk_size: int) -> None:
        self.stream = stream
        self.chunk_size = chunk_size
        self.data = b""
        self.base = 0
        self.eof = False

    def fill(self, pos: int, needed: int) -> int:
        """Drop the bytes before ``pos`` and read until ``needed`` bytes follow it (or EOF).

        Returns the new index of ``pos`` (0 here; a window over a whole mapped file keeps its
        indexes). Reads at least one chunk when it reads.
        """
        kept = self.data[pos:]
        self.base += pos
        parts = [kept]
        have = len(kept)
        while have < needed and not self.eof:
            chunk = self.stream.read(self.chunk_size)
            if not chunk:
                self.eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        self.data = b"".join(parts) if len(parts) > 1 else kept
        return 0


class MappedWindow(Window):
    """A window over a whole file mapped in memory: nothing to read, indexes never move."""

    def __init__(self, stream: BinaryIO, data: mmap.mmap) -> None:
        super().__init__(stream, 0)
        self.mapped = data
        self.data = data  # type: ignore[assignment]
        self.eof = True

    def fill(self, pos: int, needed: int) -> int:
        return pos


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

    One record (a ``Frame``, or a ``bad_payload_crc`` damage), or the damage of a bad header
    (the index then is the next verifiable record's), or the incomplete tail. The index is -1
    when the stream is done. The window may be refilled: the index is into ``window.data``.
    Both readers call this, so damage is described the same way whichever engine reads.
    """
    data = window.data
    if len(data) - pos < HEADER_SIZE:
        pos = window.fill(pos, HEADER_SIZE)
        data = window.data
        left = len(data) - pos
        if left < HEADER_SIZE:
            return ([_tail(window.base + pos, left, "a record header")] if left else []), -1
    length, length_crc = _HEADER.unpack_from(data, pos)
    if masked_crc32c(data[pos : pos + 8]) != length_crc or length > MAX_PLAUSIBLE_LENGTH:
        damage, pos = _resync(window, pos)
        return [damage], pos
    end = pos + HEADER_SIZE + length + FOOTER_SIZE
    if end > len(data):
        pos = window.fill(pos, end - pos)
        data = window.data
        end = pos + HEADER_SIZE + length + FOOTER_SIZE
        if end > len(data):
            what = f"a record of {length} payload bytes"
            return [_tail(window.base + pos, len(data) - pos, what)], -1
    payload = data[pos + HEADER_SIZE : end - FOOTER_SIZE]
    if masked_crc32c(payload) == _FOOTER.unpack_from(data, end - FOOTER_SIZE)[0]:
        return [Frame(window.base + pos, payload)], end
    damage = FrameDamage(
        window.base + pos,
        "bad_payload_crc",
        end - pos,
        f"payload CRC mismatch: one record of {length} payload bytes lost",
    )
    return [damage], end


def _tail(offset: int, size: int, what: str) -> FrameDamage:
    return FrameDamage(
        offset,
        "incomplete_tail",
        size,
        f"file ends inside {what} ({size} bytes present): skipped, as a writer may still be "
        "appending",
    )


def _resync(window: Window, start: int) -> tuple[FrameDamage, int]:
    """Scan forward from ``start`` (a bad header) to the next fully verifiable record.

    Returns the ``bad_length_crc`` damage of the skipped bytes and the window index of the
    next good record, or -1 when none is left. A candidate must pass both CRCs, so random
    bytes cannot become a false record (odds about 2**-64 per offset); a verified header that
    the end of the file cuts off is also accepted, to be reported as an incomplete tail.
    """
    damage_offset = window.base + start
    pos = start + 1
    while True:
        pos = _find_candidate(window, pos)
        if pos < 0:
            lost = window.base + len(window.data) - damage_offset
            damage = FrameDamage(
                damage_offset,
                "bad_length_crc",
                lost,
                "length CRC mismatch and no verifiable record after it: rest of the file lost",
            )
            return damage, -1
        if _record_check(window, pos) != "bad":  # good, or a verified header cut off by EOF
            pos = window.fill(pos, 0)
            damage = FrameDamage(
                damage_offset,
                "bad_length_crc",
                window.base + pos - damage_offset,
                "length CRC mismatch: bytes skipped up to the next verifiable record",
            )
            return damage, pos
        pos += 1


def _find_candidate(window: Window, pos: int) -> int:
    """Window index >= ``pos`` of the next header with a plausible length, or -1 at EOF.

    A plausible length (< 2 GiB) has its four high bytes zero, so ``bytes.find`` skips most
    offsets in C. The returned header's 12 bytes are present in the window.
    """
    while True:
        data = window.data
        hit = data.find(_HIGH_ZERO, pos + 4)
        while hit >= 0 and data[hit - 1] >= 0x80:  # length >= 2 GiB: implausible
            hit = data.find(_HIGH_ZERO, hit + 1)
        if hit >= 0 and hit - 4 + HEADER_SIZE <= len(data):
            return hit - 4
        if window.eof:
            return -1
        # Keep the unexamined positions (a header may straddle the chunk boundary).
        keep = hit - 4 if hit >= 0 else max(pos, len(data) - 7)
        size = len(data) - keep
        pos = window.fill(keep, size + 1)
        if len(window.data) <= size:
            return -1


def _record_check(window: Window, pos: int) -> Literal["good", "tail", "bad"]:
    """Whether the record at window index ``pos`` verifies (both CRCs), is a verified header
    cut off by the end of the file (``tail``), or is not a record (``bad``).

    May refill the window; index ``pos`` stays valid because the window keeps its start.
    """
    data = window.data
    length, length_crc = _HEADER.unpack_from(data, pos)
    if masked_crc32c(data[pos : pos + 8]) != length_crc:
        return "bad"
    end = pos + HEADER_SIZE + length + FOOTER_SIZE
    if end > len(data):
        if not window.eof:
            window.fill(0, end)  # from index 0: keeps every byte, so ``pos`` stays valid
            data = window.data
        if end > len(data):
            return "tail"
    payload = data[pos + HEADER_SIZE : end - FOOTER_SIZE]
    verifies = masked_crc32c(payload) == _FOOTER.unpack_from(data, end - FOOTER_SIZE)[0]
    return "good" if verifies else "bad"
