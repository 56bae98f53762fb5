"""The default format: a terminal table per run, worst parameter first (rich).

Per run: a header (path, files, step range, writers, verdict counts), warnings, the global
gradient norm, then one row per finding (verdict, parameter, first bad step, key numbers,
sparkline), the evidence and hint of each finding, and healthy parameters folded into one line.
Fits ``Env.width`` columns (80 when not a terminal); colour only when ``Env.color``. Every
string shown is passed through :func:`gradcheck.report.escape.terminal` first.
"""

from __future__ import annotations

import io
import re
from dataclasses import replace

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from gradcheck.model import LayerResult, Report, RunReport, Sweep
from gradcheck.report.escape import each_string, terminal
from gradcheck.report.interface import Env, Formatter
from gradcheck.report.numbers import format_steps
from gradcheck.report.sparkline import sparkline
from gradcheck.report.sweep_view import (
    hparams_line,
    left_out_line,
    rank_header,
    ranking_rows,
    relation_lines,
    sweep_headline,
)
from gradcheck.report.view import (
    KEY_NUMBERS,
    LayerSelection,
    Note,
    clipping_lines,
    notes_for,
    plural,
    run_verdict_line,
    select_layers,
)

VERDICT_STYLES = {
    "nan": "bold red",
    "exploding": "red",
    "vanishing": "yellow",
    "static": "magenta",
    "slow": "blue",
    "overflow": "cyan",
    "ok": "green",
}
VERDICT_WIDTH = 9  # "exploding", "vanishing"
MIN_STEP_WIDTH = 5  # "first"
NUMBER_WIDTH = 6  # "1.2e-7"
MIN_TREND, MAX_TREND = 8, 24
MIN_NAME = 10
ANSI_CODE = re.compile(r"\x1b\[[0-9;]*m")
TRAILING = re.compile(r"(?:\s|\x1b\[[0-9;]*m)+$")  # spaces and ANSI codes ending a line
MAX_WARNINGS = 5  # per run; the rest are counted (JSON lists them all)


class TableFormatter(Formatter):
    """Renders a report as aligned text for a terminal (ANSI colours only on a colour TTY)."""

    def format(self, report: Report) -> str:
        console = text_console(self.options.env)
        if report.sweep is not None:
            _print_sweep(console, each_string(report.sweep, terminal))  # names from the logs
        for position, run in enumerate(report.runs):
            if position or report.sweep is not None:
                console.print()
            self._print_run(console, run)
        for warning in each_string(report.warnings, terminal):  # they quote names
            console.print(Text(f"warning: {warning}", style="yellow"))
        return console_text(console)

    def _print_run(self, console: Console, run: RunReport) -> None:
        selection = select_layers(run, self.options.top, self.options.show_all)
        verdict_line = terminal(run_verdict_line(run))  # counts all parameters
        # Every string shown comes from the logs or quotes them: the run's own and the listed
        # parameters' (not those only counted: thousands of healthy ones, 20 µs each)
        run, listed = each_string((replace(run, layers=()), selection.listed), terminal)
        console.print(Text(run.run, style="bold"))
        for line in _run_summary(run, verdict_line):
            console.print(Padding(Text(line), (0, 0, 0, 2)))
        warnings = _warning_lines(run)
        if warnings:
            console.print(Padding(hanging("!", warnings, "yellow"), (0, 0, 0, 2)))
        if run.clipping is not None:
            for line in clipping_lines(run.clipping):
                console.print(Padding(Text(line), (0, 0, 0, 2)))
        if listed:
            console.print(self._layer_table(listed))
        for line in _tail_lines(selection):
            console.print(Padding(Text(line, style="dim"), (0, 0, 0, 2)))
        notes, left_out = notes_for(listed, every=self.options.show_all)
        for note in notes:
            _print_note(console, note)
        if left_out:
            more = f"evidence for {plural(left_out, 'more finding')}: --all or --format json"
            console.print(Padding(Text(more, style="dim"), (0, 0, 0, 2)))

    def _layer_table(self, layers: tuple[LayerResult, ...]) -> Table:
        """One row per parameter, column widths fixed so the table fits ``Env.width``."""
        steps = [str(x.first_bad_step) for x in layers if x.first_bad_step is not None]
        step_width = max([MIN_STEP_WIDTH, *map(len, steps)])
        name_width, trend_width = _flexible_widths(self.options.env.width, step_width, layers)
        table = Table(box=None, pad_edge=False, padding=(0, 0, 0, 1), show_edge=False)
        table.add_column("verdict", width=VERDICT_WIDTH, no_wrap=True)
        table.add_column("parameter", width=name_width, no_wrap=True)
        table.add_column("first\nbad", width=step_width, justify="right", no_wrap=True)
        for number in KEY_NUMBERS:
            table.add_column(number.label, width=NUMBER_WIDTH, justify="right", no_wrap=True)
        table.add_column("trend", width=trend_width, no_wrap=True)  # of LayerResult.trend_of
        for layer in layers:
            style = VERDICT_STYLES[layer.verdict]
            table.add_row(
                Text(layer.verdict, style=style),
                Text(shorten(layer.name, name_width)),
                "" if layer.first_bad_step is None else str(layer.first_bad_step),
                *(number.of(layer) for number in KEY_NUMBERS),
                Text(sparkline(layer.trend, trend_width), style=style),
            )
        return table


