"""Verdicts for one run: reduced series -> a RunReport with every parameter ranked.

``analyze_run`` pairs the run's series into parameters (:mod:`.pairing`), derives their
signals (:mod:`gradcheck.verdicts.signals`), measures the run as a whole (largest gradient, loss,
weight movements, clipping), applies one rule per verdict (:mod:`gradcheck.verdicts.rules`) and
ranks the results: NaN above exploding above vanishing above static, and within a kind by how
far past its threshold. A parameter's verdict is its most severe flag.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping

import numpy as np

from gradcheck.model import (
    GLOBAL_NORM_ROW,
    LOSS_ROW,
    VERDICTS,
    GradientCoverage,
    LayerResult,
    Reference,
    RunData,
    RunReport,
    ScalarSeries,
    StepSeries,
    Verdict,
)
from gradcheck.series.merge import join_renamed
from gradcheck.tags import DEFAULT_RULES, TagRules
from gradcheck.tags.scalars import ScalarRole, scalar_role, scalar_roles, training_loss_rank
from gradcheck.verdicts import hints
from gradcheck.verdicts.activations import activation_results, run_activations
from gradcheck.verdicts.clipping import (
    GlobalNorm,
    chart_series,
    clip_info,
    downsample,
    global_norms,
    pinned_ceiling,
)
from gradcheck.verdicts.config import DEFAULT_CONFIG, Config
from gradcheck.verdicts.numeric import median, nanmedian
from gradcheck.verdicts.pairing import ParameterTags, pair_parameters
from gradcheck.verdicts.rules import (
    Excuse,
    Finding,
    RunContext,
    align_event_onsets,
    early_and_late,
    find_exploding,
    find_nan,
    find_slow,
    find_static,
    find_vanishing,
    grad_to_weight,
    gradient_level,
    rank_nan,
    rms_early_and_late,
)
from gradcheck.verdicts.rules.dead import find_dead
from gradcheck.verdicts.rules.diverging import find_diverging, loss_blow_up, trainer_clips
from gradcheck.verdicts.rules.saturated import find_saturated
from gradcheck.verdicts.rules.slow import run_updates, sgd_ratio
from gradcheck.verdicts.rules.start_growth import start_growth_findings
from gradcheck.verdicts.rules.static import reference_movements
from gradcheck.verdicts.signals import (
    Movement,
    Parameter,
    WeightSignal,
    before,
    confirmed,
    movement,
    parameter_signals,
    run_weight_spread,
)
from gradcheck.verdicts.spikes import loss_chart, loss_spikes

__all__ = ["DEFAULT_CONFIG", "analyze_run"]

Rule = Callable[[Parameter, RunContext], "Finding | Excuse | None"]
BLOW_UP_RULES: tuple[Rule, ...] = (find_nan, find_exploding)
QUIET_RULES: tuple[Rule, ...] = (find_vanishing, find_static, find_slow)
ACTIVATION_RULES = (find_dead, find_saturated)
"""The rules of a layer's outputs (activation histograms: :mod:`.activations`)."""


