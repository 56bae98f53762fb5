"""The HTML format: one self-contained file with interactive charts, to open in any browser.

It opens on the answer: an overview table of every run (its verdict counts, its worst finding
and when it began, a link to its section), runs failing ``--fail-on`` first; then the sweep view
when it is on (runs per verdict, hyperparameter relations, every run ranked). Per run: what was
judged, its warnings, its findings as layer rows (as the table shows them) with a line of cause
and fix per verdict kind, a layer x logged-step heatmap of the gradient norms (NaN/Inf cells
red, exact zeros grey, one column per logged step), one chart per group of findings (a layer
row, not a parameter), frozen parameters as a list, the global gradient norm where clipping
advice applies, and, folded, every parameter's numbers (click a heading to sort) and every
finding's evidence. plotly (the optional ``gradcheck[html]`` extra) draws the charts; its
JavaScript is inlined once, so the file works offline and fetches nothing. Every untrusted text
(tag and run names, evidence, warnings) goes through :func:`escape` only, in the markup and in
the charts' labels alike.
"""

from __future__ import annotations

import html
from typing import Any

from gradcheck._optional import require
from gradcheck.model import LayerResult, Report, RunReport, Sweep
from gradcheck.report.escape import terminal_lines
from gradcheck.report.interface import Formatter
from gradcheck.report.layers import LayerRow, LayerView, layer_view
from gradcheck.report.sweep_view import hparams_line, hparams_text, relation_lines, sweep_headline
from gradcheck.report.view import (
    KEY_NUMBERS,
    clipping_applies,
    clipping_lines,
    counts_phrase,
    failing_first,
    judged_phrase,
    plural,
    report_summary,
    spikes_line,
    verdict_counts,
)
from gradcheck.verdicts.registry import ENTRIES, OK, UNJUDGED, UNJUDGED_CSS, entry

STYLE = (
    """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;
max-width:1280px;padding:12px;color:#222}
h1{font-size:1.4em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
h3{font-size:1.05em;margin-bottom:.2em}code{font-size:.95em;overflow-wrap:anywhere}
p,h1,h2,h3{overflow-wrap:anywhere}.plotly-graph-div{max-width:100%;overflow:hidden}
.diverges{color:#b00020}
.warning{background:#fff4e5;border-left:4px solid #f0a020;padding:4px 8px;margin:4px 0}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:.9em}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;white-space:nowrap}
th{cursor:pointer;user-select:none;background:#f6f6f6}td.num{text-align:right}
.hint{color:#555}.chart{width:100%}.meta{color:#555;margin:.2em 0}
.advice td{border:0;white-space:normal;padding:1px 8px}.advice td:first-child{font-weight:bold}
details{margin:.8em 0}summary{cursor:pointer;color:#333}
"""
    + "".join(f".{e.name}{{{e.css}}}\n" for e in ENTRIES)
    + f".{UNJUDGED}{{{UNJUDGED_CSS}}}\n"
)
"""The page's style, each verdict's class as its registry entry says (``.exploding``)."""

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
        runs = failing_first(report.runs, self.options.fail_on)
        views = [layer_view(run) for run in runs]
        body = [f"<h1>gradcheck {escape(report.version)}: {escape(report_summary(report))}</h1>"]
        body += [warning(text) for text in report.warnings]
        body += _overview(runs, views, report.sweep)
        if report.sweep is not None:
            body += _sweep(report.sweep)
        for number, (run, view) in enumerate(zip(runs, views, strict=True), 1):
            body += self._run(run, view, number)
        return page("gradcheck report", body)

    def _run(self, run: RunReport, view: LayerView, number: int) -> list[str]:
        from gradcheck.report import html_charts

        parts = [
            f'<section id="{anchor(number)}">',
            f"<h2><code>{escape(run.run)}</code></h2>",
            f'<p class="meta">{escape(_meta(run))}</p>',
            f"<p>{escape(_judged(run, view))}</p>",
        ]
        parts += [f"<p>{escape(note)}</p>" for note in run.notes]
        parts += [warning(text) for text in run.warnings]
        if view.rows:
            parts.append(_layer_table(view))
            parts.append(_advice(view.rows))
        if run.loss is not None:
            spikes = spikes_line(run)
            parts.append(f"<h3>Training loss{': ' + escape(spikes) if spikes else ''}</h3>")
            parts.append(self._charts.div(html_charts.loss_figure(run, escape)))
        heatmap = html_charts.layer_heatmap(run, escape)
        if heatmap is not None:
            gradients = any(x.trend_of == html_charts.GRADIENT for x in run.layers)
            heading = f"{'Gradient' if gradients else 'Weight'} norm by layer and logged step"
            parts += [f"<h3>{heading}</h3>", self._charts.div(heatmap)]
        for row in view.rows:
            if entry(row.verdict).charted:
                parts += _group_heading(row)
                parts.append(self._charts.div(html_charts.group_figure(row, escape)))
        frozen = [row for row in view.rows if not entry(row.verdict).charted]
        if frozen:
            parts += _frozen(frozen)
        if run.clipping is not None and clipping_applies(run, self.options.clip):
            parts += [f"<p>{escape(line)}</p>" for line in clipping_lines(run.clipping)]
            parts.append(self._charts.div(html_charts.clipping_figure(run.clipping, escape)))
        parts.append(_details(f"Every parameter ({len(run.layers)})", _table(run.layers)))
        evidence = _evidence(run.layers)
        if evidence:
            parts.append(_details("Evidence and hints", evidence))
        parts.append("</section>")
        return parts


