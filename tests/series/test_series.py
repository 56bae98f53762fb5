"""Streaming reduction of records into per-series arrays, restart purges, merge of parts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gradcheck.series.thin as thin_module
from gradcheck.model import COLUMN, STAT_NAMES, Damage, FileInfo, Notice, Record, RunData
from gradcheck.series.merge import merge
from gradcheck.series.reduce import BATCH_SIZE, reduce_records
from gradcheck.series.stats import histogram_stats
from tests.support.histograms import Buckets, tf2_buckets, torch_proto
from tests.support.records import RUN, histogram, scalar


def values_at(step: int, scale: float = 1.0, size: int = 300) -> np.ndarray:
    return np.random.default_rng(step).normal(0.0, scale, size=size)


def test_statistics_per_step_match_histogram_stats() -> None:
    records = [
        histogram(tag, step, make(values_at(step, scale)))
        for step in range(5)
        for tag, make, scale in (("w", tf2_buckets, 0.1), ("g", torch_proto, 1e-3))
    ]
    data = reduce_records(records)
    assert list(data.histograms) == [("w", 0), ("g", 0)]  # order of first appearance
    weights = data.histograms[("w", 0)]
    assert weights.steps.tolist() == [0, 1, 2, 3, 4]
    assert weights.wall_times.tolist() == [1000.0 + s for s in range(5)]
    assert weights.stats.dtype == np.float32 and weights.stats.shape == (5, len(STAT_NAMES))
    assert weights.encoding == "tensor" and data.histograms[("g", 0)].encoding == "histo"
    for step in range(5):
        buckets = torch_proto(values_at(step, 1e-3))
        expected = histogram_stats(buckets.left, buckets.right, buckets.counts, **buckets.fields())
        gradient = data.histograms[("g", 0)]
        assert gradient.column("l2_norm")[step] == pytest.approx(expected.l2_norm, rel=1e-6)
        assert gradient.column("p50")[step] == pytest.approx(expected.percentiles[50], rel=1e-6)
    grid = weights.quantile_grid()
    assert grid.shape == (5, 9)
    assert (np.diff(grid, axis=1) >= 0).all()


def test_collision_indexes_are_separate_series() -> None:
    records = [
        histogram("kernel/histogram", step, tf2_buckets(values_at(step, size=size)), index=i)
        for step in range(3)
        for i, size in enumerate((50, 5000, 5500))
    ]
    data = reduce_records(records)
    assert [key for key in data.histograms] == [("kernel/histogram", i) for i in range(3)]
    counts = [series.column("count")[0] for series in data.histograms.values()]
    assert counts == [50, 5000, 5500]


def test_more_records_than_a_batch_keep_stream_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(thin_module, "MAX_ROWS", 2 * BATCH_SIZE)  # no thinning (test_thinning.py)
    steps = range(BATCH_SIZE + 37)
    data = reduce_records(histogram("w", s, tf2_buckets(values_at(s, size=20))) for s in steps)
    series = data.histograms[("w", 0)]
    assert series.steps.tolist() == list(steps)
    assert series.column("count").tolist() == [20.0] * len(steps)


def test_restart_purges_older_steps_and_keeps_the_newer_data() -> None:
    records = [histogram("w", s, tf2_buckets(values_at(s))) for s in range(10)]
    # training resumed from a checkpoint at step 6: steps 6.. are written again, scaled by 2
    records += [histogram("w", s, tf2_buckets(values_at(s, 2.0))) for s in range(6, 12)]
    records += [scalar("loss", s, float(s)) for s in range(10)]
    records += [scalar("loss", s, -float(s)) for s in range(6, 12)]
    data = reduce_records(records)
    series = data.histograms[("w", 0)]
    assert series.steps.tolist() == list(range(12))
    std = series.column("std")
    assert std[:6].mean() == pytest.approx(1.0, rel=0.15)
    assert std[6:].mean() == pytest.approx(2.0, rel=0.15)
    loss = data.scalars["loss"]
    assert loss.steps.tolist() == list(range(12))
    assert loss.values.tolist() == [0, 1, 2, 3, 4, 5, -6, -7, -8, -9, -10, -11]


def test_fingerprints_tell_identical_histograms_apart_from_changed_ones() -> None:
    frozen = tf2_buckets(values_at(1))
    moved = Buckets(frozen.left, frozen.right.copy(), frozen.counts)
    moved.right[-1] = np.nextafter(moved.right[-1], np.inf)  # one ulp on one edge
    records = [histogram("w", s, frozen) for s in range(3)] + [histogram("w", 3, moved)]
    fingerprints = reduce_records(records).histograms[("w", 0)].fingerprints
    assert fingerprints[0] == fingerprints[1] == fingerprints[2]
    assert fingerprints[3] != fingerprints[2]


def test_fingerprint_does_not_depend_on_batch_padding() -> None:
    narrow = tf2_buckets(values_at(1), bucket_count=30)
    wide = torch_proto(values_at(2))  # another bucket count in the same batch
    alone = reduce_records([histogram("w", 0, narrow)]).histograms[("w", 0)].fingerprints
    mixed = reduce_records([histogram("v", 0, wide), histogram("w", 0, narrow)])
    assert mixed.histograms[("w", 0)].fingerprints[0] == alone[0]


def test_other_records_are_kept() -> None:
    damage = Damage(RUN, "f1", 40, "incomplete_tail", 12, "incomplete record at byte 40")
    notice = Notice(RUN, "f1", "tag_collision", "kernel/histogram", 0, "collision")
    info = FileInfo(RUN, "f1", 52, 1, 1, "pytorch")
    data = reduce_records([scalar("loss", 0, 1.0), damage, notice, info])
    assert data.run == RUN and data.files == ("f1",)
    assert data.damages == (damage,) and data.notices == (notice,) and data.file_infos == (info,)
    assert data.steps == (0, 0)
    assert reduce_records([]).steps is None


def test_huge_finite_values_stay_finite_in_float32() -> None:
    values = np.array([-2e50, 1e50, 3e50])  # finite in float64, beyond float32
    huge = Buckets(
        np.array([-2e50, 0.0]),
        np.array([0.0, 3e50]),
        np.array([1.0, 2.0]),
        *(-2e50, 3e50, 3.0, float(values.sum()), float(values @ values)),
    )
    stats = reduce_records([histogram("g", 0, huge)]).histograms[("g", 0)].stats[0]
    assert np.isfinite(stats[COLUMN["l2_norm"]]) and stats[COLUMN["nonfinite_share"]] == 0
    # Saturated at the float32 limit with the sign kept (not inf, not wrapped to 0).
    top = np.finfo(np.float32).max
    saturated = [stats[COLUMN[name]] for name in ("l2_norm", "min", "max")]
    assert saturated == [top, -top, top]


def _split_stream(records: list[Record], cuts: list[int]) -> list[list[Record]]:
    bounds = [0, *sorted(set(cuts)), len(records)]
    return [records[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _same(left: RunData, right: RunData) -> None:
    assert list(left.histograms) == list(right.histograms)
    for key, series in left.histograms.items():
        other = right.histograms[key]
        assert series.steps.tolist() == other.steps.tolist()
        np.testing.assert_array_equal(series.stats, other.stats)
        np.testing.assert_array_equal(series.fingerprints, other.fingerprints)
    assert {t: s.values.tolist() for t, s in left.scalars.items()} == {
        t: s.values.tolist() for t, s in right.scalars.items()
    }


@settings(max_examples=60, deadline=None)
@given(
    restart_at=st.integers(0, 14),
    restart_to=st.integers(0, 14),
    cuts=st.lists(st.integers(0, 60), max_size=3),
)
def test_merge_of_parts_equals_reducing_the_whole_stream(
    restart_at: int, restart_to: int, cuts: list[int]
) -> None:
    steps = list(range(restart_at + 1)) + list(range(min(restart_to, restart_at), 15))
    records: list[Record] = []
    for i, step in enumerate(steps):
        records.append(histogram("w", step, tf2_buckets(values_at(step + 100 * i, size=40))))
        records.append(scalar("loss", step, float(i)))
    whole = reduce_records(records)
    parts = [reduce_records(part) for part in _split_stream(records, cuts)]
    _same(merge(parts), whole)
    assert whole.histograms[("w", 0)].steps.tolist() == sorted(set(steps))


def test_merge_of_nothing_and_of_one_part() -> None:
    assert merge([]).histograms == {}
    part = reduce_records([scalar("loss", 0, 1.0)])
    assert merge([part]) is part
