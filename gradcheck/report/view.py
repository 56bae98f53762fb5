"""What the human formats (table, Markdown) show of a run: which parameters, which numbers.

Machine formats carry everything; a person triaging a run wants the worst parameters first,
a handful of key numbers each, and healthy parameters folded into one line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gradcheck.model import (
    LOSS_ROW,
    RUN_ROWS,
    VERDICTS,
    ClipInfo,
    LayerResult,
    Report,
    RunReport,
    Spike,
    Verdict,
)
from gradcheck.report.numbers import MISSING, format_number, format_ratio, format_steps
from gradcheck.verdicts.gate import fails
from gradcheck.verdicts.registry import BLOW_UPS, OK


@dataclass(eq=False)
class KeyNumber:
    """One statistic shown as a column: the first of ``keys`` present in ``LayerResult.stats``."""

    label: str  # two short lines ("grad\nmedian") so that the table stays narrow
    keys: tuple[str, ...]
    render: Callable[[float | int | None], str] = format_number

    def of(self, layer: LayerResult) -> str:
        """The rendered value for ``layer``, ``–`` when none of the keys is present."""
        for key in self.keys:
            if key in layer.stats:
                return self.render(layer.stats[key])
        return MISSING


KEY_NUMBERS: tuple[KeyNumber, ...] = (
    KeyNumber("grad\nmedian", ("grad_norm_median",)),
    KeyNumber("grad\nlast", ("grad_norm_last",)),
    KeyNumber("ratio\nto max", ("grad_ratio_to_largest",), format_ratio),
    KeyNumber("weight\nmoved", ("weight_movement",)),
)
"""Gradient norm median and last, ratio to the run's largest, weight movement (docs: Verdicts)."""


@dataclass(eq=False)
class LayerSelection:
    """The parameters of a run split for display."""

    listed: tuple[LayerResult, ...]  # one row each, worst first
    hidden: tuple[LayerResult, ...]  # findings beyond --top (counted, not listed)
    folded: tuple[LayerResult, ...]  # healthy parameters folded into one line


def select_layers(run: RunReport, top: int | None, show_all: bool) -> LayerSelection:
    """Findings worst first, at most ``top`` of them; with ``show_all`` every parameter."""
    if show_all:
        return LayerSelection(listed=tuple(run.layers), hidden=(), folded=())
    findings = tuple(layer for layer in run.layers if layer.verdict != OK)
    healthy = tuple(layer for layer in run.layers if layer.verdict == OK)
    cut = len(findings) if top is None else max(top, 0)
    return LayerSelection(listed=findings[:cut], hidden=findings[cut:], folded=healthy)


def failing_first(runs: tuple[RunReport, ...], fail_on: frozenset[Verdict]) -> list[RunReport]:
    """The runs with a finding in ``fail_on`` first, each group in report order."""
    return sorted(runs, key=lambda run: not any(fails(layer, fail_on) for layer in run.layers))


def verdict_counts(run: RunReport) -> Mapping[str, int]:
    """Parameters per verdict, from the layers (so a --layer filter is reflected)."""
    counts: dict[str, int] = dict.fromkeys(VERDICTS, 0)
    for layer in run.layers:
        counts[layer.verdict] += 1
    return counts


def counts_phrase(counts: Mapping[str, int]) -> str:
    """``1 nan · 2 exploding · 5 ok``: only verdicts that occur, most severe first."""
    parts = [f"{counts[v]} {v}" for v in VERDICTS if counts.get(v)]
    return " · ".join(parts) if parts else "no parameters"


def run_verdict_line(run: RunReport) -> str:
    """``1 nan · 4 ok``; for a run with nothing to judge, what its log holds instead."""
    if not run.judgeable:
        return f"nothing to judge: {run.holds}"
    return counts_phrase(verdict_counts(run))


def report_summary(report: Report) -> str:
    """``2 runs, 3 findings (1 nan, 2 exploding)``."""
    totals: dict[str, int] = dict.fromkeys(VERDICTS, 0)
    for run in report.runs:
        for verdict, count in verdict_counts(run).items():
            totals[verdict] += count
    findings = sum(count for verdict, count in totals.items() if verdict != OK)
    detail = counts_phrase({v: c for v, c in totals.items() if v != OK}).replace(" · ", ", ")
    text = f"{plural(len(report.runs), 'run')}, {plural(findings, 'finding')}"
    return f"{text} ({detail})" if findings else text


