"""The table's statistics are the per-parameter definitions', bit for bit (issue 36).

``verdicts.table`` computes a statistic for every parameter logged at the same steps at once;
``verdicts.signals`` defines it one parameter at a time. Both are run here on every real run the
tests have (the writers' logs, the issue-15 runs, the sample runs, the sweep, the shared corpus
when present), and on runs made to leave the table (a step without quantiles, steps of their
own, weights from scalars only), and compared field by field, NaN for NaN.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from gradcheck.engine.read import read_runs, using
from gradcheck.events.discover import discover
from gradcheck.events.steps import StepWindow
from gradcheck.model import RunData, ScalarSeries
from gradcheck.series.data import STAT_NAMES
from gradcheck.series.merge import join_renamed, merge
from gradcheck.tags import DEFAULT_RULES
from gradcheck.tags.scalars import scalar_roles
from gradcheck.verdicts import table
from gradcheck.verdicts.config import DEFAULT_CONFIG
from gradcheck.verdicts.context import learning_rate
from gradcheck.verdicts.detect import run_parameters
from gradcheck.verdicts.numeric import median
from gradcheck.verdicts.pairing import ParameterTags, pair_parameters
from gradcheck.verdicts.rules.base import early_and_late
from gradcheck.verdicts.rules.stopped import stopped_index
from gradcheck.verdicts.signals import (
    GradientSignal,
    Parameter,
    WeightSignal,
    movement,
    parameter_signals,
    run_weight_spread,
    sgd_update_ratio,
)
from gradcheck.verdicts.table import baselines, sgd_ratios, signals, table_movements
from tests.support.paths import CORPUS_RUNS, SAMPLE_RUNS, TEST_DATA


def _runs_under(path: Path) -> list:
    runs = discover([str(path)])
    with using(None, 1) as workers:
        parts = read_runs(runs, StepWindow(), None, workers)
    return [merge([part.data for part in run]) for run in parts]


def _weights(data) -> list[WeightSignal]:
    _, parameters, _, _, _ = run_parameters(data)
    return [w for p in parameters for w in (p.weight, *p.weight_also) if w is not None]


def _same(a: object, b: object) -> bool:
    """Equal bit for bit: floats with their sign of zero, NaN for NaN; arrays by dtype, shape
    and bytes; dataclasses field by field."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        assert isinstance(b, float)
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if dataclasses.is_dataclass(a):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, tuple):
        assert isinstance(b, tuple)
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _check(weights: list[WeightSignal]) -> int:
    """Table against definition on ``weights``; the number of movements compared."""
    spread = run_weight_spread_of(weights)
    at_once = table_movements(weights, spread)
    one_by_one = [movement(w, spread) for w in weights]
    for weight, got, want in zip(weights, at_once, one_by_one, strict=True):
        assert _same(got, want), (weight.tag, got, want)
        if "_stopped_index" in weight.__dict__:  # kept by the table
            alone = dataclasses.replace(weight)
            assert weight.__dict__["_stopped_index"] == stopped_index(alone), weight.tag
    return sum(m is not None for m in one_by_one)


def run_weight_spread_of(weights: list[WeightSignal]) -> float:
    return run_weight_spread([Parameter(ParameterTags(w.tag, 0), None, w) for w in weights])


ROOTS = [
    TEST_DATA / "writers",
    TEST_DATA / "runs15",
    TEST_DATA / "sweep",
    SAMPLE_RUNS,
]


def _signals(data) -> tuple[RunData, list[ParameterTags], list[Parameter]]:
    """A run's data as the verdicts see it, its parameters' tags, and ``table.signals``."""
    data = join_renamed(data)
    tags = pair_parameters(
        list(data.histograms), list(data.scalars), DEFAULT_RULES, scalar_roles(data.scalars)
    )
    return data, tags, signals(data, tags)


