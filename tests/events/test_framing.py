"""TFRecord framing: verified records, incomplete tails, bad CRCs and resynchronisation."""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path

import pytest
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tb_masked_crc

from gradcheck.events import framing
from gradcheck.events.framing import Frame, FrameDamage, iter_frames, masked_crc32c
from tests.support.eventfiles import frame, header_claiming, record_offsets

PAYLOADS = [b"first payload", b"", b"x" * 1000, bytes(range(256)) * 3, b"last"]


def frames_of(data: bytes, chunk_size: int = 1 << 20) -> list[Frame | FrameDamage]:
    return list(iter_frames(io.BytesIO(data), chunk_size=chunk_size))


def good(items: list[Frame | FrameDamage]) -> list[bytes]:
    return [item.payload for item in items if isinstance(item, Frame)]


def damages(items: list[Frame | FrameDamage]) -> list[FrameDamage]:
    return [item for item in items if isinstance(item, FrameDamage)]


def test_crc_is_the_c_implementation_and_matches_tensorboard() -> None:
    import google_crc32c  # framing imports it on first use only

    assert google_crc32c.implementation == "c"
    for data in (b"", b"a", b"123456789", os.urandom(1000)):
        assert masked_crc32c(data) == tb_masked_crc(data)


@pytest.mark.parametrize("chunk_size", [1, 7, 13, 64, 1 << 20])
def test_intact_file_gives_every_payload_at_its_offset(chunk_size: int) -> None:
    items = frames_of(frame(PAYLOADS), chunk_size)
    assert good(items) == PAYLOADS
    assert [item.offset for item in items] == record_offsets(PAYLOADS)


def test_empty_file_gives_nothing() -> None:
    assert frames_of(b"") == []


@pytest.mark.parametrize("cut", [1, 4, 11, 12, 20, 1000, 1015])
def test_truncated_last_record_is_an_incomplete_tail(cut: int) -> None:
    data = frame(PAYLOADS[:3])
    last = record_offsets(PAYLOADS[:3])[2]
    items = frames_of(data[: last + cut], chunk_size=64)
    assert good(items) == PAYLOADS[:2]
    (tail,) = damages(items)
    assert (tail.kind, tail.offset, tail.lost_bytes) == ("incomplete_tail", last, cut)


def test_missing_trailing_crc_only_is_an_incomplete_tail() -> None:
    data = frame(PAYLOADS)[:-4]
    items = frames_of(data)
    assert good(items) == PAYLOADS[:-1]
    (tail,) = damages(items)
    assert tail.kind == "incomplete_tail"
    assert tail.offset == record_offsets(PAYLOADS)[-1]
    assert tail.lost_bytes == 12 + len(PAYLOADS[-1])


def flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x10]) + data[index + 1 :]


def test_bad_payload_crc_loses_one_record() -> None:
    data = frame(PAYLOADS)
    offsets = record_offsets(PAYLOADS)
    items = frames_of(flip(data, offsets[2] + 12 + 500), chunk_size=100)
    assert good(items) == PAYLOADS[:2] + PAYLOADS[3:]
    (damage,) = damages(items)
    assert (damage.kind, damage.offset, damage.lost_bytes) == ("bad_payload_crc", offsets[2], 1016)


def test_bad_trailing_crc_loses_one_record() -> None:
    data = frame(PAYLOADS)
    offsets = record_offsets(PAYLOADS)
    items = frames_of(flip(data, offsets[1] - 1))
    assert good(items) == PAYLOADS[1:]
    assert [d.kind for d in damages(items)] == ["bad_payload_crc"]
    (damage,) = damages(items)  # where and how much: the whole first record, nothing more
    assert (damage.offset, damage.lost_bytes) == (offsets[0], offsets[1] - offsets[0])


