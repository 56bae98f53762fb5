"""The default format: per run a header line, then its findings as layer rows (rich).

Per run: the run's name, steps and files on one line; what was judged and the verdict counts
(a healthy run: "all healthy", and nothing more unless something the user should know is
missing, such as gradients that were not logged); warnings; the global gradient norm and the
clipping advice only where they apply (:func:`~gradcheck.report.view.clipping_applies`); one
row per layer with a finding (its parameters together, consecutive layers with the same verdict
folded, the prefix they share said once: :mod:`gradcheck.report.layers`), worst first; then a
line of cause and a line of fix per verdict kind (:mod:`gradcheck.report.advice`).
``--explain`` adds the evidence of each finding, the whole hints and the run's context;
``--all`` lists every parameter on its own row with its key numbers, and the evidence.
Fits ``Env.width`` columns; names too long for their column lose leading path components, or
wrap when that would make two of them read the same (:mod:`gradcheck.report.names`). Colour
only when ``Env.color``. Every string shown is passed through
:func:`gradcheck.report.escape.terminal` first.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import replace

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from gradcheck.model import LayerResult, Report, RunReport, Sweep
from gradcheck.report.advice import Advice
from gradcheck.report.escape import each_string, terminal
from gradcheck.report.interface import Env, Formatter
from gradcheck.report.layers import LayerRow, LayerView, layer_view
from gradcheck.report.names import distinct_shortened
from gradcheck.report.numbers import format_steps
from gradcheck.report.sparkline import sparkline
from gradcheck.report.view import (
    KEY_NUMBERS,
    Note,
    clipping_applies,
    clipping_lines,
    counts_phrase,
    judged_phrase,
    notes_for,
    plural,
    spike_lines,
    spikes_line,
    verdict_counts,
)
from gradcheck.verdicts.registry import ENTRIES, OK, VERDICTS

VERDICT_STYLES: dict[str, str] = {entry.name: entry.style for entry in ENTRIES}
VERDICT_WIDTH = max(len(verdict) for verdict in VERDICTS)  # exploding, vanishing: 9
MIN_STEP_WIDTH = 5  # "first"
NUMBER_WIDTH = 6  # "1.2e-7"
MIN_TREND, MAX_TREND = 8, 24
MAX_ROW_TREND = 16  # the layer view's trend column
MIN_NAME = 10
MIN_ALL_NAME = 20  # --all: the name column's width before key numbers are dropped
INDENT = 2
ANSI_CODE = re.compile(r"\x1b\[[0-9;]*m")
TRAILING = re.compile(r"(?:\s|\x1b\[[0-9;]*m)+$")  # spaces and ANSI codes ending a line
MAX_WARNINGS = 5  # per run with --explain or --all; the rest are counted (JSON lists them all)
DEFAULT_WARNINGS = 2  # per run by default
POINTER = "details: --explain (evidence), --all (every parameter)"


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
        findings = any(layer.verdict != OK for run in report.runs for layer in run.layers)
        if findings and not self._detailed:
            console.print(Text(POINTER, style="dim"))
        return console_text(console)

    @property
    def _detailed(self) -> bool:
        return self.options.explain or self.options.show_all

    def _print_run(self, console: Console, run: RunReport) -> None:
        view = layer_view(run)
        counts = verdict_counts(run)  # all parameters, before any is escaped
        shown_rows = view.rows if self.options.top is None else view.rows[: self.options.top]
        # Every string shown comes from the logs or quotes them: the run's own and the listed
        # parameters' (not those only counted: thousands of healthy ones)
        listed = run.layers if self.options.show_all else ()
        escaped_run, listed, rows, prefix = each_string(
            (replace(run, layers=()), listed, shown_rows, view.prefix), terminal
        )
        console.print(self._header(escaped_run))
        self._indented(console, [_judged_line(run, view, counts, prefix)])
        self._indented(console, list(escaped_run.notes))
        spikes = spikes_line(escaped_run)
        if spikes:
            self._indented(console, [spikes])
        if spikes and self._detailed:
            self._indented(console, spike_lines(escaped_run))
        if self._detailed and escaped_run.updates:
            self._indented(console, [escaped_run.updates])
        warnings = _warning_lines(escaped_run, MAX_WARNINGS if self._detailed else DEFAULT_WARNINGS)
        if warnings:
            console.print(Padding(hanging("!", warnings, "yellow"), (0, 0, 0, INDENT)))
        if self.options.show_all:
            if listed:
                table = self._parameter_table(listed, len(prefix))
                console.print(Padding(table, (0, 0, 0, INDENT)))
        elif rows:
            console.print(Padding(self._layer_table(rows), (0, 0, 0, INDENT)))
        hidden = len(view.rows) - len(shown_rows)
        if hidden and not self.options.show_all:
            more = f"… {plural(hidden, 'more layer')} with findings (--top N, --all)"
            self._indented(console, [more], style="dim")
        advised = rows if not self.options.show_all else each_string(view.rows, terminal)
        _print_advice(console, advised)
        clip = escaped_run.clipping
        # by default only with something to do: a suggestion or a word on the current clip
        wanted = clip is not None and (clip.advice or self._detailed or self.options.clip)
        if clip is not None and wanted and clipping_applies(run, self.options.clip):
            lines = clipping_lines(clip, self._detailed)
            # by default the advice alone when there is one: it names the clip and the value
            whole = self._detailed or self.options.clip or len(lines) == 1
            self._indented(console, lines if whole else lines[1:])
        if self._detailed:
            findings = listed if self.options.show_all else _members(rows)
            notes, _ = notes_for(tuple(findings), every=True)
            for note in notes:
                _print_note(console, note)

    def _header(self, run: RunReport) -> Text:
        """``runs/a · steps 0–31 · 2 files`` (with ``--explain``, the writers too)."""
        parts = [f"steps {format_steps(run.steps)}", plural(len(run.files), "file")]
        if self._detailed and run.writers:
            parts.append(", ".join(run.writers))
        return Text.assemble((run.run, "bold"), " · " + " · ".join(parts))

    @staticmethod
    def _indented(console: Console, lines: list[str], style: str = "") -> None:
        for line in lines:
            console.print(Padding(Text(line, style=style), (0, 0, 0, INDENT)))

    def _layer_table(self, rows: tuple[LayerRow, ...]) -> Table:
        """One row per layer (or folded layers): verdict, onset, layer, parameters, trend."""
        width = self.options.env.width - INDENT
        steps = [str(row.onset) for row in rows if row.onset is not None]
        step_width = max([4, *map(len, steps)])  # "from"
        parameters = max([10, *(len(row.parameter_text()) for row in rows)])
        texts = [row.layer_text() for row in rows]
        layers = max([5, *map(len, texts)])  # "layer"
        available = width - VERDICT_WIDTH - step_width - 3  # three gaps
        trend = min(MAX_ROW_TREND, available - 1 - layers - parameters)  # names first
        trend = trend if trend >= MIN_TREND else 0
        available -= trend + 1 if trend else 0
        if layers + parameters <= available:
            parameter_width, layer_width = parameters, layers
        else:  # one or both wrap (or shorten): the layer gets up to 3/5
            layer_width = min(layers, max(available * 3 // 5, 10))
            parameter_width = available - layer_width
        singles = [text for row, text in zip(rows, texts, strict=True) if len(row.layers) == 1]
        short = dict(zip(singles, distinct_shortened(singles, layer_width), strict=True))
        table = Table(box=None, pad_edge=False, padding=(0, 0, 0, 1), show_edge=False)
        table.add_column("verdict", width=VERDICT_WIDTH, no_wrap=True)
        table.add_column("from", width=step_width, justify="right", no_wrap=True)
        table.add_column("layer", width=layer_width, overflow="fold")
        table.add_column("parameters", width=parameter_width, overflow="fold")
        if trend:
            table.add_column("trend", width=trend, no_wrap=True)
        for row, text in zip(rows, texts, strict=True):
            style = VERDICT_STYLES.get(row.verdict, "")
            cells: list[Text | str] = [
                Text(row.verdict, style=style),
                "" if row.onset is None else str(row.onset),
                Text(short.get(text, text)),
                Text(row.parameter_text()),
            ]
            if trend:
                cells.append(Text(sparkline(row.worst.trend, trend), style=style))
            table.add_row(*cells)
        return table

    def _parameter_table(self, layers: tuple[LayerResult, ...], prefix: int) -> Table:
        """One row per parameter (``--all``), column widths fixed so the table fits
        ``Env.width`` (on a narrow one, the key numbers go from the last, so that names keep
        :data:`MIN_ALL_NAME` columns); names without the run's common prefix, shortened
        distinctly."""
        names = [layer.name[prefix:] for layer in layers]
        steps = [str(x.first_bad_step) for x in layers if x.first_bad_step is not None]
        step_width = max([MIN_STEP_WIDTH, *map(len, steps)])
        width = self.options.env.width - INDENT
        numbers = list(KEY_NUMBERS)
        name_width, trend_width = _flexible_widths(width, step_width, names, len(numbers))
        longest = max(map(len, names), default=MIN_NAME)
        while numbers and name_width < min(longest, MIN_ALL_NAME):
            numbers.pop()
            name_width, trend_width = _flexible_widths(width, step_width, names, len(numbers))
        table = Table(box=None, pad_edge=False, padding=(0, 0, 0, 1), show_edge=False)
        table.add_column("verdict", width=VERDICT_WIDTH, no_wrap=True)
        table.add_column("parameter", width=name_width, overflow="fold")
        table.add_column("first\nbad", width=step_width, justify="right", no_wrap=True)
        for number in numbers:
            table.add_column(number.label, width=NUMBER_WIDTH, justify="right", no_wrap=True)
        if trend_width:
            table.add_column("trend", width=trend_width, no_wrap=True)  # of LayerResult.trend_of
        for layer, name in zip(layers, distinct_shortened(names, name_width), strict=True):
            style = VERDICT_STYLES.get(layer.verdict, "")
            cells: list[Text | str] = [
                Text(layer.verdict, style=style),
                Text(name),
                "" if layer.first_bad_step is None else str(layer.first_bad_step),
                *(number.of(layer) for number in numbers),
            ]
            if trend_width:
                cells.append(Text(sparkline(layer.trend, trend_width), style=style))
            table.add_row(*cells)
        return table


def _judged_line(run: RunReport, view: LayerView, counts: Mapping[str, int], prefix: str) -> str:
    """``all healthy: gradients and weights of 6 parameters in 3 layers``, or with findings
    ``gradients and weights of 18 parameters in 9 layers under mlp/: 12 vanishing · 6 ok``;
    for a run with nothing to judge, what its log holds."""
    if not run.judgeable:
        return terminal(f"nothing to judge: {run.holds}")
    judged = judged_phrase(run, view.layers)
    if not view.rows:
        return f"all healthy: {judged}"
    if " of " in judged:  # what could not be judged: the run's notes say
        judged = judged.split(" of ", 1)[1]
    under = f" under {prefix}" if prefix else ""
    return f"{judged}{under}: {counts_phrase(counts)}"


def _members(rows: tuple[LayerRow, ...]) -> list[LayerResult]:
    """The parameters behind the rows, row by row."""
    return [member for row in rows for member in row.members]


def _print_advice(console: Console, rows: tuple[LayerRow, ...]) -> None:
    """A line of cause and a line of fix per verdict kind, in the rows' order; a verdict whose
    rows have different causes (a frozen layer, another left out of the optimizer) gets each,
    named by its first row's layers."""
    advised: dict[tuple[str, Advice], LayerRow] = {}
    for row in rows:
        if row.advice is not None:
            advised.setdefault((row.verdict, row.advice), row)
    kinds = [verdict for verdict, _ in advised]
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(width=VERDICT_WIDTH, no_wrap=True)
    grid.add_column()
    for (verdict, advice), row in advised.items():
        style = VERDICT_STYLES.get(verdict, "")
        where = f"{row.layer_text()}: " if kinds.count(verdict) > 1 else ""
        if advice.cause:
            grid.add_row(Text(verdict, style=style), Text(where + advice.cause))
            grid.add_row(Text("fix", justify="right"), Text(advice.fix))
        else:  # a hint not shortened yet: whole, cause and fix in one
            grid.add_row(Text(verdict, style=style), Text(where + advice.fix))
    if grid.row_count:
        console.print(Padding(grid, (0, 0, 0, INDENT)))


