"""The framing of W&B's ``.wandb`` run files: LevelDB's log format with W&B's header.

The file starts with a 7-byte header (``:W&B``, magic 0xBEE1 little-endian, a version byte),
then 32 KiB blocks (counted from the file's first byte) of fragments::

    crc32: uint32 LE   zlib CRC-32 of the type byte followed by the data (not LevelDB's CRC32C)
    length: uint16 LE
    type: uint8        1 FULL, 2 FIRST, 3 MIDDLE, 4 LAST (0: the rest of the block is padding)
    data: length bytes

A fragment never crosses a block; fewer than 7 bytes left in a block are zero padding. A
record is one FULL fragment, or FIRST, MIDDLE..., LAST. Each payload is one protobuf
``wandb_internal.Record`` (``gradcheck.sources.wandb_run`` reads it).

Damage is found per fragment: a CRC or length that does not verify, or a fragment out of
sequence, costs the rest of its block (where the next fragment can be trusted again) and the
record it belonged to; a file cut short costs its last, half-written record.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from gradcheck.model import DamageKind

HEADER = struct.Struct("<4sHB")
IDENT = b":W&B"
MAGIC = 0xBEE1
BLOCK = 32768
FRAGMENT = struct.Struct("<IHB")
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_TYPE_CRC = {kind: zlib.crc32(bytes((kind,))) for kind in (FULL, FIRST, MIDDLE, LAST)}


@dataclass(frozen=True, slots=True)
class Payload:
    offset: int  # byte offset of the record's first fragment
    data: bytes


@dataclass(frozen=True, slots=True)
class Lost:
    offset: int
    kind: DamageKind
    lost_bytes: int
    detail: str


def has_header(head: bytes) -> bool:
    """Whether ``head`` (the file's first bytes) is a ``.wandb`` header."""
    if len(head) < HEADER.size:
        return False
    ident, magic, _ = HEADER.unpack_from(head)
    return ident == IDENT and magic == MAGIC


def payloads(stream: BinaryIO) -> Iterator[Payload | Lost]:
    """The records of a ``.wandb`` file in order, and what was lost where."""
    head = stream.read(HEADER.size)
    if not has_header(head):
        yield Lost(0, "undecodable", len(head), "no W&B header (not a .wandb run file)")
        return
    pieces: list[bytes] = []
    start = -1  # offset of the pending record's first fragment
    block_at = 0
    block = head + stream.read(BLOCK - len(head))
    pos = len(head)
    while True:
        if BLOCK - pos < FRAGMENT.size or pos >= len(block):
            if len(block) < BLOCK:  # the file's last block: its end
                break
            block_at += BLOCK
            block, pos = stream.read(BLOCK), 0
            if not block:
                break
            continue
        if len(block) - pos < FRAGMENT.size:
            yield _cut(block_at + pos if not pieces else start, len(block) - pos, pieces)
            return
        crc, length, kind = FRAGMENT.unpack_from(block, pos)
        at = block_at + pos
        if kind == 0 and length == 0:
            pos = BLOCK  # zero padding to the end of the block
            continue
        end = pos + FRAGMENT.size + length
        if end > len(block):
            if len(block) < BLOCK:
                yield _cut(at if not pieces else start, len(block) - pos, pieces)
                return
            yield _lost(at, "bad_length", BLOCK - pos, pieces, f"fragment of {length} bytes")
            pieces, pos = [], BLOCK
            continue
        data = block[pos + FRAGMENT.size : end]
        if kind not in _TYPE_CRC or zlib.crc32(data, _TYPE_CRC[kind]) != crc:
            yield _lost(at, "bad_payload_crc", BLOCK - pos, pieces, "fragment CRC")
            pieces, pos = [], BLOCK
            continue
        pos = end
        if kind in (FULL, FIRST):
            if pieces:
                size = sum(map(len, pieces))
                yield Lost(start, "bad_payload_crc", size, "a record left unfinished: lost")
            pieces, start = [data], at
            if kind == FULL:
                yield Payload(at, data)
                pieces = []
        elif not pieces:
            yield Lost(at, "bad_payload_crc", len(data), "a record's later fragment alone")
        else:
            pieces.append(data)
            if kind == LAST:
                yield Payload(start, b"".join(pieces))
                pieces = []
    if pieces:
        yield _cut(start, 0, pieces)


def _lost(offset: int, kind: DamageKind, size: int, pieces: list[bytes], what: str) -> Lost:
    pending = sum(map(len, pieces))
    detail = f"bad {what}: the rest of its block lost"
    if pending:
        detail += " with the record it continued"
    return Lost(offset, kind, size + pending, detail)


def _cut(offset: int, size: int, pieces: list[bytes]) -> Lost:
    """The file ends ``size`` bytes into a fragment, after the record's ``pieces``."""
    return Lost(
        offset,
        "incomplete_tail",
        size + sum(map(len, pieces)),
        "half-written last record (the file ends inside it)",
    )