@pytest.mark.parametrize("byte", [0, 3, 7, 8, 11])
def test_bad_length_crc_resyncs_at_the_next_record(byte: int) -> None:
    data = frame(PAYLOADS)
    offsets = record_offsets(PAYLOADS)
    items = frames_of(flip(data, offsets[2] + byte), chunk_size=50)
    assert good(items) == PAYLOADS[:2] + PAYLOADS[3:]
    (damage,) = damages(items)
    assert damage.kind == "bad_length_crc"
    assert (damage.offset, damage.lost_bytes) == (offsets[2], offsets[3] - offsets[2])


@pytest.mark.parametrize("garbage", [b"\x00" * 100, os.urandom(333), b"\xff" * 17, b"z"])
def test_inserted_garbage_is_skipped_and_reported(garbage: bytes) -> None:
    data = frame(PAYLOADS)
    cut = record_offsets(PAYLOADS)[3]
    items = frames_of(data[:cut] + garbage + data[cut:], chunk_size=40)
    assert good(items) == PAYLOADS
    (damage,) = damages(items)
    assert (damage.kind, damage.offset, damage.lost_bytes) == ("bad_length_crc", cut, len(garbage))


def test_garbage_only_is_one_damage_to_the_end() -> None:
    garbage = b"\x00\x01" * 5000
    (damage,) = frames_of(garbage, chunk_size=512)
    assert (damage.kind, damage.offset, damage.lost_bytes) == ("bad_length_crc", 0, 10000)


def test_resync_rejects_a_header_whose_payload_crc_fails() -> None:
    # A decoy: a header whose length CRC verifies, followed by a payload with a wrong CRC.
    length = struct.pack("<Q", 4)
    decoy = length + struct.pack("<I", masked_crc32c(length)) + b"fake" + b"\0\0\0\0"
    data = frame(PAYLOADS)
    cut = record_offsets(PAYLOADS)[1]
    items = frames_of(data[:cut] + b"junk" + decoy + data[cut:], chunk_size=16)
    assert good(items) == PAYLOADS
    (damage,) = damages(items)
    assert damage.lost_bytes == 4 + len(decoy)


def test_record_larger_than_the_chunk_is_read_whole() -> None:
    payloads = [os.urandom(100_000), b"small"]
    assert good(frames_of(frame(payloads), chunk_size=1000)) == payloads


def test_implausible_length_with_valid_crc_is_resynced_not_allocated() -> None:
    length = struct.pack("<Q", 1 << 40)
    header = length + struct.pack("<I", masked_crc32c(length))
    data = frame(PAYLOADS)
    items = frames_of(header + data)
    assert good(items) == PAYLOADS
    assert [(d.kind, d.lost_bytes) for d in damages(items)] == [("bad_length", 12)]


@pytest.mark.parametrize("claimed", [10**6, (1 << 31) - 1, 1 << 31, (1 << 31) + 1, 1 << 62])
def test_crafted_length_past_the_end_is_not_a_tail_when_records_follow(claimed: int) -> None:
    data = frame(PAYLOADS)
    cut = record_offsets(PAYLOADS)[2]
    items = frames_of(data[:cut] + header_claiming(claimed) + data[cut:], chunk_size=64)
    assert good(items) == PAYLOADS
    (damage,) = damages(items)
    assert (damage.kind, damage.offset, damage.lost_bytes) == ("bad_length", cut, 12)
    assert str(claimed) in damage.detail


def test_length_past_the_end_with_nothing_after_it_is_the_tail() -> None:
    data = frame(PAYLOADS) + header_claiming(10**6) + b"partial payload"
    items = frames_of(data, chunk_size=64)
    assert good(items) == PAYLOADS
    (tail,) = damages(items)
    assert (tail.kind, tail.offset, tail.lost_bytes) == (
        "incomplete_tail",
        len(frame(PAYLOADS)),
        27,
    )


