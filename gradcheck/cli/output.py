"""What a command writes: the document to stdout or a file (whole or not at all), notes on
stderr, the progress bar; the terminal it writes to (:func:`env_of`, injectable by tests).
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

import click

from gradcheck.cli.outcome import say
from gradcheck.errors import InputError
from gradcheck.report.interface import Env, FormatOptions
from gradcheck.verdicts.gate import failing_runs, fails, findings

if TYPE_CHECKING:
    from gradcheck.model import Comparison, Report, Verdict


def format_comparison(comparison: Comparison, format_name: str, options: FormatOptions) -> str:
    from gradcheck.report import comparison_formatter_for

    return comparison_formatter_for(format_name, options).format(comparison)


def env_of(ctx: click.Context, width: int | None = None) -> Env:
    """The injected environment (tests pass ``obj=Env(...)``), else the real terminal's;
    ``--width`` wins over either."""
    root = ctx.find_root()
    if isinstance(root.obj, Env):
        return root.obj if width is None else replace(root.obj, width=width)
    return Env.from_system(sys.stdout, sys.stderr, width=width)


def format_report(report: Report, format_name: str, options: FormatOptions) -> str:
    return "".join(report_chunks(report, format_name, options))


def report_chunks(report: Report, format_name: str, options: FormatOptions) -> Iterator[str]:
    """The report's document in the parts its formatter makes (``Formatter.chunks``)."""
    from gradcheck.report import formatter_for

    return formatter_for(format_name, options).chunks(report)


def emit(text: str | Iterable[str], output: str | None) -> None:
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
    all (:func:`gradcheck.cli.files.replacing`): a full disk, an interruption or a part that could
    not be made leaves the file as it was, never truncated."""
    from gradcheck.cli.files import replacing

    with replacing(path) as binary:
        stream = io.TextIOWrapper(binary, encoding="utf-8", newline="")
        stream.writelines(parts)
        stream.flush()
        stream.detach()  # the binary stream is replacing's to close


DAMAGE_SAID = 10
"""Warnings about damaged or unreadable files said on stderr at most (the report has all)."""


def note_warnings(report: Report, format_names: list[str], written: list[tuple[str, str]]) -> None:
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


def note_failing_runs(report: Report, fail_on: frozenset[Verdict]) -> None:
    """On stderr, one line per run failing ``--fail-on`` (so a CI log says what failed when
    the report itself went to a file): ``gradcheck: runs/a: 2 parameters failing --fail-on
    (1 nan · 1 exploding): fc1.weight, fc2.weight``."""
    from gradcheck.report.view import counts_phrase, plural

    for run in failing_runs(report, fail_on):
        bad = [layer for layer in run.layers if fails(layer, fail_on)]
        counts: dict[str, int] = {v: sum(layer.verdict == v for layer in bad) for v in findings()}
        names = ", ".join(layer.name for layer in bad[:3]) + (", ..." if len(bad) > 3 else "")
        line = f"{run.run}: {plural(len(bad), 'parameter')} failing --fail-on"
        line += f" ({counts_phrase(counts)}): {names}"
        say(line)


PROGRESS_REDRAW_SECONDS = 0.1
"""The progress bar is redrawn at most this often (rich's own default is 10 times a second)."""


@contextmanager
def progress_bar(env: Env, *, enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
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