def _print_sweep(console: Console, sweep: Sweep) -> None:
    """The sweep's headline, its hyperparameters and their relations with the verdicts, and
    the runs ranked worst first (at most ``MAX_RANKED``)."""
    console.print(Text(sweep_headline(sweep), style="bold"))
    for line in [hparams_line(sweep), *relation_lines(sweep)]:
        console.print(Padding(Text(line), (0, 0, 0, 2)))
    rows, left_out = ranking_rows(sweep)
    table = Table(box=None, pad_edge=False, padding=(0, 0, 0, 1), show_edge=False)
    for label in rank_header(sweep):
        numeric = label in ("#", "first bad")
        table.add_column(label, justify="right" if numeric else "left", overflow="fold")
    for row in rows:
        style = VERDICT_STYLES.get(row.verdict, "dim")
        cells = [Text(cell) for cell in row.cells(sweep)]
        cells[1].stylize(style)
        table.add_row(*cells)
    console.print(table)
    if left_out:
        console.print(Padding(Text(left_out_line(left_out), style="dim"), (0, 0, 0, 2)))


def text_console(env: Env) -> Console:
    """A rich console that renders into a string, ``env.width`` wide, coloured per ``env``."""
    return Console(
        file=io.StringIO(),
        width=env.width,
        force_terminal=env.color,
        no_color=not env.color,
        color_system="standard" if env.color else None,
        highlight=False,
        emoji=False,
        markup=False,
        legacy_windows=False,
    )


def console_text(console: Console) -> str:
    """What ``console`` (from :func:`text_console`) rendered, without trailing spaces."""
    text = console.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join(rstrip_styled(line) for line in text.splitlines()) + "\n"


def _run_summary(run: RunReport, verdict_line: str) -> list[str]:
    """``2 files · steps 0–199 · pytorch``, ``1 nan · 4 ok``, the kernels' update size."""
    parts = [plural(len(run.files), "file"), f"steps {format_steps(run.steps)}"]
    if run.writers:
        parts.append(", ".join(run.writers))
    updates = [run.updates] if run.updates else []
    return [" · ".join(parts), verdict_line, *updates, *run.notes]


def _warning_lines(run: RunReport) -> list[str]:
    """The first warnings of a run, then how many more there are."""
    lines = list(run.warnings[:MAX_WARNINGS])
    extra = len(run.warnings) - MAX_WARNINGS
    if extra > 0:
        lines.append(f"… and {plural(extra, 'more warning')} (--format json lists all)")
    return lines


def hanging(mark: str, lines: list[str], style: str) -> Table:
    """``lines`` each after ``mark``, wrapped lines indented under the text, not the mark."""
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(width=len(mark), no_wrap=True)
    grid.add_column()
    for line in lines:
        grid.add_row(Text(mark, style=style), Text(line, style=style))
    return grid


def _tail_lines(selection: LayerSelection) -> list[str]:
    """What is not listed row by row: findings beyond --top, healthy parameters."""
    lines = []
    if selection.hidden:
        lines.append(f"… {plural(len(selection.hidden), 'more finding')} (--top N or --all)")
    if selection.folded:
        lines.append(f"ok: {plural(len(selection.folded), 'healthy parameter')} (--all lists them)")
    return lines


def _print_note(console: Console, note: Note) -> None:
    """The evidence sentence of one finding, and its hint, wrapped under the table."""
    layer = note.layer
    evidence = Text.assemble(
        (layer.name, VERDICT_STYLES[layer.verdict]), ": ", layer.evidence or layer.verdict
    )
    console.print(Padding(evidence, (0, 0, 0, 2)))
    for excuse in note.excuses:
        console.print(Padding(Text(excuse, style="dim"), (0, 0, 0, 4)))
    if note.hint:
        console.print(Padding(Text(f"hint: {note.hint}", style="dim"), (0, 0, 0, 4)))


def _flexible_widths(
    width: int, step_width: int, layers: tuple[LayerResult, ...]
) -> tuple[int, int]:
    """Widths of the parameter and trend columns: names first, trend between 16 and 24."""
    columns = 4 + len(KEY_NUMBERS)
    fixed = VERDICT_WIDTH + step_width + NUMBER_WIDTH * len(KEY_NUMBERS) + (columns - 1)
    available = max(width - fixed, MIN_NAME + MIN_TREND)
    longest = max((len(layer.name) for layer in layers), default=MIN_NAME)
    trend = min(MAX_TREND, max(16, available - longest))
    trend = max(MIN_TREND, min(trend, available - MIN_NAME))
    name = min(available - trend, max(longest, MIN_NAME))
    return name, trend


def rstrip_styled(line: str) -> str:
    """``line`` without trailing spaces, even spaces inside a styled span (codes are kept)."""
    match = TRAILING.search(line)
    if match is None:
        return line
    return line[: match.start()] + "".join(ANSI_CODE.findall(match.group()))


def shorten(name: str, width: int) -> str:
    """``name`` cut to ``width`` characters, keeping more of its end than of its start.

    The end of a parameter path tells siblings apart (``…hidden_1/kernel``), its start tells
    which block it is in; both survive the cut.
    """
    if len(name) <= width:
        return name
    if width <= 1:
        return name[:width]
    head = (width - 1) // 3
    tail = width - 1 - head
    return f"{name[:head]}…{name[-tail:]}"
