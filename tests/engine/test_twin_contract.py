"""What the twin claim of ``ARCHITECTURE.md`` rests on, beside the C-against-twin comparisons:
the numbers C and Python share are one definition (``gradcheck.native.shared``), and the C
copy of numpy's pairwise summation still sums in numpy's order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tensorflow.core.framework import types_pb2

from gradcheck import native
from gradcheck.engine import fastpath
from gradcheck.events import framing
from gradcheck.events.discover import discover
from gradcheck.events.reader import read_run
from gradcheck.inspect import inspect_paths, inspect_records
from gradcheck.model import COLUMN, STAT_NAMES
from gradcheck.native import shared
from gradcheck.series import batch, stats
from tests.support import eventfiles as ef

# --------------------------------------------------------------------------------------------
# Shared numbers: _scan.SHARED (the C side's enums and macros) against their Python definition
# --------------------------------------------------------------------------------------------

_STAT_OF_COLUMN = {
    "S_COUNT": "count",
    "S_MIN": "min",
    "S_MAX": "max",
    "S_MEAN": "mean",
    "S_STD": "std",
    "S_L2": "l2_norm",
    "S_BOUND": "l2_error_bound",
    "S_NONFINITE": "nonfinite_share",
    "S_ZERO": "zero_share",
    "S_P01": "p01",
}
_PROTOCOL = ("STOP_", "K_", "FLAG_", "WHAT_", "ENCODING_")


def python_definitions() -> dict[str, float]:
    """Every number the C extension must agree on, from where Python defines it."""
    numbers = {
        name: value
        for name, value in vars(shared).items()
        if name.startswith(_PROTOCOL) and isinstance(value, int)
    }
    numbers.update({name: COLUMN[stat] for name, stat in _STAT_OF_COLUMN.items()})
    numbers["N_STATS"] = len(STAT_NAMES)
    numbers["MAX_WEIGHTS"] = batch.FINGERPRINT_WEIGHTS.shape[1]
    numbers["FINGERPRINT_MIX"] = int(batch._MIX)
    numbers["S_ACTIVATION"] = COLUMN[stats.ACTIVATION_STATS[0]]
    numbers["GRID_LEVELS"] = len(stats.QUANTILE_LEVELS)
    numbers["ZERO_WIDTH"] = stats.ZERO_WIDTH
    numbers["BOUND_MARGIN"] = stats.BOUND_MARGIN
    numbers["MAX_PLAUSIBLE_LENGTH"] = framing.MAX_PLAUSIBLE_LENGTH
    return numbers


@pytest.mark.skipif(not native.built(), reason="the C extension is not built")
def test_the_c_extension_shares_its_numbers_with_their_python_definition() -> None:
    from gradcheck.native import _scan  # type: ignore[attr-defined]

    assert python_definitions() == _scan.SHARED


def test_the_python_names_of_the_scanners_numbers_agree_with_its_numbers() -> None:
    """The names the tallies hold, by bit and by row kind, as the reader names them."""
    assert shared.WHATS == {0: "", 3: "file_version", 5: "summary"}
    assert shared.ENCODINGS == {0: "histo", 1: "tensor", 2: "simple_value"}
    assert [shared.ENCODING_OF_KIND[kind] for kind in range(4)] == [
        "histo",
        "tensor",
        "simple_value",
        "tensor",
    ]
    assert shared.K_SIMPLE == 2 and all(  # histograms before scalars: kind < K_SIMPLE
        kind < shared.K_SIMPLE for kind in (shared.K_HISTO, shared.K_TENSOR_HIST)
    )


# --------------------------------------------------------------------------------------------
# numpy's pairwise summation, which _scan.c copies (DEFINE_PAIRWISE_SUM) for bucket totals
# --------------------------------------------------------------------------------------------


def pairwise(values: np.ndarray, block: int = 128) -> float:
    """numpy's order of summing float64 (``pairwise_sum`` in its ``loops_utils``), as
    ``_scan.c`` copies it: below 8 values one after the other; up to ``block`` values, eight
    running sums combined as a tree, then the rest; above, the two halves (cut at a multiple
    of 8) summed so and added."""
    count = len(values)
    if count < 8:
        total = 0.0
        for value in values.tolist():
            total += value
        return total
    if count <= block:
        sums = values[:8].tolist()
        at = 8
        while at < count - count % 8:
            for lane in range(8):
                sums[lane] += float(values[at + lane])
            at += 8
        total = ((sums[0] + sums[1]) + (sums[2] + sums[3])) + (
            (sums[4] + sums[5]) + (sums[6] + sums[7])
        )
        for value in values[at:].tolist():
            total += value
        return total
    half = count // 2
    half -= half % 8
    return pairwise(values[:half], block) + pairwise(values[half:], block)


def one_after_the_other(values: np.ndarray) -> float:
    total = 0.0
    for value in values.tolist():
        total += value
    return total


def counts_telling_orders_apart(size: int) -> np.ndarray:
    """Bucket counts whose float64 total depends on the order of the sum: small counts beside
    2^53 and +-2^54, so that each order loses a different set of them."""
    counts = np.arange(1, size + 1, dtype=np.float64) % 7 + 1
    counts[0] = 2.0**53
    counts[size // 3] = 2.0**54
    counts[2 * size // 3] = -(2.0**54)
    return counts


SIZES = (8, 64, 128, 129, 200, 1000)
"""Each branch of the order (eight running sums, a remainder, halves); at each size the
counts above tell numpy's order from one after the other, and above 128 from halving at
64 or 256 values."""


@pytest.mark.parametrize("size", SIZES)
def test_numpy_still_sums_in_the_order_the_c_copy_follows(size: int) -> None:
    """Fails when numpy's summation order changes: ``_scan.c``'s copy must change with it."""
    counts = counts_telling_orders_apart(size)
    assert pairwise(counts) == counts.sum()
    assert pairwise(counts) == np.stack([counts] * 3, axis=1)[:, 2].sum()  # a strided column
    assert pairwise(counts) != one_after_the_other(counts)  # the counts tell orders apart
    if size > 128:
        assert pairwise(counts) not in (pairwise(counts, 64), pairwise(counts, 256))


@pytest.mark.skipif(not fastpath.available(), reason="the C engine is not built, or NO_EXT")
@pytest.mark.parametrize("dtype", [types_pb2.DT_DOUBLE, types_pb2.DT_FLOAT])
def test_the_c_scanner_totals_bucket_counts_in_numpys_order(tmp_path: Path, dtype: int) -> None:
    """A TF2 histogram's element count is its bucket total: the scanner's (C) equals numpy's
    ``counts.sum()`` bit for bit, where another order would give another count."""
    events: list[object] = [ef.file_version()]
    for size in SIZES:
        counts = counts_telling_orders_apart(size)
        edges = np.linspace(-1.0, 1.0, size + 1)
        buckets = np.stack([edges[:-1], edges[1:], counts], axis=1)
        events.append(ef.summary_event(1, [ef.tensor_histogram(f"h{size}", buckets, dtype=dtype)]))
    run = tmp_path / "run"
    run.mkdir()
    ef.write_events(run / "events.out.tfevents.1.host", events)

    listed = inspect_paths([str(run)])  # the C scanner
    runs = discover([str(run)])
    assert listed == inspect_records(record for found in runs for record in read_run(found))
    tags = {tag.tag: tag for tag in listed.runs[0].files[0].tags}
    for size in SIZES:
        counts = counts_telling_orders_apart(size)
        assert tags[f"h{size}"].element_counts == (int(counts.sum()),)
        assert int(counts.sum()) != int(one_after_the_other(counts))
