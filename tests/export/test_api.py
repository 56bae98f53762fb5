"""The Python API: ``gradcheck.read`` and the long-format ``gradcheck.frame``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gradcheck
from gradcheck import api
from gradcheck.errors import InputError
from gradcheck.export import table
from gradcheck.model import STAT_NAMES, FileInfo, HistogramRecord, ScalarRecord
from gradcheck.series.stats import histogram_stats
from tests.support import eventfiles as ef
from tests.support.fresh_interpreter import frameworks_imported_by
from tests.support.paths import TEST_DATA

WRITERS = TEST_DATA / "writers"


def test_read_yields_typed_records_of_every_run() -> None:
    records = list(gradcheck.read(str(WRITERS)))
    infos = [r for r in records if isinstance(r, FileInfo)]
    assert len(infos) == 5  # keras train + validation, pytorch, tensorboardx, tf2
    assert {Path(i.run).name for i in infos} == {
        "train", "validation", "pytorch", "tensorboardx", "tf2_summary"
    }  # fmt: skip
    assert sum(isinstance(r, HistogramRecord) for r in records) == 8 + 4 + 4 + 7


def test_read_raises_input_error_at_the_call_not_at_iteration(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        gradcheck.read(str(tmp_path / "missing"))
    with pytest.raises(InputError, match="no event file"):
        gradcheck.read([str(tmp_path)])


def test_frame_is_long_format_with_exact_norms_from_sum_squares() -> None:
    frame = gradcheck.frame(str(WRITERS / "pytorch"))
    assert tuple(frame.columns) == api.FRAME_COLUMNS
    assert list(frame["kind"]) == ["histogram", "scalar"] * 3 + ["histogram"]
    weight = frame[frame.tag == "fc.weight"].set_index("step")
    ramp = np.linspace(-1, 1, 101)
    for step in (0, 1, 2):
        row = weight.loc[step]
        assert row["l2_norm"] == pytest.approx(np.linalg.norm(ramp * (step + 1)), rel=1e-7)
        assert row["l2_norm"] == math.sqrt(row["sum_squares"])
        assert bool(row["l2_norm_exact"]) and row["count"] == 101
        assert (row["min"], row["max"]) == (-(step + 1), step + 1)
        assert row["encoding"] == "histo" and math.isnan(row["value"])
    grad = frame[frame.tag == "fc.weight.grad"].iloc[0]
    assert not grad["l2_norm_exact"] and grad["count"] == 5
    assert grad["nonfinite_share"] == pytest.approx(2 / 5)
    loss = frame[frame.tag == "loss"]
    assert list(loss["value"]) == pytest.approx([1.0, 0.5, 1 / 3], rel=1e-7)
    assert loss["l2_norm"].isna().all() and (loss["buckets"] == 0).all()
    assert frame.attrs["warnings"] == ()


def test_frame_of_tf2_tensors_has_no_proto_sums() -> None:
    frame = gradcheck.frame(str(WRITERS / "tf2_summary"))
    kernel = frame[frame.tag == "dense/kernel"]
    assert (kernel["encoding"] == "tensor").all() and (kernel["buckets"] == 30).all()
    assert kernel["sum_squares"].isna().all() and not kernel["l2_norm_exact"].any()
    assert list(kernel["max"]) == [1.0, 2.0, 3.0] and list(kernel["count"]) == [101] * 3


def test_records_frame_statistics_match_histogram_stats_per_record() -> None:
    # More histograms than one batch, of different bucket counts, interleaved with scalars.
    rng = np.random.default_rng(1)
    records: list = []
    for step in range(table.BATCH_SIZE + 40):
        values = rng.normal(size=50) * (step + 1)
        bins = 5 + step % 3
        counts, edges = np.histogram(values, bins=bins)
        records.append(
            HistogramRecord(
                "run", "f", 0, "w", 0, step, 1.0, "histo", edges[:-1], edges[1:],
                counts.astype(float), float(values.min()), float(values.max()), 50.0,
                float(values.sum()), float(values @ values),
            )
        )  # fmt: skip
        records.append(ScalarRecord("run", "f", 0, "loss", step, 1.0, "simple_value", step))
    frame = api.records_frame(records)
    assert len(frame) == 2 * (table.BATCH_SIZE + 40)
    histograms = frame[frame.kind == "histogram"].reset_index(drop=True)
    for position in (0, 1, 2, table.BATCH_SIZE - 1, table.BATCH_SIZE, len(histograms) - 1):
        record = records[2 * position]
        expected = histogram_stats(
            record.left, record.right, record.counts, min=record.min, max=record.max,
            num=record.num, sum=record.sum, sum_squares=record.sum_squares,
        )  # fmt: skip
        row = histograms.iloc[position]
        assert row["step"] == record.step
        assert row["l2_norm"] == pytest.approx(expected.l2_norm, rel=1e-12)
        assert row["std"] == pytest.approx(expected.std, rel=1e-12)
        assert row["p50"] == pytest.approx(expected.percentiles[50.0], rel=1e-12)
    assert list(frame[frame.kind == "scalar"]["value"]) == list(range(table.BATCH_SIZE + 40))
    assert set(STAT_NAMES) <= set(frame.columns)


def test_frame_warnings_name_the_damage(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1"
    ef.write_events(path, [ef.summary_event(s, [ef.simple_scalar("x", s)]) for s in range(3)])
    path.write_bytes(path.read_bytes()[:-5])
    frame = gradcheck.frame(str(tmp_path))
    assert list(frame["step"]) == [0, 1]
    (warning,) = frame.attrs["warnings"]
    assert warning.startswith(f"{path}: incomplete final record, at byte ")


def test_empty_frame_keeps_its_columns(tmp_path: Path) -> None:
    ef.write_events(tmp_path / "events.out.tfevents.1", [ef.file_version()])
    frame = gradcheck.frame(str(tmp_path))
    assert frame.empty and tuple(frame.columns) == api.FRAME_COLUMNS
    assert isinstance(frame, pd.DataFrame)


def test_api_never_imports_tensorflow_or_torch() -> None:
    code = f"import gradcheck; assert len(gradcheck.frame({str(WRITERS)!r})) > 0"
    assert frameworks_imported_by(code) == []


def test_frame_has_each_histogram_s_buckets_as_tbparse_gives_them() -> None:
    records = [r for r in gradcheck.read(str(WRITERS)) if isinstance(r, HistogramRecord)]
    frame = gradcheck.frame(str(WRITERS))
    histograms = frame[frame.kind == "histogram"]
    assert len(histograms) == len(records) == 23
    for row, record in zip(histograms.itertuples(), records, strict=True):
        if record.encoding == "histo":  # the proto's bucket_limit and bucket
            assert np.array_equal(row.limits, record.right)
            assert np.array_equal(row.counts, record.counts)
        else:  # TF2 [k, 3]: the first left edge as a limit with count 0
            assert np.array_equal(row.limits, [record.left[0], *record.right], equal_nan=True)
            assert np.array_equal(row.counts, [0.0, *record.counts])
        assert row.buckets == record.counts.size
    scalars = frame[frame.kind == "scalar"]
    assert scalars["limits"].isna().all() and scalars["counts"].isna().all()
    assert {"histo", "tensor"} <= set(histograms["encoding"])


def test_frame_without_bucket_arrays_keeps_the_statistics() -> None:
    light = gradcheck.frame(str(WRITERS / "pytorch"), bucket_arrays=False)
    full = gradcheck.frame(str(WRITERS / "pytorch"))
    assert light["limits"].isna().all() and light["counts"].isna().all()
    assert light.drop(columns=["limits", "counts"]).equals(full.drop(columns=["limits", "counts"]))
