"""The ``gradcheck`` command: parse options, call the core, format, map the outcome to a status.

This is the only module that imports click. Every exception is turned into an exit status in
one place (:meth:`GradcheckGroup.main`): a ``GradcheckError`` or a usage error is one line on
stderr and status 2, anything else is a bug (status 3, traceback with ``--debug``).
"""

from __future__ import annotations

import gc
import io
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

import click
from click.exceptions import NoArgsIsHelpError
from click.shell_completion import CompletionItem

from gradcheck import __version__
from gradcheck.errors import GradcheckError, InputError
from gradcheck.report.escape import terminal
from gradcheck.report.interface import MIN_WIDTH, Env, FormatOptions
from gradcheck.status import ExitStatus
from gradcheck.verdicts.gate import (
    DEFAULT_FAIL_ON,
    FINDINGS,
    failing_layers,
    failing_runs,
    fails,
    nothing_to_judge,
    parse_fail_on,
)

if TYPE_CHECKING:
    from gradcheck.engine.pool import Workers
    from gradcheck.export import ExportSummary
    from gradcheck.model import Comparison, Report, Verdict
    from gradcheck.tags import TagRules
    from gradcheck.verdicts.config import Config
    from gradcheck.watch import Update, Watcher

FORMAT_CHOICES = ("table", "json", "markdown", "csv", "github", "junit", "html")
INSPECT_FORMAT_CHOICES = ("table", "json")
COMPARE_FORMAT_CHOICES = ("table", "json", "markdown", "html")
EXPORT_FORMAT_CHOICES = ("parquet", "csv", "jsonl")
DEFAULT_TOP = 20

EXIT_STATUS_HELP = """\b
Exit status:
  0  no finding in --fail-on
  1  at least one finding in --fail-on
  2  usage, input or output error (bad option, missing path, no event
     files, nothing readable, report not writable)
  3  internal error (a bug: rerun with --debug and report it)
  4  nothing to judge: no run logs weights, gradients or gradient norms
  130  interrupted (Ctrl-C, SIGINT)
  143  terminated (SIGTERM)"""


COMPARE_EXIT_STATUS_HELP = """\b
Exit status:
  0  compared (with --fail-on-divergence: no parameter diverges)
  1  with --fail-on-divergence: at least one parameter diverges
  2  usage, input or output error (bad option, missing path, a path
     without exactly one run, no parameter or step in common)
  3  internal error (a bug: rerun with --debug and report it)
  130  interrupted (Ctrl-C, SIGINT)
  143  terminated (SIGTERM)"""

INSPECT_EXIT_STATUS_HELP = """\b
Exit status:
  0  listed (damage in the files is listed, not an error)
  2  usage, input or output error (bad option, missing path, no event
     files, listing not writable)
  3  internal error (a bug: rerun with --debug and report it)"""


class GradcheckGroup(click.Group):
    """A click group whose ``main`` maps every outcome to an :class:`ExitStatus`."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> NoReturn:
        argv = list(sys.argv[1:] if args is None else args)
        debug = _wants_debug(argv)
        try:
            with warnings.catch_warnings(), _sigterm_as_interrupt():
                if not debug:  # numpy's "All-NaN slice" and the like are noise to a user
                    warnings.simplefilter("ignore", RuntimeWarning)
                result = super().main(
                    argv, prog_name or "gradcheck", complete_var, standalone_mode=False, **extra
                )
            status = int(result) if isinstance(result, int) else ExitStatus.OK
        except Terminated:
            click.echo("gradcheck: terminated", err=True)
            status = ExitStatus.TERMINATED
        except (KeyboardInterrupt, click.Abort):
            click.echo("gradcheck: interrupted", err=True)
            status = ExitStatus.INTERRUPTED
        except Exception as error:  # noqa: BLE001 - the one place every error is mapped
            status = report_error(error, debug)
        sys.exit(status)


class Terminated(BaseException):
    """SIGTERM, raised where the process is, as Ctrl-C raises ``KeyboardInterrupt``: what
    undoes an interrupted step (``except BaseException``: forked readers killed and reaped, a
    half-written report removed) undoes a terminated one too. Not a ``KeyboardInterrupt``,
    which click would turn into ``Abort`` after printing an empty line."""


def _raise_terminated(signum: int, frame: object) -> NoReturn:
    raise Terminated


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` while the command runs (main thread only: a
    signal handler cannot be set elsewhere); the previous handler afterwards."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _wants_debug(argv: Sequence[str]) -> bool:
    """``--debug`` anywhere before ``--``: known even when option parsing itself fails."""
    options = argv[: argv.index("--")] if "--" in argv else argv
    return "--debug" in options


def report_error(error: Exception, debug: bool) -> ExitStatus:
    """Print one line (and with ``debug`` the traceback) for ``error``; its exit status."""
    if debug:
        import traceback  # only here: ~3 ms at every start otherwise

        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
    if isinstance(error, NoArgsIsHelpError):  # bare `gradcheck`: the help, as click gives it
        click.echo(error.ctx.get_help(), err=True)
        return ExitStatus.INPUT_ERROR
    if isinstance(error, click.UsageError) and error.ctx is not None:
        hint = f" (see '{error.ctx.command_path} --help')"
        say(f"error: {one_line(error.format_message())}{hint}")
        return ExitStatus.INPUT_ERROR
    if isinstance(error, click.ClickException):
        say(f"error: {one_line(error.format_message())}")
        return ExitStatus.INPUT_ERROR
    if isinstance(error, GradcheckError):
        say(f"error: {one_line(str(error))}")
        return ExitStatus.INPUT_ERROR
    say(
        f"internal error: {type(error).__name__}: {one_line(str(error))} "
        "(this is a bug in gradcheck; rerun with --debug for the traceback and report it)"
    )
    return ExitStatus.INTERNAL_ERROR


def say(message: str) -> None:
    """``gradcheck: message`` on stderr, its names from the logs and the command line shown
    through :func:`~gradcheck.report.escape.terminal` (no escape sequence reaches it)."""
    click.echo(f"gradcheck: {terminal(message)}", err=True)


def one_line(text: str) -> str:
    """``text`` with its lines joined, so that an error is always one line on stderr."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def complete_paths(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of a path: the shell completes files and directories itself."""
    return [CompletionItem(incomplete, type="file")]


