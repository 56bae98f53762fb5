"""``gradcheck watch``: follow the event files while a training writes them, judging the log
so far at every look: a live table on a terminal, status lines or JSON lines otherwise."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from gradcheck.cli.options import (
    Reading,
    complete_paths,
    fail_on_option,
    reading_options,
    steps_option,
    top_option,
    view_options,
)
from gradcheck.cli.outcome import Terminated, say
from gradcheck.cli.output import env_of, format_report, note_failing_runs
from gradcheck.cli.status import ExitStatus
from gradcheck.errors import InputError
from gradcheck.report.interface import Env, FormatOptions
from gradcheck.verdicts.gate import DEFAULT_FAIL_ON, nothing_to_judge, parse_fail_on

if TYPE_CHECKING:
    from gradcheck.watch import Update, Watcher

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


@click.command(epilog=WATCH_EXIT_STATUS_HELP)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...", shell_complete=complete_paths)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between two looks at the event files.",
)
@fail_on_option("Exit 1 as soon as one of these verdicts appears (as analyze's --fail-on).")
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
@top_option("List at most N layers with findings per run.")
@view_options
@steps_option
@reading_options(jobs=False)
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
    reading: Reading,
) -> ExitStatus:
    """Follow the event files under PATH... while a training writes them.

    Reads only the bytes appended since the last look (new files and runs too) and judges
    the log so far as analyze would: a live table on a terminal, JSON lines otherwise.
    """
    from gradcheck.events.steps import StepWindow
    from gradcheck.events.storage import parse_storage_options
    from gradcheck.watch import Watcher

    env = env_of(ctx, width)
    config, rules = reading.settings()
    failing = parse_fail_on(fail_on or config.fail_on or DEFAULT_FAIL_ON)
    window = StepWindow.parse(steps) if steps is not None else None
    storage = parse_storage_options(reading.storage_options)
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
            note_failing_runs(update.report, self.options.fail_on)
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
        table = Text.from_ansi(format_report(shown, "table", self.options))
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
            _emit_flushed(format_report(update.report, "table", self.options))


class _ReaderGone(Exception):
    """stdout's reader went away (``gradcheck watch --format json | head -1``): stop."""


def _emit_flushed(text: str) -> None:
    """The text to stdout, flushed (a reader of the pipe sees each line at once)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise _ReaderGone from None
    except OSError as error:  # e.g. a full disk: not a bug, and not a traceback
        raise InputError(f"cannot write the report: {error.strerror or error}") from None
