"""``gradcheck inspect`` through the C engine (``census.census_run``) lists exactly what the
reference reader's records give (``inspect_records(read_run(...))``): same runs, files, tags
(kind, encoding, step range, count, element counts), damage and notices, and the same JSON,
on real writers' files, the corpus, edge cases, damaged files and runs of several files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradcheck import inspect as inspect_module
from gradcheck.engine import census, fastpath
from gradcheck.events.discover import discover
from gradcheck.events.reader import read_run
from gradcheck.inspect import InspectReport, inspect_paths, inspect_records
from gradcheck.report.inspect_view import inspect_json
from tests.support import eventfiles as ef
from tests.support.eventfiles import keras3_step
from tests.support.paths import CORPUS, REPO
from tests.support.twins import (
    DATA,
    EDGE_CASES,
    PAYLOADS,
    SETTINGS,
    histo_step,
    odd_values,
    tf2_steps,
)

pytestmark = pytest.mark.skipif(
    not fastpath.available(), reason="the C engine is not built, or GRADCHECK_NO_EXT=1"
)


def reference(paths: list[str]) -> InspectReport:
    runs = discover(paths)
    return inspect_records(record for run in runs for record in read_run(run))


def check(*paths: Path | str) -> InspectReport:
    """Both engines list ``paths`` the same; the C engine's listing."""
    names = [str(path) for path in paths]
    fast, expected = inspect_paths(names), reference(names)
    assert fast == expected
    assert inspect_json(fast) == inspect_json(expected)
    return fast


