"""A run's activation histograms (a layer's outputs) as the dead and saturated rules see them.

Each activation series (:func:`gradcheck.tags.roles.activation_layer`) becomes an
:class:`Activation`: its per-step shares of exact zeros and of values near the bounds of its
range (estimated from the buckets, with the bounds they allow: :mod:`gradcheck.series.stats`),
the kind of bounded output its range shows (tanh's ``[-1, 1]``, sigmoid's ``[0, 1]``, or none),
and whether it is the network's output. :func:`activation_results` judges each with the rules
of :data:`ACTIVATION_RULES` and gives the rows of the report (``LayerResult`` with an
``activation_tag``), after the parameters in depth.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gradcheck.model import VERDICTS, HistogramSeries, LayerResult, Reference, RunData, Verdict
from gradcheck.tags import DEFAULT_RULES, TagRules
from gradcheck.verdicts.clipping import chart_series, downsample
from gradcheck.verdicts.numeric import median
from gradcheck.verdicts.registry import OK
from gradcheck.verdicts.rules.base import Excuse, Finding, RunContext
from gradcheck.verdicts.rules.shares import charted, threshold_of

BoundKind = Literal["tanh", "sigmoid"]

_OUTPUT_NAME = re.compile(
    r"(?:^|[/._])(?:logits?|outputs?|out|predictions?|preds?|probs?|probabilities|softmax"
    r"|classifier|head|lm_head)(?:[/._]|$)",
    re.IGNORECASE,
)
"""Layer names of a network's output (``logits``, ``output``, ``classifier``, ``lm_head``)."""
RELU_LIKE_SHARE = 0.5
"""A layer inside ``[0, 1]`` whose exact zeros are at least half its values near 0 or 1
(medians over the steps) is ReLU-like: judged for dead, not for sigmoid saturation. A sigmoid
is exactly 0 only below about -103 in float32 (a deeply saturated one shows a few such zeros
beside many more values near 0 and 1); a ReLU layer's values near 0 are mostly its zeros."""


@dataclass(eq=False)
class Activation:
    """One layer's outputs over the logged steps (arrays in step order)."""

    name: str  # the layer (the tag without its role word)
    tag: str  # the histogram's tag (``#index`` after it for a colliding tag)
    depth: int  # order of first appearance among the run's rows
    steps: np.ndarray
    zero: np.ndarray  # share of exact zeros (estimated), and the bounds the buckets allow
    zero_low: np.ndarray
    zero_high: np.ndarray
    bound_kind: BoundKind | None  # the bounded output the range shows (None: unbounded)
    bound: np.ndarray  # share near the bounds of ``bound_kind`` (NaN without one)
    bound_low: np.ndarray
    bound_high: np.ndarray
    output_layer: bool  # the network's output (bounded by design: not judged saturated)


ActivationRule = Callable[[Activation, RunContext], "Finding | Excuse | None"]


def run_activations(
    data: RunData,
    rules: TagRules = DEFAULT_RULES,
    depth: int = 0,
    taken: frozenset[str] = frozenset(),
) -> list[Activation]:
    """The run's activation series, numbered from ``depth`` in order of first appearance; a
    layer's name is kept unique against the others' and the parameters' (``taken``): ``#2``
    after a repeated one, `` (outputs)`` after a parameter's name."""
    found: list[tuple[str, str, HistogramSeries]] = []
    for (tag, index), series in data.histograms.items():
        role, layer = rules.classify(tag)
        if role == "activation" and len(series):
            shown = tag if index == 0 else f"{tag}#{index}"
            found.append((layer if index == 0 else f"{layer}#{index}", shown, series))
    names = _unique([f"{layer} (outputs)" if layer in taken else layer for layer, _, _ in found])
    last = len(found) - 1
    return [
        _activation(name, tag, series, depth + at, output_layer=_is_output(name, at, last))
        for at, (name, (_, tag, series)) in enumerate(zip(names, found, strict=True))
    ]


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return unique


def _is_output(name: str, at: int, last: int) -> bool:
    """The network's output: by name, or as the last of two or more activation layers (the
    order of first appearance is the forward pass's for hooks, callbacks and TF1 graphs)."""
    return bool(_OUTPUT_NAME.search(name)) or (last >= 1 and at == last)