def run_summary(run: RunReport) -> str:
    """``2 files · steps 0–31 · <writers> · 1 nan · 5 ok`` (unescaped: writers come from logs;
    a run with nothing to judge says what its log holds)."""
    parts = [plural(len(run.files), "file"), f"steps {format_steps(run.steps)}"]
    if run.writers:
        parts.append(", ".join(run.writers))
    parts.append(run_verdict_line(run))
    return " · ".join(parts)


def finding_lines(layer: LayerResult) -> list[str]:
    """A finding for a CI log: its evidence, its first bad step and its hint, a line each."""
    lines = ["; ".join(filter(None, (layer.evidence, *layer.notes)))]
    if layer.first_bad_step is not None:
        lines.append(f"first bad step: {layer.first_bad_step}")
    if layer.hint:
        lines.append(f"hint: {layer.hint}")
    return lines


def plural(count: int, noun: str) -> str:
    """``1 file``, ``2 files``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


CLIP_VERDICTS = BLOW_UPS
"""Verdicts after which clipping advice applies: the run blew up or went NaN. Not after a
loss that diverged alone: clipping does not prevent that (the ``diverging`` evidence says what
the clip did), a lower learning rate does."""


def clipping_applies(run: RunReport, asked: bool = False) -> bool:
    """Whether a human format shows the run's global norm and clipping advice: when asked
    (``--clip``), when the run blew up or went NaN, or when its clip is worth a word
    (``ClipInfo.noteworthy``). Not for a healthy run, nor a slow one (there a clip is the
    wrong fix: the learning rate is too small)."""
    if run.clipping is None:
        return False
    if asked or run.clipping.noteworthy:
        return True
    return any(flag in CLIP_VERDICTS for layer in run.layers for flag in layer.flags)


def judged_phrase(run: RunReport, layers: int | None = None) -> str:
    """What was judged: ``gradients and weights of 18 parameters in 9 layers``, ``... and the
    training loss``, ``..., and the outputs of 3 layers`` (activation histograms)."""
    outputs = sum(layer.is_activation for layer in run.layers)
    parameters = sum(layer.name not in RUN_ROWS and not layer.is_activation for layer in run.layers)
    loss = any(layer.name == LOSS_ROW for layer in run.layers)
    judged_outputs = f"the outputs of {plural(outputs, 'layer')}"
    if not parameters and outputs:
        return judged_outputs + (" and the training loss" if loss else "")
    weights = any(layer.weight_tag for layer in run.layers)
    kinds = {
        "per_parameter": "gradients and weights" if weights else "gradients",
        "global": "weights and the global gradient norm" if weights else "the global gradient norm",
        "none": "weights",
    }[run.gradients]
    if not parameters:  # no per-parameter series: the run's own rows are what was judged
        return f"{kinds} and the training loss" if loss else kinds
    text = f"{kinds} of {plural(parameters, 'parameter')}"
    if layers is not None:
        layers -= outputs + (1 if loss else 0)  # the loss's row and the outputs' are no layer
    if layers is not None and layers not in (parameters, 1):
        text += f" in {plural(layers, 'layer')}"
    text += " and the training loss" if loss else ""
    return text + (f", and {judged_outputs}" if outputs else "")


SPIKE_STEPS_SHOWN = 6
"""Steps a run's spike line names before it counts the rest."""


def spikes_line(run: RunReport) -> str | None:
    """``3 loss spikes (steps 152, 304, 456), led by lm_head.weight each time`` (unescaped:
    names come from the logs); None without spikes."""
    spikes = run.spikes
    if not spikes:
        return None
    steps = _steps_text([spike.step for spike in spikes])
    head = (
        f"{plural(len(spikes), 'loss spike')} ({'step' if len(spikes) == 1 else 'steps'} {steps})"
    )
    leaders: dict[str, list[int]] = {}
    unled: list[Spike] = []
    for spike in spikes:
        if spike.led_by:
            leaders.setdefault(spike.led_by[0], []).append(spike.step)
        else:
            unled.append(spike)
    parts = []
    if len(leaders) == 1 and not unled:
        (name,) = leaders
        parts.append(f"led by {name}" + (" each time" if len(spikes) > 1 else ""))
    elif leaders:
        named = [f"{name} ({_steps_text(at)})" for name, at in leaders.items()]
        parts.append("led by " + ", ".join(named))
    if unled:
        logged = all("logged" in spike.note for spike in unled)
        reason = "no gradient logged" if logged else "no parameter's gradient rose"
        at = _steps_text([spike.step for spike in unled])
        where = f" at {at}" if leaders else (" there" if logged else "")
        parts.append(reason + where)
    return f"{head}, {'; '.join(parts)}"


