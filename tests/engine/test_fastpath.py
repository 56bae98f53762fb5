"""The C engine (native._scan + engine.fastpath) gives exactly what the reference reader
gives: same series (steps, wall times, statistics, fingerprints), notices, damage and FileInfo,
on real writers' files, edge cases, damaged files, the corpus, and when a file is split in two
byte ranges read apart."""

from __future__ import annotations

import os
from pathlib import Path

import google_crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto import types_pb2

from gradcheck.engine import fastpath, join, ranges, read
from gradcheck.engine import pool as parallel
from gradcheck.engine.parts import file_part, reduce_file_reference
from gradcheck.events.decode import first_left_edges
from gradcheck.events.framing import masked_crc32c
from gradcheck.events.steps import StepWindow
from gradcheck.events.wire import EVENT_SUMMARY, event_head
from gradcheck.model import STAT_NAMES, HistogramRecord
from gradcheck.series import reduce
from gradcheck.series.batch import FINGERPRINT_WEIGHTS, reduce_histograms
from gradcheck.series.stats import histogram_stats_batch
from tests.support import eventfiles as ef
from tests.support.eventfiles import keras3_step
from tests.support.paths import CORPUS, REPO
from tests.support.twins import (
    DATA,
    EDGE_CASES,
    PAYLOADS,
    SETTINGS,
    assert_close_stats,
    assert_same,
    both_engines,
    check_file,
    histo_step,
    tf2_steps,
)

pytestmark = pytest.mark.skipif(
    not fastpath.available(), reason="the C engine is not built, or GRADCHECK_NO_EXT=1"
)


def check_split(
    path: Path | str, boundary: int, window: StepWindow | None = None, assume: bool = False
) -> bool:
    """:func:`check_pieces` with two ranges meeting at ``boundary``."""
    return check_pieces(path, [boundary], window, assume)


def check_pieces(
    path: Path | str, boundaries: list[int], window: StepWindow | None = None, assume: bool = False
) -> bool:
    """Read ``path`` as ranges meeting at ``boundaries``; if they join, they match the
    reference. Returns whether they joined (else the pipeline reads the file again whole).
    ``assume``: each range after the first assumes the plugins of the file's head before it,
    as the pipeline does."""
    window = window or StepWindow()
    starts, limits = [0, *boundaries], [*boundaries, -1]
    pieces = [
        ranges.read_range(
            str(path),
            "run",
            window,
            start,
            limit,
            ranges.head_plugins(str(path), "run", start) if assume and start else None,
        )
        for start, limit in zip(starts, limits, strict=True)
    ]
    joined = join.join_ranges(pieces, boundaries)
    if joined is None:
        return False
    part = file_part(joined, str(path), "run")
    reference = reduce_file_reference(str(path), "run", window)
    assert_same(reference.data, part.data)
    assert (part.values_read, part.values_kept) == (reference.values_read, reference.values_kept)
    assert part.data.file_infos == reference.data.file_infos
    return True


COMMITTED = sorted(
    str(p.relative_to(REPO))
    for folder in ("tests/data/writers", "sample_runs")
    for p in (REPO / folder).rglob("*tfevents*")
)


@pytest.mark.parametrize("relative", COMMITTED)
def test_committed_fixtures_read_the_same(relative: str) -> None:
    part = check_file(REPO / relative)
    assert part.values_read > 0


@pytest.mark.parametrize("relative", COMMITTED)
def test_committed_fixtures_read_the_same_in_a_step_window(relative: str) -> None:
    check_file(REPO / relative, StepWindow(2, 5))


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus absent")
def test_corpus_reads_the_same() -> None:
    files = sorted(p for p in (CORPUS / "runs").rglob("*tfevents*") if p.is_file())
    assert len(files) > 20
    for path in files:
        check_file(path)


