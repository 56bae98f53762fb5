"""Discovery of runs and the reader's record stream: order, collisions, restarts, damage."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gradcheck.errors import InputError
from gradcheck.events.discover import discover
from gradcheck.events.reader import read_file, read_run, series_name
from gradcheck.model import Damage, FileInfo, HistogramRecord, Notice, Run, ScalarRecord
from tests.support import eventfiles as ef
from tests.support.eventfiles import keras3_step
from tests.support.fresh_interpreter import frameworks_imported_by

# ---------------------------------------------------------------------------------- discover


def touch_event_file(path: Path) -> Path:
    ef.write_events(path, [ef.file_version()])
    return path


def test_discover_finds_runs_recursively_with_odd_names(tmp_path: Path) -> None:
    a = touch_event_file(tmp_path / "exp" / "train" / "events.out.tfevents.2.host.1.0.v2")
    b = touch_event_file(tmp_path / "exp" / "train" / "events.out.tfevents.1.host.1.0.v2")
    c = touch_event_file(tmp_path / "exp" / "eval" / "2gpu_big%2Fevents.out.tfevents.1.host")
    d = touch_event_file(tmp_path / "exp" / "events.out.tfevents.resnet")
    (tmp_path / "exp" / "train" / "checkpoint").write_text("not an event file")
    (tmp_path / "exp" / "empty").mkdir()
    runs = discover([str(tmp_path / "exp")])
    assert runs == [
        Run(str(tmp_path / "exp"), (str(d),)),
        Run(str(tmp_path / "exp" / "eval"), (str(c),)),
        Run(str(tmp_path / "exp" / "train"), (str(b), str(a))),
    ]


def test_discover_a_file_given_directly_and_merged_with_its_directory(tmp_path: Path) -> None:
    first = touch_event_file(tmp_path / "run" / "events.out.tfevents.1")
    second = touch_event_file(tmp_path / "run" / "events.out.tfevents.2")
    assert discover([str(second)]) == [Run(str(tmp_path / "run"), (str(second),))]
    merged = discover([str(second), str(tmp_path / "run")])
    assert merged == [Run(str(tmp_path / "run"), (str(first), str(second)))]
    assert discover(str(second)) == discover([str(second)])


def test_discover_missing_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        discover([str(tmp_path / "nope")])


def test_discover_without_event_files_says_what_it_looked_for(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="no event file found in .*logs.*'tfevents'"):
        discover([str(tmp_path / "logs")])


# ---------------------------------------------------------------------------------- reading


def kinds(records: list) -> list[str]:
    return [type(record).__name__ for record in records]


def test_records_then_file_info_with_counts(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.host.2.3.v2"
    offsets = ef.write_events(
        path,
        [
            ef.file_version(),
            ef.graph(),
            ef.summary_event(1, [ef.tensor_histogram("h", ef.tf2_buckets(np.arange(10.0)))]),
            ef.summary_event(1, [ef.simple_scalar("loss", 2.0), ef.tensor_scalar("acc", 0.5)]),
        ],
    )
    records = list(read_file(str(path), "myrun"))
    assert kinds(records) == ["HistogramRecord", "ScalarRecord", "ScalarRecord", "FileInfo"]
    histogram, loss, acc, info = records
    assert isinstance(histogram, HistogramRecord) and histogram.counts.sum() == 10
    assert (histogram.run, histogram.file, histogram.offset) == ("myrun", str(path), offsets[2])
    assert isinstance(loss, ScalarRecord) and loss.value == 2.0 and loss.offset == offsets[3]
    assert isinstance(acc, ScalarRecord) and acc.value == 0.5
    assert info == FileInfo(
        "myrun", str(path), path.stat().st_size, 4, 4, "tensorflow (TF2 summary ops)"
    )


def test_keras3_tag_collisions_become_indexed_series_with_one_notice(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.v2"
    ef.write_events(path, [ef.file_version(), keras3_step(0), keras3_step(3), keras3_step(6)])
    records = list(read_file(str(path), "run"))
    histograms = [r for r in records if isinstance(r, HistogramRecord)]
    kernels = [(r.step, r.index, int(r.counts.sum())) for r in histograms if r.tag.startswith("k")]
    assert kernels == [(s, i, n) for s in (0, 3, 6) for i, n in enumerate((50, 5000, 5500))]
    notices = [r for r in records if isinstance(r, Notice)]
    assert [(n.kind, n.tag, n.step) for n in notices] == [
        ("tag_collision", "kernel/histogram", 0),
        ("tag_collision", "bias/histogram", 0),
    ]
    assert "element counts 50, 5000, 5500" in notices[0].message
    assert "kernel/histogram#2" in notices[0].message
    assert series_name("kernel/histogram", 0) == "kernel/histogram"
    assert isinstance(records[-1], FileInfo)


def test_restart_gives_one_notice_per_restart_point_and_resets_index(tmp_path: Path) -> None:
    def step(s: int) -> object:
        values = [ef.histo_of("w", np.arange(5.0) + s), ef.histo_of("b", np.arange(3.0))]
        return ef.summary_event(s, [*values, ef.simple_scalar("loss", float(s))])

    path = tmp_path / "events.out.tfevents.1"
    steps = [0, 1, 2, 3, 2, 3, 4, 1, 2]  # resumed at step 2, then at step 1
    ef.write_events(path, [ef.file_version()] + [step(s) for s in steps])
    records = list(read_file(str(path), "run"))
    notices = [r for r in records if isinstance(r, Notice)]
    assert [(n.kind, n.step, n.tag) for n in notices] == [("restart", 2, "w"), ("restart", 1, "w")]
    assert "from 3 to 2" in notices[0].message and "from 4 to 1" in notices[1].message
    weights = [r for r in records if isinstance(r, HistogramRecord) and r.tag == "w"]
    assert [r.step for r in weights] == steps
    assert {r.index for r in weights} == {0}
    # The notice comes right before the first record that went back.
    first_back = records.index(notices[0])
    assert isinstance(records[first_back + 1], HistogramRecord)
    assert records[first_back + 1].step == 2


def test_run_files_are_read_in_name_order_with_state_carried_across(tmp_path: Path) -> None:
    buckets = ef.tf2_buckets(np.arange(4.0))
    later = tmp_path / "events.out.tfevents.2.v2"
    earlier = tmp_path / "events.out.tfevents.1.v2"
    ef.write_events(earlier, [ef.summary_event(0, [ef.tensor_histogram("h", buckets)])])
    # The second file's values carry no plugin metadata: it was given in the first file.
    ef.write_events(later, [ef.summary_event(1, [ef.tensor_histogram("h", buckets, first=False)])])
    (run,) = discover([str(tmp_path)])
    records = list(read_run(run))
    assert kinds(records) == ["HistogramRecord", "FileInfo", "HistogramRecord", "FileInfo"]
    assert [r.file for r in records] == [str(earlier)] * 2 + [str(later)] * 2
    assert [r.step for r in records if isinstance(r, HistogramRecord)] == [0, 1]


def test_damage_is_reported_with_file_and_offset_and_the_rest_is_read(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1"
    events = [ef.file_version()] + [
        ef.summary_event(s, [ef.simple_scalar("loss", float(s))]) for s in range(5)
    ]
    offsets = ef.write_events(path, events)
    data = bytearray(path.read_bytes())
    data[offsets[2] + 20] ^= 0xFF  # payload of step 1
    data[offsets[4] + 2] ^= 0xFF  # length of step 3
    path.write_bytes(bytes(data[:-3]))  # and a half-written tail (step 4)
    records = list(read_file(str(path), "run"))
    assert [r.step for r in records if isinstance(r, ScalarRecord)] == [0, 2]
    damages = [r for r in records if isinstance(r, Damage)]
    assert [(d.kind, d.offset, d.file) for d in damages] == [
        ("bad_payload_crc", offsets[2], str(path)),
        ("bad_length_crc", offsets[4], str(path)),
        ("incomplete_tail", offsets[5], str(path)),
    ]
    assert damages[1].lost_bytes == offsets[5] - offsets[4]
    assert damages[0].message.startswith(f"bad payload CRC, at byte {offsets[2]}:")
    info = records[-1]
    assert isinstance(info, FileInfo) and (info.records, info.events) == (3, 3)


def test_undecodable_payload_loses_one_record(tmp_path: Path) -> None:
    good = [e.SerializeToString() for e in (ef.file_version(), ef.summary_event(1, []))]
    path = tmp_path / "events.out.tfevents.1"
    path.write_bytes(ef.frame([good[0], b"\x0a\xff\xff\xff", good[1]]))
    records = list(read_file(str(path), "run"))
    (damage,) = [r for r in records if isinstance(r, Damage)]
    assert (damage.kind, damage.offset, damage.lost_bytes) == (
        "undecodable",
        12 + 4 + len(good[0]),
        20,
    )
    assert records[-1] == FileInfo(
        "run", str(path), path.stat().st_size, 3, 2, "unknown (brain.Event:2)"
    )


def test_unreadable_and_empty_files_never_raise(tmp_path: Path) -> None:
    empty = tmp_path / "events.out.tfevents.empty"
    empty.write_bytes(b"")
    assert list(read_file(str(empty), "run")) == [FileInfo("run", str(empty), 0, 0, 0, None)]
    folder = tmp_path / "events.out.tfevents.folder"
    folder.mkdir()
    damage, info = read_file(str(folder), "run")
    assert isinstance(damage, Damage) and damage.kind == "unreadable"
    assert isinstance(info, FileInfo) and info.records == 0
    missing = list(read_file(str(tmp_path / "gone"), "run"))
    assert isinstance(missing[0], Damage) and "gone" in missing[0].message


HISTO = ef.summary_event(0, [ef.histo_of("w", np.ones(3))])
SCALAR = ef.summary_event(0, [ef.simple_scalar("x", 1)])
WRITER_CASES = [
    ("events.out.tfevents.1.h.v2", [ef.source_writer("my.writer")], "my.writer"),
    ("events.out.tfevents.1.h", [ef.graph(), HISTO], "TF1 (HistogramProto)"),
    ("events.out.tfevents.1.h.v2", [HISTO], "tensorflow 2.0-2.1 Keras callback (HistogramProto)"),
    ("events.out.tfevents.1.h.77.0", [HISTO], "pytorch/tensorboardX (HistogramProto)"),
    ("events.out.tfevents.1.h.77.0", [ef.file_version(), SCALAR], "pytorch/tensorboardX"),
    ("events.out.tfevents.1.h", [SCALAR], "old tensorboardX (no file_version)"),
]


@pytest.mark.parametrize(("name", "events", "expected"), WRITER_CASES)
def test_writer_guess(tmp_path: Path, name: str, events: list, expected: str) -> None:
    path = tmp_path / name
    ef.write_events(path, events)
    info = list(read_file(str(path), "run"))[-1]
    assert isinstance(info, FileInfo) and info.writer == expected


def test_reader_never_imports_tensorflow(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1"
    ef.write_events(path, [ef.summary_event(0, [ef.histo_of("w", np.ones(3))])])
    code = (
        "import gradcheck.events.reader as r\n"
        f"records = list(r.read_file({str(path)!r}, 'run'))\n"
        "assert [type(x).__name__ for x in records] == ['HistogramRecord', 'FileInfo'], records\n"
    )
    assert frameworks_imported_by(code) == []
