"""The HTML format: one self-contained file with interactive charts, to open in any browser.

The sweep view first when it is on (runs per verdict, hyperparameter relations, every run
ranked in a sortable table). Runs failing ``--fail-on`` first; per run its summary, warnings,
the global gradient norm with the clip ceiling and suggested clip norm, a table of every
parameter (click a heading to sort), a chart per finding and a depth profile of every gradient
norm. plotly (the optional ``gradcheck[html]`` extra) draws the charts; its JavaScript is
inlined once, so the file works offline and fetches nothing. Every untrusted text (tag and run
names, evidence, warnings) goes through :func:`escape` only, in the markup and in the charts'
labels alike.
"""

from __future__ import annotations

import html
from typing import Any

from gradcheck._optional import require
from gradcheck.model import LayerResult, Report, RunReport, Sweep
from gradcheck.report.escape import terminal_lines
from gradcheck.report.interface import Formatter
from gradcheck.report.sweep_view import (
    hparams_line,
    rank_header,
    ranking_rows,
    relation_lines,
    sweep_headline,
)
from gradcheck.report.view import (
    KEY_NUMBERS,
    clipping_lines,
    failing_first,
    report_summary,
    run_summary,
)

STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;
max-width:1100px;padding:12px;color:#222}
h1{font-size:1.4em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
h3{font-size:1.05em;margin-bottom:.2em}code{font-size:.95em;overflow-wrap:anywhere}
p,h1,h2,h3{overflow-wrap:anywhere}.plotly-graph-div{max-width:100%;overflow:hidden}
.diverges{color:#b00020}
.warning{background:#fff4e5;border-left:4px solid #f0a020;padding:4px 8px;margin:4px 0}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:.9em}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;white-space:nowrap}
th{cursor:pointer;user-select:none;background:#f6f6f6}td.num{text-align:right}
.nan,.exploding{color:#b00020;font-weight:bold}.vanishing{color:#8a6d00}.static{color:#6a3d9a}
.slow{color:#795548}.overflow{color:#1f5fa8}.ok{color:#2e7d32}.hint{color:#555}.chart{width:100%}
"""

SORT_SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th, column) {
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0];
    var up = th.dataset.order !== "up";
    th.dataset.order = up ? "up" : "down";
    var key = function (row) {
      var cell = row.cells[column], value = cell.dataset.value;
      return value === undefined ? cell.textContent : (value === "" ? NaN : Number(value));
    };
    Array.from(body.rows).sort(function (a, b) {
      var x = key(a), y = key(b);
      if (typeof x === "number" && typeof y === "number") {
        if (isNaN(x)) return 1;
        if (isNaN(y)) return -1;
        return up ? x - y : y - x;
      }
      return up ? String(x).localeCompare(y) : String(y).localeCompare(x);
    }).forEach(function (row) { body.appendChild(row); });
  });
});
"""


def escape(text: str) -> str:
    """Text for HTML markup and for plotly's labels (which render a subset of HTML), control,
    bidi and invisible characters shown escaped first (a bidi override reorders the page)."""
    return html.escape(terminal_lines(text), quote=True)


class HtmlFormatter(Formatter):
    """A standalone HTML document (plotly.js inlined, about 5 MB)."""

    def format(self, report: Report) -> str:
        require("plotly", "html", "--format html")
        self._charts = Charts()
        body = [f"<h1>gradcheck {escape(report.version)}: {escape(report_summary(report))}</h1>"]
        body += [warning(text) for text in report.warnings]
        if report.sweep is not None:
            body += _sweep(report.sweep)
        for run in failing_first(report.runs, self.options.fail_on):
            body += self._run(run)
        return page("gradcheck report", body)

    def _run(self, run: RunReport) -> list[str]:
        from gradcheck.report import html_charts

        parts = [f"<h2><code>{escape(run.run)}</code></h2>", f"<p>{escape(run_summary(run))}</p>"]
        if run.updates:
            parts.append(f"<p>{escape(run.updates)}.</p>")
        parts += [f"<p>{escape(note)}</p>" for note in run.notes]
        parts += [warning(text) for text in run.warnings]
        if run.clipping is not None:
            parts += [f"<p>{escape(line)}</p>" for line in clipping_lines(run.clipping)]
            parts.append(self._charts.div(html_charts.clipping_figure(run.clipping, escape)))
        parts.append(_table(run.layers))
        for layer in run.layers:
            if layer.verdict != "ok":
                parts += _finding(layer)
                parts.append(self._charts.div(html_charts.finding_figure(layer, escape)))
        profile = html_charts.profile_figure(run, escape)
        if profile is not None:
            parts.append("<h3>Gradient norms by depth (first layer at the top)</h3>")
            parts.append(self._charts.div(profile))
        return parts


def page(title: str, body: list[str]) -> str:
    """The standalone document: ``body``'s parts (already escaped markup) with the style, the
    inlined plotly.js and the script that sorts tables by a clicked heading."""
    plotly = require("plotly", "html", "--format html")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n"
        f'<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script>\n'
        "</head>\n<body>\n" + "\n".join(body) + f"\n<script>{SORT_SCRIPT}</script>\n"
        "</body>\n</html>\n"
    )


class Charts:
    """Writes figures as ``<div>``s numbered in order (the document is the same every time)."""

    def __init__(self) -> None:
        self.count = 0

    def div(self, figure: dict[str, Any] | None) -> str:
        """The figure as a ``<div id="chart-N">`` and its script ("" for no figure)."""
        if figure is None:
            return ""
        import plotly.io

        self.count += 1
        return plotly.io.to_html(
            figure,
            validate=False,  # html_charts builds the dicts plotly.js reads; validating costs 0.1 s
            full_html=False,
            include_plotlyjs=False,
            div_id=f"chart-{self.count}",
            default_width="100%",
            config={"responsive": True, "displaylogo": False},
        )


def warning(text: str) -> str:
    """A warning from the analysis (it may quote names from the log), escaped."""
    return f'<p class="warning">warning: {escape(text)}</p>'


def _finding(layer: LayerResult) -> list[str]:
    verdicts = ", ".join(layer.flags)
    step = "" if layer.first_bad_step is None else f", from step {layer.first_bad_step}"
    lines = [
        f'<h3><span class="{layer.verdict}">{escape(verdicts)}</span> '
        f"<code>{escape(layer.name)}</code>{step}</h3>",
        f"<p>{escape(layer.evidence)}</p>",
    ]
    if layer.hint:
        lines.append(f'<p class="hint">hint: {escape(layer.hint)}</p>')
    return lines


def _sweep(sweep: Sweep) -> list[str]:
    """The sweep view: headline, hyperparameters, relations, and every run ranked (a table
    that sorts by a clicked heading)."""
    parts = [f"<h2>{escape(sweep_headline(sweep))}</h2>", f"<p>{escape(hparams_line(sweep))}</p>"]
    relations = relation_lines(sweep)
    if relations:
        parts.append("<ul>" + "".join(f"<li>{escape(text)}</li>" for text in relations) + "</ul>")
    rows, _ = ranking_rows(sweep, limit=None)
    markup = []
    for row in rows:
        rank, verdict, run, worst, first_bad, *hparams = row.cells(sweep)
        markup.append(
            "<tr>"
            + number_cell(int(rank), rank)
            + f'<td class="{escape(verdict)}">{escape(verdict)}</td>'
            + f"<td><code>{escape(run)}</code></td><td><code>{escape(worst)}</code></td>"
            + number_cell(int(first_bad) if first_bad else None, first_bad)
            + "".join(f"<td>{escape(text)}</td>" for text in hparams)
            + "</tr>"
        )
    parts.append(sortable_table(list(rank_header(sweep)), markup))
    return parts


def _table(layers: tuple[LayerResult, ...]) -> str:
    headings = ["verdict", "parameter", "first bad step", *(n.label for n in KEY_NUMBERS)]
    rows = [
        "<tr>"
        f'<td class="{layer.verdict}">{escape(layer.verdict)}</td>'
        f"<td><code>{escape(layer.name)}</code></td>"
        + number_cell(layer.first_bad_step, step_text(layer.first_bad_step))
        + "".join(number_cell(_stat(layer, n.keys), n.of(layer)) for n in KEY_NUMBERS)
        + "</tr>"
        for layer in layers
    ]
    return sortable_table(headings, rows)


def sortable_table(headings: list[str], rows: list[str]) -> str:
    """A table (``rows`` are ``<tr>`` markup) that sorts by a clicked heading, scrolling
    sideways on its own when wider than the screen."""
    head = "".join(f"<th>{escape(h.replace(chr(10), ' '))}</th>" for h in headings)
    body = "\n".join(rows)
    return (
        f'<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>\n{body}\n</tbody></table></div>"
    )


def step_text(step: int | None) -> str:
    """A step as text ("" for none)."""
    return "" if step is None else str(step)


def _stat(layer: LayerResult, keys: tuple[str, ...]) -> float | int | None:
    return next((layer.stats[key] for key in keys if key in layer.stats), None)


def number_cell(value: float | int | None, text: str) -> str:
    """A right-aligned cell whose ``data-value`` sorts numerically (empty when absent)."""
    raw = "" if value is None else repr(float(value))
    return f'<td class="num" data-value="{raw}">{escape(text)}</td>'
