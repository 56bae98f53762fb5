"""gradcheck's reader agrees with tbparse (TensorBoard's EventAccumulator) on the same files.

Compared per ``(tag, step)``: every histogram's bucket values (right edges and counts, plus left
edges for TF2 tensors) and every scalar, as multisets (Keras 3 collisions put several values
under one tag and step). The two must be equal, truncated tails and restarted runs included
(tbparse does not purge); only after mid-file damage, where TensorBoard's loader stops, must
everything tbparse has merely be among gradcheck's records.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from gradcheck.events.discover import discover
from gradcheck.events.reader import read_file
from gradcheck.model import Damage, HistogramRecord, ScalarRecord

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
import tbparse  # noqa: E402  (a dev dependency: a failing import must not turn into a skip)

from tests.support.paths import CORPUS_RUNS as CORPUS
from tests.support.paths import TEST_DATA

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")  # inside tbparse

WRITERS = TEST_DATA / "writers"

Values = dict[tuple[str, str, int], list[bytes | str]]  # scalars as repr: NaN == NaN


def event_files(root: Path) -> list[str]:
    return [file for run in discover([str(root)]) for file in run.files] if root.is_dir() else []


def histogram_key(right: np.ndarray, counts: np.ndarray, left: np.ndarray | None) -> bytes:
    parts = [right, counts] if left is None else [left, right, counts]
    return np.concatenate([np.asarray(p, dtype=np.float64) for p in parts]).tobytes()


def ours(path: str) -> tuple[Values, bool]:
    """Values read by gradcheck, and whether damage before the end made TensorBoard stop."""
    values: Values = defaultdict(list)
    partial = False
    for record in read_file(path, "run"):
        if isinstance(record, HistogramRecord):
            left = record.left if record.encoding == "tensor" else None
            key = histogram_key(record.right, record.counts, left)
            values[("histogram", record.tag, record.step)].append(key)
        elif isinstance(record, ScalarRecord):
            values[("scalar", record.tag, record.step)].append(repr(record.value))
        elif isinstance(record, Damage) and record.kind != "incomplete_tail":
            partial = True
    return values, partial


def theirs(path: str) -> Values:
    """Values tbparse reads: ``histograms`` (HistogramProto), ``scalars``, ``tensors`` (TF2)."""
    reader = tbparse.SummaryReader(path)
    values: Values = defaultdict(list)
    for row in reader.histograms.itertuples():
        key = histogram_key(row.limits, row.counts, None)
        values[("histogram", row.tag, int(row.step))].append(key)
    for row in reader.scalars.itertuples():
        values[("scalar", row.tag, int(row.step))].append(repr(float(row.value)))
    for row in reader.tensors.itertuples():
        tensor = np.asarray(row.value)
        if tensor.dtype.kind != "f":
            continue  # text and other plugins gradcheck does not read
        if tensor.ndim == 2 and tensor.shape[1] == 3:
            key = histogram_key(tensor[:, 1], tensor[:, 2], tensor[:, 0])
            values[("histogram", row.tag, int(row.step))].append(key)
        elif tensor.size == 1:
            values[("scalar", row.tag, int(row.step))].append(repr(float(tensor.reshape(-1)[0])))
    return values


def as_multisets(values: Values) -> dict[tuple[str, str, int], list[bytes | str]]:
    return {key: sorted(items, key=repr) for key, items in values.items()}


def check_agreement(path: str) -> None:
    mine, partial = ours(path)
    tb = theirs(path)
    if not partial:
        assert as_multisets(mine) == as_multisets(tb)
        return
    for key, items in tb.items():
        remaining = list(mine.get(key, []))
        for item in items:
            assert item in remaining, f"{key} read by tbparse but not by gradcheck"
            remaining.remove(item)


@pytest.mark.parametrize("path", event_files(WRITERS), ids=lambda p: Path(p).parent.name)
def test_agrees_with_tbparse_on_real_writer_files(path: str) -> None:
    mine, partial = ours(path)
    assert mine and not partial
    check_agreement(path)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not present")
@pytest.mark.parametrize(
    "path", event_files(CORPUS), ids=lambda p: str(Path(p).relative_to(CORPUS)).split("/")[0]
)
def test_agrees_with_tbparse_on_the_corpus(path: str) -> None:
    check_agreement(path)