def analyze_run(
    data: RunData,
    config: Config = DEFAULT_CONFIG,
    rules: TagRules = DEFAULT_RULES,
    open_end: bool = False,
    charts: bool = True,
) -> RunReport:
    """Verdicts on every parameter of one run, ranked worst first; ``open_end``: the log is
    still being written (see ``RunContext.open_end``); ``charts``: each parameter with its
    series at every step (``LayerResult.series``, ``update_series``: the HTML report's)."""
    data, parameters, norms, gradients, roles = run_parameters(data, rules)
    loss = training_loss(data)
    context = run_context(data, parameters, config, norms, loss=loss)
    if open_end:
        context = dataclasses.replace(context, open_end=True)
    outcomes = {p.name: _outcomes(p, context, BLOW_UP_RULES) for p in parameters}
    findings = align_event_onsets(
        {name: found for name, (found, _) in outcomes.items()}, context.gradients, config
    )
    notes = {name: excused for name, (_, excused) in outcomes.items()}
    _rank_nan_findings(parameters, findings)
    if not any(findings.values()):  # a blow-up before the second logged step hides in baselines
        for name, finding in start_growth_findings(parameters, context, norms).items():
            findings[name] = [finding]
    # Vanishing and static are judged on the healthy steps only: after a blow-up, saturated
    # units give zero gradients and NaN weights stop moving, which says nothing new.
    healthy_before = _first_trouble(findings)
    loss_rise = None if healthy_before is None else loss_blow_up(loss, healthy_before, config)
    if loss_rise is not None:  # the loss shows the blow-up's start first: healthy before it
        healthy_before = loss_rise.onset_step
    healthy = [before(p, healthy_before) for p in parameters]
    healthy_context = (  # without trouble every step is healthy: the same context again
        context
        if healthy_before is None
        else dataclasses.replace(
            run_context(data, healthy, config, norms, healthy_before, loss),
            open_end=open_end,
            blow_up_step=healthy_before,
        )
    )
    for parameter in healthy:
        if parameter.name == GLOBAL_NORM_ROW:
            continue  # a global norm has no weights and no depth: nan and exploding only
        found, excused = _outcomes(parameter, healthy_context, QUIET_RULES)
        found = _without_vanishing(findings[parameter.name], found, excused)
        found = _without_slow(findings[parameter.name] + found, excused)
        findings[parameter.name] = found
        notes[parameter.name] += excused
    context = dataclasses.replace(
        context,
        movements=healthy_context.movements,
        reference_movements=healthy_context.reference_movements,
    )
    rise = _first_rise(findings), loss_rise.onset_step if loss_rise is not None else None
    layers = [
        _layer_result(p, findings[p.name], notes[p.name], context, charts, rise) for p in parameters
    ]
    layers += _loss_row(data, loss, norms, context, layers, charts)
    names = frozenset(layer.name for layer in layers)
    activations = run_activations(data, rules, depth=len(layers), taken=names)
    layers += activation_results(activations, context, ACTIVATION_RULES, charts)
    layers.sort(key=lambda layer: (-layer.severity, layer.depth))
    counts: dict[str, int] = {v: sum(layer.verdict == v for layer in layers) for v in VERDICTS}
    slow = {layer.name for layer in layers if "slow" in layer.flags}
    updates, whole_model = run_updates(healthy, healthy_context, slow)
    return RunReport(
        run=data.run,
        files=data.files,
        steps=data.steps,
        writers=tuple(dict.fromkeys(i.writer for i in data.file_infos if i.writer)),
        warnings=_warnings(data),
        layers=tuple(layers),
        clipping=clip_info(data, parameters, norms, config, healthy_before),
        counts=counts,
        gradients=gradients,
        holds="" if parameters or activations else holdings(data, roles),
        notes=coverage_notes(parameters, gradients, bool(activations))
        + ((whole_model,) if whole_model else ()),
        updates=updates,
        wall_times=_wall_times(data),
        hparams=dict(data.hparams),
        damage=_damage(data),
        spikes=loss_spikes(loss, parameters, config, _blow_up_step(layers, healthy_before)),
        loss=loss_chart(loss) if charts else None,
    )


def _loss_row(
    data: RunData,
    loss: ScalarSeries | None,
    norms: list[GlobalNorm],
    context: RunContext,
    layers: list[LayerResult],
    charts: bool,
) -> list[LayerResult]:
    """The ``(training loss)`` row of a run whose training loss diverged (``diverging``), when
    no parameter already says the run blew up (``nan``, ``exploding``: their hint names the
    loss's rise where it came first)."""
    if loss is None or any(f in ("nan", "exploding") for layer in layers for f in layer.flags):
        return []
    found = find_diverging(loss, norms, context.clip_ceiling, trainer_clips(data), context.config)
    if found is None:
        return []
    label = f"training loss ({loss.tag})"
    return [
        LayerResult(
            name=LOSS_ROW,
            weight_tag=None,
            grad_tag=None,
            verdict="diverging",
            flags=("diverging",),
            severity=found.severity,
            first_bad_step=found.first_bad_step,
            evidence=f"diverging: {found.evidence}",
            hint=found.hint,
            depth=len(layers),
            stats={key: _json_safe(value) for key, value in found.numbers.items()},
            trend=downsample(loss.values),
            trend_of=label,
            onsets={"diverging": found.first_bad_step} if found.first_bad_step is not None else {},
            series=chart_series(label, loss.steps, loss.values, np.empty(0, dtype=np.int64))
            if charts
            else None,
        )
    ]