def spike_lines(run: RunReport) -> list[str]:
    """One line per spike for ``--explain``: its size, its leaders and their rise."""
    lines = []
    for spike in run.spikes:
        text = f"loss spike at step {spike.step}: {spike.loss_ratio:.3g}x the running median"
        if spike.led_by:
            rise = f"{spike.rise:.3g}x" if spike.rise is not None else "most"
            text += (
                f"; led by {', '.join(spike.led_by)} (gradient norm up {rise} over its median "
                f"at step {spike.gradient_step})"
            )
        elif spike.note:
            text += f"; {spike.note}"
        lines.append(text)
    return lines


def _steps_text(steps: list[int]) -> str:
    shown = ", ".join(str(step) for step in steps[:SPIKE_STEPS_SHOWN])
    more = len(steps) - SPIKE_STEPS_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


CLIP_KIND_PHRASE = {
    "global_norm": "clipped by global norm at",
    "per_tensor_norm": "each parameter's gradient norm clipped at",
    "value": "gradients clipped by value at",
}


def clipping_lines(clip: ClipInfo, detailed: bool = True) -> list[str]:
    """The clipping sentence, and the advice on where and how to clip when there is one."""
    advice = [f"clipping: {clip.advice}"] if clip.advice else []
    return [clipping_phrase(clip, detailed), *advice]


def clipping_phrase(clip: ClipInfo, detailed: bool = True) -> str:
    """One sentence on the run's global gradient norm, its clipping and a suggested clip norm
    (``detailed``: where the norm comes from and how the suggestion was made)."""
    source = f" ({clip.source})" if detailed else ""
    text = (
        f"global gradient norm{source}: median {format_number(clip.median)}, "
        f"p99 {format_number(clip.p99)}, max {format_number(clip.maximum)}"
    )
    if clip.kind is not None:
        sign = "±" if clip.kind == "value" else ""
        text += f"; {CLIP_KIND_PHRASE[clip.kind]} {sign}{format_number(clip.clip_value)}"
    if clip.suggested_clip_norm is not None:
        text += f"; suggested clip norm {format_number(clip.suggested_clip_norm)}"
        if clip.rule and detailed:
            text += f" ({clip.rule})"
        if clip.suggested_share is not None:
            text += f", clipping {clip.suggested_share:.0%} of healthy steps"
    return text + "."


@dataclass(eq=False)
class Note:
    """What to print under the table for one finding: its evidence, and its hint if new."""

    layer: LayerResult
    hint: str  # "" when the same hint was already given for an earlier finding
    excuses: tuple[str, ...] = ()  # why rules did not fire (``--all`` only)


def notes_for(layers: tuple[LayerResult, ...], every: bool) -> tuple[list[Note], int]:
    """The evidence worth reading below the table, and how many findings were left out.

    Without ``every``: the worst finding of each verdict, and each finding that brings a hint not
    given yet (each hint is printed once: ten vanishing layers share one). The table row of
    every finding still shows its numbers; JSON and ``--all`` carry every evidence sentence,
    and ``--all`` the reasons a rule did not fire (healthy parameters included).
    """
    notes: list[Note] = []
    seen_verdicts: set[str] = set()
    seen_hints: set[str] = set()
    left_out = 0
    for layer in layers:
        if layer.verdict == OK:
            if every and layer.notes:
                notes.append(Note(layer=layer, hint="", excuses=layer.notes))
            continue
        new_hint = bool(layer.hint) and layer.hint not in seen_hints
        if every or new_hint or layer.verdict not in seen_verdicts:
            excuses = layer.notes if every else ()
            notes.append(Note(layer=layer, hint=layer.hint if new_hint else "", excuses=excuses))
        else:
            left_out += 1
        seen_verdicts.add(layer.verdict)
        seen_hints.add(layer.hint)
    return notes, left_out
