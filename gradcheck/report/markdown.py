"""The Markdown format: a summary and a table per run, for a pull-request comment or
``$GITHUB_STEP_SUMMARY`` (GitHub-flavoured Markdown tables and ``<details>``). Every string
from the logs goes through :func:`~gradcheck.report.escape.markdown_text` or, for names,
:func:`~gradcheck.report.escape.markdown_code`."""

from __future__ import annotations

from gradcheck.model import LayerResult, Report, RunReport, Sweep
from gradcheck.report.escape import markdown_code, markdown_text
from gradcheck.report.interface import Formatter
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
    clipping_applies,
    clipping_lines,
    failing_first,
    plural,
    report_summary,
    run_summary,
    select_layers,
    spikes_line,
)
from gradcheck.verdicts.registry import ENTRIES

MARKS: dict[str, str] = {entry.name: entry.mark for entry in ENTRIES}


class MarkdownFormatter(Formatter):
    """GitHub-flavoured Markdown."""

    def format(self, report: Report) -> str:
        lines = [f"## gradcheck {report.version}: {report_summary(report)}", ""]
        lines += [f"> **warning:** {markdown_text(warning)}" for warning in report.warnings]
        if report.warnings:
            lines.append("")
        if report.sweep is not None:
            lines += _sweep_lines(report.sweep)
        for run in failing_first(report.runs, self.options.fail_on):
            lines += self._run_lines(run)
        return "\n".join(lines).rstrip("\n") + "\n"

    def _run_lines(self, run: RunReport) -> list[str]:
        selection = select_layers(run, self.options.top, self.options.show_all)
        lines = [f"### {markdown_code(run.run)}", "", markdown_text(run_summary(run)), ""]
        if run.updates:
            lines += [markdown_text(run.updates) + ".", ""]
        lines += [f"> {markdown_text(note)}" for note in run.notes]
        if run.notes:
            lines.append("")
        spikes = spikes_line(run)
        if spikes:
            lines += [markdown_text(spikes) + ".", ""]
        lines += [f"> **warning:** {markdown_text(warning)}  " for warning in run.warnings]
        if run.warnings:
            lines.append("")
        if run.clipping is not None and clipping_applies(run, self.options.clip):
            lines += [f"{markdown_text(line)}  " for line in clipping_lines(run.clipping)]
            lines.append("")
        if selection.listed:
            lines += _table(selection.listed) + [""]
        lines += _evidence_lines(selection.listed)
        lines += _hint_lines(selection.listed)
        if selection.hidden:
            lines += [f"… {plural(len(selection.hidden), 'more finding')} not listed.", ""]
        if selection.folded:
            names = ", ".join(markdown_code(layer.name) for layer in selection.folded)
            summary = plural(len(selection.folded), "healthy parameter")
            lines += [f"<details><summary>{summary}</summary>", "", names, "", "</details>", ""]
        return lines


def _sweep_lines(sweep: Sweep) -> list[str]:
    """The sweep view: headline, hyperparameters and relations, the ranking as a table."""
    lines = [f"### {markdown_text(sweep_headline(sweep))}", "", markdown_text(hparams_line(sweep))]
    lines += ["", *(f"- {markdown_text(text)}" for text in relation_lines(sweep))]
    if sweep.relations:
        lines.append("")
    header = rank_header(sweep)
    lines += [_row(list(header)), _row(["---:", "---", "---", "---", "---:", "---"][: len(header)])]
    rows, left_out = ranking_rows(sweep)
    for row in rows:
        rank, verdict, run, worst, first_bad, *hparams = row.cells(sweep)
        cells = [
            rank,
            f"{MARKS.get(verdict, '⬜')} {verdict}",
            markdown_code(run, in_table=True),
            markdown_code(worst, in_table=True) if worst else "",
            first_bad,
            *(markdown_text(text) for text in hparams),
        ]
        lines.append(_row(cells))
    lines.append("")
    if left_out:
        lines += [markdown_text(left_out_line(left_out)), ""]
    return lines


def _table(layers: tuple[LayerResult, ...]) -> list[str]:
    header = [
        "verdict",
        "parameter",
        "first bad step",
        *(n.label.replace("\n", " ") for n in KEY_NUMBERS),
    ]
    lines = [_row(header), _row(["---"] * 2 + ["---:"] * (1 + len(KEY_NUMBERS)))]
    for layer in layers:
        cells = [
            f"{MARKS[layer.verdict]} {layer.verdict}",
            markdown_code(layer.name, in_table=True),
            "" if layer.first_bad_step is None else str(layer.first_bad_step),
            *(number.of(layer) for number in KEY_NUMBERS),
        ]
        lines.append(_row(cells))
    return lines


def _evidence_lines(layers: tuple[LayerResult, ...]) -> list[str]:
    """Each listed finding's evidence, once, below the table that holds its numbers."""
    texts = [(layer, "; ".join(filter(None, (layer.evidence, *layer.notes)))) for layer in layers]
    lines = [
        f"- {MARKS[layer.verdict]} {markdown_code(layer.name)}: {markdown_text(text)}"
        for layer, text in texts
        if text
    ]
    return [*lines, ""] if lines else []


def _hint_lines(layers: tuple[LayerResult, ...]) -> list[str]:
    """Each distinct hint once, with the parameters it applies to, folded under ``<details>``."""
    names_by_hint: dict[str, list[str]] = {}
    for layer in layers:
        if layer.hint:
            names_by_hint.setdefault(layer.hint, []).append(markdown_code(layer.name))
    if not names_by_hint:
        return []
    hints = [
        f"- {', '.join(names)}: {markdown_text(hint)}" for hint, names in names_by_hint.items()
    ]
    return ["<details><summary>hints</summary>", "", *hints, "", "</details>", ""]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"
