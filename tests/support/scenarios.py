"""Runs built in memory from value generators (one function per step), reduced and judged:
the scenarios of the verdict tests, one per rule."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gradcheck.model import HistogramRecord, LayerResult, Record, RunReport, ScalarRecord
from gradcheck.series.reduce import reduce_records
from gradcheck.tags import TagRules
from gradcheck.verdicts.config import DEFAULT_CONFIG, Config
from gradcheck.verdicts.detect import analyze_run
from tests.support.histograms import tf2_buckets, torch_proto

RUN = "runs/hand"
STEPS = 40
Values = Callable[[int], "np.ndarray | None"]


def gaussian(scale: float | Callable[[int], float], size: int = 256, seed: int = 0) -> Values:
    """Fresh N(0, scale(step)) values at every step (a gradient, or moving weights)."""

    def at(step: int) -> np.ndarray:
        value = scale(step) if callable(scale) else scale
        return np.random.default_rng(seed * 1000 + step).normal(0.0, value, size=size)

    return at


def walking(scale: float = 0.1, speed: float = 0.01, size: int = 256, seed: int = 1) -> Values:
    """Weights that drift a little at every step, as training moves them."""
    start = np.random.default_rng(seed).normal(0.0, scale, size=size)
    drift = np.random.default_rng(seed + 1).normal(0.0, scale * speed, size=size)
    return lambda step: start + drift * step


def frozen(scale: float = 0.1, size: int = 256, seed: int = 2) -> Values:
    values = np.random.default_rng(seed).normal(0.0, scale, size=size)
    return lambda step: values


def constant(value: float, size: int = 64) -> Values:
    return lambda step: np.full(size, value)


def until(last: int, values: Values) -> Values:
    """``values`` up to step ``last`` (excluded), nothing after: the writer stopped."""
    return lambda step: values(step) if step < last else None


def records(
    series: dict[str, Values],
    *,
    steps: int = STEPS,
    scalars: dict[str, Callable[[int], float | None]] | None = None,
    encoding: str = "histo",
) -> list[Record]:
    out: list[Record] = []
    for step in range(steps):
        for tag, values_at in series.items():
            values = values_at(step)
            if values is None:
                continue
            buckets = torch_proto(values) if encoding == "histo" else tf2_buckets(values)
            out.append(
                HistogramRecord(
                    RUN,
                    "f",
                    0,
                    tag,
                    0,
                    step,
                    float(step),
                    encoding,  # type: ignore[arg-type]
                    buckets.left,
                    buckets.right,
                    buckets.counts,
                    **buckets.fields(),
                )  # fmt: skip
            )
        for tag, value_at in (scalars or {}).items():
            value = value_at(step)
            if value is not None:
                out.append(ScalarRecord(RUN, "f", 0, tag, step, float(step), "tensor", value))
    return out


def analyze(
    series: dict[str, Values], config: Config = DEFAULT_CONFIG, **kwargs: object
) -> RunReport:
    return analyze_run(reduce_records(records(series, **kwargs)), config, TagRules())  # type: ignore[arg-type]


def layer(report: RunReport, name: str) -> LayerResult:
    return next(result for result in report.layers if result.name == name)


def healthy_mlp() -> dict[str, Values]:
    """Three layers, weights moving, gradients of similar size (the last one largest)."""
    series: dict[str, Values] = {}
    for i, grad_scale in enumerate((0.02, 0.03, 0.05)):
        series[f"fc{i}.weight"] = walking(seed=10 + i)
        series[f"fc{i}.weight/grad"] = gaussian(grad_scale, seed=20 + i)
    return series