# --------------------------------------------------------------------------------------------
# Edge cases written with tensorboard's record writer
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases_read_the_same(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"events.out.tfevents.1.host.{name}"
    ef.write_events(path, EDGE_CASES[name])
    check_file(path)


def test_collisions_and_restarts_are_noticed_by_the_c_engine(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.v2"
    ef.write_events(path, EDGE_CASES["keras3_collisions"])
    part = check_file(path)
    kernel, bias = part.data.notices
    assert (kernel.kind, kernel.tag, bias.tag) == (
        "tag_collision",
        "kernel/histogram",
        "bias/histogram",
    )
    assert "element counts 50, 5000, 5500" in kernel.message
    assert [key for key in part.data.histograms] == [
        (tag, i) for tag in ("kernel/histogram", "bias/histogram") for i in range(3)
    ]
    ef.write_events(path, EDGE_CASES["restarts"])
    part = check_file(path)
    assert [(n.kind, n.step) for n in part.data.notices] == [("restart", 2), ("restart", 1)]


def many_series_events(series: int, steps: list[int]) -> list[object]:
    """``series`` histograms a step, after a record of a half-precision tensor histogram
    (which the scanner leaves to the reference decoder: records pending between scanned
    rows)."""
    half = ef.tf2_buckets(np.linspace(-1.0, 1.0, 40))
    events: list[object] = [ef.file_version()]
    for number, step in enumerate(steps):
        value = ef.tensor_histogram("half", half * (step + 1), first=number == 0,
                                    dtype=types_pb2.DT_HALF)  # fmt: skip
        values = [ef.histo_of(f"p{i}", np.arange(5.0) * (step + 1) + i) for i in range(series)]
        events.append(ef.summary_event(step, [value]))
        events.append(ef.summary_event(step, [*values, ef.simple_scalar("loss", float(step))]))
    return events


@pytest.mark.parametrize("rows_per_series", [1, 8, 10_000])
def test_many_series_settled_across_batches_read_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows_per_series: int
) -> None:
    """More series than a batch holds rows, a restart in every series, rows pooled over
    several batches (and settled every batch, or once at the end): the reference's series, in
    its order, with its read counts."""
    monkeypatch.setattr(reduce, "SETTLE_ROWS_PER_SERIES", rows_per_series)
    path = tmp_path / "events.out.tfevents.1.host"
    steps = [*range(6), *range(3, 10)]
    ef.write_events(path, many_series_events(1500, steps))
    reference, fast = both_engines(path)
    assert_same(reference.data, fast.data)
    assert list(fast.data.histograms)[:2] == [("half", 0), ("p0", 0)]
    for key, series in fast.data.histograms.items():
        assert series.steps.tolist() == list(range(10)), key
        assert series.histograms_read == reference.data.histograms[key].histograms_read == 10
    assert fast.values_read == len(steps) * 1502


def test_odd_values_damage_and_writer_as_the_reference(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.host"
    ef.write_events(path, EDGE_CASES["odd_values"])
    part = check_file(path)
    assert {damage.kind for damage in part.data.damages} == {"undecodable"}
    assert part.data.file_infos[0].writer == "my.writer"
    assert set(part.data.scalars) == {"acc", "acc64", "loss"}


def test_empty_missing_and_unreadable_files(tmp_path: Path) -> None:
    empty = tmp_path / "events.out.tfevents.empty"
    empty.write_bytes(b"")
    folder = tmp_path / "events.out.tfevents.folder"
    folder.mkdir()
    for path in (empty, folder, tmp_path / "gone"):
        check_file(path)


# --------------------------------------------------------------------------------------------
# Damage: both engines lose the same bytes and say the same
# --------------------------------------------------------------------------------------------


@SETTINGS
@given(flips=st.lists(st.tuples(st.integers(0, len(DATA) - 1), st.integers(0, 7)), max_size=4))
def test_bit_flips_read_the_same(tmp_path: Path, flips: list[tuple[int, int]]) -> None:
    data = bytearray(DATA)
    for position, bit in flips:
        data[position] ^= 1 << bit
    path = tmp_path / "events.out.tfevents.flipped"
    path.write_bytes(bytes(data))
    check_file(path)


@SETTINGS
@given(cut=st.integers(0, len(DATA)), garbage=st.binary(max_size=40), at=st.integers(0, len(DATA)))
def test_truncation_and_garbage_read_the_same(
    tmp_path: Path, cut: int, garbage: bytes, at: int
) -> None:
    path = tmp_path / "events.out.tfevents.damaged"
    path.write_bytes(DATA[:cut])
    check_file(path)
    path.write_bytes(DATA[:at] + garbage + DATA[at:])
    check_file(path)


@SETTINGS
@given(payloads=st.lists(st.binary(max_size=200), min_size=1, max_size=6))
def test_garbage_payloads_with_valid_crcs_read_the_same(
    tmp_path: Path, payloads: list[bytes]
) -> None:
    """Random bytes framed with good CRCs: the C decoder must never read past a field, never
    crash, and hand anything it does not understand to the reference decoder."""
    path = tmp_path / "events.out.tfevents.garbage"
    path.write_bytes(ef.frame(payloads))
    check_file(path)


@SETTINGS
@given(
    position=st.integers(0, 2000),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 7)), min_size=1, max_size=3),
)
def test_mutated_payloads_with_valid_crcs_read_the_same(
    tmp_path: Path, position: int, flips: list[tuple[int, int]]
) -> None:
    """Bit flips inside a real Event payload, re-framed with good CRCs (protobuf-level damage)."""
    payloads = list(PAYLOADS)
    index = 1 + position % (len(payloads) - 1)
    payload = bytearray(payloads[index])
    for offset, bit in flips:
        payload[offset % len(payload)] ^= 1 << bit
    payloads[index] = bytes(payload)
    path = tmp_path / "events.out.tfevents.mutated"
    path.write_bytes(ef.frame(payloads))
    check_file(path)