def run_parameters(
    data: RunData, rules: TagRules = DEFAULT_RULES
) -> tuple[RunData, list[Parameter], list[GlobalNorm], GradientCoverage, dict[str, ScalarRole]]:
    """A run's parameters as the verdicts see them: series renamed mid-run joined
    (:func:`~gradcheck.series.merge.join_renamed`), tags paired, signals derived, and the
    ``(global gradient norm)`` row where the global norm is the only gradient evidence; with
    the joined data, the run's global norms, its gradient coverage and its scalars' roles
    (found once: a run may log 10^6 scalar tags; ``compare`` takes the same)."""
    data = join_renamed(data)
    roles = scalar_roles(data.scalars)
    tags = pair_parameters(list(data.histograms), list(data.scalars), rules, roles)
    parameters = [parameter_signals(data, t) for t in tags]
    norms = global_norms(data, parameters, roles)
    gradients = _gradient_coverage(parameters, norms)
    if gradients == "global":  # the global norm is the only gradient evidence: judge it
        parameters.append(global_norm_parameter(data, norms[0], depth=len(parameters)))
    return data, parameters, norms, gradients, roles


def _wall_times(data: RunData) -> tuple[float, float] | None:
    """When the run's histograms were written: first and last wall time."""
    times = [s.wall_times for s in data.histograms.values() if s.wall_times.size]
    if not times:
        return None
    return float(min(t.min() for t in times)), float(max(t.max() for t in times))


def _outcomes(
    parameter: Parameter, context: RunContext, rules: tuple[Rule, ...]
) -> tuple[list[Finding], list[str]]:
    """The findings of ``rules`` on one parameter, and the reasons of those that excused it."""
    found: list[Finding] = []
    excused: list[str] = []
    for rule in rules:
        try:
            outcome = rule(parameter, context)
        except Exception as error:  # a bug in one rule costs this verdict, not the run's report
            excused.append(rule_failed_note(rule, error))
            continue
        if isinstance(outcome, Finding):
            found.append(outcome)
        elif isinstance(outcome, Excuse):
            excused.append(f"not {outcome.verdict}: {outcome.reason}")
    return found, excused


def _without_vanishing(
    blow_ups: list[Finding], found: list[Finding], excused: list[str]
) -> list[Finding]:
    """``found`` without its vanishing finding when the parameter's own gradient blew up
    (``blow_ups``: its nan and exploding findings): the level before the blow-up is no
    evidence of a gradient that vanished; the reason goes to ``excused``."""
    blown = next((f for f in blow_ups if f.verdict in ("nan", "exploding")), None)
    if blown is None or not any(f.verdict == "vanishing" for f in found):
        return found
    since = f" from step {blown.first_bad_step}" if blown.first_bad_step is not None else ""
    how = "turned NaN/Inf" if blown.verdict == "nan" else "exploded"
    excused.append(
        f"not vanishing: its own gradient {how}{since}: a small gradient before a blow-up "
        "is not a vanishing one"
    )
    return [f for f in found if f.verdict != "vanishing"]


def rule_failed_note(rule: Callable[..., object], error: Exception) -> str:
    """The note on a parameter a rule could not judge (an internal error: a bug to report)."""
    verdict = getattr(rule, "__name__", "rule").removeprefix("find_")
    return (
        f"not judged for {verdict}: internal error in gradcheck ({type(error).__name__}: "
        f"{error}); the other verdicts stand (please report this bug)"
    )


