"""Bounded histogram series: the first and the worst row of each W-step window past MAX_ROWS.

``MAX_ROWS`` is made small here (monkeypatched) so that runs of a few hundred steps thin.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gradcheck.engine import fastpath, join, ranges
from gradcheck.engine.parts import reduce_file_reference
from gradcheck.events.steps import StepWindow
from gradcheck.model import COLUMN, STAT_NAMES, HistogramSeries, Record, RunData
from gradcheck.pipeline import analyze
from gradcheck.series import reduce, thin
from gradcheck.series.merge import merge
from gradcheck.series.reduce import reduce_records
from gradcheck.tags import TagRules
from gradcheck.verdicts.config import DEFAULT_CONFIG
from tests.support import eventfiles as ef
from tests.support.histograms import tf2_buckets
from tests.support.records import histogram, scalar

RUN = "runs/a"


@pytest.fixture
def max_rows_8(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(thin, "MAX_ROWS", 8)
    yield


def gradient(step: int, *, spike: int | None = None, nan_from: int | None = None) -> np.ndarray:
    """Values whose L2 norm shrinks slowly; x1000 at ``spike``; NaN from ``nan_from`` to +5."""
    values = np.random.default_rng(step).normal(0, 0.1 * 0.999**step, 50)
    if step == spike:
        values = values * 1000
    if nan_from is not None and nan_from <= step < nan_from + 5:
        values[3] = np.nan
    return values


def stream(steps: range, **kind: int) -> list[Record]:
    records: list[Record] = []
    for step in steps:
        records.append(histogram("g", step, tf2_buckets(gradient(step, **kind))))
        records.append(scalar("loss", step, 1.0 / (1 + step)))
    return records


def unthinned(records: list[Record]) -> HistogramSeries:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(thin, "MAX_ROWS", 1 << 20)
        return reduce_records(records).histograms[("g", 0)]


def rows_at(series_: HistogramSeries, steps: list[int]) -> np.ndarray:
    return series_.stats[np.searchsorted(series_.steps, steps)]


def kept_steps(full: HistogramSeries, window: int) -> list[int]:
    """The rule spelled out one window at a time: its first step, and its worst step (the
    first with a non-finite value, else the first with the largest L2 norm)."""
    chosen: list[int] = []
    for start in range(0, int(full.steps[-1]) + 1, window):
        inside = (full.steps >= start) & (full.steps < start + window)
        steps = full.steps[inside].tolist()
        norms = full.column("l2_norm")[inside].tolist()
        shares = full.column("nonfinite_share")[inside].tolist()
        rows = zip(steps, norms, shares, strict=True)
        bad = [step for step, norm, share in rows if share != 0 or not math.isfinite(norm)]
        if steps:
            worst = bad[0] if bad else steps[norms.index(max(norms))]
            chosen += sorted({steps[0], worst})
    return chosen


def smallest_window(full: HistogramSeries, limit: int) -> int:
    """The smallest power of two whose kept steps fit ``limit`` (brute force), the first
    window counting one row (see ``thin._fits``)."""
    window = 1
    while True:
        kept = kept_steps(full, window)
        first_window_has_two = len(kept) > 1 and kept[1] // window == kept[0] // window
        if len(kept) - first_window_has_two <= limit:
            return window
        window *= 2


def thinned_notices(data: RunData) -> list[str]:
    return [notice.message for notice in data.notices if notice.kind == "thinned"]


@pytest.mark.usefixtures("max_rows_8")
def test_thinning_keeps_the_first_nan_row_and_a_one_step_spike() -> None:
    records = stream(range(100), spike=37, nan_from=70)
    data = reduce_records(records)
    kept = data.histograms[("g", 0)]
    # 100 steps: 7 windows of 16 (up to 14 rows: > 8), 4 of 32: their first steps and 37, 70
    assert kept.window == 32 and kept.histograms_read == 100
    full = unthinned(records)
    assert kept.steps.tolist() == kept_steps(full, 32) and smallest_window(full, 8) == 32
    assert {0, 32, 64, 96, 37, 70} <= set(kept.steps.tolist()) and len(kept) <= 8 + 1
    # a kept row is one histogram's row, all columns (no averaging)
    np.testing.assert_array_equal(kept.stats, rows_at(full, kept.steps.tolist()))
    first_bad = kept.steps[~(kept.column("nonfinite_share") == 0)].tolist()[0]
    assert first_bad == 70
    assert len(data.scalars["loss"]) == 100  # scalars stay complete
    (message,) = thinned_notices(data)
    assert "100 steps read" in message and f"at most {len(kept)} kept" in message
    assert "each window of 32 steps" in message


def test_series_under_max_rows_are_not_thinned() -> None:
    data = reduce_records(stream(range(100), spike=37))
    kept = data.histograms[("g", 0)]
    assert kept.window == 1 and kept.steps.tolist() == list(range(100))
    assert thinned_notices(data) == []


@pytest.mark.usefixtures("max_rows_8")
def test_ties_go_to_the_earliest_step() -> None:
    same = tf2_buckets(np.linspace(-1, 1, 50))
    data = reduce_records([histogram("g", step, same) for step in range(40)])
    assert data.histograms[("g", 0)].steps.tolist() == [0, 8, 16, 24, 32]  # first = worst


@settings(max_examples=25, deadline=None)
@example(spike=0, nan_from=0, cuts=[9], batch=3)  # the second part alone needed W=128, whole 64
@given(  # early steps and cuts as often as any: the first windows are where parts differ
    spike=st.one_of(st.integers(0, 12), st.integers(0, 299)),
    nan_from=st.one_of(st.integers(0, 12), st.integers(0, 299)),
    cuts=st.lists(st.one_of(st.integers(1, 40), st.integers(1, 599)), max_size=3),
    batch=st.sampled_from([3, 64, 4096]),
)
def test_cut_streams_merged_equal_the_whole_stream(
    spike: int, nan_from: int, cuts: list[int], batch: int
) -> None:
    records = stream(range(300), spike=spike, nan_from=nan_from)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(thin, "MAX_ROWS", 8)
        patch.setattr(reduce, "BATCH_SIZE", batch)
        whole = reduce_records(records)
        bounds = [0, *sorted(set(cuts)), len(records)]
        parts = [reduce_records(records[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
        merged = merge(parts)
    assert_same_series(merged, whole)
    kept = whole.histograms[("g", 0)]
    full = unthinned(records)
    assert kept.window == smallest_window(full, 8) and len(kept) <= 8 + 1
    assert kept.steps.tolist() == kept_steps(full, kept.window)
    assert nan_from in kept.steps.tolist()  # the NaN onset step is exact
    assert thinned_notices(merged) == thinned_notices(whole) and len(thinned_notices(whole)) == 1


def assert_same_series(left: RunData, right: RunData, *, same_read: bool = True) -> None:
    assert list(left.histograms) == list(right.histograms)
    for key, kept in left.histograms.items():
        other = right.histograms[key]
        assert kept.window == other.window
        assert kept.histograms_read == other.histograms_read or not same_read
        assert kept.steps.tolist() == other.steps.tolist()
        np.testing.assert_array_equal(kept.stats, other.stats)
        np.testing.assert_array_equal(kept.wall_times, other.wall_times)
        np.testing.assert_array_equal(kept.fingerprints, other.fingerprints)
    assert {t: s.values.tolist() for t, s in left.scalars.items()} == {
        t: s.values.tolist() for t, s in right.scalars.items()
    }


@pytest.mark.usefixtures("max_rows_8")
def test_restart_at_a_window_edge_after_thinning_equals_the_resumed_stream() -> None:
    first = stream(range(100))
    resumed = stream(range(48, 130), spike=70)  # written again from step 48 (W = 16)
    data = reduce_records(first + resumed)
    expected = reduce_records(first[: 2 * 48] + resumed)
    assert_same_series(data, expected, same_read=False)  # purged histograms were read too
    kept = data.histograms[("g", 0)]
    assert 70 in kept.steps.tolist() and kept.histograms_read == 100 + 82
    assert len(kept) <= 8 + 1


@pytest.mark.usefixtures("max_rows_8")
def test_restart_inside_a_window_keeps_the_newer_data() -> None:
    first = stream(range(100), nan_from=90)  # NaN 90-94 in the older data: purged
    resumed = stream(range(53, 130), nan_from=111)
    kept = reduce_records(first + resumed).histograms[("g", 0)]
    newer = unthinned(resumed)
    steps = kept.steps.tolist()
    assert steps == sorted(set(steps)) and len(kept) <= 8 + 1
    later = [s for s in steps if s >= 53]
    np.testing.assert_array_equal(rows_at(kept, later), rows_at(newer, later))
    assert 111 in steps and 90 not in steps
    bad = kept.steps[~(kept.column("nonfinite_share") == 0)].tolist()
    assert bad[0] == 111


def write_thinned_run(directory: Path, steps: int, nan_from: int) -> Path:
    """A real event file: a weight and its gradient per step, gradients NaN from ``nan_from``."""
    rng = np.random.default_rng(0)
    weight = rng.normal(0, 0.3, 40)
    events = [ef.file_version()]
    for step in range(steps):
        grad = rng.normal(0, 0.05, 40)
        if step >= nan_from:
            grad[7] = math.nan
        else:
            weight = weight - 0.1 * grad
        values = [
            ef.tensor_histogram("gradients/fc.weight", ef.tf2_buckets(grad), first=step == 0),
            ef.tensor_histogram("weights/fc.weight", ef.tf2_buckets(weight), first=step == 0),
            ef.simple_scalar("loss", 1.0 / (1 + step)),
        ]
        events.append(ef.summary_event(step, values))
    directory.mkdir(parents=True, exist_ok=True)
    ef.write_events(directory / "events.out.tfevents.1700000000.host.1.0", events)
    return directory


def test_real_event_file_end_to_end_notice_and_exact_nan_onset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thin, "MAX_ROWS", 16)
    run = write_thinned_run(tmp_path / "run", steps=300, nan_from=203)
    rules = TagRules.from_patterns(None, None)
    report = analyze([str(run)], config=DEFAULT_CONFIG, rules=rules, jobs=1)
    (result,) = report.runs
    (layer,) = result.layers
    assert (layer.name, layer.verdict, layer.first_bad_step) == ("fc.weight", "nan", 203)
    (warning,) = [w for w in result.warnings if "thinned" in w]
    assert warning.startswith("events.out.tfevents.1700000000.host.1.0: 2 histogram series")
    assert "300 steps read" in warning and "each window of 32 steps" in warning
    assert result.steps == (0, 299)
    # The numbers count the steps read, not the rows kept.
    assert (layer.stats["grad_steps"], layer.stats["weight_steps"]) == (300, 300)


def test_both_engines_and_byte_ranges_thin_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thin, "MAX_ROWS", 16)
    run = write_thinned_run(tmp_path / "run", steps=300, nan_from=203)
    (path,) = (str(p) for p in run.iterdir())
    window = StepWindow()
    reference = reduce_file_reference(path, str(run), window).data
    if not fastpath.available():
        pytest.skip("the C engine is not built, or GRADCHECK_NO_EXT=1")
    size = Path(path).stat().st_size
    (boundary,) = ranges.split_offsets(path, size, 2)
    first = fastpath.reduce_file_range(path, str(run), window, None, 0, boundary)
    second = fastpath.reduce_file_range(path, str(run), window, None, boundary, -1)
    whole = fastpath.reduce_file_range(path, str(run), window)
    joined = join.join_ranges([first, second], [boundary])
    assert joined is not None
    for data in (whole.data, joined.data):
        assert_same_series(data, reference)
    gradient = reference.histograms[("gradients/fc.weight", 0)]
    weight = reference.histograms[("weights/fc.weight", 0)]
    assert (gradient.window, weight.window) == (32, 32) and 203 in gradient.steps.tolist()
    # windows are nested: the first steps of the coarser one's are in both series
    assert set(range(0, 300, 64)) <= set(weight.steps.tolist()) & set(gradient.steps.tolist())
    assert gradient.histograms_read == 300


@pytest.mark.usefixtures("max_rows_8")
def test_a_run_logged_again_from_its_start_is_not_thinned_at_the_older_runs_window() -> None:
    """A long run, then training started again in the same directory: the older rows are all
    purged, so the newer run's 6 steps fit and are kept whole, streamed or merged from files."""
    older, newer = stream(range(100)), stream(range(6), spike=2)
    assert reduce_records(older).histograms[("g", 0)].window == 32  # the older run alone
    whole = reduce_records(older + newer)
    merged = merge([reduce_records(older), reduce_records(newer)])
    for data in (whole, merged):
        kept = data.histograms[("g", 0)]
        assert (kept.window, kept.steps.tolist()) == (1, list(range(6)))
        np.testing.assert_array_equal(kept.stats, unthinned(newer).stats)
        assert thinned_notices(data) == []