def _activation(
    name: str, tag: str, series: HistogramSeries, depth: int, output_layer: bool
) -> Activation:
    minimum, maximum = series.column("min"), series.column("max")
    zero = series.column("exact_zero_share")
    kind = bound_kind(minimum, maximum, zero, series.column("sigmoid_bound_share"))
    prefix = f"{kind}_bound_share" if kind else None
    nothing = np.full(len(series), np.nan)
    return Activation(
        name=name,
        tag=tag,
        depth=depth,
        steps=series.steps,
        zero=zero,
        zero_low=series.column("exact_zero_share_low"),
        zero_high=series.column("exact_zero_share_high"),
        bound_kind=kind,
        bound=series.column(prefix) if prefix else nothing,
        bound_low=series.column(f"{prefix}_low") if prefix else nothing,
        bound_high=series.column(f"{prefix}_high") if prefix else nothing,
        output_layer=output_layer,
    )


def bound_kind(
    minimum: np.ndarray, maximum: np.ndarray, zero: np.ndarray, sigmoid_share: np.ndarray
) -> BoundKind | None:
    """The bounded output a layer's range shows at every logged step: sigmoid's ``[0, 1]``
    (unless ReLU-like: :data:`RELU_LIKE_SHARE`), tanh's ``[-1, 1]``, else None."""
    finite = np.isfinite(minimum) & np.isfinite(maximum)
    if not finite.any():
        return None
    low, high = minimum[finite], maximum[finite]
    if high.max() > 1 or low.min() < -1:
        return None
    if low.min() >= 0:
        zeros, near = _median(zero), _median(sigmoid_share)
        relu_like = zeros is not None and near is not None and zeros >= RELU_LIKE_SHARE * near
        return None if relu_like and zeros else "sigmoid"
    return "tanh"


# --------------------------------------------------------------------------------------------
# The rows of the report
# --------------------------------------------------------------------------------------------


def activation_results(
    activations: list[Activation],
    context: RunContext,
    rules: tuple[ActivationRule, ...],
    charts: bool = True,
) -> list[LayerResult]:
    """Each activation layer's row: its findings (most severe first), notes and numbers."""
    return [_result(activation, context, rules, charts) for activation in activations]


def _result(
    activation: Activation,
    context: RunContext,
    rules: tuple[ActivationRule, ...],
    charts: bool,
) -> LayerResult:
    from gradcheck.verdicts.passes import outcomes  # the passes run the rules (and import this)

    findings, notes = outcomes(activation, context, rules)
    findings.sort(key=lambda f: VERDICTS.index(f.verdict))
    flags: tuple[Verdict, ...] = tuple(dict.fromkeys(f.verdict for f in findings))
    which = charted(activation, flags)
    quantity, values = QUANTITIES[which], getattr(activation, which)
    numbers = _numbers(activation)
    for finding in findings:
        numbers.update(finding.numbers)
    threshold = threshold_of(flags, context.config)
    return LayerResult(
        name=activation.name,
        weight_tag=None,
        grad_tag=None,
        verdict=flags[0] if flags else OK,
        flags=flags,
        severity=max((f.severity for f in findings), default=0.0),
        first_bad_step=findings[0].first_bad_step if findings else None,
        evidence="; also ".join(f"{f.verdict}: {f.evidence}" for f in findings),
        hint=findings[0].hint if findings else "",
        depth=activation.depth,
        stats={key: _json_safe(value) for key, value in numbers.items()},
        trend=downsample(values),
        trend_of=quantity,
        onsets={f.verdict: f.first_bad_step for f in findings if f.first_bad_step is not None},
        notes=tuple(notes),
        series=chart_series(quantity, activation.steps, values, np.empty(0, np.int64))
        if charts
        else None,
        references=()
        if threshold is None
        else (Reference(f"threshold ({threshold:g})", threshold),),
        activation_tag=activation.tag,
    )


QUANTITIES = {"zero": "share of outputs exactly 0", "bound": "share of outputs near the bounds"}
"""What a row's trend shows, by the share charted (:func:`.rules.shares.charted`)."""


def _numbers(activation: Activation) -> dict[str, float | int | None]:
    numbers: dict[str, float | int | None] = {
        "activation_steps": int(activation.steps.size),
        "exact_zero_share_last": _last(activation.zero),
        "exact_zero_share_median": _median(activation.zero),
    }
    if activation.bound_kind is not None:
        numbers["bound_share_last"] = _last(activation.bound)
        numbers["bound_share_median"] = _median(activation.bound)
    return numbers


def _last(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if finite.size else None


def _median(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return median(finite) if finite.size else None


def _json_safe(value: float | int | None) -> float | int | None:
    if value is None or isinstance(value, int):
        return value
    return value if np.isfinite(value) else None