@pytest.mark.parametrize("where", ["remove", "duplicate"])
@pytest.mark.parametrize("chunk_size", [16, 100, 1 << 20])
def test_bytes_removed_or_added_inside_a_record_lose_only_that_record(
    where: str, chunk_size: int
) -> None:
    data = frame(PAYLOADS)
    offsets = record_offsets(PAYLOADS)
    inside = offsets[2] + 12 + 300  # in the third payload (1000 bytes)
    changed = (
        data[:inside] + data[inside + 40 :]
        if where == "remove"
        else data[:inside] + data[inside : inside + 40] + data[inside:]
    )
    items = frames_of(changed, chunk_size)
    assert good(items) == PAYLOADS[:2] + PAYLOADS[3:]
    (damage,) = damages(items)
    size = offsets[3] - offsets[2] + (-40 if where == "remove" else 40)
    assert (damage.kind, damage.offset, damage.lost_bytes) == ("bad_payload_crc", offsets[2], size)
    assert "unknown number of records" in damage.detail


@pytest.mark.parametrize("zeros", [12, 13, 4096, 3 << 20])
def test_zero_runs_are_skipped_and_every_record_around_them_read(zeros: int) -> None:
    data = frame(PAYLOADS)
    cut = record_offsets(PAYLOADS)[3]
    items = frames_of(data[:cut] + bytes(zeros) + data[cut:], chunk_size=1000)
    assert good(items) == PAYLOADS
    (damage,) = damages(items)
    assert (damage.kind, damage.offset, damage.lost_bytes) == ("bad_length_crc", cut, zeros)


def test_a_zero_tail_is_skipped_at_memory_speed() -> None:
    import time

    zeros = 64 << 20  # byte by byte this took minutes (about 0.5 MB/s)
    started = time.perf_counter()
    items = frames_of(frame(PAYLOADS) + bytes(zeros))
    assert time.perf_counter() - started < 10
    assert good(items) == PAYLOADS
    (damage,) = damages(items)
    assert (damage.kind, damage.lost_bytes) == ("bad_length_crc", zeros)


def test_bad_length_followed_by_a_truncated_record_reports_both() -> None:
    data = frame(PAYLOADS)
    offsets = record_offsets(PAYLOADS)
    items = frames_of(flip(data, offsets[2] + 1)[:-2], chunk_size=32)
    assert good(items) == PAYLOADS[:2] + PAYLOADS[3:4]
    assert [(d.kind, d.offset, d.lost_bytes) for d in damages(items)] == [
        ("bad_length_crc", offsets[2], offsets[3] - offsets[2]),
        ("incomplete_tail", offsets[4], len(data) - 2 - offsets[4]),
    ]


def test_a_sparse_files_hole_is_not_read(tmp_path: Path) -> None:
    import time

    data = frame(PAYLOADS)
    path = tmp_path / "sparse"
    with path.open("wb") as stream:
        stream.write(data)
        stream.seek(len(data) + (8 << 30))  # an 8 GiB hole: reading it takes about a minute
        stream.write(data)
    if path.stat().st_blocks * 512 > 1 << 20 or not hasattr(os, "SEEK_DATA"):
        pytest.skip("this file system stores zeros instead of leaving a hole")
    started = time.perf_counter()
    with path.open("rb") as stream:
        items = list(iter_frames(stream))
    assert time.perf_counter() - started < 10
    assert good(items) == PAYLOADS * 2
    (damage,) = damages(items)
    assert (damage.kind, damage.offset, damage.lost_bytes) == ("bad_length_crc", len(data), 8 << 30)


def test_crafted_headers_cost_a_bounded_checksum_then_the_rest_is_reported_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A verified header claiming 64 kB at every 16 bytes, over junk: each costs a 64 kB CRC.
    monkeypatch.setattr(framing, "RESYNC_CHECK_BYTES", 1 << 20)
    decoys = (header_claiming(1 << 16) + b"junk") * 100
    data = b"\xff" * 12 + decoys + os.urandom(1 << 17) + frame(PAYLOADS)
    (damage,) = frames_of(data)
    assert (damage.kind, damage.offset, damage.lost_bytes) == ("bad_length_crc", 0, len(data))
    assert "more than 1 MiB of headers whose payload CRC fails" in damage.detail
    monkeypatch.setattr(framing, "RESYNC_CHECK_BYTES", 1 << 30)  # an honest bound: all read
    assert good(frames_of(data)) == PAYLOADS
