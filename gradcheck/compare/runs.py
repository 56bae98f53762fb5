"""Two runs of one model, parameter by parameter: ``gradcheck compare A B``.

"``model.fit()`` trains; my hand-written step explodes": the cause shows when the two runs are
put side by side. Parameters are matched by name (:mod:`.matching`), steps aligned on
those both runs logged, and per parameter the ratios B/A of the gradient norm (at the first
common step and its median), of the weights' movement per logged step, and of movement per
unit of gradient (for SGD, the learning-rate ratio) are taken, with each run's own verdict.
:mod:`gradcheck.compare.causes` then names the likely cause in one sentence.

Movement is the Wasserstein-1 distance between the weight histograms of consecutive logged
steps (what ``gradcheck analyze`` measures too): a lower bound of the element-wise update,
exact for small tensors (biases), noisier for large kernels whose histogram has few buckets.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gradcheck import __version__
from gradcheck.compare.causes import name_cause
from gradcheck.compare.matching import NamePair, match_names, names_phrase
from gradcheck.errors import InputError
from gradcheck.model import Comparison, ParameterComparison, RunData, RunReport, StepSeries, Verdict
from gradcheck.series.stats import wasserstein_from_quantiles
from gradcheck.tags import DEFAULT_RULES, TagRules
from gradcheck.verdicts import hints
from gradcheck.verdicts.clipping import chart_series
from gradcheck.verdicts.config import DEFAULT_CONFIG, Config
from gradcheck.verdicts.detect import run_parameters
from gradcheck.verdicts.numeric import median
from gradcheck.verdicts.signals import (
    GradientSignal,
    Parameter,
    WeightSignal,
    common_steps,
    movement,
    run_weight_spread,
)


@dataclass(frozen=True)
class LoadedRun:
    """One run's merged series and its report: what :func:`compare_runs` compares
    (``pipeline.load_runs`` reads them)."""

    data: RunData
    report: RunReport


class _Side:
    """One run's parameters (signals by name), verdicts, and whether each one's weights move."""

    def __init__(self, run: LoadedRun, config: Config, rules: TagRules) -> None:
        parameters = run_parameters(run.data, rules)[1]
        self.path = run.report.run
        self.parameters = {p.name: p for p in parameters}
        self.verdicts: dict[str, Verdict] = {x.name: x.verdict for x in run.report.layers}
        spread = run_weight_spread(parameters)
        self.moves: dict[str, bool] = {}
        for p in parameters:
            found = movement(p.weight, spread) if p.weight is not None else None
            if found is not None:
                self.moves[p.name] = (
                    not found.bit_identical and found.largest >= config.static_movement
                )


def compare_runs(
    a: LoadedRun,
    b: LoadedRun,
    *,
    config: Config = DEFAULT_CONFIG,
    rules: TagRules = DEFAULT_RULES,
    layer_glob: str | None = None,
) -> Comparison:
    """Run B against run A (every ratio B over A), most different parameters first.

    Raises ``InputError`` when no parameter of A matches one of B, when ``layer_glob`` leaves
    none, or when the runs logged no matched parameter at a common step.
    """
    side_a, side_b = _Side(a, config, rules), _Side(b, config, rules)
    pairs = match_names(list(side_a.parameters), list(side_b.parameters))
    if not any(pair.matched_by for pair in pairs):
        raise InputError(
            f"no parameter of {side_a.path} ({_some(side_a.parameters)}) matches one of "
            f"{side_b.path} ({_some(side_b.parameters)}): are they runs of one model?"
        )
    if layer_glob is not None:
        pairs = [pair for pair in pairs if _matches(layer_glob, pair)]
        if not pairs:
            raise InputError(f"no parameter matches --layer {layer_glob!r}")
    compared = [_compare(pair, side_a, side_b, config.compare_factor) for pair in pairs]
    steps = _common_steps(pairs, side_a, side_b)
    if steps.size == 0 and any(p.presence == "both" for p in compared):
        raise InputError(
            f"{side_a.path} and {side_b.path} logged no parameter at a common step "
            f"(A: {_step_range(side_a)}, B: {_step_range(side_b)}); check --steps"
        )
    compared.sort(key=lambda p: (p.presence != "both", -p.difference))
    summary, cause = name_cause(compared, config.compare_factor, int(steps.size))
    return Comparison(
        version=__version__,
        a=side_a.path,
        b=side_b.path,
        factor=config.compare_factor,
        steps=(int(steps[0]), int(steps[-1])) if steps.size else None,
        common_steps=int(steps.size),
        summary=summary,
        cause=cause,
        names=names_phrase(pairs),
        parameters=tuple(compared),
        warnings=tuple(
            f"{label}: {warning}"
            for label, run in (("A", a), ("B", b))
            for warning in run.report.warnings
        ),
    )


def _compare(pair: NamePair, a: _Side, b: _Side, factor: float) -> ParameterComparison:
    """One parameter's ratios B/A (only its verdict and movement when in one run only)."""
    name = pair.name_a if pair.name_a is not None else pair.name_b
    assert name is not None
    pa = a.parameters.get(pair.name_a) if pair.name_a else None
    pb = b.parameters.get(pair.name_b) if pair.name_b else None
    moves_a = a.moves.get(pair.name_a) if pair.name_a else None
    moves_b = b.moves.get(pair.name_b) if pair.name_b else None
    ratios = _Ratios.of(pa, pb, factor)
    one_moves = moves_a is not None and moves_b is not None and moves_a != moves_b
    update_out = ratios.update_median is not None and _outside(ratios.update_median, factor)
    return ParameterComparison(
        name=name,
        name_b=pair.name_b if pair.name_a and pair.name_b != pair.name_a else None,
        presence="both" if pa and pb else "a" if pa else "b",
        matched_by=pair.matched_by,
        kind=hints.parameter_kind(name),
        verdict_a=a.verdicts.get(pair.name_a) if pair.name_a else None,
        verdict_b=b.verdicts.get(pair.name_b) if pair.name_b else None,
        common_steps=ratios.common_steps,
        grad_norm_ratio_first=ratios.first,
        grad_norm_ratio_median=ratios.median,
        update_ratio_median=ratios.update_median,
        step_size_ratio_median=ratios.step_size_median,
        moves_a=moves_a,
        moves_b=moves_b,
        first_divergent_step=ratios.first_divergent_step,
        diverges=ratios.first_divergent_step is not None or one_moves or update_out,
        difference=math.inf if one_moves else ratios.difference(),
        grad_norm_series=ratios.grad_norm_series,
        update_series=ratios.update_series,
    )