# --------------------------------------------------------------------------------------------
# Two byte ranges read apart (two processes share a big file)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pieces", [2, 3, 6])
@pytest.mark.parametrize(
    "name", ["tf2", "keras3_collisions", "histo", "restart_across", "plugin_named_late"]
)
def test_ranges_join_to_the_reference(tmp_path: Path, name: str, pieces: int) -> None:
    events = {
        "tf2": tf2_steps(range(60)),
        "keras3_collisions": [ef.file_version(), *(keras3_step(s) for s in range(45))],
        "histo": [ef.file_version(), *(histo_step(s) for s in range(60))],
        "restart_across": [
            ef.file_version(),
            *(histo_step(s) for s in [*range(30), *range(10, 40)]),
        ],
        "plugin_named_late": tf2_steps(range(60), first_plugin_step=45),
    }[name]
    path = tmp_path / "events.out.tfevents.1.v2"
    offsets = ef.write_events(path, events)
    boundaries = ranges.split_offsets(str(path), path.stat().st_size, pieces)
    assert len(boundaries) == pieces - 1 and boundaries == sorted(set(boundaries))
    assert set(boundaries) <= set(offsets)  # each the start of a record
    for assume in (False, True):
        joined = check_pieces(path, boundaries, assume=assume)
        # A restart across a boundary, or a plugin named only after one, cannot be joined
        # exactly: the pipeline then reads the file again in one piece.
        assert joined == (name not in ("restart_across", "plugin_named_late"))
        check_pieces(path, boundaries, StepWindow(5, 40), assume=assume)
    size = path.stat().st_size  # each cut after its share of the bytes
    assert all(b >= size * n // pieces for n, b in enumerate(boundaries, start=1))


@pytest.mark.parametrize("relative", COMMITTED)
def test_committed_fixtures_cut_in_ranges_join_to_the_reference(relative: str) -> None:
    """Files of real writers cut in 2 to 5 ranges, each after the first assuming the head's
    plugins: joined, and exactly the reference (none of them restarts, so every cut found
    must join; a join that fell back to reading the file whole would hide here)."""
    path = REPO / relative
    size = path.stat().st_size
    cuts = [ranges.split_offsets(str(path), size, pieces) for pieces in range(2, 6)]
    assert any(cuts), "no step boundary found to cut at"
    for boundaries in filter(None, cuts):
        assert check_pieces(path, boundaries, assume=True), boundaries


def test_second_range_reads_tf2_histograms_at_once_with_the_heads_plugins(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.out.tfevents.1.v2"
    ef.write_events(path, tf2_steps(range(40)))
    (boundary,) = ranges.split_offsets(str(path), path.stat().st_size, 2)
    assumed = ranges.head_plugins(str(path), "run", boundary)
    assert set(assumed.values()) == {"histograms", "scalars"}
    first = ranges.read_range(str(path), "run", StepWindow(), 0, boundary)
    assert assumed == first.plugins  # learnt without statistics, the same as reading it all
    blind = ranges.read_range(str(path), "run", StepWindow(), boundary, -1)
    second = ranges.read_range(str(path), "run", StepWindow(), boundary, -1, assumed)
    assert set(blind.pending) == set(assumed)  # without: every TF2 value of the range pending
    assert not second.pending and second.assumed == assumed
    assert join.join_ranges([first, second], [boundary]) is not None


def test_a_wrong_plugin_assumption_reads_the_file_again(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.v2"
    ef.write_events(path, tf2_steps(range(40)))
    (boundary,) = ranges.split_offsets(str(path), path.stat().st_size, 2)
    assumed = ranges.head_plugins(str(path), "run", boundary)
    wrong = {
        tag: "scalars" if name == "histograms" else "histograms" for tag, name in assumed.items()
    }
    first = ranges.read_range(str(path), "run", StepWindow(), 0, boundary)
    second = ranges.read_range(str(path), "run", StepWindow(), boundary, -1, wrong)
    assert join.join_ranges([first, second], [boundary]) is None


def test_a_cut_starts_a_new_step_at_a_verifiable_record(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.v2"
    offsets = ef.write_events(path, tf2_steps(range(10)))
    (boundary,) = ranges.split_offsets(str(path), path.stat().st_size, 2)
    assert boundary in offsets
    at = offsets.index(boundary)
    assert at % 3 == 1  # the first of a step's three events (after file_version)


def _protobuf_head(payload: bytes) -> tuple[int, str] | None:
    """What tensorboard's own parser says: the step and the oneof's field name ("" for none)."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto.event_pb2 import Event

    try:
        event = Event.FromString(payload)
    except DecodeError:
        return None
    return int(event.step), event.WhichOneof("what") or ""


def _protobuf_summary_step(payload: bytes) -> int | None:
    head = _protobuf_head(payload)
    return head[0] if head is not None and head[1] == "summary" else None


def _summary_step(payload: bytes) -> int | None:
    """The split point's step reader, as ``ranges._step_boundary`` uses ``event_head``."""
    head = event_head(payload)
    return head[0] if head is not None and head[1] == EVENT_SUMMARY else None


_WHAT = st.sampled_from(["summary", "file_version", "graph_def", "log_message", "none"])


@settings(max_examples=300, deadline=None)
@given(
    step=st.integers(-(2**63), 2**63 - 1),
    wall_time=st.floats(allow_nan=False),
    what=st.lists(_WHAT, min_size=1, max_size=3),
    tags=st.lists(st.text(max_size=5), max_size=3),
)
def test_summary_step_reads_what_protobuf_reads(
    step: int, wall_time: float, what: list[str], tags: list[str]
) -> None:
    """The split point's protobuf-free step reader against tensorboard's parser, on events
    of every kind, negative and 64-bit steps, and several oneof fields on the wire (the
    last one wins), concatenated as protobuf merges messages."""
    from tensorboard.compat.proto import event_pb2

    payload = b""
    for kind in what:
        event = event_pb2.Event(step=step, wall_time=wall_time)
        if kind == "summary":
            event.summary.value.add(tag=tags[0] if tags else "t", simple_value=1.0)
        elif kind == "file_version":
            event.file_version = "brain.Event:2"
        elif kind == "graph_def":
            event.graph_def = b"\x00\x01graph"
        elif kind == "log_message":
            event.log_message.message = "hello"
        payload += event.SerializeToString()
    assert _summary_step(payload) == _protobuf_summary_step(payload)
    head, expected = event_head(payload), _protobuf_head(payload)
    assert head is not None and expected is not None
    fields = event_pb2.Event.DESCRIPTOR.fields_by_number
    assert (head[0], fields[head[1]].name if head[1] else "") == expected


@pytest.mark.parametrize(
    "payload",
    [
        b"\x10",  # step key, no value
        b"\x10\x80",  # truncated varint
        b"\x10" + b"\xff" * 10 + b"\x01",  # varint longer than ten bytes
        b"\x2a\x05ab",  # summary field longer than the payload
        b"\x00\x01",  # field number 0
        b"\x13",  # a group (wire type 3)
    ],
)
def test_summary_step_of_a_malformed_payload_is_none(payload: bytes) -> None:
    assert _summary_step(payload) is None
    assert event_head(payload) is None
    assert _protobuf_summary_step(payload) is None  # as protobuf sees it too


def test_a_big_file_is_split_when_its_reading_is_estimated_long_enough() -> None:
    """The bench logs' densities, one file on two processes: a 160 MB TF2 log (~1,250
    records a MB, 0.33 s in one process) is split, a 160 MB PyTorch one (~160 a MB, 0.19 s)
    is not, a 1 GB one is; on eight processes the 1 GB PyTorch log in eight ranges."""
    mb = 1 << 20

    def pieces(size: int, records: int, scanned: int, jobs: int = 2) -> int:
        estimate = ranges.estimated_seconds(size, records, scanned)
        return ranges.plan_pieces(size, size / jobs, estimate)

    assert pieces(160 * mb, 5000, 4 * mb) == 2  # TF2
    assert pieces(160 * mb, 640, 4 * mb) == 1  # PyTorch
    assert pieces(1000 * mb, 640, 4 * mb) == 2
    assert pieces(1000 * mb, 640, 4 * mb, jobs=8) == 8
    assert pieces(64 * mb, 5000, 4 * mb) == 1
    assert pieces(160 * mb, 0, 0) == 2  # nothing read: split, the ranges check what they read
    assert ranges.estimated_seconds(160 * mb, 0, 0) is None


def test_plan_splits_by_the_estimate_and_assumes_the_heads_plugins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "events.out.tfevents.1.v2"
    ef.write_events(path, tf2_steps(range(40)))
    size = path.stat().st_size
    monkeypatch.setattr(ranges, "SPLIT_SIZE", 1)
    monkeypatch.setattr(ranges, "PIECE_SECONDS", 1e9)  # never long enough
    (whole,) = read._plan([(str(path), "run")], [size], jobs=2)
    assert not whole.split
    monkeypatch.setattr(ranges, "PIECE_SECONDS", 1e-12)  # any estimate long enough
    first, second = read._plan([(str(path), "run")], [size], jobs=2)
    assert first.split and second.split and first.limit == second.start
    assert second.assumed == ranges.head_plugins(str(path), "run", second.start)
    assert set(second.assumed.values()) == {"histograms", "scalars"}
    tasks = read._plan([(str(path), "run")], [size], jobs=4)  # one range a process
    assert len(tasks) == 4 and all(task.split for task in tasks)
    assert [t.limit for t in tasks[:-1]] == [t.start for t in tasks[1:]] and tasks[-1].limit == -1
    assert tasks[0].start == 0 and tasks[0].assumed is None
    assert all(t.assumed == ranges.head_plugins(str(path), "run", t.start) for t in tasks[1:])


def test_plan_cuts_a_file_that_holds_more_than_a_process_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several files: a file bigger than a process's share of all the bytes is cut (else one
    process reads it alone while the other is done); files of about a share are not."""
    monkeypatch.setattr(ranges, "SPLIT_SIZE", 1)
    monkeypatch.setattr(ranges, "PIECE_SECONDS", 1e-12)  # any estimate long enough
    files = []
    for number, steps in enumerate((90, 10, 10)):
        path = tmp_path / f"events.out.tfevents.{number}.v2"
        ef.write_events(path, tf2_steps(range(steps)))
        files.append((str(path), "run"))
    sizes = [Path(path).stat().st_size for path, _ in files]
    tasks = read._plan(files, sizes, jobs=2)
    assert [task.file for task in tasks] == [0, 0, 1, 2]  # the big one in two, about a share
    assert plan_sizes(read._plan(files[1:], sizes[1:], jobs=2)) == sizes[1:]


def test_a_file_is_cut_in_about_its_size_over_a_share_each_long_enough_to_read() -> None:
    assert ranges.PIECE_SECONDS == 0.125
    assert ranges.plan_pieces(100, 50, None) == 2
    assert ranges.plan_pieces(100, 50, 0.2) == 1  # each piece would read under 0.125 s
    assert ranges.plan_pieces(100, 120, None) == 1
    assert ranges.plan_pieces(100, 60, None) == 2  # 1.67 shares
    assert ranges.plan_pieces(800, 100, 0.6) == 4
    assert ranges.plan_pieces(800, 100, 5.0) == 8


def plan_sizes(tasks: list[read._Task]) -> list[int]:
    return [read._task_bytes(task) for task in tasks]


def test_the_heaviest_go_first_and_the_loads_follow_it() -> None:
    assert parallel.longest_first([20, 10, 25, 5]) == [2, 0, 1, 3]
    assert parallel.longest_first([1.0, 1.0, 1.0]) == [0, 1, 2]  # ties in item order
    assert parallel.loads([10, 10], 2) == [10, 10]
    assert parallel.loads([40, 40, 40, 40], 2) == [80, 80]
    assert parallel.loads([100, 10, 10, 10], 2) == [30, 100]
    assert parallel.loads([20, 10, 25, 5], 2) == [30, 30]
    assert parallel.loads([20, 10, 25, 5], 3) == [15, 20, 25]
    assert parallel.loads([1.0], 3) == [0.0, 0.0, 1.0]


def test_joined_ranges_free_each_piece_as_they_join(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.v2"
    ef.write_events(path, tf2_steps(range(40)))
    (boundary,) = ranges.split_offsets(str(path), path.stat().st_size, 2)
    first = ranges.read_range(str(path), "run", StepWindow(), 0, boundary)
    second = ranges.read_range(str(path), "run", StepWindow(), boundary, -1)
    joined = join.join_ranges([first, second], [boundary])
    assert joined is not None
    # The halves' series moved into the joined result (nothing held twice).
    assert not first.data.histograms and not second.data.histograms
    assert not first.data.scalars and not second.data.scalars
    assert len(joined.data.histograms[("gradients/dense/kernel", 0)]) == 40
    assert joined.data.scalars["loss"].steps.tolist() == list(range(40))


# --------------------------------------------------------------------------------------------
# Pieces
# --------------------------------------------------------------------------------------------


@given(data=st.binary(max_size=3000))
def test_c_crc32c_matches_google_crc32c(data: bytes) -> None:
    from gradcheck.native import _scan  # type: ignore[attr-defined]

    assert _scan.masked_crc32c(data) == masked_crc32c(data)
    assert _scan.crc32c_software(data) == google_crc32c.value(data)


# _scan.c's three-stream CRC32C: buffers of CRC_THREE_STREAMS bytes or more are cut into rounds
# of three blocks of at most CRC_BLOCK bytes, whose CRCs are combined.
CRC_THREE_STREAMS = 96
CRC_BLOCK = 4096


def _wrong_crcs(data: bytes, lengths: list[int]) -> list[tuple[int, int]]:
    """(start, length) of the slices of ``data``, starting at byte 0 to 7 (misaligned), whose
    CRC from the instruction or from the tables differs from google-crc32c's."""
    from gradcheck.native import _scan  # type: ignore[attr-defined]

    view = memoryview(data)
    wrong = []
    for start in range(8):
        for length in lengths:
            piece = view[start : start + length]
            expected = bytes(piece)
            hardware = _scan.masked_crc32c(piece) == masked_crc32c(expected)
            tables = _scan.crc32c_software(piece) == google_crc32c.value(expected)
            if not (hardware and tables):
                wrong.append((start, length))
    return wrong


def test_c_crc32c_is_right_for_every_length_up_to_4096_at_every_alignment() -> None:
    data = np.random.default_rng(6).integers(0, 256, 4096 + 8, dtype=np.uint8).tobytes()
    assert _wrong_crcs(data, list(range(4097))) == []


def test_c_crc32c_is_right_around_its_rounds_and_on_megabytes() -> None:
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, (4 << 20) + 8, dtype=np.uint8).tobytes()
    round_ = 3 * CRC_BLOCK  # the longest round; a shorter last round, then one chain
    edges = [
        CRC_THREE_STREAMS,
        round_,
        2 * round_,
        round_ + CRC_THREE_STREAMS,
        5 * round_ + 24,
    ]
    lengths = [edge + delta for edge in edges for delta in range(-25, 26)]
    lengths += [int(n) for n in rng.integers(0, 4 << 20, 20)] + [4 << 20]
    assert _wrong_crcs(data, lengths) == []


def test_c_crc32c_uses_three_streams_where_the_cpu_can() -> None:
    """The tests above test the three streams only if this CPU takes them."""
    from gradcheck.native import _scan  # type: ignore[attr-defined]

    cpuinfo = Path("/proc/cpuinfo")
    if os.uname().machine != "x86_64" or not cpuinfo.exists():
        pytest.skip("not a Linux x86-64 machine")
    flags = set(cpuinfo.read_text().split())
    if not {"sse4_2", "pclmulqdq"} <= flags:
        pytest.skip("this CPU has no SSE4.2 and PCLMUL")
    assert _scan.CRC_IMPLEMENTATION == "sse4.2+pclmul"


def test_statistics_do_not_depend_on_the_position_in_a_batch() -> None:
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 1000, size=(3000, 30)).astype(float)
    right = np.sort(rng.normal(size=(3000, 30)), axis=1)
    left = np.concatenate([right[:, :1] - 1, right[:, :-1]], axis=1)
    fields, present = np.zeros((3000, 5)), np.zeros((3000, 5), dtype=bool)
    whole = histogram_stats_batch(left, right, counts, fields, present)
    tail = histogram_stats_batch(
        left[2000:], right[2000:], counts[2000:], fields[2000:], present[2000:]
    )
    assert np.array_equal(whole[2000:], tail, equal_nan=True)


def test_no_ext_environment_variable_selects_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    assert fastpath.available()
    monkeypatch.setenv("GRADCHECK_NO_EXT", "1")
    assert not fastpath.available()


# --------------------------------------------------------------------------------------------
# The C statistics kernel (_scan.reduce) against numpy (stats.histogram_stats_batch)
# --------------------------------------------------------------------------------------------


def c_reduce(records: list[HistogramRecord]) -> tuple[np.ndarray, np.ndarray]:
    """``_scan.reduce`` on records laid out as the scanner lays out its data column."""
    from gradcheck.native import _scan  # type: ignore[attr-defined]

    chunks, starts, sizes, kinds = [], [], [], []
    fields = np.zeros((len(records), 5))
    at = 0
    for i, record in enumerate(records):
        if record.encoding == "tensor":
            chunk = np.stack([record.left, record.right, record.counts], axis=1).ravel()
            kinds.append(1)
        else:
            chunk = np.concatenate([record.right, record.counts])
            fields[i] = (record.min, record.max, record.num, record.sum, record.sum_squares)
            kinds.append(0)
        chunks.append(chunk)
        starts.append(at)
        sizes.append(record.counts.size)
        at += chunk.size
    data = np.concatenate([*chunks, np.zeros(1)])
    stats = np.empty((len(records), len(STAT_NAMES)), dtype=np.float32)
    fingerprints = np.empty(len(records), dtype=np.uint64)
    _scan.reduce(
        data,
        np.arange(len(records), dtype=np.int64),
        np.array(starts, dtype=np.int64),
        np.array(sizes, dtype=np.int32),
        np.array(kinds, dtype=np.uint8),
        fields,
        FINGERPRINT_WEIGHTS,
        stats,
        fingerprints,
    )
    return stats, fingerprints


def check_c_reduce(records: list[HistogramRecord]) -> None:
    expected_stats, expected_fingerprints = reduce_histograms(records)
    stats, fingerprints = c_reduce(records)
    assert np.array_equal(fingerprints, expected_fingerprints)
    assert_close_stats(stats, expected_stats, records, np.array([magnitude(r) for r in records]))


def magnitude(record: HistogramRecord) -> float:
    """The largest finite magnitude of a record's edges and limits, in float64: a histogram
    squeezed between limits of 1e50 has a mean whose rounding (an ulp of 1e50) makes a std of
    ~1e34 in one summation order and 0 in another, which its float32 statistics, capped at
    3.4e38, cannot show to be noise (hypothesis found one)."""
    limits = [record.min, record.max] if record.encoding == "histo" else []
    values = np.abs(np.concatenate([record.left, record.right, np.array(limits, dtype=float)]))
    return float(values[np.isfinite(values)].max(initial=0.0))


def histogram_record(
    encoding: str, right: np.ndarray, counts: np.ndarray, left_first: float, proto: list[float]
) -> HistogramRecord:
    """A record as the reference decoder builds it (histo: left edges from the limits; the
    reference decoder gives no empty ``histo`` record)."""
    if encoding == "tensor":
        left = np.concatenate([[left_first], right[:-1]]) if right.size else right
        return HistogramRecord("r", "f", 0, "t", 0, 0, 0.0, "tensor", left, right, counts)
    first = first_left_edges(np.float64(proto[0]), right[0], counts[0])
    left = np.concatenate([[first], right[:-1]])
    return HistogramRecord("r", "f", 0, "t", 0, 0, 0.0, "histo", left, right, counts, *proto)


ODD_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, -1e-300, 1e300, -1e300, 1.8e308, -1.8e308, 1e-12]),
    st.floats(-10, 10),
)
COUNTS = st.one_of(
    st.sampled_from([0.0, 1.0, 2.0, 1e6, 0.5]),
    st.integers(0, 1000).map(float),
    st.floats(0, 1e30),
)


