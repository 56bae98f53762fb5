"""Corruption of real writers' files with where each byte came from, to know which records
survive intact (``tests/events/test_fault_injection.py``, ``scripts/fuzz_reader.py``)."""

from __future__ import annotations

import io

import numpy as np

from gradcheck.events.framing import Frame, iter_frames
from tests.support.eventfiles import header_claiming
from tests.support.paths import TEST_DATA

WRITER_FILES = sorted((TEST_DATA / "writers").rglob("*tfevents*"))
Operation = tuple[str, float, int, int]  # kind, where (share of the length), size, a number
HUGE_LENGTHS = [10**7, (1 << 31) - 1, 1 << 31, 1 << 40, (1 << 64) - 1]


class Damaged:
    """A file's bytes under corruption, with where each byte came from (``origin``: its
    offset in the original, -1 for bytes the corruption wrote), to know which original
    records survive intact and where they are now."""

    def __init__(self, data: bytes) -> None:
        self.data = bytearray(data)
        self.origin = np.arange(len(data), dtype=np.int64)

    def at(self, where: float) -> int:
        return min(int(where * len(self.data)), len(self.data))

    def replace(self, start: int, end: int, new: bytes, origin: np.ndarray | None = None) -> None:
        self.data[start:end] = new
        written = np.full(len(new), -1, np.int64) if origin is None else origin
        self.origin = np.concatenate([self.origin[:start], written, self.origin[end:]])

    def apply(self, operation: Operation) -> None:
        kind, where, size, extra = operation
        start = self.at(where)
        end = min(start + size, len(self.data))
        if kind == "flip" and start < len(self.data):
            byte = bytes([self.data[start] ^ (1 << extra % 8)])
            self.replace(start, start + 1, byte)
        elif kind == "remove":
            self.replace(start, end, b"")
        elif kind == "duplicate":
            self.replace(start, start, bytes(self.data[start:end]), self.origin[start:end].copy())
        elif kind == "zeros":  # a zero-filled stretch written over the file, or inserted
            self.replace(start, end if extra % 2 else start, bytes(size))
        elif kind == "huge_length":
            self.replace(start, start, header_claiming(HUGE_LENGTHS[extra % len(HUGE_LENGTHS)]))

    def intact(self, records: list[tuple[int, bytes]]) -> set[tuple[int, bytes]]:
        """Every ``(offset now, payload)`` of an original record whose bytes all survive,
        contiguous and in order (a duplicated one may be there twice)."""
        found = set()
        for offset, payload in records:
            size = len(payload) + 16
            for now in np.flatnonzero(self.origin == offset):
                piece = self.origin[now : now + size]
                if np.array_equal(piece, np.arange(offset, offset + size)):
                    found.add((int(now), payload))
        return found


KINDS = ["flip", "remove", "duplicate", "zeros", "huge_length"]


def frames_in(data: bytes) -> set[tuple[int, bytes]]:
    return {
        (item.offset, item.payload)
        for item in iter_frames(io.BytesIO(data), chunk_size=4096)
        if isinstance(item, Frame)
    }
