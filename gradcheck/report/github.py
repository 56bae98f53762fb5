"""The GitHub Actions format: workflow commands that become annotations on the run's page.

One ``::error`` per finding in ``--fail-on`` (``::warning`` for the other findings), titled
with the verdict, the parameter and the run, its evidence and hint as the message; a
``::warning`` per reader warning and per run with nothing to judge, a ``::notice`` per thing a
run's logs leave unjudged (its notes); a closing ``::notice`` with the summary. With the sweep
view on, a ``::notice`` titled ``gradcheck sweep`` before the runs holds it, a line each.
Untrusted text (tag and run names, evidence that quotes them) goes through :func:`escape_data` and
:func:`escape_property` only, so no name can end a command early or start a new one:
https://github.com/actions/toolkit/blob/main/packages/core/src/command.ts
"""

from __future__ import annotations

from gradcheck.model import LayerResult, Report, RunReport
from gradcheck.report.escape import terminal_lines
from gradcheck.report.interface import Formatter
from gradcheck.report.sweep_view import sweep_lines
from gradcheck.report.view import finding_lines, plural, report_summary
from gradcheck.verdicts.gate import FINDINGS, failing_runs, fails


class GithubFormatter(Formatter):
    """GitHub Actions workflow commands, one per line."""

    def format(self, report: Report) -> str:
        fail_on = self.options.fail_on
        lines = [command("warning", {"title": "gradcheck"}, w) for w in report.warnings]
        if report.sweep is not None:
            sweep = "\n".join(sweep_lines(report.sweep))
            lines.append(command("notice", {"title": "gradcheck sweep"}, sweep))
        for run in report.runs:
            title = {"title": f"gradcheck: {run.run}"}
            if run.holds:
                lines.append(command("warning", title, f"nothing to judge: {run.holds}"))
            lines += [command("notice", title, note) for note in run.notes]
            lines += [command("warning", title, warning) for warning in run.warnings]
            for layer in run.layers:
                if layer.verdict != "ok":
                    level = "error" if fails(layer, fail_on) else "warning"
                    lines.append(
                        command(
                            level, {"title": _title(run, layer)}, "\n".join(finding_lines(layer))
                        )
                    )
        failing = len(failing_runs(report, fail_on))
        summary = f"gradcheck {report.version}: {report_summary(report)}"
        if failing:
            gate = ",".join(verdict for verdict in FINDINGS if verdict in fail_on)
            summary += f"; {plural(failing, 'run')} failing --fail-on {gate}"
        lines.append(command("notice", {"title": "gradcheck"}, summary))
        return "\n".join(lines) + "\n"


def _title(run: RunReport, layer: LayerResult) -> str:
    """``nan, exploding: fc1.weight in runs/troubled``."""
    return f"{', '.join(layer.flags) or layer.verdict}: {layer.name} in {run.run}"


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
