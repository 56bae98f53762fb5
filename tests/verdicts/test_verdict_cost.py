"""The verdicts' cost grows linearly with the number of parameters (issue 30, point 6).

Counted, not timed (the machine is shared): the Python and C function calls that judging a run
of 50 and of 400 parameters makes, over the same steps. Linear cost gives 8x; a run-wide
quantity found again for each parameter (the largest other movement, the group of clip
ceilings, the other gradients' levels during a rise) gives ~20-60x at these sizes.
"""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable

import numpy as np
import pytest

from gradcheck.model import HistogramRecord, Record, ScalarRecord
from gradcheck.series.reduce import reduce_records
from gradcheck.tags import TagRules
from gradcheck.verdicts.detect import analyze_run
from tests.support.histograms import torch_proto

RUN = "runs/cost"
SMALL, LARGE = 50, 400
Scale = Callable[[int, int], float]  # (parameter, step) -> the scale of its values


def _records(parameters: int, steps: int, weight: Scale, gradient: Scale) -> list[Record]:
    base = np.linspace(-1.0, 1.0, 64)
    out: list[Record] = []
    for step in range(steps):
        for number in range(parameters):
            tag = f"layer{number}.weight"
            for name, scale in ((tag, weight), (f"{tag}.grad", gradient)):
                buckets = torch_proto(base * scale(number, step))
                out.append(
                    HistogramRecord(
                        RUN,
                        "f",
                        0,
                        name,
                        0,
                        step,
                        float(step),
                        "histo",
                        buckets.left,
                        buckets.right,
                        buckets.counts,
                        **buckets.fields(),
                    )  # fmt: skip
                )
        out.append(ScalarRecord(RUN, "f", 0, "loss", step, float(step), "tensor", 1.0))
    return out


def _calls(records: list[Record]) -> int:
    data = reduce_records(records)
    profile = cProfile.Profile()
    profile.runcall(analyze_run, data, rules=TagRules(), charts=False)
    return int(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]


def _spread(number: int) -> float:
    return 1.0 + 0.05 * (number * 7919 % 101) / 101


SCENARIOS: dict[str, tuple[int, Scale, Scale]] = {
    # weights that never move, gradients constant: every parameter static, every gradient
    # norm pinned at its own ceiling (static.py's other weights, clipping.py's ceiling groups)
    "static, pinned gradients": (
        3,
        lambda number, step: 0.1 * _spread(number),
        lambda number, step: 0.01 * _spread(number),
    ),
    # every gradient rising 10,000x half-way: every parameter exploding (the other gradients'
    # levels during each rise)
    "every gradient exploding": (
        12,
        lambda number, step: (0.1 + 0.001 * step) * _spread(number),
        lambda number, step: 0.01 * _spread(number) * (1e4 * (1 + 0.3 * step) if step >= 6 else 1),
    ),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_judging_cost_is_linear_in_parameters(scenario: str) -> None:
    steps, weight, gradient = SCENARIOS[scenario]
    small = _calls(_records(SMALL, steps, weight, gradient))
    large = _calls(_records(LARGE, steps, weight, gradient))
    assert large / small < 1.25 * LARGE / SMALL, (small, large)


def test_the_scenarios_judge_what_they_say() -> None:
    """The scenarios reach the code they are there for: static and exploding verdicts."""
    expected = {"static, pinned gradients": "static", "every gradient exploding": "exploding"}
    for scenario, verdict in expected.items():
        steps, weight, gradient = SCENARIOS[scenario]
        report = analyze_run(
            reduce_records(_records(20, steps, weight, gradient)), rules=TagRules()
        )
        assert {layer.verdict for layer in report.layers} == {verdict}, scenario