class _Ratios:
    """The ratios B/A of one parameter's gradient norms and weight movements."""

    def __init__(self) -> None:
        self.common_steps = 0
        self.first: float | None = None
        self.median: float | None = None
        self.first_divergent_step: int | None = None
        self.update_median: float | None = None
        self.step_size_median: float | None = None
        self.grad_norm_series: tuple[StepSeries, StepSeries] | None = None
        self.update_series: tuple[StepSeries, StepSeries] | None = None

    @classmethod
    def of(cls, a: Parameter | None, b: Parameter | None, factor: float) -> _Ratios:
        ratios = cls()
        if a is None or b is None:
            return ratios
        gradient_steps, gradient_ratio = np.empty(0, dtype=np.int64), np.empty(0)
        if a.gradient is not None and b.gradient is not None:
            gradient_steps, gradient_ratio = ratios._gradients(a.gradient, b.gradient, factor)
        if a.weight is not None and b.weight is not None:
            ratios._updates(a.weight, b.weight, gradient_steps, gradient_ratio)
        return ratios

    def _gradients(
        self, a: GradientSignal, b: GradientSignal, factor: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Gradient-norm ratios at the common steps (NaN where undefined)."""
        steps, in_a, in_b = common_steps(a.steps, b.steps)
        norm_a, norm_b = a.norm[in_a], b.norm[in_b]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = norm_b / norm_a
        # Out of band: a finite ratio beyond [1/f, f], a gradient that is zero in A only, or
        # a non-finite (NaN/Inf) gradient in one run only.
        finite_a, finite_b = np.isfinite(norm_a), np.isfinite(norm_b)
        out = np.isinf(ratio) | (finite_a != finite_b)
        out |= np.isfinite(ratio) & ((ratio > factor) | (ratio < 1 / factor))
        ratio = np.where(np.isfinite(ratio), ratio, np.nan)
        self.common_steps = int(steps.size)
        self.grad_norm_series = _pair("gradient L2 norm", steps, (norm_a, a), (norm_b, b))
        if steps.size:
            self.first = _number(ratio[0])
            defined = ratio[np.isfinite(ratio)]
            self.median = median(defined) if defined.size else None
        if out.any():
            self.first_divergent_step = int(steps[np.argmax(out)])
        return steps, ratio

    def _updates(
        self,
        a: WeightSignal,
        b: WeightSignal,
        gradient_steps: np.ndarray,
        gradient_ratio: np.ndarray,
    ) -> None:
        """Movement ratios per logged interval of the common weight steps, and the same per
        unit of gradient (the gradient ratio at each interval's first step)."""
        steps, in_a, in_b = common_steps(a.steps, b.steps)
        if steps.size < 2:
            return
        move_a = _movement_per_step(a.quantiles[in_a], steps)
        move_b = _movement_per_step(b.quantiles[in_b], steps)
        with np.errstate(divide="ignore", invalid="ignore"):
            update = move_b / move_a
        update = np.where(np.isfinite(update), update, np.nan)
        label = "weight movement per step"
        self.update_series = _pair(label, steps[1:], (move_a, a), (move_b, b))
        self.update_median = _finite_median(update)
        at = np.searchsorted(gradient_steps, steps[:-1])
        known = at < gradient_steps.size
        known[known] = gradient_steps[at[known]] == steps[:-1][known]
        per_gradient = np.full(update.size, np.nan)
        per_gradient[known] = update[known] / gradient_ratio[at[known]]
        self.step_size_median = _finite_median(per_gradient)

    def difference(self) -> float:
        """log10 of the largest factor between the runs among the ratios (0 when none)."""
        ratios = (self.first, self.median, self.update_median)
        logs = [abs(math.log10(r)) for r in ratios if r is not None and r > 0]
        if self.first_divergent_step is not None and not logs:
            return math.inf  # diverges where no ratio is defined: zero or NaN in one run only
        return max(logs, default=0.0)


def _pair(
    label: str,
    steps: np.ndarray,
    a: tuple[np.ndarray, GradientSignal | WeightSignal],
    b: tuple[np.ndarray, GradientSignal | WeightSignal],
) -> tuple[StepSeries, StepSeries]:
    """A's and B's ``values`` at the common ``steps``, as chart series (each signal's
    non-finite steps among them marked)."""
    return (
        chart_series(label, steps, a[0], np.intersect1d(a[1].bad_steps, steps)),
        chart_series(label, steps, b[0], np.intersect1d(b[1].bad_steps, steps)),
    )


def _movement_per_step(grids: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Wasserstein-1 distance between consecutive quantile grids, per optimizer step."""
    distance = wasserstein_from_quantiles(grids[1:], grids[:-1])
    return np.asarray(distance / np.diff(steps), dtype=np.float64)


def _finite_median(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return median(finite) if finite.size else None


def _number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _outside(ratio: float, factor: float) -> bool:
    return ratio > factor or ratio < 1 / factor


def _common_steps(pairs: Sequence[NamePair], a: _Side, b: _Side) -> np.ndarray:
    """Every step at which both runs logged some matched parameter's gradient (or, for runs
    that log weights only, its weights)."""
    found: dict[str, list[np.ndarray]] = {"gradient": [], "weight": []}
    for pair in pairs:
        pa = a.parameters.get(pair.name_a) if pair.name_a else None
        pb = b.parameters.get(pair.name_b) if pair.name_b else None
        for kind, steps in found.items():
            signal_a = getattr(pa, kind, None)
            signal_b = getattr(pb, kind, None)
            if signal_a is not None and signal_b is not None:
                steps.append(common_steps(signal_a.steps, signal_b.steps)[0])
    arrays = found["gradient"] or found["weight"]
    return np.unique(np.concatenate(arrays)) if arrays else np.empty(0, dtype=np.int64)


def _step_range(side: _Side) -> str:
    signals = [p.gradient or p.weight for p in side.parameters.values()]
    steps = [signal.steps for signal in signals if signal is not None]
    every = np.concatenate(steps) if steps else np.empty(0, dtype=np.int64)
    return f"steps {every.min()}-{every.max()}" if every.size else "no step"


def _some(names: dict[str, Parameter], shown: int = 3) -> str:
    listed = ", ".join(list(names)[:shown])
    return listed + (", ..." if len(names) > shown else "") if names else "no parameter"


def _matches(pattern: str, pair: NamePair) -> bool:
    """``--layer``: a shell glob on A's or B's name of the parameter."""
    return any(
        name is not None and fnmatch.fnmatchcase(name, pattern)
        for name in (pair.name_a, pair.name_b)
    )
