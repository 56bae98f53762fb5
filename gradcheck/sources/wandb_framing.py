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

Damage is found per fragment. A fragment whose CRC fails costs its record; reading goes on
after it, as its length says, when the next fragment verifies (the damage was in the data),
else from the next block (the length was wrong: nothing before the next block can be trusted,
as LevelDB's reader does). A length past its block, or a fragment out of sequence, costs the
rest of its block and the record it belonged to; a file cut short, its last record.
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
    suspect = False  # the last fragment failed its CRC: its length may have been wrong
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
            yield _lost(at, "bad_length", BLOCK - pos, pieces, f"length {length}", REST)
            pieces, pos = [], BLOCK
            continue
        data = block[pos + FRAGMENT.size : end]
        if kind not in _TYPE_CRC or zlib.crc32(data, _TYPE_CRC[kind]) != crc:
            if suspect:  # the length before was wrong too: nothing here can be trusted
                yield _lost(at, "bad_payload_crc", BLOCK - pos, pieces, "fragment CRC", REST)
                pieces, pos, suspect = [], BLOCK, False
                continue
            yield _lost(at, "bad_payload_crc", end - pos, pieces, "fragment CRC", "its record lost")
            pieces, pos, suspect = [], end, True  # on past it, if its length was right
            continue
        pos, suspect = end, False
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


REST = "the rest of its block lost"


def _lost(
    offset: int, kind: DamageKind, size: int, pieces: list[bytes], what: str, cost: str
) -> Lost:
    pending = sum(map(len, pieces))
    detail = f"bad {what}: {cost}"
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