def _without_slow(found: list[Finding], excused: list[str]) -> list[Finding]:
    """``found`` without its slow finding when another finding explains the small updates (a
    vanishing gradient, a NaN, a blow-up): the reason goes to ``excused``."""
    others = [f.verdict for f in found if f.verdict != "slow"]
    if not others or len(others) == len(found):
        return found
    excused.append(f"not slow: its weights move little per update, which {others[0]} explains")
    return [f for f in found if f.verdict != "slow"]


def _gradient_coverage(parameters: list[Parameter], norms: list[GlobalNorm]) -> GradientCoverage:
    """Per-parameter gradients, only a logged global norm, or no gradient evidence at all."""
    if any(p.gradient is not None for p in parameters):
        return "per_parameter"
    if norms and norms[0].source.startswith("scalar "):
        return "global"
    return "none"


def global_norm_parameter(data: RunData, norm: GlobalNorm, depth: int) -> Parameter:
    """The run-level row of a run whose only gradient evidence is a global norm scalar: a
    gradient signal without element count or weights, judged for nan and exploding."""
    tag = norm.source.removeprefix("scalar ")
    nonfinite = [s.tag for s in data.scalars.values() if _is_global_nonfinite(s.tag)]
    tags = ParameterTags(
        name=GLOBAL_NORM_ROW,
        depth=depth,
        grad_norm=tag,
        grad_nonfinite=nonfinite[0] if nonfinite else None,
    )
    return parameter_signals(data, tags)


def _is_global_nonfinite(tag: str) -> bool:
    role = scalar_role(tag)
    return role is not None and role.kind == "global_grad_nonfinite"


def holdings(data: RunData, roles: Mapping[str, ScalarRole]) -> str:
    """What a run with nothing to judge holds, in a few words (``only scalars: loss, acc``)."""
    scalars = list(data.scalars)
    histograms = [key[0] for key in data.histograms]
    if not scalars and not histograms:
        events = sum(info.events for info in data.file_infos)
        if events:
            said = f"{events} event" + ("s" if events > 1 else "")
            return f"no histogram or scalar ({said}: graphs, images or text)"
        return "no histogram or scalar"
    parts = []
    if histograms:
        parts.append(f"only activation/other histograms: {_listed(histograms)}")
    if scalars:
        parts.append(f"{'scalars' if histograms else 'only scalars'}: {_listed(scalars)}")
    return "; ".join(parts)


def _listed(names: list[str], limit: int = 6) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


NO_GRADIENTS_NOTE = (
    "no gradients logged: vanishing and exploding gradients cannot be judged from this run; "
    "only NaN and weight movement were (log gradients with gradcheck.keras.GradientLogger or "
    "gradcheck.torch.log_gradients)"
)
GLOBAL_ONLY_NOTE = (
    "only a global gradient norm logged: NaN and exploding gradients were judged for the run as "
    "a whole; vanishing gradients and single layers cannot be (log per-parameter norms, e.g. "
    "Lightning's grad_norm, or gradcheck's helpers)"
)


ONLY_ACTIVATIONS_NOTE = (
    "only activations logged: dead and saturated layers were judged from their outputs; "
    "gradients and weights cannot be (log them with gradcheck.torch or gradcheck.keras)"
)


def coverage_notes(
    parameters: list[Parameter], gradients: GradientCoverage, activations: bool = False
) -> tuple[str, ...]:
    """What this run's log cannot answer, one line each."""
    if not parameters:
        return (ONLY_ACTIVATIONS_NOTE,) if activations else ()
    if gradients == "none":
        return (NO_GRADIENTS_NOTE,)
    if gradients == "global":
        return (GLOBAL_ONLY_NOTE,)
    return ()


def _warnings(data: RunData) -> tuple[str, ...]:
    return _damage(data) + tuple(f"{os.path.basename(n.file)}: {n.message}" for n in data.notices)


def _damage(data: RunData) -> tuple[str, ...]:
    return tuple(f"{os.path.basename(d.file)}: {d.message}" for d in data.damages)


