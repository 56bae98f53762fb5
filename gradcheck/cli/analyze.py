"""``gradcheck analyze``: judge every parameter of the runs, write the report(s), and the exit
status that ``--fail-on`` asks for."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

import click

from gradcheck.cli.options import (
    FORMAT_CHOICES,
    Reading,
    complete_paths,
    complete_report,
    fail_on_option,
    format_options,
    reading_options,
    steps_option,
    top_option,
    view_options,
)
from gradcheck.cli.outcome import say
from gradcheck.cli.output import (
    emit,
    env_of,
    note_failing_runs,
    note_warnings,
    progress_bar,
    report_chunks,
)
from gradcheck.cli.status import ExitStatus
from gradcheck.errors import InputError
from gradcheck.report.interface import Env, FormatOptions
from gradcheck.verdicts.gate import DEFAULT_FAIL_ON, failing_layers, nothing_to_judge, parse_fail_on
from gradcheck.verdicts.registry import FINDINGS, VERDICTS

if TYPE_CHECKING:
    from gradcheck.model import Report

EXIT_STATUS_HELP = """\b
Exit status:
  0  no finding in --fail-on
  1  at least one finding in --fail-on
  2  usage, input or output error (bad option, missing path, no event
     files, nothing readable, report not writable)
  3  internal error (a bug: rerun with --debug and report it)
  4  nothing to judge: no run logs weights, gradients, gradient norms
     or activations
  130  interrupted (Ctrl-C, SIGINT)
  143  terminated (SIGTERM)"""

ANALYZE_HELP = f"""Judge every parameter of the runs under PATH... (event files or directories).

Verdicts: {", ".join(VERDICTS)}; worst first, with the numbers behind each; and the training
loss's spikes."""


@click.command(epilog=EXIT_STATUS_HELP, help=ANALYZE_HELP)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...", shell_complete=complete_paths)
@format_options(FORMAT_CHOICES, "report")
@click.option(
    "--report",
    "reports",
    multiple=True,
    metavar="FORMAT:FILE",
    shell_complete=complete_report,
    callback=lambda ctx, param, value: [_report_target(text) for text in value],
    help="Also write the report in FORMAT to FILE (repeatable; stdout keeps --format).",
)
@fail_on_option(
    f"Verdicts that make the exit status 1: comma list of {', '.join(FINDINGS)}; or any; or none."
)
@top_option("List at most N layers with findings per run (table; markdown: findings).")
@click.option(
    "--all", "show_all", is_flag=True, help="List every parameter on its own row, healthy ones too."
)
@view_options
@click.option(
    "--sweep/--no-sweep",
    default=None,
    help="Show the sweep view above the runs (default: for 3+ runs with hyperparameters, "
    "or 12+ runs).",
)
@steps_option
@reading_options(jobs=True)
@click.pass_context
def analyze(
    ctx: click.Context,
    paths: tuple[str, ...],
    format_name: str,
    output: str | None,
    reports: list[tuple[str, str]],
    fail_on: str | None,
    top: int,
    show_all: bool,
    explain: bool,
    clip: bool,
    width: int | None,
    layer: str | None,
    run_glob: str | None,
    sweep: bool | None,
    steps: str | None,
    reading: Reading,
) -> ExitStatus:
    """Judge every parameter of the runs under PATH... (:data:`ANALYZE_HELP`)."""
    from gradcheck.events.steps import StepWindow
    from gradcheck.pipeline import analyze as run_analysis

    env = env_of(ctx, width)
    config, rules = reading.settings()
    failing = parse_fail_on(fail_on or config.fail_on or DEFAULT_FAIL_ON)
    window = StepWindow.parse(steps) if steps is not None else None
    storage = reading.storage()  # a bad option before any cluster starts
    with (
        reading.workers() as workers,
        progress_bar(env, enabled=not reading.no_progress) as progress,
    ):
        report = run_analysis(
            list(paths),
            config=config,
            rules=rules,
            layer_glob=layer,
            run_glob=run_glob,
            steps=window,
            progress=progress,
            jobs=reading.jobs,
            workers=workers,
            sweep=sweep,
            storage_options=storage,
            charts=any(name == "html" for name in (format_name, *(f for f, _ in reports))),
        )
    summary = _step_summary(format_name, reports)
    options = FormatOptions(
        top=top,
        show_all=show_all,
        fail_on=failing,
        explain=explain,
        clip=clip,
        step_summary=summary is not None,
    )
    file_env = Env() if width is None else Env(width=width)
    stdout_options = replace(options, env=env if output is None else file_env)
    options = replace(options, env=file_env)
    for report_format, path in reports:  # files first: one not writable leaves stdout empty
        emit(report_chunks(report, report_format, options), path)
    emit(report_chunks(report, format_name, stdout_options), output)
    if summary is not None:
        _append_step_summary(report, summary, options)
    written = [(format_name, output)] if output is not None else []
    note_warnings(report, [format_name, *(name for name, _ in reports)], written + reports)
    if written or reports:
        note_failing_runs(report, failing)
    silence = nothing_to_judge(report)
    if silence is not None:
        say(f"nothing to judge: {silence}")
        return ExitStatus.NOTHING_TO_JUDGE
    return ExitStatus.FINDINGS if failing_layers(report, failing) else ExitStatus.OK


STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
"""The file GitHub Actions shows as the job's summary page (Markdown, appended to)."""


def _step_summary(format_name: str, reports: list[tuple[str, str]]) -> str | None:
    """``$GITHUB_STEP_SUMMARY`` when a github report is made and the variable names a file."""
    wanted = "github" in (format_name, *(name for name, _ in reports))
    path = os.environ.get(STEP_SUMMARY, "").strip()
    return path if wanted and path else None


def _append_step_summary(report: Report, path: str, options: FormatOptions) -> None:
    """The full Markdown report (every finding: no ``--top``) appended to the job summary,
    where GitHub shows it whole (annotations stop at 10 of each level)."""
    from gradcheck.report import formatter_for

    text = formatter_for("markdown", replace(options, top=None)).format(report)
    try:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(text)
    except OSError as error:
        raise InputError(
            f"cannot write {path} (${STEP_SUMMARY}): {error.strerror or error}"
        ) from None


def _report_target(text: str) -> tuple[str, str]:
    """``FORMAT:FILE`` of ``--report`` as ``(format, file)``."""
    name, sep, path = text.partition(":")
    if not sep or not path or name not in FORMAT_CHOICES:
        names = ", ".join(FORMAT_CHOICES)
        raise click.BadParameter(f"{text!r}: expected FORMAT:FILE with FORMAT one of {names}")
    return name, path
