"""Files written by the real writers (``scripts/make_writer_fixtures.py``), checked on numbers.

Each fixture run holds ``expected.json``: the exact statistics of the tensors that were logged,
computed with numpy when the file was written.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gradcheck.events.discover import discover
from gradcheck.events.reader import read_run
from gradcheck.model import Damage, FileInfo, HistogramRecord, Notice, Record, ScalarRecord
from tests.support.paths import TEST_DATA

WRITERS = TEST_DATA / "writers"


def read(name: str) -> tuple[list[Record], dict[str, Any]]:
    records = [r for run in discover([str(WRITERS / name)]) for r in read_run(run)]
    assert not [r for r in records if isinstance(r, (Damage, Notice))]
    return records, json.loads((WRITERS / name / "expected.json").read_text())


def histograms(records: list[Record], tag: str) -> dict[int, HistogramRecord]:
    return {r.step: r for r in records if isinstance(r, HistogramRecord) and r.tag == tag}


def scalars(records: list[Record], tag: str) -> dict[int, float]:
    return {r.step: r.value for r in records if isinstance(r, ScalarRecord) and r.tag == tag}


def number(value: float | str) -> float:
    return float(value)  # expected.json writes non-finite values as "nan", "inf"


# ------------------------------------------------------------------ TF2 tf.summary (tensor)


def test_tf2_summary_histograms_are_30_equal_buckets_spanning_min_to_max() -> None:
    records, expected = read("tf2_summary")
    kernel = histograms(records, "dense/kernel")
    assert sorted(kernel) == [0, 1, 2]
    for step, record in kernel.items():
        want = expected["histograms"]["dense/kernel"][str(step)]
        assert record.encoding == "tensor" and record.counts.size == 30
        assert record.counts.sum() == want["count"] == 101
        assert (record.left[0], record.right[-1]) == (want["min"], want["max"])
        widths = record.right - record.left
        np.testing.assert_allclose(widths, widths[0], rtol=1e-9)
        assert record.sum is None and record.sum_squares is None  # this encoding has none
    # The ramp is symmetric: 50 values below zero, 1 at zero, 50 above.
    assert kernel[0].counts[:15].sum() == 50 and kernel[0].counts[15:].sum() == 51
    assert scalars(records, "loss") == pytest.approx({0: 1.0, 1: 0.5, 2: 1 / 3}, rel=1e-7)


def test_tf2_summary_odd_inputs_as_tensorboard_2_8_and_later_write_them() -> None:
    records, _ = read("tf2_summary")
    empty = histograms(records, "odd/empty")[0]
    assert empty.counts.shape == (30,) and not empty.counts.any() and not empty.right.any()
    constant = histograms(records, "odd/constant")[0]
    assert (constant.left == 3.0).all() and (constant.right == 3.0).all()  # zero-width rows
    assert constant.counts[-1] == 7 and constant.counts.sum() == 7
    nan = histograms(records, "odd/nan")[0]
    assert np.isnan(nan.left).all() and np.isnan(nan.right).all() and nan.counts.sum() == 0
    inf = histograms(records, "odd/inf")[0]
    assert inf.counts.sum() == 3  # the Inf is not counted
    assert (inf.left[0], inf.right[-1]) == (1.0, math.inf)


# ----------------------------------------------------------------- Keras TensorBoard callback


KERAS_SIZES = {"hidden/kernel": 12, "hidden/bias": 4, "out/kernel": 4, "out/bias": 1}


def test_keras_callback_histograms_per_epoch_with_element_counts_and_final_weights() -> None:
    records, expected = read("keras_callback")
    assert expected["epochs"] == 2
    for name, size in KERAS_SIZES.items():
        per_step = histograms(records, f"sequential/{name}/histogram")  # Keras >= 3.14 tags
        assert sorted(per_step) == [0, 1]
        assert {r.index for r in per_step.values()} == {0}
        assert all(r.counts.sum() == size for r in per_step.values())
        final = expected["final_weights"][f"sequential/{name}"]
        last = per_step[1]
        assert (last.left[0], last.right[-1]) == (final["min"], final["max"])
    losses = scalars(records, "epoch_loss")
    train = [r for r in records if isinstance(r, ScalarRecord) and "train" in r.run]
    assert len(losses) == 2 and all(math.isfinite(v) and v > 0 for v in losses.values())
    assert {r.tag for r in train} == {"epoch_loss", "epoch_learning_rate"}
    infos = [r for r in records if isinstance(r, FileInfo)]
    assert [Path(i.run).name for i in infos] == ["train", "validation"]
    assert all(i.writer == "tensorflow.core.util.events_writer" for i in infos)


# ------------------------------------------------------- PyTorch and tensorboardX (histo)


@pytest.mark.parametrize("writer", ["pytorch", "tensorboardx"])
def test_histogram_proto_keeps_exact_sums_and_the_exact_norm(writer: str) -> None:
    records, expected = read(writer)
    weight = histograms(records, "fc.weight")
    assert sorted(weight) == [0, 1, 2]
    for step, record in weight.items():
        want = expected["histograms"]["fc.weight"][str(step)]
        assert record.encoding == "histo"
        assert (record.min, record.max, record.num) == (want["min"], want["max"], want["count"])
        assert record.sum == pytest.approx(want["sum"], abs=1e-9)
        assert record.sum_squares == pytest.approx(want["sum_squares"], rel=1e-12)
        assert math.sqrt(record.sum_squares) == pytest.approx(
            np.linalg.norm(np.linspace(-1, 1, 101) * (step + 1)), rel=1e-7
        )
        assert record.counts.sum() == 101
        assert record.counts[0] == 0 and record.left[0] == record.right[0]  # leading empty
        assert record.left[1] <= want["min"] and record.right[-1] >= want["max"]
        assert (np.diff(record.right) > 0).all()
    assert scalars(records, "loss") == pytest.approx({0: 1.0, 1: 0.5, 2: 1 / 3}, rel=1e-7)


@pytest.mark.parametrize("writer", ["pytorch", "tensorboardx"])
def test_non_finite_tensor_histogram_proto(writer: str) -> None:
    records, expected = read(writer)
    record = histograms(records, "fc.weight.grad")[0]
    want = expected["histograms"]["fc.weight.grad"]["0"]
    assert math.isnan(record.min) and math.isnan(record.max) and math.isnan(record.sum)
    assert record.num == want["count"] == 5
    assert record.counts.sum() == want["finite_count"] == 3  # num > bucket total
    assert np.isfinite(record.left).all() and np.isfinite(record.right).all()