def _rank_nan_findings(parameters: list[Parameter], findings: dict[str, list[Finding]]) -> None:
    nan = [(p, f) for p in parameters for f in findings[p.name] if f.verdict == "nan"]
    exploded = frozenset(
        name for name, found in findings.items() if any(f.verdict == "exploding" for f in found)
    )
    for parameter, ranked in rank_nan(nan, exploded):
        findings[parameter.name] = [
            ranked if f.verdict == "nan" else f for f in findings[parameter.name]
        ]


def _blow_up_step(layers: list[LayerResult], healthy_before: int | None) -> int | None:
    """Where the run blew up, from which on its loss is the blow-up's, not spikes: the
    ``diverging`` row's onset, else the first ``nan`` or ``exploding`` onset (or the loss's
    rise into it, when earlier: the healthy steps' end); None for a run that did not."""
    for layer in layers:
        if layer.name == LOSS_ROW and layer.first_bad_step is not None:
            return layer.first_bad_step
    return healthy_before


def _first_rise(findings: Mapping[str, list[Finding]]) -> int | None:
    """The earliest exploding onset of the run (None without one)."""
    steps = [
        f.first_bad_step
        for found in findings.values()
        for f in found
        if f.verdict == "exploding" and f.first_bad_step is not None
    ]
    return min(steps) if steps else None


def _first_trouble(findings: Mapping[str, list[Finding]]) -> int | None:
    """The earliest exploding onset or NaN step of the run: healthy steps end there."""
    steps = [
        f.first_bad_step
        for found in findings.values()
        for f in found
        if f.verdict in ("nan", "exploding") and f.first_bad_step is not None
    ]
    return min(steps) if steps else None


# --------------------------------------------------------------------------------------------
# The run as a whole
# --------------------------------------------------------------------------------------------


def run_context(
    data: RunData,
    parameters: list[Parameter],
    config: Config,
    norms: list[GlobalNorm],
    before_step: int | None = None,
    loss: ScalarSeries | None = None,
) -> RunContext:
    """Everything the rules compare a parameter with; with ``before_step``, the training loss
    is restricted to the steps before it, like the parameters (the healthy steps): a loss
    that stalls or soars after a blow-up says nothing about the gradients before it."""
    levels = {p.name: gradient_level(p) for p in parameters}
    finite_levels = {name: level for name, level in levels.items() if np.isfinite(level)}
    norm_levels = frozenset(
        p.name for p in parameters if p.gradient is not None and not p.gradient.per_element
    )
    # The largest per-element level; norms only where no parameter has a per-element one.
    rms_levels = {n: v for n, v in finite_levels.items() if n not in norm_levels}
    pool = rms_levels or finite_levels
    largest_name = max(pool, key=pool.__getitem__, default="")
    early_levels, decays = [], []
    for p in parameters:
        if p.gradient is not None:
            early, late, finite = rms_early_and_late(p.gradient, config)
            early_levels.append(early)
            if finite.size >= 6 and early > 0:
                decays.append(late / early)
    finite_early = [level for level in early_levels if math.isfinite(level)]
    loss = _loss_before(loss or training_loss(data), before_step)
    scale = loss_scale(data)
    rate = learning_rate(data)
    movements = _movements(parameters)
    ceilings = [c for g in norms if (c := pinned_ceiling(g.values, config, g.exact)) is not None]
    return RunContext(
        config=config,
        parameter_count=len(parameters),
        largest_level=finite_levels.get(largest_name, float("nan")),
        largest_name=largest_name,
        largest_early_level=max(finite_early, default=float("nan")),
        typical_weight_rms=_typical_weight_rms(parameters, config),
        median_decay=median(decays) if decays else 1.0,
        loss_tag=loss.tag if loss is not None else None,
        loss_steps=loss.steps if loss is not None else np.empty(0, dtype=np.int64),
        loss_values=loss.values if loss is not None else np.empty(0),
        loss_ratio=_loss_ratio(loss, config),
        loss_nan_step=_first_nonfinite_step(loss),
        last_step=data.steps[1] if data.steps else None,
        movements=movements,
        reference_movements=reference_movements(movements),
        levels=levels,
        layer_levels=_layer_levels(finite_levels),
        clip_ceiling=ceilings[0] if ceilings else None,
        moving_stats_moved=_moving_stats_moved(movements, config),
        gradients_logged=sum(
            p.gradient is not None and p.name != GLOBAL_NORM_ROW for p in parameters
        ),
        gradients={p.name: p.gradient for p in parameters if p.gradient is not None},
        unpaired_gradients=sum(
            p.gradient is not None and p.weight is None and p.name != GLOBAL_NORM_ROW
            for p in parameters
        ),
        norm_levels=norm_levels,
        loss_scale_tag=scale.tag if scale is not None else None,
        loss_scale_drops=_drops(scale),
        lr_tag=rate.tag if rate is not None else None,
        lr_steps=rate.steps if rate is not None else np.empty(0, dtype=np.int64),
        lr_values=rate.values if rate is not None else np.empty(0),
        steps_are_epochs=_steps_are_epochs(data, parameters),
    )


