"""``gradcheck compare``'s default format: the two runs, one row per parameter, the summary.

Rows are most different first: gradient-norm ratio B/A at the first common step and its
median, the ratio of weight movement per step, whether the weights move in A and in B, each
run's verdict, and the first common step where the gradient ratio leaves the band. Fits
``Env.width`` columns (80 when not a terminal). Names from the log are shown with control
characters and bidi overrides escaped (:func:`gradcheck.report.escape.terminal`).
"""

from __future__ import annotations

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from gradcheck.compare.matching import without_model_scope
from gradcheck.model import Comparison, ParameterComparison
from gradcheck.report.escape import terminal
from gradcheck.report.interface import ComparisonFormatter
from gradcheck.report.names import distinct_shortened
from gradcheck.report.numbers import MISSING, format_ratio, format_steps
from gradcheck.report.table import VERDICT_STYLES, console_text, text_console

RATIO_WIDTH = 6  # "1.2e-7", "0.056"
MOVES_WIDTH = 7  # "yes/no"
MIN_VERDICTS = 7  # "verdict"
STEP_WIDTH = 5  # "parts"
MIN_NAME = 12
RENAMES_SHOWN = 3  # B's differing names listed under the table (JSON lists all)


class ComparisonTableFormatter(ComparisonFormatter):
    """Aligned text for a terminal (ANSI colours only on a colour TTY)."""

    def format(self, comparison: Comparison) -> str:
        console = text_console(self.options.env)
        console.print(Text.assemble(("A ", "bold"), terminal(comparison.a)))
        console.print(Text.assemble(("B ", "bold"), terminal(comparison.b)))
        for line in header_lines(comparison):
            console.print(Padding(Text(line), (0, 0, 0, 2)))
        for warning in comparison.warnings:
            console.print(Padding(Text(f"! {terminal(warning)}", style="yellow"), (0, 0, 0, 2)))
        console.print(self._table(comparison.parameters))
        for line in rename_lines(comparison.parameters):
            console.print(Padding(Text(line, style="dim"), (0, 0, 0, 2)))
        _print_summary(console, comparison.summary)
        return console_text(console)

    def _table(self, parameters: tuple[ParameterComparison, ...]) -> Table:
        verdicts = [verdict_pair(p) for p in parameters]
        verdict_width = max([MIN_VERDICTS, *map(len, verdicts)])
        fixed = 3 * RATIO_WIDTH + MOVES_WIDTH + verdict_width + STEP_WIDTH + 6
        longest = max((len(shown_name(p)) for p in parameters), default=MIN_NAME)
        name_width = max(MIN_NAME, min(longest, self.options.env.width - fixed))
        table = Table(box=None, pad_edge=False, padding=(0, 0, 0, 1), show_edge=False)
        table.add_column("parameter", width=name_width, overflow="fold")
        for label in ("grad\nfirst", "grad\nmedian", "update\nmedian"):
            table.add_column(label, width=RATIO_WIDTH, justify="right", no_wrap=True)
        table.add_column("moves\nA/B", width=MOVES_WIDTH, justify="center", no_wrap=True)
        table.add_column("verdict\nA/B", width=verdict_width, no_wrap=True)
        table.add_column("parts\nat", width=STEP_WIDTH, justify="right", no_wrap=True)
        names = distinct_shortened([shown_name(p) for p in parameters], name_width)
        for p, verdict, name in zip(parameters, verdicts, names, strict=True):
            table.add_row(
                Text(name, style="red" if p.diverges else ""),
                format_ratio(p.grad_norm_ratio_first),
                format_ratio(p.grad_norm_ratio_median),
                format_ratio(p.update_ratio_median),
                moves_pair(p),
                _verdicts(p, verdict),
                "" if p.first_divergent_step is None else str(p.first_divergent_step),
            )
        return table


def shown_name(parameter: ParameterComparison) -> str:
    """The parameter's name without its Keras model scope (``sequential_1/``): the rows then
    show what tells parameters apart (the JSON keeps the full names)."""
    return terminal(without_model_scope(parameter.name))


def header_lines(comparison: Comparison) -> list[str]:
    """``common steps 0–11 (12) · band [1/4, 4]`` and how the names were matched."""
    steps = f"common steps {format_steps(comparison.steps)} ({comparison.common_steps})"
    factor = f"{comparison.factor:g}"
    band = f"ratios B/A agree within [1/{factor}, {factor}]"
    return [f"{steps} · {band}", terminal(comparison.names)]


def moves_pair(parameter: ParameterComparison) -> str:
    """``yes/no``: whether the weights move in A and in B (``–`` where not logged)."""
    return "/".join(
        MISSING if moves is None else "yes" if moves else "no"
        for moves in (parameter.moves_a, parameter.moves_b)
    )


def rename_lines(parameters: tuple[ParameterComparison, ...]) -> list[str]:
    """B's names where they differ from A's: the first few, then how many more."""
    renamed = [p for p in parameters if p.name_b is not None]
    lines = [
        f"{shown_name(p)} is {terminal(without_model_scope(p.name_b or ''))} in B" for p in renamed
    ]
    if len(lines) > RENAMES_SHOWN:
        more = len(lines) - RENAMES_SHOWN
        lines = [*lines[:RENAMES_SHOWN], f"… and {more} more renamed (--format json lists all)"]
    return lines


def verdict_pair(parameter: ParameterComparison) -> str:
    """``ok/static``: each run's verdict (``–`` for a run without the parameter)."""
    return "/".join(verdict or MISSING for verdict in (parameter.verdict_a, parameter.verdict_b))


def _verdicts(parameter: ParameterComparison, text: str) -> Text:
    """``text`` (:func:`verdict_pair`) with each verdict in its colour."""
    parts = [verdict or MISSING for verdict in (parameter.verdict_a, parameter.verdict_b)]
    return Text.assemble(
        (parts[0], VERDICT_STYLES.get(parts[0], "")),
        "/",
        (parts[1], VERDICT_STYLES.get(parts[1], "")),
    )


def _print_summary(console: Console, summary: str) -> None:
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(no_wrap=True)
    grid.add_column()
    grid.add_row(Text("summary:", style="bold"), Text(terminal(summary)))
    console.print(grid)