@st.composite
def odd_histograms(draw: st.DrawFn) -> HistogramRecord:
    size = draw(st.one_of(st.integers(0, 4), st.integers(0, 70), st.integers(60, 300)))
    sort = draw(st.booleans())
    right = np.array(draw(st.lists(ODD_FLOATS, min_size=size, max_size=size)))
    if sort:
        right = np.sort(right)
    if draw(st.booleans()):  # zero-width buckets
        right = np.repeat(right[: (size + 1) // 2], 2)[:size]
    counts = np.array(draw(st.lists(COUNTS, min_size=size, max_size=size)))
    if draw(st.booleans()):
        counts[:] = 0.0 if draw(st.booleans()) else counts
    encoding = draw(st.sampled_from(["tensor", "histo"]) if size else st.just("tensor"))
    proto = draw(st.lists(ODD_FLOATS, min_size=5, max_size=5))
    return histogram_record(encoding, right, counts, draw(ODD_FLOATS), proto)


@SETTINGS
@given(records=st.lists(odd_histograms(), min_size=1, max_size=6))
def test_c_statistics_match_numpy_on_odd_buckets(records: list[HistogramRecord]) -> None:
    for record in records:  # each alone: numpy's reference has no batch effects then
        check_c_reduce([record])
    if all((r.counts >= 0).all() for r in records):
        check_c_reduce(records)


def test_c_statistics_of_a_histogram_squeezed_between_huge_limits() -> None:
    """Found by hypothesis: every bucket clipped to a minimum of 3.8e50, so the std is the
    rounding of the mean alone, ~1e34 in one summation order and 0 in the other: noise at
    1e-16 of the histogram, which its float32 limits (capped at 3.4e38) could not show."""
    record = HistogramRecord(
        "r", "f", 0, "t", 0, 0, 0.0, "histo",
        np.array([-np.inf, 0.0, 0.0]),
        np.zeros(3),
        np.array([3.448068464705536e16, 4.151897106683421e22, 1e30]),
        3.761094915053678e50, 1e300, 0.0, 0.0, 0.0,
    )  # fmt: skip
    stats, _ = c_reduce([record])
    expected, _ = reduce_histograms([record])
    std = STAT_NAMES.index("std")
    assert abs(float(stats[0, std]) - float(expected[0, std])) <= 1e-12 * 3.8e50
    check_c_reduce([record])


def test_c_statistics_match_numpy_on_regular_histograms() -> None:
    rng = np.random.default_rng(7)
    records = []
    for i in range(500):
        size = int(rng.integers(1, 700))
        right = np.sort(rng.normal(scale=10.0 ** rng.integers(-30, 30), size=size))
        counts = rng.integers(0, 50, size=size).astype(float)
        values = rng.normal(size=3)
        proto = [right[0], right[-1], counts.sum() + i % 2, values[0], abs(values[1])]
        encoding = "tensor" if i % 3 else "histo"
        records.append(histogram_record(encoding, right, counts, right[0] - 1.0, proto))
    check_c_reduce(records)


BENCH_40MB = [REPO / "bench" / "data" / f"{encoding}-40MB" for encoding in ("tensor", "histo")]


@pytest.mark.parametrize("directory", BENCH_40MB, ids=lambda p: p.name)
def test_bench_logs_read_the_same(directory: Path) -> None:
    """The benchmark's 40 MB logs (when written: ``make bench``), both engines."""
    files = sorted(directory.glob("events.out.tfevents.*")) if directory.is_dir() else []
    if not files:
        pytest.skip(f"{directory} not written")
    for path in files:
        check_file(path)


def test_decode_knows_tensorboard_dtype_values_without_importing_them() -> None:
    from tensorboard.compat.proto import types_pb2

    from gradcheck.events import decode

    expected = (types_pb2.DT_FLOAT, types_pb2.DT_DOUBLE, types_pb2.DT_HALF)
    assert expected == (decode.DT_FLOAT, decode.DT_DOUBLE, decode.DT_HALF)


def adversarial_records() -> list[HistogramRecord]:
    """Rows aimed at the C kernel's shortcuts (issue 6): a padded tail (sizes above 64),
    cumulative shares landing exactly on a percentile level, totals too small or too large for
    the division-free share test, totals and means that overflow, several zero buckets,
    non-finite edges and counts (the general kernel), and the constant-tensor encoding in a
    wide row."""
    rng = np.random.default_rng(11)
    records = []
    for size in (1, 2, 30, 65, 100, 300, 513):
        right = np.sort(rng.normal(size=size)) if size > 1 else np.array([0.5])
        for counts in (
            np.ones(size),  # shares (j + 1) / size: exactly on the levels when size is 100
            np.where(np.arange(size) % 3 == 0, 1e-320, 0.0),  # subnormal total
            np.full(size, 1e300),  # the running total and numpy's sum overflow
            np.full(size, 1e250),  # near the top of the division-free range
            np.where(np.arange(size) == size - 1, 5.0, 0.0),  # everything in the last bucket
            np.where(np.arange(size) == 0, 7.0, 0.0),  # everything in the first bucket
            rng.integers(0, 3, size=size).astype(float),
        ):
            proto = [right[0], right[-1], counts.sum(), 0.1, 2.0]
            for encoding in ("tensor", "histo"):
                records.append(histogram_record(encoding, right, counts, right[0] - 1.0, proto))
        odd = rng.integers(0, 5, size=size).astype(float)
        negative_zeros = np.where(odd == 0, -0.0, odd)  # sign bit set, still counts >= 0
        records.append(histogram_record("tensor", right, negative_zeros, right[0] - 1, [0.0] * 5))
        for position, value in ((size // 2, -1.0), (size // 2, np.nan), (size - 1, np.inf)):
            counts = odd.copy()
            counts[position] = value
            records.append(histogram_record("tensor", right, counts, right[0] - 1.0, [0.0] * 5))
        for position, value in ((0, -np.inf), (size // 2, np.nan), (size - 1, np.inf)):
            edges = right.copy()
            edges[position] = value
            proto = [-1.0, 1.0, odd.sum(), 0.0, 1.0]
            for encoding in ("tensor", "histo"):
                records.append(histogram_record(encoding, edges, odd, edges[0] - 1.0, proto))
        zeros = np.zeros(size)  # zero-width buckets at 0: several zero buckets to sum
        records.append(histogram_record("tensor", zeros, odd, 0.0, [0.0] * 5))
        # several zero buckets of some width (-1 to 0.5, then 0.5 back to 0: clipped to 0 to 0):
        # their widths count in the variance, not only in the zero share
        straddle = np.linspace(0.5, 2.0, size)
        straddle[1 if size > 1 else 0] = 0.0
        records.append(histogram_record("tensor", straddle, odd + 1.0, -1.0, [0.0] * 5))
        far = np.linspace(1e10, 2e10, size)  # count * middle overflows: the mean is inf
        records.append(histogram_record("tensor", far, np.full(size, 1e300), 0.0, [0.0] * 5))
    constant = np.where(np.arange(80) == 0, 4.0, 0.0)  # TF <= 2.7's constant tensor, widened
    records.append(histogram_record("tensor", np.arange(80.0) + 3.5, constant, 2.5, [0.0] * 5))
    return records + adversarial_histo_records()


def adversarial_histo_records() -> list[HistogramRecord]:
    """``HistogramProto`` rows at the edges of the kernel's one-pass path (all fields finite,
    ``num`` > 0, every edge and count finite, counts not negative or -0.0, at most one zero
    bucket) and just outside it, where the row goes back to the general passes."""
    rng = np.random.default_rng(13)
    records = []
    for size in (1, 7, 64, 65, 300, 700):
        right = np.sort(rng.normal(size=size)) if size > 1 else np.array([0.25])
        counts = rng.integers(0, 4, size=size).astype(float)
        counts[size // 2] += 1.0
        num = counts.sum()

        def histo(edges: np.ndarray, bins: np.ndarray, *proto: float) -> None:
            records.append(histogram_record("histo", edges, bins, 0.0, list(proto)))

        histo(right, counts, right[0], right[-1], num, 0.1, 2.0)  # the one-pass path
        histo(right, counts, right[0] - 5.0, right[-1] + 5.0, num, -3.0, 9.0)  # loose limits
        low, high = (right[size // 4], right[3 * size // 4]) if size > 1 else (0.1, 0.2)
        histo(right, counts, low, high, num, 0.0, 1.0)  # limits inside: edges clipped
        histo(right, counts, right[0], right[-1], num + 7.0, 0.1, 2.0)  # values not bucketed
        histo(right, np.zeros(size), right[0], right[-1], 3.0, 0.0, 1.0)  # empty buckets
        first_full = counts.copy()
        first_full[0] = 2.0  # min above the first edge: first left edge -inf, general path
        histo(right, first_full, right[0] + 1.0, right[-1], num + 2.0, 0.1, 2.0)
        histo(right, np.where(counts == 0, -0.0, counts), right[0], right[-1], num, 0.0, 1.0)
        for field, value in ((2, 0.0), (2, -1.0), (3, np.inf), (4, np.nan), (0, -np.inf)):
            proto = [right[0], right[-1], num, 0.1, 2.0]
            proto[field] = value
            histo(right, counts, *proto)
        for position, value in ((0, np.nan), (size - 1, np.inf)):
            bad_counts = counts.copy()
            bad_counts[position] = value
            histo(right, bad_counts, right[0], right[-1], num, 0.1, 2.0)
        at_zero = np.zeros(size)  # zero-width buckets at 0: several zero buckets
        histo(at_zero, counts, 0.0, 0.0, num, 0.0, 0.0)
        straddling = np.linspace(-1.0, 1.0, size) if size > 1 else np.array([0.5])
        histo(straddling, counts, -1.5, 1.0, num, 0.0, 1.0)  # one zero bucket
    return records


def test_c_statistics_match_numpy_on_adversarial_rows() -> None:
    for record in adversarial_records():  # each alone: no batch effects in the reference
        check_c_reduce([record])