def _check_sgd(data) -> int:
    """``table.sgd_ratios`` against ``rules.slow.sgd_ratio``'s median; the ratios compared."""
    _, _, at_once = _signals(data)
    rate = learning_rate(data)
    if rate is None:
        return 0
    ratios = sgd_ratios(at_once, rate.steps, rate.values)
    for p in at_once:
        if p.name in ratios:
            assert p.gradient is not None and p.weight is not None
            ratio = sgd_update_ratio(p.gradient, p.weight, rate.steps, rate.values)
            assert _same(ratios[p.name], median(ratio) if ratio.size else None), p.name
    return len(ratios)


def _check_signals(data) -> int:
    """``table.signals`` against ``parameter_signals`` on a run, and the baselines kept on
    them; the parameters compared."""
    data, tags, at_once = _signals(data)
    for t, got in zip(tags, at_once, strict=True):
        assert _same(got, parameter_signals(data, t)), t.name
    baselines(at_once, DEFAULT_CONFIG)
    for p in at_once:
        for signal in (p.gradient, p.weight):
            if signal is None:
                continue
            kept = signal.__dict__.get("_rms_early_and_late")
            if kept is not None:
                assert _same(kept[1], early_and_late(signal.rms, DEFAULT_CONFIG)), p.name
            if "level" in signal.__dict__:
                assert _same(signal.__dict__["level"], GradientSignal.level.func(signal)), p.name
    return len(tags)


@pytest.mark.parametrize("root", ROOTS, ids=lambda p: p.name)
def test_table_is_the_definition_on_real_runs(root: Path) -> None:
    runs = _runs_under(root)
    assert sum(_check_signals(data) for data in runs) > 0
    assert sum(_check(_weights(data)) for data in runs) > 0


def test_table_sgd_ratios_with_a_learning_rate() -> None:
    """No committed run logs a learning rate beside gradients and weights: a real run's, with
    a decaying learning rate logged before its first step, at its steps from the fourth on and
    after its last, and weights of norm zero at one step (an infinite ratio: computed alone)."""
    (data,) = _runs_under(SAMPLE_RUNS / "tf_loop_vanishing_sigmoid")  # histograms only
    steps = next(iter(data.histograms.values())).steps
    rate = ScalarSeries(
        "learning_rate",
        np.array([steps[0] - 1, *steps[3:], steps[-1] + 5], dtype=np.int64),
        0.1 / np.arange(1.0, steps.size),
    )
    key = next(k for k in data.histograms if "kernel" in k[0] and "grad" not in k[0].lower())
    zeroed = data.histograms[key].stats.copy()
    zeroed[2, STAT_NAMES.index("l2_norm")] = 0.0
    histograms = {**data.histograms, key: dataclasses.replace(data.histograms[key], stats=zeroed)}
    scalars = {**data.scalars, rate.tag: rate}
    assert _check_sgd(dataclasses.replace(data, histograms=histograms, scalars=scalars)) >= 5


@pytest.mark.skipif(not CORPUS_RUNS.is_dir(), reason="the shared corpus is not here")
def test_table_is_the_definition_on_the_corpus() -> None:
    runs = _runs_under(CORPUS_RUNS)
    assert sum(_check_signals(data) for data in runs) > 100
    assert sum(_check(_weights(data)) for data in runs) > 100


def _weight(steps: list[int], seed: int, nan_at: int | None = None) -> WeightSignal:
    rng = np.random.default_rng(seed)
    count = len(steps)
    quantiles = np.sort(rng.normal(size=(count, 9)), axis=1) * (1 + np.arange(count))[:, None]
    if nan_at is not None:
        quantiles[nan_at] = np.nan
    norm = np.linalg.norm(quantiles, axis=1)
    return WeightSignal(
        tag=f"w{seed}",
        steps=np.array(steps, dtype=np.int64),
        norm=norm,
        rms=norm / 3,
        mean=quantiles[:, 4].copy(),
        std=quantiles[:, 5] - quantiles[:, 3],
        quantiles=quantiles,
        fingerprints=rng.integers(0, 2**63, count, dtype=np.int64).astype(np.uint64),
        bad_steps=np.empty(0, dtype=np.int64),
        count=100.0,
        steps_logged=count,
    )


