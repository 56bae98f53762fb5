"""Properties under damage: truncation, bit flips and inserted garbage never raise, and every
record the damage did not touch is recovered, with no false record."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradcheck.events.framing import Frame, iter_frames
from gradcheck.events.reader import read_file
from gradcheck.model import Damage, FileInfo, ScalarRecord
from tests.support import eventfiles as ef

payload_lists = st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=12)
chunk_sizes = st.sampled_from([1, 5, 16, 64, 1 << 16])
# GRADCHECK_EXAMPLES=3000 runs a longer search (about 20 s).
SETTINGS = settings(
    max_examples=int(os.environ.get("GRADCHECK_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def spans(payloads: list[bytes]) -> list[tuple[int, int]]:
    """``(start, end)`` byte range of each framed record."""
    starts = ef.record_offsets(payloads)
    return [(s, s + 16 + len(p)) for s, p in zip(starts, payloads, strict=True)]


def recovered(data: bytes, chunk_size: int) -> list[tuple[int, bytes]]:
    """Every verified ``(offset, payload)``; fails the test if framing raises."""
    items = list(iter_frames(io.BytesIO(data), chunk_size=chunk_size))
    return [(i.offset, i.payload) for i in items if isinstance(i, Frame)]


@SETTINGS
@given(payloads=payload_lists, cut=st.floats(0, 1), chunk_size=chunk_sizes)
def test_truncation_keeps_every_complete_record(
    payloads: list[bytes], cut: float, chunk_size: int
) -> None:
    data = ef.frame(payloads)
    length = int(len(data) * cut)
    got = recovered(data[:length], chunk_size)
    complete = [(s, p) for (s, e), p in zip(spans(payloads), payloads, strict=True) if e <= length]
    assert got == complete


@SETTINGS
@given(
    payloads=payload_lists,
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 7)), min_size=1, max_size=4),
    chunk_size=chunk_sizes,
)
def test_bit_flips_lose_only_the_records_they_touch(
    payloads: list[bytes], flips: list[tuple[float, int]], chunk_size: int
) -> None:
    data = bytearray(ef.frame(payloads))
    positions = set()
    for where, bit in flips:
        position = min(int(where * len(data)), len(data) - 1)
        data[position] ^= 1 << bit
        positions.add(position)
    got = recovered(bytes(data), chunk_size)
    untouched = [
        (s, p)
        for (s, e), p in zip(spans(payloads), payloads, strict=True)
        if not any(s <= q < e for q in positions)
    ]
    assert set(untouched) <= set(got)
    original = set(zip(ef.record_offsets(payloads), payloads, strict=True))
    assert set(got) <= original  # no false record


@SETTINGS
@given(
    payloads=payload_lists,
    where=st.floats(0, 1),
    garbage=st.binary(min_size=1, max_size=200),
    chunk_size=chunk_sizes,
)
def test_inserted_garbage_loses_only_the_record_it_lands_in(
    payloads: list[bytes], where: float, garbage: bytes, chunk_size: int
) -> None:
    data = ef.frame(payloads)
    at = int(where * len(data))
    got = recovered(data[:at] + garbage + data[at:], chunk_size)
    shift = len(garbage)
    expected = [
        (s if e <= at else s + shift, p)
        for (s, e), p in zip(spans(payloads), payloads, strict=True)
        if e <= at or s >= at
    ]
    assert set(expected) <= set(got)
    # Nothing false: a record found inside the damage is a real one (inserting a zero byte
    # into the zero high bytes of a length can leave a whole record verifiable, one byte on).
    assert {p for _, p in got} <= set(payloads)


@SETTINGS
@given(data=st.binary(max_size=3000), chunk_size=chunk_sizes)
def test_arbitrary_bytes_never_raise(data: bytes, chunk_size: int) -> None:
    items = list(iter_frames(io.BytesIO(data), chunk_size=chunk_size))
    covered = sum(len(i.payload) + 16 if isinstance(i, Frame) else i.lost_bytes for i in items)
    assert covered == len(data)  # every byte is either a record or reported damage


def scalar_file(steps: int) -> tuple[bytes, list[tuple[int, int]]]:
    payloads = [ef.file_version().SerializeToString()] + [
        ef.summary_event(step, [ef.simple_scalar("loss", step / 7)]).SerializeToString()
        for step in range(steps)
    ]
    return ef.frame(payloads), spans(payloads)[1:]


@settings(max_examples=60, deadline=None)
@given(
    steps=st.integers(1, 30),
    flips=st.lists(st.floats(0, 1), max_size=3),
    cut=st.floats(0.5, 1),
    garbage=st.binary(max_size=64),
    where=st.floats(0, 1),
)
def test_reader_recovers_untouched_events_and_reports_the_rest(
    tmp_path_factory: pytest.TempPathFactory,
    steps: int,
    flips: list[float],
    cut: float,
    garbage: bytes,
    where: float,
) -> None:
    data, record_spans = scalar_file(steps)
    damaged = bytearray(data)
    touched = [False] * steps
    for flip in flips:
        position = min(int(flip * len(damaged)), len(damaged) - 1)
        damaged[position] ^= 0x5A
    changed = [i for i, (a, b) in enumerate(zip(damaged, data, strict=True)) if a != b]
    for position in changed:  # a byte flipped twice is back as it was: no damage there
        touched = [t or s <= position < e for t, (s, e) in zip(touched, record_spans, strict=True)]
    at = int(where * len(damaged))
    damaged[at:at] = garbage
    length = int(len(damaged) * cut)
    shift = len(garbage)
    touched = [
        t or (shift > 0 and s < at < e) or (e if e <= at else e + shift) > length
        for t, (s, e) in zip(touched, record_spans, strict=True)
    ]
    path = tmp_path_factory.mktemp("damage") / "events.out.tfevents.1"
    path.write_bytes(bytes(damaged[:length]))
    records = list(read_file(str(path), "run"))
    read_steps = [r.step for r in records if isinstance(r, ScalarRecord)]
    assert set(read_steps) >= {step for step in range(steps) if not touched[step]}
    assert len(read_steps) == len(set(read_steps))
    assert all(r.value == np.float32(r.step / 7) for r in records if isinstance(r, ScalarRecord))
    assert isinstance(records[-1], FileInfo)
    # A record cut at a record boundary leaves no trace; any other touched record must.
    starts = [s if s < at else s + shift for s, _ in record_spans]
    if any(t and start < length for t, start in zip(touched, starts, strict=True)):
        assert any(isinstance(r, Damage) for r in records)
