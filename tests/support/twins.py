"""The C engine against the reference reader (the twin rule of ``ARCHITECTURE.md``): the
comparisons (bit for bit, statistics within ``STATS_RTOL``) and the event files both are read on
(edge cases, framed payloads, TF2 steps), shared by the engine's tests."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, settings
from tensorboard.compat.proto import summary_pb2, types_pb2

from gradcheck.engine.parts import FilePart, reduce_file, reduce_file_reference
from gradcheck.events.steps import StepWindow
from gradcheck.model import STAT_NAMES, RunData
from tests.support import eventfiles as ef
from tests.support.eventfiles import keras3_step

# GRADCHECK_EXAMPLES=3000 runs a longer search.
SETTINGS = settings(
    max_examples=int(os.environ.get("GRADCHECK_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def assert_same(reference: RunData, fast: RunData) -> None:
    """Equal RunData: bit for bit (NaN equal to NaN), statistics within ``STATS_RTOL``."""
    assert fast.run == reference.run
    assert fast.files == reference.files
    assert fast.file_infos == reference.file_infos
    assert fast.damages == reference.damages
    assert fast.notices == reference.notices
    assert list(fast.histograms) == list(reference.histograms)
    for key, expected in reference.histograms.items():
        got = fast.histograms[key]
        assert got.encoding == expected.encoding, key
        assert (got.window, got.histograms_read) == (expected.window, expected.histograms_read)
        assert np.array_equal(got.steps, expected.steps), key
        assert np.array_equal(got.wall_times, expected.wall_times, equal_nan=True), key
        # Statistics within a relative 1e-6 (the C kernel may sum buckets in another order
        # than numpy's einsum: see STATS_RTOL); everything else bit for bit.
        assert_close_stats(got.stats, expected.stats, key)
        assert np.array_equal(got.fingerprints, expected.fingerprints), key
    assert list(fast.scalars) == list(reference.scalars)
    for tag, expected_scalar in reference.scalars.items():
        got_scalar = fast.scalars[tag]
        assert np.array_equal(got_scalar.steps, expected_scalar.steps), tag
        assert np.array_equal(got_scalar.values, expected_scalar.values, equal_nan=True), tag


def both_engines(path: Path | str, window: StepWindow | None = None) -> tuple[FilePart, FilePart]:
    window = window or StepWindow()
    return reduce_file_reference(str(path), "run", window), reduce_file(str(path), "run", window)


def check_file(path: Path | str, window: StepWindow | None = None) -> FilePart:
    reference, fast = both_engines(path, window)
    assert_same(reference.data, fast.data)
    assert (fast.values_read, fast.values_kept) == (reference.values_read, reference.values_kept)
    return fast


def histo_step(step: int, tags: tuple[str, ...] = ("w", "b")) -> object:
    values = [ef.histo_of(tag, np.arange(5.0) * (step + 1) + len(tag)) for tag in tags]
    return ef.summary_event(step, [*values, ef.simple_scalar("loss", float(step))])


def odd_values() -> list[object]:
    """Values the C scanner leaves to the reference decoder, or reads in a less common form."""
    rng = np.random.default_rng(0)
    buckets = ef.tf2_buckets(rng.normal(size=100))
    image = summary_pb2.Summary.Value(tag="img", image=summary_pb2.Summary.Image(height=1))
    unpacked = ef.histo_of("unpacked", rng.normal(size=50))
    return [
        ef.summary_event(1, [ef.tensor_histogram("f32", buckets, dtype=types_pb2.DT_FLOAT)]),
        ef.summary_event(1, [ef.tensor_histogram("half", buckets, dtype=types_pb2.DT_HALF)]),
        ef.summary_event(1, [ef.tensor_histogram("typed", buckets, as_content=False)]),
        ef.summary_event(1, [ef.tensor_scalar("acc", 0.5)]),
        ef.summary_event(1, [ef.tensor_scalar("acc64", 0.25, dtype=types_pb2.DT_DOUBLE)]),
        ef.summary_event(
            1, [ef.tensor_value("bad", np.ones((2, 2)), plugin="histograms")]
        ),  # wrong shape: damage
        ef.summary_event(1, [ef.tensor_value("sc", np.ones(3), plugin="scalars")]),
        ef.summary_event(1, [ef.tensor_value("txt", np.ones(3), plugin="text")]),
        ef.summary_event(2, [image, ef.simple_scalar("loss", 2.0)]),
        ef.summary_event(2, [unpacked]),
        ef.summary_event(2, [ef.histo("empty", [], [], min=0, max=0, num=0, sum=0, sum_squares=0)]),
        ef.summary_event(2, [ef.tensor_histogram("f32", buckets, first=False)]),
        ef.summary_event(3, [ef.tensor_histogram("typed", buckets, first=False)]),
        ef.summary_event(3, [ef.tensor_scalar("acc", 0.75, first=False)]),
        ef.graph(),
        ef.source_writer("my.writer"),
    ]


EDGE_CASES = {
    "keras3_collisions": [ef.file_version(), *(keras3_step(s) for s in (0, 3, 6, 9))],
    "restarts": [ef.file_version(), *(histo_step(s) for s in (0, 1, 2, 3, 2, 3, 4, 1, 2))],
    "odd_values": [ef.file_version(), *odd_values()],
    "no_file_version": [histo_step(s) for s in range(3)],
    "empty_events": [ef.Event(wall_time=1.0), ef.summary_event(0, [])],
}
PAYLOADS = [e.SerializeToString() for e in [ef.file_version(), *(histo_step(s) for s in range(8))]]
DATA = ef.frame(PAYLOADS)
"""A file version and eight steps of histograms, framed: the bytes the property tests damage."""


def tf2_steps(steps: range, first_plugin_step: int = 0) -> list[object]:
    rng = np.random.default_rng(1)
    events: list[object] = [ef.file_version()]
    for step in steps:
        for tag in ("weights/dense/kernel", "gradients/dense/kernel"):
            buckets = ef.tf2_buckets(rng.normal(size=200) * (step + 1))
            first = step == first_plugin_step
            events.append(ef.summary_event(step, [ef.tensor_histogram(tag, buckets, first=first)]))
        events.append(
            ef.summary_event(step, [ef.tensor_scalar("loss", 1.0 / (step + 1), first=first)])
        )
    return events


STATS_RTOL = 1e-6
"""The C kernel sums some buckets in another order than numpy's einsum: statistics may differ
in the last bits of float64 (float32 rounding hides nearly all of it); fingerprints never."""


def assert_close_stats(
    got: np.ndarray,
    expected: np.ndarray,
    what: object = "",
    magnitudes: np.ndarray | None = None,
) -> None:
    """Equal NaN pattern and infinities; finite values within ``STATS_RTOL`` (relative).
    ``magnitudes``: each row's histogram magnitude, when the statistics cannot tell it (their
    float32 min and max stop at 3.4e38)."""
    got64, expected64 = got.astype(np.float64), expected.astype(np.float64)
    assert got64.shape == expected64.shape, what
    assert np.array_equal(np.isnan(got64), np.isnan(expected64)), what
    infinite = np.isinf(expected64)
    assert np.array_equal(got64[infinite], expected64[infinite]), what
    finite = np.isfinite(expected64)
    allowed = STATS_RTOL * np.maximum(np.abs(expected64), np.abs(got64))
    # Near-zero results of cancelling sums (the std of a near-constant histogram, a mean near
    # 0, a relative bound near 0) get an absolute slack: 1e-12 of the histogram's magnitude.
    with np.errstate(invalid="ignore"):
        edges = np.abs(expected64[:, [STAT_NAMES.index("min"), STAT_NAMES.index("max")]])
    magnitude = np.nanmax(np.where(np.isfinite(edges), edges, np.nan), axis=1, initial=0.0)
    if magnitudes is not None:
        magnitude = np.maximum(magnitude, magnitudes)
    allowed += 1e-12 * magnitude[:, None]
    allowed[:, STAT_NAMES.index("l2_error_bound")] += 1e-12
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf (checked above)
        difference = np.abs(got64 - expected64)
    assert (difference[finite] <= allowed[finite]).all(), what
