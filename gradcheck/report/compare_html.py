"""``gradcheck compare --format html``: the comparison as one self-contained page with charts.

The summary, the ranked table (click a heading to sort) and, for every parameter that
diverges, a chart of A's and B's gradient norm over their common steps (log scale) with the
step where they part, and their weight movement per step under it. The page, its charts and
the escaping of names from the logs are :mod:`gradcheck.report.html`'s.
"""

from __future__ import annotations

from gradcheck._optional import require
from gradcheck.model import Comparison, ParameterComparison
from gradcheck.report.compare_markdown import HEADER
from gradcheck.report.compare_table import header_lines, moves_pair
from gradcheck.report.html import (
    Charts,
    escape,
    number_cell,
    page,
    sortable_table,
    step_text,
    warning,
)
from gradcheck.report.interface import ComparisonFormatter
from gradcheck.report.numbers import MISSING, format_ratio


class ComparisonHtmlFormatter(ComparisonFormatter):
    """A standalone HTML document (plotly.js inlined, about 5 MB)."""

    def format(self, comparison: Comparison) -> str:
        require("plotly", "html", "--format html")
        from gradcheck.report import html_charts

        diverging = [p for p in comparison.parameters if p.diverges]
        body = [
            f"<h1>gradcheck {escape(comparison.version)} compare: {len(diverging)} of "
            f"{len(comparison.parameters)} parameters diverge</h1>",
            f"<p><b>A</b> <code>{escape(comparison.a)}</code><br>"
            f"<b>B</b> <code>{escape(comparison.b)}</code></p>",
            *(f"<p>{escape(line)}</p>" for line in header_lines(comparison)),
            f"<p><b>Summary:</b> {escape(comparison.summary)}</p>",
            *(warning(text) for text in comparison.warnings),
            sortable_table(list(HEADER), [_row(p) for p in comparison.parameters]),
        ]
        charts = Charts()
        for parameter in diverging:
            figure = html_charts.comparison_figure(parameter, escape)
            if figure is not None:
                body += [_chart_heading(parameter), charts.div(figure)]
        agreeing = len(comparison.parameters) - len(diverging)
        if agreeing:
            body.append(f"<p>{agreeing} parameters agree: their ratios are in the table.</p>")
        return page("gradcheck compare", body)


def _row(parameter: ParameterComparison) -> str:
    mark = ' class="diverges"' if parameter.diverges else ""
    return (
        f"<tr><td{mark}><code>{escape(parameter.name)}</code></td>"
        f"<td>{_name_b(parameter)}</td>"
        + number_cell(
            parameter.grad_norm_ratio_first, format_ratio(parameter.grad_norm_ratio_first)
        )
        + number_cell(
            parameter.grad_norm_ratio_median, format_ratio(parameter.grad_norm_ratio_median)
        )
        + number_cell(parameter.update_ratio_median, format_ratio(parameter.update_ratio_median))
        + f"<td>{moves_pair(parameter)}</td>"
        + _verdict(parameter.verdict_a)
        + _verdict(parameter.verdict_b)
        + number_cell(parameter.first_divergent_step, step_text(parameter.first_divergent_step))
        + "</tr>"
    )


def _name_b(parameter: ParameterComparison) -> str:
    """B's name where it differs, or in which run alone the parameter is."""
    if parameter.presence != "both":
        return f"<i>only in {parameter.presence.upper()}</i>"
    return "" if parameter.name_b is None else f"<code>{escape(parameter.name_b)}</code>"


def _verdict(verdict: str | None) -> str:
    if verdict is None:
        return f"<td>{MISSING}</td>"
    return f'<td class="{escape(verdict)}">{escape(verdict)}</td>'


def _chart_heading(parameter: ParameterComparison) -> str:
    renamed = "" if parameter.name_b is None else f" (B: <code>{escape(parameter.name_b)}</code>)"
    return f'<h3 class="diverges"><code>{escape(parameter.name)}</code>{renamed}</h3>'
