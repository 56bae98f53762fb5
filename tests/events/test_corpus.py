"""The 30 real event files of ``../shared/corpus`` (19 public projects) read as MANIFEST.tsv says.

Skipped cleanly when the corpus is not present; its files are never copied into the repository.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from gradcheck.events.discover import discover
from gradcheck.events.reader import element_count, read_run
from gradcheck.model import Damage, FileInfo, HistogramRecord, Notice, Record, ScalarRecord
from tests.support.paths import CORPUS

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not present")

TRUNCATED = re.compile(r"parse: @(\d+): truncated record \(need \d+ bytes, have (\d+)\)")


@dataclass
class FileRead:
    """What the reader yielded for one corpus file."""

    info: FileInfo | None = None
    records: list[Record] = field(default_factory=list)

    def of(self, kind: type) -> list:
        return [r for r in self.records if isinstance(r, kind)]

    def tags(self, kind: type) -> set[str]:
        return {r.tag for r in self.of(kind)}


@pytest.fixture(scope="module")
def corpus() -> dict[str, FileRead]:
    """Every corpus file read once, by path relative to the corpus."""
    reads: dict[str, FileRead] = {}
    for run in discover([str(CORPUS / "runs")]):
        for record in read_run(run):
            key = str(Path(record.file).relative_to(CORPUS))
            read = reads.setdefault(key, FileRead())
            if isinstance(record, FileInfo):
                assert read.info is None, f"two FileInfo for {key}"
                read.info = record
            else:
                assert read.info is None, f"a record after the FileInfo of {key}"
                read.records.append(record)
    return reads


def manifest() -> list[dict[str, str]]:
    if not CORPUS.is_dir():
        return []
    with open(CORPUS / "MANIFEST.tsv", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


ROWS = manifest()


def find(corpus: dict[str, FileRead], fragment: str) -> FileRead:
    (key,) = [key for key in corpus if fragment in key]
    return corpus[key]


def test_every_file_is_found_and_read_to_one_file_info(corpus: dict[str, FileRead]) -> None:
    assert len(ROWS) == 30
    assert sorted(corpus) == sorted(row["path"] for row in ROWS)
    assert all(read.info is not None for read in corpus.values())


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row["path"].split("/")[1])
def test_file_matches_its_manifest_row(corpus: dict[str, FileRead], row: dict[str, str]) -> None:
    read = corpus[row["path"]]
    assert read.info is not None
    assert read.info.size == int(row["bytes"])
    assert read.info.events == int(row["n_events"])
    assert len(read.tags(HistogramRecord)) == int(row["n_hist_tags"])
    assert len(read.tags(ScalarRecord)) == int(row["n_scalar_tags"])
    steps = [r.step for r in read.of(HistogramRecord) + read.of(ScalarRecord)]
    if steps and "other values" not in row["notes"]:  # other plugins' steps count there too
        assert f"{min(steps)}-{max(steps)}" == row["steps"]
    encoding = re.search(r"histogram encoding: (\w+)", row["notes"])
    if encoding:
        assert {r.encoding for r in read.of(HistogramRecord)} == {encoding.group(1)}
    truncated = TRUNCATED.search(row["notes"])
    damages = [(d.kind, d.offset, d.lost_bytes) for d in read.of(Damage)]
    if truncated:
        offset, present = int(truncated.group(1)), int(truncated.group(2))
        assert damages == [("incomplete_tail", offset, present)]
    else:
        assert damages == []


def test_keras3_collisions_give_distinct_series_by_element_count(
    corpus: dict[str, FileRead],
) -> None:
    read = find(corpus, "ldebris__Rossman")
    series: dict[tuple[str, int], set[int | None]] = {}
    for record in read.of(HistogramRecord):
        series.setdefault((record.tag, record.index), set()).add(element_count(record))
    kernels = {index: counts for (tag, index), counts in series.items() if tag.startswith("kernel")}
    assert sorted(n for counts in kernels.values() for n in counts) == [50, 5000, 5500]
    assert all(len(counts) == 1 for counts in kernels.values())
    assert len([key for key in series if key[0] == "bias/histogram"]) == 3
    assert len([key for key in series if key[0] == "embeddings/histogram"]) == 2
    notices = {n.tag: n.message for n in read.of(Notice) if n.kind == "tag_collision"}
    assert set(notices) == {"kernel/histogram", "bias/histogram", "embeddings/histogram"}
    assert "element counts 5500, 5000, 50" in notices["kernel/histogram"]


def test_timegan_nan_blow_up_is_visible(corpus: dict[str, FileRead]) -> None:
    read = find(corpus, "Normal_7_discriminator")
    broken = {
        r.tag
        for r in read.of(HistogramRecord)
        if not (np.isfinite(r.left).all() and np.isfinite(r.right).all())
    }
    assert len(broken) == 25
    bad_steps = [r.step for r in read.of(HistogramRecord) if np.isnan(r.left).any()]
    assert min(bad_steps) == 50
    nan_scalars = {r.tag for r in read.of(ScalarRecord) if not math.isfinite(r.value)}
    assert len(nan_scalars) == 3


def test_dead_lstm_layer_histograms_are_bit_identical(corpus: dict[str, FileRead]) -> None:
    read = find(corpus, "20200315-093920")
    by_tag: dict[str, list[HistogramRecord]] = {}
    for record in read.of(HistogramRecord):
        by_tag.setdefault(record.tag, []).append(record)
    frozen = {
        tag
        for tag, records in by_tag.items()
        if all(
            np.array_equal(r.counts, records[0].counts)
            and np.array_equal(r.right, records[0].right)
            and r.sum_squares == records[0].sum_squares
            for r in records
        )
    }
    assert frozen == {"lstm/kernel_0", "lstm/recurrent_kernel_0", "lstm/bias_0"}
    assert all(len(records) == 201 for records in by_tag.values())


def test_exact_norm_from_sum_squares_in_a_tf1_file(corpus: dict[str, FileRead]) -> None:
    read = find(corpus, "MorvanZhou")
    for record in read.of(HistogramRecord):
        assert record.encoding == "histo" and record.sum_squares is not None
        assert record.num == record.counts.sum()
        # Every value lies within [min, max], so sum_squares <= num * max(min^2, max^2).
        bound = record.num * max(record.min**2, record.max**2)
        assert 0 <= record.sum_squares <= bound * (1 + 1e-12)


def test_odd_files_and_writers(corpus: dict[str, FileRead]) -> None:
    no_version = find(corpus, "miaoshuyu")
    assert no_version.info is not None
    assert no_version.info.writer == "old tensorboardX (no file_version)"
    assert len(no_version.of(ScalarRecord)) == 100
    empty = find(corpus, "events.out.tfevents.1600155525")
    assert empty.info is not None and (empty.info.size, empty.info.records) == (0, 0)
    assert find(corpus, "2gpu_big%2Fevents").of(ScalarRecord)
    assert find(corpus, "events.out.tfevents.resnet").of(ScalarRecord)
    # Odd names are read whole, not just found: every scalar of each file.
    odd_name = find(corpus, "2gpu_big%2Fevents").of(ScalarRecord)
    assert sorted((r.tag, r.step) for r in odd_name) == [("accuracy", 1003), ("loss", 1003)]
    renamed = find(corpus, "events.out.tfevents.resnet").of(ScalarRecord)
    per_tag = {tag: sum(r.tag == tag for r in renamed) for tag in {r.tag for r in renamed}}
    assert per_tag == {"train/loss": 200, "train/acc": 200, "val/acc": 100}
    modern = find(corpus, "imdb-model")
    assert modern.info is not None
    assert modern.info.writer == "tensorflow.core.util.events_writer"
    restarted = find(corpus, "DNN_regressor")
    assert min(r.step for r in restarted.of(ScalarRecord)) == 10001