def _layer_levels(levels: Mapping[str, float]) -> dict[str, float]:
    layers: dict[str, float] = {}
    for name, level in levels.items():
        layer = hints.layer_of(name)
        layers[layer] = max(layers.get(layer, level), level)
    return layers


def training_loss(data: RunData) -> ScalarSeries | None:
    """The run's training loss scalar: a loss tag, training before validation, longest first."""
    candidates = [
        s
        for s in data.scalars.values()
        if (r := scalar_role(s.tag)) and r.kind == "loss" and len(s)
    ]
    if not candidates:
        return None
    return min(candidates, key=lambda s: (training_loss_rank(s.tag), -len(s)))


def loss_scale(data: RunData) -> ScalarSeries | None:
    """The dynamic loss scale of mixed-precision training, when logged."""
    for series in data.scalars.values():
        role = scalar_role(series.tag)
        if role is not None and role.kind == "loss_scale" and len(series):
            return series
    return None


def _steps_are_epochs(data: RunData, parameters: list[Parameter]) -> bool:
    """Whether the weights were logged at the steps of an ``epoch_*`` scalar (Keras'
    ``TensorBoard`` callback numbers its histograms and ``epoch_loss`` by epoch)."""
    epochs = [s.steps for s in data.scalars.values() if s.tag.startswith("epoch_") and len(s)]
    weights = [p.weight.steps for p in parameters if p.weight is not None and p.weight.steps.size]
    return bool(epochs and weights) and all(
        any(np.array_equal(steps, epoch) for epoch in epochs) for steps in weights
    )


def learning_rate(data: RunData) -> ScalarSeries | None:
    """The optimizer's learning rate, when logged (the longest such series: Lightning logs one
    per parameter group, ``lr-SGD/pg1``, ``lr-SGD/pg2``)."""
    rates = [
        s
        for s in data.scalars.values()
        if (r := scalar_role(s.tag)) and r.kind == "learning_rate" and len(s)
    ]
    return max(rates, key=len, default=None)


def _drops(series: ScalarSeries | None) -> np.ndarray:
    """Steps at which ``series`` went down."""
    if series is None or len(series) < 2:
        return np.empty(0, dtype=np.int64)
    return series.steps[1:][np.diff(series.values) < 0]


def _loss_before(loss: ScalarSeries | None, step: int | None) -> ScalarSeries | None:
    """The loss at the steps before ``step`` (all of it when None)."""
    if loss is None or step is None:
        return loss
    keep = loss.steps < step
    return ScalarSeries(loss.tag, loss.steps[keep], loss.values[keep])


def _first_nonfinite_step(series: ScalarSeries | None) -> int | None:
    if series is None:
        return None
    bad = ~np.isfinite(series.values)
    return int(series.steps[np.argmax(bad)]) if bad.any() else None


def _loss_ratio(loss: ScalarSeries | None, config: Config) -> float | None:
    """Late / early training loss, when the loss is positive (a ratio means something)."""
    if loss is None:
        return None
    values = loss.values[np.isfinite(loss.values)]
    if values.size < 6 or (values < 0).any():
        return None  # not a positive quantity (a GAN's or a likelihood's): no ratio
    early, late, _ = early_and_late(values, config)
    return late / early if early > 0 else None


