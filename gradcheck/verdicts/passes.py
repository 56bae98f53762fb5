"""The passes that judge a run, in the one order they run: :data:`PASSES`.

Each verdict's rule runs in the pass its registry entry names (:mod:`.registry`: ``phase``):
first the blow-up rules on every step, then the passes between rules (a blow-up's onsets
aligned, NaNs ranked, weights blown up from the start, the healthy steps' end), then the quiet
rules on the healthy steps and the excuses one finding gives another, then the rows: the
parameters', the training loss's, the layers' outputs'. A pass takes the run being judged
(:class:`Judging`) and adds to it; :mod:`.detect` makes the report of what they found.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gradcheck.model import GLOBAL_NORM_ROW, LayerResult, RunData, ScalarSeries
from gradcheck.tags import TagRules
from gradcheck.verdicts.activations import Activation, activation_results, run_activations
from gradcheck.verdicts.clipping import GlobalNorm
from gradcheck.verdicts.context import run_context
from gradcheck.verdicts.registry import BLOW_UPS, Phase, with_phase
from gradcheck.verdicts.results import layer_result, loss_row
from gradcheck.verdicts.rules import Excuse, Finding, RunContext, align_event_onsets
from gradcheck.verdicts.rules.diverging import loss_blow_up, trainer_clips
from gradcheck.verdicts.rules.exploding import Rise, first_rise
from gradcheck.verdicts.rules.nan import rank_nan_findings
from gradcheck.verdicts.rules.slow import without_slow
from gradcheck.verdicts.rules.start_growth import start_growth_findings
from gradcheck.verdicts.rules.vanishing import without_vanishing
from gradcheck.verdicts.signals import Parameter, before

Rule = Callable[..., "Finding | Excuse | None"]


@dataclass
class Judging:
    """A run as the passes judge it: what they read, and what they found so far."""

    data: RunData
    rules: TagRules
    parameters: list[Parameter]
    norms: list[GlobalNorm]
    loss: ScalarSeries | None
    context: RunContext  # every step's
    charts: bool
    findings: dict[str, list[Finding]] = field(default_factory=dict)  # by parameter name
    notes: dict[str, list[str]] = field(default_factory=dict)  # the rules' excuses
    healthy_before: int | None = None  # the run's blow-up: its first bad step, else None
    loss_rise: Rise | None = None  # the training loss's rise into the blow-up
    healthy: list[Parameter] = field(default_factory=list)  # each parameter before the blow-up
    healthy_context: RunContext | None = None
    layers: list[LayerResult] = field(default_factory=list)  # the report's rows
    activations: list[Activation] = field(default_factory=list)


@functools.cache
def rules(phase: Phase) -> tuple[Rule, ...]:
    """The rules the registry's entries run in ``phase``, in rank order (each entry names its
    rule as ``module.function`` of :mod:`gradcheck.verdicts.rules`)."""
    found = []
    for entry in with_phase(phase):
        module, _, name = entry.rule.rpartition(".")
        found.append(getattr(importlib.import_module(f"gradcheck.verdicts.rules.{module}"), name))
    return tuple(found)


def outcomes(
    item: Any, context: RunContext, rules: tuple[Rule, ...]
) -> tuple[list[Finding], list[str]]:
    """The findings of ``rules`` on one parameter (or a layer's outputs), and the reasons of
    those that excused it."""
    found: list[Finding] = []
    excused: list[str] = []
    for rule in rules:
        try:
            outcome = rule(item, context)
        except Exception as error:  # a bug in one rule costs this verdict, not the run's report
            excused.append(rule_failed_note(rule, error))
            continue
        if isinstance(outcome, Finding):
            found.append(outcome)
        elif isinstance(outcome, Excuse):
            excused.append(f"not {outcome.verdict}: {outcome.reason}")
    return found, excused


def rule_failed_note(rule: Callable[..., object], error: Exception) -> str:
    """The note on a parameter a rule could not judge (an internal error: a bug to report)."""
    verdict = getattr(rule, "__name__", "rule").removeprefix("find_")
    return (
        f"not judged for {verdict}: internal error in gradcheck ({type(error).__name__}: "
        f"{error}); the other verdicts stand (please report this bug)"
    )


# --------------------------------------------------------------------------------------------
# The passes, in their order
# --------------------------------------------------------------------------------------------


def blow_up_rules(run: Judging) -> None:
    """Each parameter's every step, by the ``blow_up`` rules (nan, exploding)."""
    for parameter in run.parameters:
        found, excused = outcomes(parameter, run.context, rules("blow_up"))
        run.findings[parameter.name] = found
        run.notes[parameter.name] = excused


def aligned_onsets(run: Judging) -> None:
    """One blow-up's exploding onsets, aligned across the parameters it reached."""
    run.findings = align_event_onsets(run.findings, run.context.gradients, run.context.config)


def ranked_nans(run: Judging) -> None:
    """NaNs ranked by where they began (a parameter's own before one inferred from the loss)."""
    rank_nan_findings(run.parameters, run.findings)


def growth_from_start(run: Judging) -> None:
    """Weights blown up before the second logged step (inside every early baseline), in a
    run where nothing else blew up."""
    if any(run.findings.values()):
        return
    for name, finding in start_growth_findings(run.parameters, run.context, run.norms).items():
        run.findings[name] = [finding]


def healthy_steps(run: Judging) -> None:
    """The steps before the run's first blow-up (or the training loss's rise into it, where
    the loss shows it first): the quiet rules judge these only, as after a blow-up saturated
    units give zero gradients and NaN weights stop moving, which says nothing new."""
    steps = [
        f.first_bad_step
        for found in run.findings.values()
        for f in found
        if f.verdict in BLOW_UPS and f.first_bad_step is not None
    ]
    run.healthy_before = min(steps) if steps else None
    config = run.context.config
    if run.healthy_before is not None:
        run.loss_rise = loss_blow_up(run.loss, run.healthy_before, config)
    if run.loss_rise is not None:
        run.healthy_before = run.loss_rise.onset_step
    run.healthy = [before(p, run.healthy_before) for p in run.parameters]
    run.healthy_context = (  # without trouble every step is healthy: the same context again
        run.context
        if run.healthy_before is None
        else dataclasses.replace(
            run_context(run.data, run.healthy, config, run.norms, run.healthy_before, run.loss),
            open_end=run.context.open_end,
            blow_up_step=run.healthy_before,
        )
    )
    run.context = dataclasses.replace(  # the rows show the weights' healthy movements
        run.context,
        movements=run.healthy_context.movements,
        reference_movements=run.healthy_context.reference_movements,
    )


def quiet_rules(run: Judging) -> None:
    """Each parameter's healthy steps, by the ``quiet`` rules (vanishing, static, slow); a
    global norm has no weights and no depth: nan and exploding only."""
    assert run.healthy_context is not None
    for parameter in run.healthy:
        if parameter.name == GLOBAL_NORM_ROW:
            continue
        found, excused = outcomes(parameter, run.healthy_context, rules("quiet"))
        run.findings[parameter.name] += found
        run.notes[parameter.name] += excused


def excused_by_others(run: Judging) -> None:
    """What one finding explains away: a vanishing gradient before the parameter's own
    blow-up, slow updates that another finding explains (in the notes instead)."""
    for parameter in run.healthy:
        if parameter.name == GLOBAL_NORM_ROW:
            continue
        notes = run.notes[parameter.name]
        found = without_vanishing(run.findings[parameter.name], notes)
        run.findings[parameter.name] = without_slow(found, notes)


def parameter_rows(run: Judging) -> None:
    """A row per parameter, its hint after the run's blow-up where one came first."""
    rise = first_rise(run.findings), run.loss_rise.onset_step if run.loss_rise is not None else None
    run.layers += [
        layer_result(p, run.findings[p.name], run.notes[p.name], run.context, run.charts, rise)
        for p in run.parameters
    ]


def loss_rows(run: Judging) -> None:
    """The ``(training loss)`` row by the ``loss`` rules (diverging), when no parameter
    already says the run blew up (their hint names the loss's rise where it came first)."""
    loss = run.loss
    if loss is None or any(f in BLOW_UPS for layer in run.layers for f in layer.flags):
        return
    for rule in rules("loss"):
        found = rule(
            loss, run.norms, run.context.clip_ceiling, trainer_clips(run.data), run.context.config
        )
        if isinstance(found, Finding):
            run.layers.append(loss_row(found, loss, len(run.layers), run.charts))


def activation_rows(run: Judging) -> None:
    """A row per layer whose outputs are logged, by the ``activation`` rules (dead,
    saturated)."""
    taken = frozenset(layer.name for layer in run.layers)
    run.activations = run_activations(run.data, run.rules, depth=len(run.layers), taken=taken)
    run.layers += activation_results(run.activations, run.context, rules("activation"), run.charts)


PASSES: tuple[Callable[[Judging], None], ...] = (
    blow_up_rules,
    aligned_onsets,
    ranked_nans,
    growth_from_start,
    healthy_steps,
    quiet_rules,
    excused_by_others,
    parameter_rows,
    loss_rows,
    activation_rows,
)
"""Every pass, in order: a pass reads what those before it found."""


def judge(run: Judging) -> Judging:
    """``run`` after every pass of :data:`PASSES`."""
    for judged in PASSES:
        judged(run)
    return run