def test_purged_histograms_of_unthinned_series_are_not_counted_as_read() -> None:
    """A restart purges rows one histogram each: read counts match the rows kept, in one
    stream and across parts (the report's grad_steps/weight_steps come from this count)."""
    first = stream(range(40))
    resumed = stream(range(25, 60))
    whole = reduce_records(first + resumed).histograms[("g", 0)]
    merged = merge([reduce_records(first), reduce_records(resumed)]).histograms[("g", 0)]
    for kept in (whole, merged):
        assert kept.window == 1 and kept.steps.tolist() == list(range(60))
        assert kept.histograms_read == len(kept) == 60


_NORMS = st.sampled_from([0.0, 1.0, 2.0, 2.0, 3.5, 1e30, np.inf, -np.inf, np.nan])
_SHARES = st.sampled_from([0.0, 0.0, 0.0, 0.25, np.nan, -0.0])


@settings(max_examples=300, deadline=None)
@example(steps=[-3, -1, 0, 5], norms=[1.0, 2.0, 2.0, 1.0], shares=[0.0] * 4, window=1, limit=3)
@example(  # ties: the earliest worst row
    steps=list(range(8)), norms=[1.0, 2.0, 2.0, 1.0] * 2, shares=[0.0] * 8, window=1, limit=3
)
@given(
    steps=st.lists(st.integers(-3000, 3000), max_size=300, unique=True).map(sorted),
    norms=st.lists(_NORMS, min_size=300, max_size=300),
    shares=st.lists(_SHARES, min_size=300, max_size=300),
    window=st.sampled_from([1, 2, 4, 64, 3, 6]),  # 3, 6: the division path (never in use)
    limit=st.integers(3, 40),
)
def test_c_thinning_keeps_the_rows_numpy_keeps(
    steps: list[int],
    norms: list[float],
    shares: list[float],
    window: int,
    limit: int,
) -> None:
    """``_scan.thin`` against its numpy twin: the same rows and window, ties and NaN/Inf norms,
    non-finite shares (NaN: present, share unknown), negative steps and every ladder start."""
    if not fastpath.available():
        pytest.skip("the C engine is not built, or GRADCHECK_NO_EXT=1")
    stats = np.zeros((len(steps), len(STAT_NAMES)), dtype=np.float32)
    stats[:, COLUMN["l2_norm"]] = norms[: len(steps)]
    stats[:, COLUMN["nonfinite_share"]] = shares[: len(steps)]
    stats[:, 0] = np.arange(len(steps))  # other columns must not matter
    step_array = np.array(steps, dtype=np.int64)
    kept_c, window_c = thin._thinned_rows(step_array, stats, window, limit)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GRADCHECK_NO_EXT", "1")
        kept_numpy, window_numpy = thin._thinned_rows(step_array, stats, window, limit)
    assert window_c == window_numpy
    assert kept_c.tolist() == kept_numpy.tolist()


def test_c_thinning_refuses_arguments_that_do_not_fit() -> None:
    if not fastpath.available():
        pytest.skip("the C engine is not built, or GRADCHECK_NO_EXT=1")
    from gradcheck.native import _scan  # type: ignore[attr-defined]

    steps = np.arange(10, dtype=np.int64)
    stats = np.zeros((10, len(STAT_NAMES)), dtype=np.float32)
    with pytest.raises(ValueError, match="inconsistent"):
        _scan.thin(steps, stats[:5], 5, 7, 1, 4, np.empty(10, np.int64))
    with pytest.raises(ValueError, match="inconsistent"):
        _scan.thin(steps, stats, 5, 7, 0, 4, np.empty(10, np.int64))
    with pytest.raises(ValueError, match="no window fits"):  # two rows a window, forever
        _scan.thin(np.array([-1, 0], np.int64), stats[:2], 5, 7, 1, 1, np.empty(2, np.int64))