def test_table_movements_on_weights_that_leave_the_table() -> None:
    frozen = _weight([0, 10, 20, 30], 3)
    frozen.fingerprints[:] = frozen.fingerprints[0]
    frozen.norm[:] = frozen.norm[0]
    frozen.quantiles[:] = frozen.quantiles[0]
    zero = _weight([0, 10, 20, 30], 4)
    zero.std[:] = 0.0
    zero.mean[:] = 0.0
    weights = [
        _weight([0, 10, 20, 30], 1),
        _weight([0, 10, 20, 30], 2, nan_at=2),  # a step without quantiles: alone
        frozen,
        zero,  # no spread, no magnitude: the run's spread
        _weight([0, 5, 20], 5),  # steps of its own: a table of one
        _weight([0, 5, 20], 6),
        _weight([7], 7),  # one step: no movement
        _weight([0, 10, 20, 30, 40, 50, 60], 8, nan_at=0),
    ]
    assert _check(weights) == 7


def test_table_signals_on_damaged_statistics() -> None:
    """A real run's series with the statistics the writers rarely give: a norm that overflowed
    where no value was non-finite, counts missing (at some steps or all) or zero, a zero share
    of NaN, a step's non-finite share, zero and signed-zero counts in the middle, steps of
    their own."""
    (data,) = _runs_under(SAMPLE_RUNS / "tf_loop_vanishing_sigmoid")  # histograms only
    tags = pair_parameters(list(data.histograms), list(data.scalars))
    pairs = [(t.gradient, t.weight) for t in tags if t.gradient and t.weight][:6]
    assert len(pairs) >= 6 and all(len(data.histograms[k]) >= 4 for pair in pairs for k in pair)
    column = {name: i for i, name in enumerate(STAT_NAMES)}
    changed = {}
    gradients, weights = [0, 1, 2, 3, 4, 8], [5, 6, 7, 2, 1, 0]
    damages = [
        *zip(gradients, (g for g, _ in pairs), strict=True),
        *zip(weights, (w for _, w in pairs), strict=True),
    ]
    for number, key in damages:
        s = data.histograms[key]
        stats = s.stats.copy()
        steps = s.steps
        if number == 0:
            stats[1, column["l2_norm"]] = np.inf
        elif number == 1:
            stats[:, column["count"]] = np.nan
        elif number == 2:
            stats[:, column["count"]] = 0.0
        elif number == 3:
            stats[:, column["zero_share"]] = np.nan
            stats[2, column["nonfinite_share"]] = 0.25
        elif number == 4:
            stats[:, column["zero_share"]] = 0.9995  # all zero, not sparse
        elif number == 5:
            stats[:, column["count"]] = 100.0 + np.arange(len(s))  # a median that moves
            stats[0, column["count"]] = np.inf
            stats[1:3, column["count"]] = np.nan  # ... when the NaNs are left out
            stats[:, column["l2_error_bound"]] = np.nan
        elif number == 6:
            steps = steps + 1  # a table of its own
        elif number == 7:
            stats[:, column["count"]] = [-0.0 if i % 2 else 0.0 for i in range(len(s))]
        elif number == 8:
            stats[:, column["count"]] = np.inf
        changed[(s.tag, s.index)] = dataclasses.replace(s, stats=stats, steps=steps)
    damaged = dataclasses.replace(data, histograms={**data.histograms, **changed})
    assert _check_signals(damaged) >= 4
    assert _check(_weights(damaged)) > 0


def test_a_table_bigger_than_its_budget_is_computed_a_slice_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run of many parameters logged at many steps is stacked a slice of rows at a time (so
    that memory stays what the series hold): the same numbers, slice by slice."""
    monkeypatch.setattr(table, "_BUDGET", 40)  # a row or two a slice
    slices = []
    real = table._slices
    monkeypatch.setattr(table, "_slices", lambda rows, width: slices.append(1) or real(rows, width))
    for root in (TEST_DATA / "runs15", SAMPLE_RUNS):
        for data in _runs_under(root):
            _check_signals(data)
            _check(_weights(data))
    assert len(slices) > 20