def _typical_weight_rms(parameters: list[Parameter], config: Config) -> float:
    levels = []
    for p in parameters:
        if p.weight is not None:
            early, _, _ = rms_early_and_late(p.weight, config)
            if early > 0:
                levels.append(early)
    return median(levels) if levels else 0.0


def _movements(parameters: list[Parameter]) -> dict[str, Movement]:
    spread = run_weight_spread(parameters)
    found = {}
    for p in parameters:
        if p.weight is None:
            continue
        others = [m for w in p.weight_also if (m := movement(w, spread)) is not None]
        if (m := confirmed(movement(p.weight, spread), others)) is not None:
            found[p.name] = m
    return found


def _moving_stats_moved(movements: Mapping[str, Movement], config: Config) -> dict[str, bool]:
    moved: dict[str, bool] = {}
    for name, m in movements.items():
        if hints.parameter_kind(name) == "bn_moving":
            layer = hints.layer_of(name)
            did = not m.bit_identical and m.largest >= config.static_movement
            moved[layer] = moved.get(layer, False) or did
    return moved


# --------------------------------------------------------------------------------------------
# One parameter's result
# --------------------------------------------------------------------------------------------


def _layer_result(
    parameter: Parameter,
    findings: list[Finding],
    notes: list[str],
    context: RunContext,
    charts: bool = True,
    rise: tuple[int | None, int | None] = (None, None),
) -> LayerResult:
    order = {verdict: i for i, verdict in enumerate(VERDICTS)}
    findings = sorted(findings, key=lambda f: order[f.verdict])
    flags: tuple[Verdict, ...] = tuple(dict.fromkeys(f.verdict for f in findings))
    numbers = _numbers(parameter, context)
    for finding in findings:
        numbers.update(finding.numbers)
    trend, trend_of = _trend(parameter)
    tags = parameter.tags
    return LayerResult(
        name=parameter.name,
        weight_tag=_display_tag(tags.weight) or tags.weight_norm,
        grad_tag=_display_tag(tags.gradient) or tags.grad_norm,
        verdict=flags[0] if flags else "ok",
        flags=flags,
        severity=max((f.severity for f in findings), default=0.0),
        first_bad_step=_first_bad_step(findings),
        evidence="; also ".join(f"{f.verdict}: {f.evidence}" for f in findings),
        hint=_hint(findings, rise),
        depth=tags.depth,
        stats={key: _json_safe(value) for key, value in numbers.items()},
        trend=trend,
        trend_of=trend_of,
        onsets={
            f.verdict: f.first_bad_step
            for f in findings
            if f.first_bad_step is not None and f.verdict != "ok"
        },
        notes=tuple(notes),
        series=_series(parameter, trend_of) if charts else None,
        update_series=_update_series(parameter.weight) if charts else None,
        references=_references(numbers, context.config),
    )


def _display_tag(key: tuple[str, int] | None) -> str | None:
    if key is None:
        return None
    tag, index = key
    return tag if index == 0 else f"{tag}#{index}"


def _first_bad_step(findings: list[Finding]) -> int | None:
    """The verdict's first bad step: the first non-finite step for NaN (the onset of an
    explosion before it is in ``onsets``), else the most severe finding's."""
    return findings[0].first_bad_step if findings else None


def _hint(findings: list[Finding], rise: tuple[int | None, int | None] = (None, None)) -> str:
    """The hint of the flag that came first (the earliest first bad step; the most severe of
    equals): a NaN after a blow-up gets the blow-up's hint, not the one for log(0): after the
    onset of this parameter's exploding gradient or of the run's earliest (``rise[0]``), or
    after the training loss's rise into the blow-up (``rise[1]``)."""
    if not findings:
        return ""
    nan = next((f for f in findings if f.verdict == "nan"), None)
    if nan is not None:
        own = [f.first_bad_step for f in findings if f.verdict == "exploding"]
        if any(_before(step, nan) for step in (*own, rise[0])):
            return hints.NAN_AFTER_RISE
        if _before(rise[1], nan):
            return hints.NAN_AFTER_LOSS_RISE
    first = min(findings, key=lambda f: (f.first_bad_step is None, f.first_bad_step or 0))
    return first.hint


