"""``gradcheck inspect``: list the runs, their files, tags and damage (no verdicts)."""

from __future__ import annotations

import click

from gradcheck.cli.options import (
    INSPECT_FORMAT_CHOICES,
    complete_paths,
    debug_option,
    format_options,
    pattern_options,
    storage_kwargs,
    storage_option,
)
from gradcheck.cli.output import emit, env_of
from gradcheck.cli.status import ExitStatus
from gradcheck.report.interface import Env

INSPECT_EXIT_STATUS_HELP = """\b
Exit status:
  0  listed (damage in the files is listed, not an error)
  2  usage, input or output error (bad option, missing path, no event
     files, listing not writable)
  3  internal error (a bug: rerun with --debug and report it)"""


@click.command(epilog=INSPECT_EXIT_STATUS_HELP)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...", shell_complete=complete_paths)
@format_options(INSPECT_FORMAT_CHOICES, "listing")
@pattern_options
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

    env = env_of(ctx)
    rules = TagRules.from_patterns(grad_pattern, weight_pattern)
    listing = inspect_paths(list(paths), rules, storage_kwargs(storage_options))
    emit(format_inspect(listing, format_name, env if output is None else Env()), output)
    return ExitStatus.OK
