"""Verdicts for one run: reduced series -> a RunReport with every parameter ranked.

``analyze_run`` pairs the run's series into parameters (:mod:`.pairing`), derives their
signals (:mod:`gradcheck.verdicts.signals`), measures the run as a whole
(:mod:`gradcheck.verdicts.context`: largest gradient, loss, weight movements, clipping), runs
the passes of :mod:`gradcheck.verdicts.passes` (each verdict's rule where its registry entry
says, :mod:`gradcheck.verdicts.registry`) and ranks the rows: by severity, the registry's
order of verdicts first, and within a verdict by how far past its threshold. A parameter's
verdict is its most severe flag.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from gradcheck.model import (
    GLOBAL_NORM_ROW,
    LOSS_ROW,
    VERDICTS,
    GradientCoverage,
    LayerResult,
    RunData,
    RunReport,
)
from gradcheck.series.merge import join_renamed
from gradcheck.tags import DEFAULT_RULES, TagRules
from gradcheck.tags.scalars import ScalarRole, scalar_role, scalar_roles
from gradcheck.verdicts import table
from gradcheck.verdicts.clipping import GlobalNorm, clip_info, global_norms
from gradcheck.verdicts.config import DEFAULT_CONFIG, Config
from gradcheck.verdicts.context import run_context, training_loss
from gradcheck.verdicts.pairing import ParameterTags, pair_parameters
from gradcheck.verdicts.passes import Judging, judge
from gradcheck.verdicts.rules.slow import run_updates, slow_names
from gradcheck.verdicts.signals import Parameter, parameter_signals
from gradcheck.verdicts.spikes import loss_chart, loss_spikes

__all__ = ["DEFAULT_CONFIG", "analyze_run"]


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
    run = judge(Judging(data, rules, parameters, norms, loss, context, charts))
    layers = sorted(run.layers, key=lambda layer: (-layer.severity, layer.depth))
    counts: dict[str, int] = {v: sum(layer.verdict == v for layer in layers) for v in VERDICTS}
    assert run.healthy_context is not None
    updates, whole_model = run_updates(run.healthy, run.healthy_context, slow_names(layers))
    return RunReport(
        run=data.run,
        files=data.files,
        steps=data.steps,
        writers=tuple(dict.fromkeys(i.writer for i in data.file_infos if i.writer)),
        warnings=_warnings(data),
        layers=tuple(layers),
        clipping=clip_info(data, parameters, norms, config, run.healthy_before),
        counts=counts,
        gradients=gradients,
        holds="" if parameters or run.activations else holdings(data, roles),
        notes=coverage_notes(parameters, gradients, bool(run.activations))
        + ((whole_model,) if whole_model else ()),
        updates=updates,
        wall_times=_wall_times(data),
        hparams=dict(data.hparams),
        damage=_damage(data),
        spikes=loss_spikes(loss, parameters, config, _blow_up_step(layers, run.healthy_before)),
        loss=loss_chart(loss) if charts else None,
    )


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
    parameters = table.signals(data, tags)
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


def _blow_up_step(layers: list[LayerResult], healthy_before: int | None) -> int | None:
    """Where the run blew up, from which on its loss is the blow-up's, not spikes: the
    ``diverging`` row's onset, else the first ``nan`` or ``exploding`` onset (or the loss's
    rise into it, when earlier: the healthy steps' end); None for a run that did not."""
    for layer in layers:
        if layer.name == LOSS_ROW and layer.first_bad_step is not None:
            return layer.first_bad_step
    return healthy_before