def _before(step: int | None, finding: Finding) -> bool:
    return step is not None and finding.first_bad_step is not None and step < finding.first_bad_step


def _numbers(parameter: Parameter, context: RunContext) -> dict[str, float | int | None]:
    numbers: dict[str, float | int | None] = {}
    gradient, weight = parameter.gradient, parameter.weight
    if gradient is not None:
        norm = gradient.norm[np.isfinite(gradient.norm)]
        level = gradient_level(parameter)
        numbers.update(
            grad_norm_first=float(norm[0]) if norm.size else None,
            grad_norm_median=median(norm) if norm.size else None,
            grad_norm_last=float(norm[-1]) if norm.size else None,
            grad_norm_max=float(norm.max()) if norm.size else None,
            grad_rms_median=level,
            grad_ratio_to_largest=level / context.largest_level
            if context.largest_level > 0 and parameter.name != GLOBAL_NORM_ROW
            else None,
            grad_norm_exact=int(gradient.exact),
            grad_norm_error_bound=gradient.error_bound,
            grad_steps=gradient.steps_logged,
        )
        _, ratio = grad_to_weight(parameter)
        if np.isfinite(ratio).any():
            numbers["grad_to_weight_ratio"] = nanmedian(ratio)
    if weight is not None:
        norm = weight.norm[np.isfinite(weight.norm)]
        numbers.update(
            weight_norm_first=float(norm[0]) if norm.size else None,
            weight_norm_last=float(norm[-1]) if norm.size else None,
            weight_steps=weight.steps_logged,
        )
        move = context.movements.get(parameter.name)
        if move is not None:
            numbers.update(
                weight_movement=move.from_first,
                weight_norm_change=move.norm_change,
                weight_update_median=move.step_update,
                weight_bit_identical=int(move.bit_identical),
                update_ratio_median=move.update_ratio,
            )
        sgd = sgd_ratio(parameter, context)
        if sgd is not None:
            numbers["update_ratio_sgd_median"] = sgd
    return numbers


def _trend(parameter: Parameter) -> tuple[tuple[float, ...], str]:
    if parameter.gradient is not None:
        return downsample(parameter.gradient.norm), "gradient L2 norm"
    if parameter.weight is not None:
        return downsample(parameter.weight.norm), "weight L2 norm"
    return (), ""


def _series(parameter: Parameter, label: str) -> StepSeries | None:
    """The ``_trend`` quantity at every step (the arrays themselves: no copy)."""
    signal = parameter.gradient if parameter.gradient is not None else parameter.weight
    if signal is None:
        return None
    return chart_series(label, signal.steps, signal.norm, signal.bad_steps)


def _update_series(weight: WeightSignal | None) -> StepSeries | None:
    """``|norm_t - norm_t-1| / norm_t-1`` of the weights: how much each step changed them (a
    lower bound of the update's size relative to the weights, ``||w_t - w_t-1|| / ||w_t-1||``)."""
    if weight is None or weight.steps.size < 2:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        change = np.abs(weight.norm[1:] - weight.norm[:-1]) / np.abs(weight.norm[:-1])
    label = "weight norm change per step (relative)"
    return chart_series(label, weight.steps[1:], change, weight.bad_steps)


def _references(numbers: Mapping[str, float | int | None], config: Config) -> tuple[Reference, ...]:
    """The exploding rule's early baseline and threshold, when it measured them."""
    baseline = numbers.get("grad_norm_baseline")
    if baseline is None or not math.isfinite(baseline):
        return ()
    factor = config.explode_factor
    return (
        Reference("early baseline", float(baseline)),
        Reference(f"threshold ({factor:g}x the baseline)", float(baseline) * factor),
    )


def _json_safe(value: float | int | None) -> float | int | None:
    if value is None or isinstance(value, int):
        return value
    value = float(value)
    return value if math.isfinite(value) else None
