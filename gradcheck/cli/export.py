"""``gradcheck export``: every scalar and histogram under the paths as one long table in a
file or on stdout (the core: :mod:`gradcheck.export`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from gradcheck.cli.options import (
    EXPORT_FORMAT_CHOICES,
    complete_paths,
    debug_option,
    storage_kwargs,
    storage_option,
)
from gradcheck.cli.outcome import say
from gradcheck.cli.output import DAMAGE_SAID, env_of
from gradcheck.cli.status import ExitStatus
from gradcheck.errors import InputError
from gradcheck.report.interface import Env

if TYPE_CHECKING:
    from gradcheck.export import ExportSummary

EXPORT_EXIT_STATUS_HELP = """\b
Exit status:
  0  exported (damage in the files is said on stderr, not an error)
  2  usage, input or output error (bad option, missing path, no logs,
     a FILE ending that names no format, parquet without pyarrow or
     to a terminal, FILE not writable)
  3  internal error (a bug: rerun with --debug and report it)
  130  interrupted (Ctrl-C, SIGINT): FILE is left as it was
  143  terminated (SIGTERM)"""


@click.command(epilog=EXPORT_EXIT_STATUS_HELP)
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

    env = env_of(ctx)
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
    storage = storage_kwargs(storage_options)
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
    from gradcheck.cli.files import replacing
    from gradcheck.export import export

    try:
        with replacing(output) as stream:
            return export(paths, stream, format_name, storage_options=storage)
    except OSError as error:
        raise InputError(f"cannot write {output}: {error.strerror or error}") from None