def test_the_c_engine_reads_no_record_object_of_a_plain_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scanner's batches are counted as they are: neither the reader nor a record of
    the reference decoder is used for a file the scanner reads whole."""

    def refuse(*args: object) -> None:
        raise AssertionError("record objects read")

    monkeypatch.setattr(inspect_module, "read_run", refuse)
    monkeypatch.setattr(fastpath, "records_of_frame", refuse)
    report = inspect_paths([str(REPO / "tests" / "data" / "writers" / "pytorch")])
    tags = {tag.tag: tag for tag in report.runs[0].files[0].tags}
    assert [(t.count, t.element_counts) for t in tags.values()] == [(3, (101,)), (3, ()), (1, (5,))]


def test_without_the_extension_the_reference_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(census, "census_run", lambda *args: calls.append(args))
    monkeypatch.setenv("GRADCHECK_NO_EXT", "1")
    path = str(REPO / "tests" / "data" / "writers")
    assert inspect_paths([path]) == reference([path]) and not calls


def test_committed_runs_list_the_same() -> None:
    for folder in ("sample_runs", "tests/data/writers", "tests/data/runs15", "tests/data/sweep"):
        check(REPO / folder)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus absent")
def test_the_corpus_lists_the_same() -> None:
    report = check(CORPUS / "runs")
    assert {n.kind for n in report.notices} >= {"tag_collision"}
    assert {d.kind for d in report.damages} >= {"incomplete_tail"}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases_list_the_same(tmp_path: Path, name: str) -> None:
    ef.write_events(tmp_path / f"events.out.tfevents.1.host.{name}", EDGE_CASES[name])
    check(tmp_path)


def test_state_carries_across_a_runs_files_as_the_reader_carries_it(tmp_path: Path) -> None:
    """Restarts and collisions across files, a TF2 plugin named in the first file only, and
    files that are empty, damaged, a folder or undecodable among them."""
    restart = tmp_path / "restart"
    ef.write_events(restart / "events.out.tfevents.1.a", [*(histo_step(s) for s in range(10))])
    ef.write_events(restart / "events.out.tfevents.2.a", [*(histo_step(s) for s in range(5, 12))])
    ef.write_events(restart / "events.out.tfevents.3.a", [histo_step(s) for s in (11, 11, 12, 3)])
    plugin = tmp_path / "plugin"
    events = tf2_steps(range(20))
    ef.write_events(plugin / "events.out.tfevents.1.v2", events[:25])
    ef.write_events(plugin / "events.out.tfevents.2.v2", [ef.file_version(), *events[25:]])
    keras = tmp_path / "keras"
    ef.write_events(keras / "events.out.tfevents.1.v2", [keras3_step(0), keras3_step(3)])
    ef.write_events(keras / "events.out.tfevents.2.v2", [keras3_step(3), keras3_step(6)])
    odd = tmp_path / "odd"
    ef.write_events(odd / "events.out.tfevents.1.h", [ef.file_version(), *odd_values()])
    (odd / "events.out.tfevents.2.h").write_bytes(DATA[: len(DATA) // 2])
    (odd / "events.out.tfevents.3.h").write_bytes(b"")
    (odd / "events.out.tfevents.4.h").mkdir()
    (odd / "events.out.tfevents.5.h").write_bytes(DATA[:100] + bytes(50) + DATA[100:])
    report = check(tmp_path)
    by_run = {Path(run.path).name: run for run in report.runs}
    assert [(n.kind, n.step) for n in by_run["restart"].notices] == [
        ("restart", 5),
        ("restart", 3),
        ("tag_collision", 11),
        ("tag_collision", 11),
    ]
    last = {tag.name: tag for tag in by_run["restart"].files[2].tags}
    assert (last["w"].first_step, last["w"].last_step, last["w"].count) == (3, 12, 2)
    assert last["w#2"].count == 1
    second = by_run["plugin"].files[1].tags  # histograms named in the first file only
    assert {t.kind for t in second} == {"weight histogram", "gradient histogram", "scalar"}
    keras_notices = [n.tag for n in by_run["keras"].notices]
    assert keras_notices == ["kernel/histogram", "bias/histogram"]  # once per run
    assert {d.kind for d in by_run["odd"].damages} >= {"undecodable", "incomplete_tail"}


def test_batches_of_the_scanner_add_up(tmp_path: Path) -> None:
    """Over 8,192 values (two batches of the scanner), a restart and a tag whose element
    counts change at every step, more than the 32 distinct counts kept."""
    steps = [*range(2800), *range(2000, 2900)]
    events: list[object] = [ef.file_version()]
    for step in steps:
        values = [
            ef.histo_of("w", np.arange(float(50 - step % 50))),  # 50, 49, ... values
            ef.tensor_histogram("t", ef.tf2_buckets(np.arange(float(step % 40 + 2)))),
            ef.simple_scalar("loss", float(step)),
        ]
        events.append(ef.summary_event(step, values))
    ef.write_events(tmp_path / "events.out.tfevents.1.big", events)
    report = check(tmp_path)
    tags = {tag.tag: tag for tag in report.runs[0].files[0].tags}
    assert [tags[t].count for t in ("w", "t", "loss")] == [len(steps)] * 3
    assert tags["w"].element_counts == tuple(range(19, 51))  # the first 32 sizes seen
    assert len(tags["t"].element_counts) == 32
    assert [n.step for n in report.notices] == [2000]


@SETTINGS
@given(
    flips=st.lists(st.tuples(st.integers(0, 2 * len(DATA) - 1), st.integers(0, 7)), max_size=4),
    cut=st.integers(0, 2 * len(DATA)),
)
def test_damaged_runs_list_the_same(tmp_path: Path, flips: list[tuple[int, int]], cut: int) -> None:
    """Bit flips in two files of one run, the second cut short: the same damage, offsets and
    counts from both engines."""
    data = bytearray(DATA + ef.frame(PAYLOADS[1:]))
    for position, bit in flips:
        data[position % len(data)] ^= 1 << bit
    run = tmp_path / "run"
    os.makedirs(run, exist_ok=True)
    (run / "events.out.tfevents.1").write_bytes(bytes(data[: len(DATA)]))
    (run / "events.out.tfevents.2").write_bytes(bytes(data[len(DATA) : cut]))
    check(run)


@pytest.mark.parametrize("dtype", ["double", "float"])
def test_the_c_bucket_total_is_numpys_pairwise_sum_bit_for_bit(tmp_path: Path, dtype: str) -> None:
    """The scanner's copy of numpy's pairwise summation (``_scan.c``'s ``pairwise_sum``) gives
    ``counts.sum()`` to the bit, on counts whose total depends on the order of the additions
    (one count of 2**53 among ones: summed left to right every one is lost). Fails if numpy
    sums in another order than the copy (then the copy must follow numpy's)."""
    from tensorflow.core.framework import types_pb2  # the protobufs only

    sizes = [*range(1, 40), 127, 128, 129, 255, 256, 257, 1000, 1025, 4099]
    expected, events, order_matters = [], [], 0
    for step, size in enumerate(sizes):
        counts = np.ones(size)
        counts[(7 * step) % size] = 2.0**53
        buckets = np.stack([np.arange(size), np.arange(size) + 1.0, counts], axis=1)
        code = types_pb2.DT_DOUBLE if dtype == "double" else types_pb2.DT_FLOAT
        value = ef.tensor_histogram(f"h{step}", buckets, dtype=code)
        events.append(ef.summary_event(step, [value]))
        expected.append(int(counts.sum()))  # float32 counts are widened first, as the reader does
        left_to_right = 0.0
        for count in counts:
            left_to_right += float(count)
        order_matters += int(left_to_right) != expected[-1]
    assert order_matters >= len(sizes) // 2  # a plain loop in C would fail here
    ef.write_events(tmp_path / "events.out.tfevents.1.host", [ef.file_version(), *events])
    tags = check(tmp_path).runs[0].files[0].tags
    assert {tag.tag: tag.element_counts for tag in tags} == {
        f"h{step}": (total,) for step, total in enumerate(expected)
    }