def complete_report(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of ``--report FORMAT:FILE``: the formats, each with its colon."""
    return [CompletionItem(f"{name}:") for name in FORMAT_CHOICES if name.startswith(incomplete)]


def debug_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--debug``: read by :meth:`GradcheckGroup.main` before parsing; declared for --help."""
    return click.option(
        "--debug", is_flag=True, expose_value=False, help="Show the traceback of an error."
    )(function)


def format_options(
    choices: Sequence[str], document: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--format`` among ``choices`` (default table) and ``--output FILE`` for ``document``."""
    names = ", ".join(choices[:-1]) + f" or {choices[-1]}"

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        function = click.option(
            "--output",
            "-o",
            metavar="FILE",
            shell_complete=complete_paths,
            help=f"Write the {document} to FILE, not stdout.",
        )(function)
        return click.option(
            "--format",
            "format_name",
            type=click.Choice(choices),
            default="table",
            show_default=True,
            metavar="FORMAT",
            help=f"Output format: {names}.",
        )(function)

    return decorate


def width_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--width N``: the table's columns (else the terminal's, ``COLUMNS``, or 80)."""
    return click.option(
        "--width",
        type=click.IntRange(min=MIN_WIDTH),
        metavar="N",
        help=f"Lines at most N columns wide (default: the terminal's, else $COLUMNS, else 80;"
        f" at least {MIN_WIDTH}).",
    )(function)


def explain_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--explain`` / ``-v``: the evidence behind each finding in the table."""
    return click.option(
        "--explain",
        "-v",
        is_flag=True,
        help="Add the evidence behind each finding, the whole hints and the run's context.",
    )(function)


def clip_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--clip``: the global gradient norm and clipping advice of every run."""
    return click.option(
        "--clip",
        is_flag=True,
        help="Show the global gradient norm and clipping advice of every run (default: only"
        " where the run blew up, went NaN or clips in a way worth a word).",
    )(function)


def steps_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--steps A:B`` (parsed by :meth:`gradcheck.events.steps.StepWindow.parse`)."""
    return click.option(
        "--steps", metavar="A:B", help="Only steps A to B (inclusive; A: or :B open)."
    )(function)


def config_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--config FILE``: thresholds from TOML."""
    return click.option(
        "--config",
        "config_path",
        metavar="FILE",
        shell_complete=complete_paths,
        help="Thresholds from a TOML file (default: [tool.gradcheck] in ./pyproject.toml).",
    )(function)


def pattern_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--grad-pattern`` and ``--weight-pattern``: user regexes for tags."""
    function = click.option(
        "--weight-pattern", metavar="RE", help="Regex for weight tags, group (?P<name>)."
    )(function)
    return click.option(
        "--grad-pattern", metavar="RE", help="Regex for gradient tags, group (?P<name>)."
    )(function)


def jobs_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--jobs N``, ``--scheduler ADDRESS`` and ``--no-progress``."""
    function = click.option("--no-progress", is_flag=True, help="No progress bar on stderr.")(
        function
    )
    function = click.option(
        "--scheduler",
        metavar="ADDRESS",
        help="Send the work to a Dask cluster: its scheduler's address (tcp://HOST:8786), or"
        " local[:N] for N worker processes on this machine (needs dask[distributed]).",
    )(function)
    return click.option(
        "--jobs",
        "-j",
        type=click.IntRange(min=1),
        metavar="N",
        help="Processes reading event files and judging runs (default: one per CPU, 8 at most;"
        " 1: this one only).",
    )(function)


def storage_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--storage-option KEY=VALUE`` (repeatable): fsspec options for URLs, secrets refused
    (:func:`gradcheck.events.storage.parse_storage_options`)."""
    return click.option(
        "--storage-option",
        "storage_options",
        multiple=True,
        metavar="K=V",
        help="An fsspec option for URLs (s3://...), e.g. endpoint_url=URL or anon=true"
        " (repeatable; no secrets).",
    )(function)


def _storage_options(texts: Sequence[str]) -> dict[str, object] | None:
    """The ``--storage-option`` texts as options (None without any: fsspec is not imported)."""
    if not texts:
        return None
    from gradcheck.events.storage import parse_storage_options

    return parse_storage_options(texts).kwargs()


def _settings(
    config_path: str | None, grad_pattern: str | None, weight_pattern: str | None
) -> tuple[Config, TagRules]:
    """The thresholds and tag rules: options given on the command line win over the file."""
    from gradcheck.tags import TagRules
    from gradcheck.verdicts.config import load_config

    config = load_config(config_path)
    rules = TagRules.from_patterns(
        grad_pattern or config.grad_pattern, weight_pattern or config.weight_pattern
    )
    return config, rules


@click.group(
    cls=GradcheckGroup,
    # A fixed help width: the docs' command reference is this --help (docs/reference/cli.md).
    context_settings={"help_option_names": ["-h", "--help"], "terminal_width": 80},
    epilog=EXIT_STATUS_HELP,
)
@click.version_option(__version__, "-V", "--version", prog_name="gradcheck")
@debug_option
def cli() -> None:
    """Find vanishing, exploding, NaN and static gradients and weights in TensorBoard logs.

    Start with: gradcheck analyze LOGDIR (the directory your SummaryWriter or Keras
    TensorBoard callback writes to).
    """


@cli.command(epilog=EXIT_STATUS_HELP)
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
@click.option(
    "--fail-on",
    show_default=DEFAULT_FAIL_ON,
    metavar="LIST",
    help="Verdicts that make the exit status 1: comma list of nan, exploding, vanishing, "
    "static, slow, overflow; or any; or none.",
)
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=DEFAULT_TOP,
    show_default=True,
    metavar="N",
    help="List at most N layers with findings per run (table; markdown: findings).",
)
@click.option(
    "--all", "show_all", is_flag=True, help="List every parameter on its own row, healthy ones too."
)
@explain_option
@clip_option
@width_option
@click.option("--layer", metavar="GLOB", help="Only parameters whose name or tag matches GLOB.")
@click.option("--run", "run_glob", metavar="GLOB", help="Only runs whose path matches GLOB.")
@click.option(
    "--sweep/--no-sweep",
    default=None,
    help="Show the sweep view above the runs (default: for 3+ runs with hyperparameters, "
    "or 12+ runs).",
)
@steps_option
@config_option
@pattern_options
@jobs_options
@storage_option
@debug_option
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
    config_path: str | None,
    grad_pattern: str | None,
    weight_pattern: str | None,
    jobs: int | None,
    scheduler: str | None,
    no_progress: bool,
    storage_options: tuple[str, ...],
) -> ExitStatus:
    """Judge every parameter of the runs under PATH... (event files or directories).

    Verdicts: nan, exploding, vanishing, static, slow, overflow, ok; worst first, with the
    numbers behind each.
    """
    from gradcheck.events.steps import StepWindow
    from gradcheck.pipeline import analyze as run_analysis

    env = _env(ctx, width)
    config, rules = _settings(config_path, grad_pattern, weight_pattern)
    failing = parse_fail_on(fail_on or config.fail_on or DEFAULT_FAIL_ON)
    window = StepWindow.parse(steps) if steps is not None else None
    storage = _storage_options(storage_options)  # a bad option before any cluster starts
    with _workers(jobs, scheduler) as workers, _progress(env, enabled=not no_progress) as progress:
        report = run_analysis(
            list(paths),
            config=config,
            rules=rules,
            layer_glob=layer,
            run_glob=run_glob,
            steps=window,
            progress=progress,
            jobs=jobs,
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
        _emit(_report_chunks(report, report_format, options), path)
    _emit(_report_chunks(report, format_name, stdout_options), output)
    if summary is not None:
        _append_step_summary(report, summary, options)
    written = [(format_name, output)] if output is not None else []
    _note_warnings(report, [format_name, *(name for name, _ in reports)], written + reports)
    if written or reports:
        _note_failing_runs(report, failing)
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


@cli.command(epilog=INSPECT_EXIT_STATUS_HELP)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...", shell_complete=complete_paths)
@format_options(INSPECT_FORMAT_CHOICES, "listing")
@click.option("--grad-pattern", metavar="RE", help="Regex for gradient tags, group (?P<name>).")
@click.option("--weight-pattern", metavar="RE", help="Regex for weight tags, group (?P<name>).")
@storage_option
@debug_option
@click.pass_context
def inspect(
    ctx: click.Context,
    paths: tuple[str, ...],
    format_name: str,
    output: str | None,
    grad_pattern: str | None,
    weight_pattern: str | None,
    storage_options: tuple[str, ...],
) -> ExitStatus:
    """List the runs under PATH..., their files, tags and any damage (no verdicts)."""
    from gradcheck.inspect import inspect_paths
    from gradcheck.report.inspect_view import format_inspect
    from gradcheck.tags import TagRules

    env = _env(ctx)
    rules = TagRules.from_patterns(grad_pattern, weight_pattern)
    listing = inspect_paths(list(paths), rules, _storage_options(storage_options))
    _emit(format_inspect(listing, format_name, env if output is None else Env()), output)
    return ExitStatus.OK


@cli.command(epilog=COMPARE_EXIT_STATUS_HELP)
@click.argument("run_a", metavar="RUN_A", shell_complete=complete_paths)
@click.argument("run_b", metavar="RUN_B", shell_complete=complete_paths)
@format_options(COMPARE_FORMAT_CHOICES, "comparison")
@steps_option
@click.option(
    "--layer", metavar="GLOB", help="Only parameters whose name (in A or B) matches GLOB."
)
@width_option
@click.option(
    "--fail-on-divergence",
    is_flag=True,
    help="Exit 1 when a parameter diverges (a CI check that a training loop still matches"
    " its reference).",
)
@config_option
@pattern_options
@jobs_options
@storage_option
@debug_option
@click.pass_context
def compare(
    ctx: click.Context,
    run_a: str,
    run_b: str,
    format_name: str,
    output: str | None,
    steps: str | None,
    layer: str | None,
    width: int | None,
    fail_on_divergence: bool,
    config_path: str | None,
    grad_pattern: str | None,
    weight_pattern: str | None,
    jobs: int | None,
    scheduler: str | None,
    no_progress: bool,
    storage_options: tuple[str, ...],
) -> ExitStatus:
    """Compare run B with run A, parameter by parameter (ratios B over A).

    For "model.fit() trains, my hand-written step explodes": parameters matched by name
    (Keras model scopes and layer numbering normalised), steps aligned on those both logged;
    gradient-norm and update ratios, weights that move in one run only, each run's verdict,
    and the likely cause in one sentence. Most different first.
    """
    from gradcheck.compare.runs import compare_runs
    from gradcheck.events.steps import StepWindow
    from gradcheck.pipeline import load_runs

    env = _env(ctx, width)
    config, rules = _settings(config_path, grad_pattern, weight_pattern)
    window = StepWindow.parse(steps) if steps is not None else None
    storage = _storage_options(storage_options)  # a bad option before any cluster starts
    with _workers(jobs, scheduler) as workers, _progress(env, enabled=not no_progress) as progress:
        run_a_data, run_b_data = load_runs(
            [run_a, run_b],
            config=config,
            rules=rules,
            steps=window,
            progress=progress,
            jobs=jobs,
            workers=workers,
            storage_options=storage,
        )
    comparison = compare_runs(run_a_data, run_b_data, config=config, rules=rules, layer_glob=layer)
    file_env = Env() if width is None else Env(width=width)
    options = FormatOptions(env=env if output is None else file_env)
    _emit(_format_comparison(comparison, format_name, options), output)
    if output is not None:
        say(f"wrote {format_name} comparison to {output}")
    diverged = any(parameter.diverges for parameter in comparison.parameters)
    return ExitStatus.FINDINGS if fail_on_divergence and diverged else ExitStatus.OK


EXPORT_EXIT_STATUS_HELP = """\b
Exit status:
  0  exported (damage in the files is said on stderr, not an error)
  2  usage, input or output error (bad option, missing path, no logs,
     a FILE ending that names no format, parquet without pyarrow or
     to a terminal, FILE not writable)
  3  internal error (a bug: rerun with --debug and report it)
  130  interrupted (Ctrl-C, SIGINT): FILE is left as it was
  143  terminated (SIGTERM)"""


@cli.command(epilog=EXPORT_EXIT_STATUS_HELP)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...", shell_complete=complete_paths)
@click.option(
    "--output",
    "-o",
    metavar="FILE",
    shell_complete=complete_paths,
    help="Write the table to FILE, its format by its ending (.parquet, .csv, .jsonl);"
    " - or none: stdout.",
)
@click.option(
    "--format",
    "format_name",
    type=click.Choice(EXPORT_FORMAT_CHOICES),
    metavar="FORMAT",
    help="parquet, csv or jsonl, whatever FILE's ending (default: by FILE's ending;"
    " jsonl on stdout).",
)
@storage_option
@debug_option
@click.pass_context
def export(
    ctx: click.Context,
    paths: tuple[str, ...],
    output: str | None,
    format_name: str | None,
    storage_options: tuple[str, ...],
) -> ExitStatus:
    """Write every scalar and histogram under PATH... as one long table.

    One row per value, of every run (event files, HF Trainer, Lightning CSV, MLflow, W&B):
    run, tag, step, wall time, a scalar's value, a histogram's statistics and its buckets
    (limits, counts), under tbparse's column names. Nothing is thinned; memory holds one
    chunk of rows at a time.
    """
    from gradcheck.export import BINARY, format_of

    env = _env(ctx)
    to_stdout = output in (None, "-")
    if format_name is None:
        format_name = "jsonl" if to_stdout else format_of(str(output))
    if format_name is None:
        raise click.UsageError(
            f"cannot tell the format of {output!r} by its ending: name it .parquet, .csv or"
            " .jsonl, or give --format"
        )
    if to_stdout and format_name in BINARY and env.stdout_isatty:
        raise click.UsageError(
            f"{format_name} is binary: write it to a file (-o FILE.{format_name}) or a pipe"
        )
    storage = _storage_options(storage_options)
    if to_stdout:
        summary = _export_to_stdout(list(paths), format_name, storage, env)
    else:
        summary = _export_to_file(list(paths), str(output), format_name, storage)
    if summary is None:  # the reader of stdout went away (`| head`)
        return ExitStatus.OK
    warnings = summary.warnings
    for warning in warnings[:DAMAGE_SAID]:
        say(f"warning: {warning}")
    if len(warnings) > DAMAGE_SAID:
        say(f"warning: and {len(warnings) - DAMAGE_SAID} more")
    if not summary.rows:
        say(f"warning: no scalar or histogram in {plural_runs(summary.runs)}: the table is empty")
    if not to_stdout:
        say(
            f"wrote {summary.rows:,} rows ({summary.scalars:,} scalars, {summary.histograms:,}"
            f" histograms) of {plural_runs(summary.runs)} to {output}"
        )
    return ExitStatus.OK


def plural_runs(count: int) -> str:
    return f"{count:,} run" + ("" if count == 1 else "s")


def _export_to_stdout(
    paths: list[str], format_name: str, storage: dict[str, object] | None, env: Env
) -> ExportSummary | None:
    """The export on stdout (None: its reader went away); a write error is status 2."""
    from gradcheck.export import export

    stream = sys.stdout.buffer
    try:
        return export(
            paths, stream, format_name, storage_options=storage, terminal=env.stdout_isatty
        )
    except BrokenPipeError:
        return None
    except OSError as error:  # e.g. a full disk: not a bug, and not a traceback
        raise InputError(f"cannot write the table: {error.strerror or error}") from None


def _export_to_file(
    paths: list[str], output: str, format_name: str, storage: dict[str, object] | None
) -> ExportSummary:
    """The export into ``output``, whole or not at all (an error leaves it as it was)."""
    from gradcheck.export import export
    from gradcheck.files import replacing

    try:
        with replacing(output) as stream:
            return export(paths, stream, format_name, storage_options=storage)
    except OSError as error:
        raise InputError(f"cannot write {output}: {error.strerror or error}") from None


WATCH_EXIT_STATUS_HELP = """\b
Exit status:
  0  --until-idle seconds passed without new data (the training ended)
     and no finding in --fail-on
  1  a finding in --fail-on appeared (printed on stderr)
  2  usage, input or output error (bad option, nothing readable at the end)
  3  internal error (a bug: rerun with --debug and report it)
  4  nothing to judge at the end: no run logs weights or gradients
  130  interrupted (Ctrl-C, SIGINT): the last report is printed
  143  terminated (SIGTERM)"""


@cli.command(epilog=WATCH_EXIT_STATUS_HELP)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...", shell_complete=complete_paths)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between two looks at the event files.",
)
@click.option(
    "--fail-on",
    show_default=DEFAULT_FAIL_ON,
    metavar="LIST",
    help="Exit 1 as soon as one of these verdicts appears (as analyze's --fail-on).",
)
@click.option(
    "--until-idle",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Exit once SECONDS pass without new data (default: until a finding or Ctrl-C).",
)
@click.option(
    "--format",
    "format_name",
    type=click.Choice(("table", "json")),
    default="table",
    show_default=True,
    metavar="FORMAT",
    help="table: a live view on a terminal; json: one JSON line per update.",
)
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=DEFAULT_TOP,
    show_default=True,
    metavar="N",
    help="List at most N layers with findings per run.",
)
@explain_option
@clip_option
@width_option
@click.option("--layer", metavar="GLOB", help="Only parameters whose name or tag matches GLOB.")
@click.option("--run", "run_glob", metavar="GLOB", help="Only runs whose path matches GLOB.")
@steps_option
@config_option
@pattern_options
@storage_option
@debug_option
@click.pass_context
def watch(
    ctx: click.Context,
    paths: tuple[str, ...],
    interval: float,
    fail_on: str | None,
    until_idle: float | None,
    format_name: str,
    top: int,
    explain: bool,
    clip: bool,
    width: int | None,
    layer: str | None,
    run_glob: str | None,
    steps: str | None,
    config_path: str | None,
    grad_pattern: str | None,
    weight_pattern: str | None,
    storage_options: tuple[str, ...],
) -> ExitStatus:
    """Follow the event files under PATH... while a training writes them.

    Reads only the bytes appended since the last look (new files and runs too) and judges
    the log so far as analyze would: a live table on a terminal, JSON lines otherwise.
    """
    from gradcheck.events.steps import StepWindow
    from gradcheck.watch import Watcher

    env = _env(ctx, width)
    config, rules = _settings(config_path, grad_pattern, weight_pattern)
    failing = parse_fail_on(fail_on or config.fail_on or DEFAULT_FAIL_ON)
    window = StepWindow.parse(steps) if steps is not None else None
    from gradcheck.events.storage import parse_storage_options

    storage = parse_storage_options(storage_options)
    watcher = Watcher(list(paths), config, rules, layer, run_glob, window, failing, storage=storage)
    options = FormatOptions(top=top, fail_on=failing, explain=explain, clip=clip)
    view = _WatchView(env, format_name, " ".join(paths), options)
    return view.run(watcher, interval, until_idle)


STATUS_EVERY = 60.0
"""Seconds between two status lines on stderr without a terminal, when nothing changed."""


class _WatchView:
    """The watch loop's output: a rich live view (table on a terminal), a status line per
    update on stderr (table without a terminal, the report printed at the end), or JSON lines."""

    def __init__(self, env: Env, format_name: str, paths: str, options: FormatOptions) -> None:
        self.env = env
        self.json = format_name == "json"
        self.live_view = not self.json and env.stdout_isatty
        self.paths = paths
        self.options = replace(options, env=env)
        self._live_display: Any = None  # rich's Live while the live view is shown
        self._status_at = 0.0  # when the last status line was written (watcher seconds)

    def run(self, watcher: Watcher, interval: float, until_idle: float | None) -> ExitStatus:
        import time

        update = None
        with self._live() as show:
            try:
                while True:
                    started = time.monotonic()
                    update = watcher.update()
                    if update.failures:
                        self._finish(update, "finding")
                        return self._failed(update)
                    show(update)
                    if until_idle is not None and update.seconds_since_data >= until_idle:
                        return self._idle(watcher.update(final=True))
                    time.sleep(max(interval - (time.monotonic() - started), 0.0))
            except (KeyboardInterrupt, Terminated):
                if update is not None:
                    self._finish(update, "interrupted")
                raise
            except _ReaderGone:  # nobody reads the updates any more: not an error
                return ExitStatus.OK

    def _idle(self, update: Update) -> ExitStatus:
        self._finish(update, "idle")
        if update.report is None:
            raise InputError(f"nothing to judge under {self.paths}: {update.waiting}")
        if update.failures:
            return self._failed(update)
        silence = nothing_to_judge(update.report)
        if silence is not None:
            say(f"nothing to judge: {silence}")
            return ExitStatus.NOTHING_TO_JUDGE
        return ExitStatus.OK

    def _failed(self, update: Update) -> ExitStatus:
        """On stderr: the worst finding in --fail-on, with its evidence, and each failing run."""
        from gradcheck.report.watch_view import failure_line

        say(f"finding: {failure_line(update.failures[0])}")
        if update.report is not None:
            _note_failing_runs(update.report, self.options.fail_on)
        return ExitStatus.FINDINGS

    @contextmanager
    def _live(self) -> Iterator[Callable[[Update], None]]:
        """A function showing an update: redrawing the live view, or writing its line."""
        if not self.live_view:
            yield self._line
            return
        from rich.console import Console
        from rich.live import Live

        console = Console(file=sys.stdout, no_color=self.env.no_color, markup=False)
        with Live(console=console, auto_refresh=False, transient=True) as live:
            self._live_display = live
            yield lambda update: live.update(self._renderable(update), refresh=True)
        self._live_display = None

    def _renderable(self, update: Update) -> Any:
        from rich.console import Group
        from rich.text import Text

        from gradcheck.report.watch_view import status_line

        line = Text(status_line(update, self.paths), style="bold")
        if update.report is None:
            return line
        # cropped at the terminal's height: the worst run first
        worst = sorted(
            update.report.runs,
            key=lambda run: -max((layer.severity for layer in run.layers), default=0.0),
        )
        shown = replace(update.report, runs=tuple(worst))
        table = Text.from_ansi(_format_report(shown, "table", self.options))
        return Group(line, table)

    def _line(self, update: Update) -> None:
        """Without a live view: a JSON line per update that read new data; or a status line
        on stderr when a verdict changed, else every ``STATUS_EVERY`` seconds of new data (a
        CI log stays readable), and one line per change."""
        from gradcheck.report.watch_view import change_line, status_line, update_line

        for warning in update.warnings:
            say(f"warning: {warning}")
        if not (update.new_bytes or update.changes or update.number == 1):
            return
        if self.json:
            _emit_flushed(update_line(update))
            return
        due = update.elapsed - self._status_at >= STATUS_EVERY
        if update.changes or due or update.number == 1:
            say(status_line(update, self.paths))
            self._status_at = update.elapsed
        for change in update.changes:
            say(f"  {change_line(change)}")

    def _finish(self, update: Update, reason: str) -> None:
        """The last update: the report printed (the live view goes away), or the last line."""
        from gradcheck.report.watch_view import update_line

        for warning in update.warnings:
            say(f"warning: {warning}")
        if self.json:
            _emit_flushed(update_line(update, reason))
            return
        if self._live_display is not None:
            self._live_display.stop()
        if update.report is not None:
            _emit_flushed(_format_report(update.report, "table", self.options))


class _ReaderGone(Exception):
    """stdout's reader went away (``gradcheck watch --format json | head -1``): stop."""


def _emit_flushed(text: str) -> None:
    """:func:`_emit` to stdout, flushed (a reader of the pipe sees each line at once)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise _ReaderGone from None
    except OSError as error:  # e.g. a full disk: not a bug, and not a traceback
        raise InputError(f"cannot write the report: {error.strerror or error}") from None


def _format_comparison(comparison: Comparison, format_name: str, options: FormatOptions) -> str:
    from gradcheck.report import comparison_formatter_for

    return comparison_formatter_for(format_name, options).format(comparison)


def _env(ctx: click.Context, width: int | None = None) -> Env:
    """The injected environment (tests pass ``obj=Env(...)``), else the real terminal's;
    ``--width`` wins over either."""
    root = ctx.find_root()
    if isinstance(root.obj, Env):
        return root.obj if width is None else replace(root.obj, width=width)
    return Env.from_system(sys.stdout, sys.stderr, width=width)


def _format_report(report: Report, format_name: str, options: FormatOptions) -> str:
    return "".join(_report_chunks(report, format_name, options))


def _report_chunks(report: Report, format_name: str, options: FormatOptions) -> Iterator[str]:
    """The report's document in the parts its formatter makes (``Formatter.chunks``)."""
    from gradcheck.report import formatter_for

    return formatter_for(format_name, options).chunks(report)


def _emit(text: str | Iterable[str], output: str | None) -> None:
    """The document (whole, or in parts as they are made) to stdout, or to ``output`` (an
    unwritable file or stdout: status 2).

    Written as the formatter made it: colour codes only when ``Env.color`` asked for them,
    and click must not strip escape sequences from the data of a CSV cell (the human formats
    have shown them escaped already)."""
    parts = (text,) if isinstance(text, str) else text
    if output is None:
        try:
            for part in parts:
                click.echo(part, nl=False, color=True)
        except BrokenPipeError:  # the reader went away (`| head`): the rest is not wanted
            pass
        except OSError as error:  # e.g. a full disk: not a bug, and not a traceback
            raise InputError(f"cannot write the report: {error.strerror or error}") from None
        return
    try:
        write_whole(output, parts)
    except OSError as error:
        raise InputError(f"cannot write {output}: {error.strerror or error}") from None


def write_whole(path: str, parts: Iterable[str]) -> None:
    """The document's ``parts``, one after the other, into ``path`` (UTF-8) whole or not at
    all (:func:`gradcheck.files.replacing`): a full disk, an interruption or a part that could
    not be made leaves the file as it was, never truncated."""
    from gradcheck.files import replacing

    with replacing(path) as binary:
        stream = io.TextIOWrapper(binary, encoding="utf-8", newline="")
        stream.writelines(parts)
        stream.flush()
        stream.detach()  # the binary stream is replacing's to close


DAMAGE_SAID = 10
"""Warnings about damaged or unreadable files said on stderr at most (the report has all)."""


def _note_warnings(report: Report, format_names: list[str], written: list[tuple[str, str]]) -> None:
    """On stderr: damaged or unreadable files whatever the format (a CI log shows them), every
    warning when a CSV document, which has no room for them, is made; where reports went."""
    if "csv" in format_names:
        warnings = [*report.warnings, *(f"{r.run}: {w}" for r in report.runs for w in r.warnings)]
    else:
        warnings = [f"{run.run}: {line}" for run in report.runs for line in run.damage]
    for warning in warnings[:DAMAGE_SAID]:
        say(f"warning: {warning}")
    if len(warnings) > DAMAGE_SAID:
        say(f"warning: and {len(warnings) - DAMAGE_SAID} more (the report lists them)")
    for format_name, path in written:
        say(f"wrote {format_name} report to {path}")


def _note_failing_runs(report: Report, fail_on: frozenset[Verdict]) -> None:
    """On stderr, one line per run failing ``--fail-on`` (so a CI log says what failed when
    the report itself went to a file): ``gradcheck: runs/a: 2 parameters failing --fail-on
    (1 nan · 1 exploding): fc1.weight, fc2.weight``."""
    from gradcheck.report.view import counts_phrase, plural

    for run in failing_runs(report, fail_on):
        bad = [layer for layer in run.layers if fails(layer, fail_on)]
        counts: dict[str, int] = {v: sum(layer.verdict == v for layer in bad) for v in FINDINGS}
        names = ", ".join(layer.name for layer in bad[:3]) + (", ..." if len(bad) > 3 else "")
        line = f"{run.run}: {plural(len(bad), 'parameter')} failing --fail-on"
        line += f" ({counts_phrase(counts)}): {names}"
        say(line)


@contextmanager
def _workers(jobs: int | None, scheduler: str | None) -> Iterator[Workers | None]:
    """The Dask cluster's workers with ``--scheduler`` (None: the command's own pool)."""
    if scheduler is None:
        yield None
        return
    if jobs is not None:
        raise click.UsageError("--jobs and --scheduler: give one (the cluster has its workers)")
    from gradcheck.engine.cluster import connect

    with connect(scheduler) as workers:
        yield workers


PROGRESS_REDRAW_SECONDS = 0.1
"""The progress bar is redrawn at most this often (rich's own default is 10 times a second)."""


@contextmanager
def _progress(env: Env, *, enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A transient progress bar on stderr, only when stderr is a terminal."""
    if not (enabled and env.stderr_isatty):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    console = Console(file=sys.stderr, no_color=env.no_color)
    columns = ("reading", BarColumn(), DownloadColumn(), TimeRemainingColumn())
    # Redrawn by the updates, not by rich's refresh thread: worker processes are forked, and
    # a fork while another thread runs can copy a lock it holds.
    with Progress(*columns, console=console, transient=True, auto_refresh=False) as bar:
        task = bar.add_task("reading", total=None)
        drawn = 0.0

        def update(done: int, total: int) -> None:
            nonlocal drawn
            bar.update(task, completed=done, total=total)
            if done >= total or time.monotonic() - drawn >= PROGRESS_REDRAW_SECONDS:
                bar.refresh()
                drawn = time.monotonic()

        yield update


GC_YOUNG_LIMIT = 100_000
"""Container allocations between two collections of the youngest generation (CPython: 700)."""


def collect_less_often() -> None:
    """The cyclic collector's youngest generation collected every ``GC_YOUNG_LIMIT`` container
    allocations, the older ones as they were (the entry point's setting, not the module's).

    At CPython's 700, with every tenth of those collections walking the middle generation, the
    collector took about half of a 1,000-run sweep's report: it builds millions of dicts,
    lists and records, none of them cyclic. The few cycles gradcheck makes (tracebacks,
    frames) are collected all the same, less often."""
    gc.set_threshold(GC_YOUNG_LIMIT, *gc.get_threshold()[1:])


def main() -> None:
    """Entry point of the ``gradcheck`` script and ``python -m gradcheck``.

    Once the command is done (its report written, its files closed, any child process joined)
    and stdout and stderr are flushed, the process ends with ``os._exit``: the interpreter's
    teardown (freeing every module and array one by one) took 0.02-0.03 s, a tenth of a run on
    a 40 MB log, for nothing a user sees.
    """
    # numpy is imported later, by the command: its OpenBLAS would start one thread per CPU,
    # which spin ~0.12 s of CPU at start-up (measured on 2 CPUs) for matrix products gradcheck
    # never makes; a choice the user made in the environment stands. (Set here, not at import:
    # a program that imports this module keeps its environment.)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    collect_less_often()
    try:
        cli.main(prog_name="gradcheck")
    except SystemExit as done:
        status = _status_of(done)
    else:  # pragma: no cover - GradcheckGroup.main always exits
        status = ExitStatus.OK
    os._exit(_flushed(status))


def _status_of(done: SystemExit) -> int:
    """The exit status ``sys.exit`` would give; a text message is printed, as Python does."""
    if done.code is None or isinstance(done.code, int):
        return done.code or 0
    with suppress(OSError):
        print(done.code, file=sys.stderr)
    return 1


def _flushed(status: int) -> int:
    """Flush stdout and stderr; the exit status then. A reader that went away (``| head``) is
    not an error; a report that cannot be written (a full disk) is an output error (2)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            pass
        except OSError as error:
            if stream is sys.stdout:
                with suppress(OSError):
                    say(f"error: cannot write the report: {error.strerror or error}")
                    sys.stderr.flush()
                status = ExitStatus.INPUT_ERROR
    return status