def anchor(number: int) -> str:
    """The id of the ``number``-th run's section (1 for the first)."""
    return f"run-{number}"


def _meta(run: RunReport) -> str:
    """``steps 0–39 · 1 file · tensorflow...`` (unescaped)."""
    from gradcheck.report.numbers import format_steps

    parts = [f"steps {format_steps(run.steps)}", plural(len(run.files), "file"), *run.writers]
    return " · ".join(parts)


def _judged(run: RunReport, view: LayerView) -> str:
    """What was judged and what was found, as the table says it (unescaped)."""
    if not run.judgeable:
        return f"nothing to judge: {run.holds}"
    judged = judged_phrase(run, view.layers)
    if not view.rows:
        return f"all healthy: {judged}"
    under = f" under {view.prefix}" if view.prefix else ""
    return f"{judged}{under}: {counts_phrase(verdict_counts(run))}"


OVERVIEW_HEADINGS = ["run", "verdicts", "worst finding", "from step"]


def _overview(runs: list[RunReport], views: list[LayerView], sweep: Sweep | None) -> list[str]:
    """The table every reader starts from: a row per run (failing ``--fail-on`` first; in a
    sweep, ranked worst first with its hyperparameters), its verdict counts, its worst finding
    and its onset, linked to the run's section."""
    root = _common_root([run.run for run in runs])
    numbered = list(enumerate(zip(runs, views, strict=True), 1))
    settings: dict[str, str] = {}
    if sweep is not None:
        rank = {entry.run: position for position, entry in enumerate(sweep.ranking)}
        numbered.sort(key=lambda item: rank.get(item[1][0].run, len(rank)))
        settings = {entry.run: hparams_text(entry, sweep) for entry in sweep.ranking}
    rows = []
    for number, (run, view) in numbered:
        counts = verdict_counts(run)
        shown = [f'<span class="{v}">{counts[v]} {escape(v)}</span>' for v in counts if counts[v]]
        verdicts = (
            " · ".join(shown) if run.judgeable else f'<span class="{UNJUDGED}">{UNJUDGED}</span>'
        )
        worst = view.rows[0] if view.rows else None
        finding = (
            ""
            if worst is None
            else (
                f'<span class="{worst.verdict}">{escape(worst.verdict)}</span> '
                f"<code>{escape(_row_name(worst, view))}</code>"
            )
        )
        onset = None if worst is None else worst.onset
        name = run.run[len(root) :] or run.run
        rows.append(
            f'<tr><td><a href="#{anchor(number)}"><code>{escape(name)}</code></a></td>'
            f"<td>{verdicts}</td><td>{finding}</td>"
            + number_cell(onset, step_text(onset))
            + (f"<td>{escape(settings.get(run.run, ''))}</td>" if sweep and sweep.hparams else "")
            + "</tr>"
        )
    under = f" under <code>{escape(root)}</code>" if root else ""
    heading = f'<h2 id="overview">{plural(len(runs), "run")}{under}</h2>'
    headings = OVERVIEW_HEADINGS + (["hyperparameters"] if sweep and sweep.hparams else [])
    return [heading, sortable_table(headings, rows)]


def _common_root(paths: list[str]) -> str:
    """The directory every run path is under, with its trailing ``/`` (``""`` for one run
    or none shared): said once above the overview."""
    if len(paths) < 2:
        return ""
    parts = [path.split("/") for path in paths]
    shared = 0
    while all(len(p) > shared + 1 and p[shared] == parts[0][shared] for p in parts):
        shared += 1
    return "/".join(parts[0][:shared]) + "/" if shared else ""