def _print_sweep(console: Console, sweep: Sweep) -> None:
    """The sweep's headline, its hyperparameters and their relations with the verdicts, and
    the runs ranked worst first (at most ``MAX_RANKED``)."""
    from gradcheck.report.sweep_view import (  # here: one run's table has no sweep (start-up)
        hparams_line,
        left_out_line,
        rank_header,
        ranking_rows,
        relation_lines,
        sweep_headline,
    )

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


def _warning_lines(run: RunReport, limit: int) -> list[str]:
    """The first ``limit`` warnings of a run, then how many more there are."""
    lines = list(run.warnings[:limit])
    extra = len(run.warnings) - limit
    if extra > 0:
        where = "--explain or --format json" if limit < MAX_WARNINGS else "--format json"
        lines.append(f"… and {plural(extra, 'more warning')} ({where} lists all)")
    return lines


def hanging(mark: str, lines: list[str], style: str) -> Table:
    """``lines`` each after ``mark``, wrapped lines indented under the text, not the mark."""
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(width=len(mark), no_wrap=True)
    grid.add_column(overflow="fold")  # a long file name wraps, never cut
    for line in lines:
        grid.add_row(Text(mark, style=style), Text(line, style=style))
    return grid


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
    width: int, step_width: int, names: list[str], numbers: int
) -> tuple[int, int]:
    """Widths of the parameter and trend columns: names first, trend between 8 and 24 (none
    when the names need the room: a narrow terminal)."""
    columns = 4 + numbers
    fixed = VERDICT_WIDTH + step_width + NUMBER_WIDTH * numbers + (columns - 1)
    available = max(width - fixed, MIN_NAME)
    longest = max((len(name) for name in names), default=MIN_NAME)
    trend = min(MAX_TREND, max(MIN_TREND, available - longest))
    trend = min(trend, available - MIN_NAME)
    if trend < MIN_TREND:
        return max(available, MIN_NAME), 0
    name = min(available - trend, max(longest, MIN_NAME))
    return name, trend


def rstrip_styled(line: str) -> str:
    """``line`` without trailing spaces, even spaces inside a styled span (codes are kept)."""
    match = TRAILING.search(line)
    if match is None:
        return line
    return line[: match.start()] + "".join(ANSI_CODE.findall(match.group()))
