"""The GitHub Actions format: workflow commands that become annotations on the run's page.

GitHub shows at most 10 error, 10 warning and 10 notice annotations per step and drops the
rest without a word, so this format makes few, and says what it left out:

- one annotation per run and verdict ("runs/a: 3 parameters nan from step 20: fc1.weight,
  fc1.bias, fc2.weight", then a line of cause and one of fix), an ``::error`` when one of its
  parameters fails ``--fail-on``, else a ``::warning``; the most severe first (errors, then
  verdicts worst first, then the most severe finding);
- the reader's warnings (damage, a run with nothing to judge) as warnings after the findings;
  what a run's logs leave unjudged (its notes) as notices, one per distinct note;
- at most :data:`LIMIT` of each level; when anything is left out, one annotation (at the
  level of the most severe thing left out, in place of the last one of that level) says how
  many findings and warnings were not annotated and where they all are: the job summary
  (``$GITHUB_STEP_SUMMARY``: the CLI appends the full Markdown report to it) or another
  format;
- a closing ``::notice`` with the summary; with the sweep view on, a ``::notice`` titled
  ``gradcheck sweep`` before the runs holds it, a line each.

Untrusted text (tag and run names, evidence that quotes them) goes through :func:`escape_data`
and :func:`escape_property` only, so no name can end a command early or start a new one:
https://github.com/actions/toolkit/blob/main/packages/core/src/command.ts
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model import VERDICTS, LayerResult, Report, RunReport, Verdict
from gradcheck.report.advice import verdict_advice
from gradcheck.report.escape import terminal_lines
from gradcheck.report.interface import Formatter
from gradcheck.report.sweep_view import sweep_lines
from gradcheck.report.view import plural, report_summary, spikes_line
from gradcheck.verdicts.gate import FINDINGS, failing_runs, fails
from gradcheck.verdicts.registry import OK

LIMIT = 10
"""Annotations of each level GitHub shows for a step (errors, warnings, notices); the rest are
dropped: https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-commands"""
MAX_NAMES = 8  # parameters named in one annotation; the rest are counted
LEVELS = ("error", "warning", "notice")
SWEEP_TITLE = "gradcheck sweep"


@dataclass(frozen=True)
class Annotation:
    """One workflow command, and what it stands for (to count what was left out)."""

    level: str
    title: str
    message: str
    findings: int = 0  # flagged parameters it reports
    warnings: int = 0  # reader warnings it reports


class GithubFormatter(Formatter):
    """GitHub Actions workflow commands, one per line."""

    def format(self, report: Report) -> str:
        fail_on = self.options.fail_on
        findings = sorted(
            (group for run in report.runs for group in _groups(run, fail_on)),
            key=lambda a: (LEVELS.index(a[0].level), a[1]),
        )
        candidates = [annotation for annotation, _ in findings]
        candidates += _reader_warnings(report)
        notices = _notes(report)
        if report.sweep is not None:
            sweep = "\n".join(sweep_lines(report.sweep))
            notices.insert(0, Annotation("notice", SWEEP_TITLE, sweep))
        shown, overflow = _within_limits([*candidates, *notices], self._where())
        summary = Annotation("notice", "gradcheck", self._summary(report))
        shown.sort(key=lambda a: a.title != SWEEP_TITLE)  # the sweep's overview first
        lines = [command(a.level, {"title": a.title}, a.message) for a in shown]
        if overflow is not None:
            lines.append(command(overflow.level, {"title": overflow.title}, overflow.message))
        lines.append(command(summary.level, {"title": summary.title}, summary.message))
        return "\n".join(lines) + "\n"

    def _where(self) -> str:
        """Where the annotations left out can be read."""
        if self.options.step_summary:
            return "the job summary lists every finding"
        return "gradcheck's table, markdown or json format lists them all"

    def _summary(self, report: Report) -> str:
        fail_on = self.options.fail_on
        failing = len(failing_runs(report, fail_on))
        summary = f"gradcheck {report.version}: {report_summary(report)}"
        if failing:
            gate = ",".join(verdict for verdict in FINDINGS if verdict in fail_on)
            summary += f"; {plural(failing, 'run')} failing --fail-on {gate}"
        return summary


def _groups(
    run: RunReport, fail_on: frozenset[Verdict]
) -> list[tuple[Annotation, tuple[int, float]]]:
    """One annotation per verdict of ``run``'s findings, with its sort key (verdict rank, the
    most severe finding first)."""
    by_verdict: dict[Verdict, list[LayerResult]] = {}
    for layer in run.layers:
        if layer.verdict != OK:
            by_verdict.setdefault(layer.verdict, []).append(layer)
    groups = []
    for verdict, layers in by_verdict.items():
        layers.sort(key=lambda layer: -layer.severity)
        level = "error" if any(fails(layer, fail_on) for layer in layers) else "warning"
        annotation = Annotation(
            level=level,
            title=f"gradcheck: {verdict} in {run.run}",
            message=_group_message(run, verdict, layers),
            findings=len(layers),
        )
        groups.append((annotation, (VERDICTS.index(verdict), -layers[0].severity)))
    return groups


def _group_message(run: RunReport, verdict: Verdict, layers: list[LayerResult]) -> str:
    """``runs/a: 3 parameters nan from step 20: fc1.weight, fc1.bias, fc2.weight``, then the
    cause and the fix of the verdict (its worst finding's hint)."""
    onsets = [layer.onsets.get(verdict, layer.first_bad_step) for layer in layers]
    known = [step for step in onsets if step is not None]
    since = f" from step {min(known)}" if known else ""
    in_order = sorted(layers, key=lambda layer: layer.depth)
    names = ", ".join(layer.name for layer in in_order[:MAX_NAMES])
    if len(layers) > MAX_NAMES:
        names += f" and {len(layers) - MAX_NAMES} more"
    noun = "layer" if all(layer.is_activation for layer in layers) else "parameter"
    lines = [f"{run.run}: {plural(len(layers), noun)} {verdict}{since}: {names}"]
    advice = verdict_advice(layers)
    if advice is not None:
        lines += [advice.cause, f"fix: {advice.fix}"] if advice.cause else [f"fix: {advice.fix}"]
    return "\n".join(lines)


def _reader_warnings(report: Report) -> list[Annotation]:
    """The report's and the runs' warnings, and each run with nothing to judge."""
    annotations = [Annotation("warning", "gradcheck", w, warnings=1) for w in report.warnings]
    for run in report.runs:
        title = f"gradcheck: {run.run}"
        if run.holds:
            annotations.append(Annotation("warning", title, f"nothing to judge: {run.holds}", 0, 1))
        annotations += [Annotation("warning", title, w, warnings=1) for w in run.warnings]
    return annotations


def _notes(report: Report) -> list[Annotation]:
    """Each run's loss spikes, then what the runs' logs leave unjudged, one notice per
    distinct note naming its runs."""
    runs_by_note: dict[str, list[str]] = {}
    for run in report.runs:
        for note in run.notes:
            runs_by_note.setdefault(note, []).append(run.run)
    notices = [
        Annotation("notice", f"gradcheck: {run.run}", line)
        for run in report.runs
        if (line := spikes_line(run)) is not None
    ]
    for note, runs in runs_by_note.items():
        title = f"gradcheck: {runs[0]}" if len(runs) == 1 else f"gradcheck: {len(runs)} runs"
        named = "" if len(runs) == 1 else "\nruns: " + ", ".join(runs[:MAX_NAMES])
        if len(runs) > MAX_NAMES:
            named += f" and {len(runs) - MAX_NAMES} more"
        notices.append(Annotation("notice", title, note + named))
    return notices


def _within_limits(
    annotations: list[Annotation], where: str
) -> tuple[list[Annotation], Annotation | None]:
    """At most :data:`LIMIT` annotations of each level (one notice kept for the summary), in
    order; when some are left out, the annotation that says so (taking the last place of the
    most severe level that lost some)."""
    room = {"error": LIMIT, "warning": LIMIT, "notice": LIMIT - 1}
    kept: list[Annotation] = []
    left_out: list[Annotation] = []
    for annotation in annotations:
        if room[annotation.level] > 0:
            kept.append(annotation)
            room[annotation.level] -= 1
        else:
            left_out.append(annotation)
    if not left_out:
        return kept, None
    level = min((a.level for a in left_out), key=LEVELS.index)
    last = max(i for i, a in enumerate(kept) if a.level == level)
    left_out.insert(0, kept.pop(last))
    findings = sum(a.findings for a in left_out)
    warnings = sum(a.warnings for a in left_out)
    notes = sum(a.level == "notice" for a in left_out)
    parts = [plural(count, noun) for count, noun in ((findings, "finding"), (warnings, "warning"),
             (notes, "note")) if count]  # fmt: skip
    message = (
        f"{_joined(parts)} not annotated (GitHub shows {LIMIT} annotations of each level): {where}."
    )
    return kept, Annotation(level, "gradcheck: more not annotated", message)


def _joined(parts: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def command(name: str, properties: dict[str, str], message: str) -> str:
    """``::name key=value,...::message`` with every part escaped."""
    props = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    return (
        f"::{name} {props}::{escape_data(message)}"
        if props
        else f"::{name}::{escape_data(message)}"
    )


def escape_data(text: str) -> str:
    """A command's message: control characters shown escaped (GitHub's log renders ANSI
    codes), then ``%``, CR and LF percent-encoded (``%`` first)."""
    text = terminal_lines(text)
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value: as :func:`escape_data`, plus ``:`` and ``,`` which end a value."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")