def _row_name(row: LayerRow, view: LayerView) -> str:
    """``mlp/hidden_1 (kernel, bias)``: the row's layers with the run's prefix, its
    parameters (unescaped)."""
    layers = view.prefix + row.layer_text()
    return f"{layers} ({row.parameter_text()})" if row.parameter_text() else layers


def _layer_table(view: LayerView) -> str:
    """The findings as layer rows (verdict, onset, layers, parameters), worst first."""
    rows = [
        f'<tr><td class="{row.verdict}">{escape(row.verdict)}</td>'
        + number_cell(row.onset, step_text(row.onset))
        + f"<td><code>{escape(row.layer_text())}</code></td>"
        f"<td>{escape(row.parameter_text())}</td></tr>"
        for row in view.rows
    ]
    under = f" (under {view.prefix})" if view.prefix else ""  # sortable_table escapes it
    return sortable_table(["verdict", "from step", f"layer{under}", "parameters"], rows)


def _advice(rows: tuple[LayerRow, ...]) -> str:
    """A cause and a fix per verdict kind (each distinct cause once), as in the table."""
    seen: set[tuple[str, Any]] = set()
    lines = []
    for row in rows:
        if row.advice is None or (row.verdict, row.advice) in seen:
            continue
        seen.add((row.verdict, row.advice))
        cause = f"{escape(row.advice.cause)}; " if row.advice.cause else ""
        lines.append(
            f'<tr><td class="{row.verdict}">{escape(row.verdict)}</td>'
            f"<td>{cause}<b>fix:</b> {escape(row.advice.fix)}</td></tr>"
        )
    return f'<table class="advice">{"".join(lines)}</table>' if lines else ""


def _group_heading(row: LayerRow) -> list[str]:
    """A finding group's heading and its worst parameter's evidence."""
    step = "" if row.onset is None else f", from step {row.onset}"
    names = f" ({escape(row.parameter_text())})" if row.parameter_text() else ""
    flags = ", ".join(row.worst.flags) or row.verdict
    return [
        f'<h3><span class="{row.verdict}">{escape(flags)}</span> '
        f"<code>{escape(row.layer_text())}</code>{names}{step}</h3>",
        f"<p>{escape(row.worst.name)}: {escape(row.worst.evidence)}</p>",
    ]


def _frozen(rows: list[LayerRow]) -> list[str]:
    """Static parameters as a list, each layer with its parameters and the worst's evidence
    (a flat line is no chart)."""
    items = [
        f"<li><code>{escape(row.layer_text())}</code>"
        + (f" ({escape(row.parameter_text())})" if row.parameter_text() else "")
        + f": {escape(row.worst.evidence)}</li>"
        for row in rows
    ]
    count = sum(len(row.members) for row in rows)
    return [f"<h3>Weights that never moved ({count})</h3>", "<ul>" + "".join(items) + "</ul>"]


def _details(summary: str, content: str) -> str:
    return f"<details><summary>{escape(summary)}</summary>{content}</details>"


def _evidence(layers: tuple[LayerResult, ...]) -> str:
    """Every finding's evidence, and each hint once, after the first finding that has it."""
    seen: set[str] = set()
    items = []
    for layer in layers:
        if layer.verdict == OK:
            continue
        text = "; ".join(filter(None, (layer.evidence, *layer.notes)))
        item = f"<li><code>{escape(layer.name)}</code>: {escape(text)}"
        if layer.hint and layer.hint not in seen:
            seen.add(layer.hint)
            item += f'<br><span class="hint">hint: {escape(layer.hint)}</span>'
        items.append(item + "</li>")
    return "<ul>" + "".join(items) + "</ul>" if items else ""


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
            validate=False,  # html_charts builds the dicts plotly.js reads; validating costs time
            full_html=False,
            include_plotlyjs=False,
            div_id=f"chart-{self.count}",
            default_width="100%",
            config={"responsive": True, "displaylogo": False},
        )


def warning(text: str) -> str:
    """A warning from the analysis (it may quote names from the log), escaped."""
    return f'<p class="warning">warning: {escape(text)}</p>'


def _sweep(sweep: Sweep) -> list[str]:
    """The sweep view's words: headline, hyperparameters and their relations with the verdicts
    (the runs, ranked with their hyperparameters, are the overview's rows)."""
    parts = [f"<h2>{escape(sweep_headline(sweep))}</h2>", f"<p>{escape(hparams_line(sweep))}</p>"]
    relations = relation_lines(sweep)
    if relations:
        parts.append("<ul>" + "".join(f"<li>{escape(text)}</li>" for text in relations) + "</ul>")
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
