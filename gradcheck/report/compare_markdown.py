"""``gradcheck compare --format markdown``: the comparison for a pull-request comment or
``$GITHUB_STEP_SUMMARY`` (GitHub-flavoured Markdown). Names from the log are code spans
(:func:`gradcheck.report.escape.markdown_code`), other text from it goes through
:func:`gradcheck.report.escape.markdown_text`."""

from __future__ import annotations

from gradcheck.model import Comparison, ParameterComparison
from gradcheck.report.compare_table import header_lines, moves_pair
from gradcheck.report.escape import markdown_code, markdown_text
from gradcheck.report.interface import ComparisonFormatter
from gradcheck.report.markdown import MARKS
from gradcheck.report.numbers import MISSING, format_ratio

HEADER = (
    "parameter",
    "B's name",
    "grad B/A first",
    "grad B/A median",
    "update B/A",
    "moves A/B",
    "verdict A",
    "verdict B",
    "parts at step",
)
ALIGNMENT = ("---", "---", "---:", "---:", "---:", ":---:", "---", "---", "---:")


class ComparisonMarkdownFormatter(ComparisonFormatter):
    """GitHub-flavoured Markdown."""

    def format(self, comparison: Comparison) -> str:
        diverging = sum(p.diverges for p in comparison.parameters)
        lines = [
            f"## gradcheck {comparison.version} compare: {diverging} of "
            f"{len(comparison.parameters)} parameters diverge",
            "",
            f"- **A:** {markdown_code(comparison.a)}",
            f"- **B:** {markdown_code(comparison.b)}",
            *(f"- {markdown_text(line)}" for line in header_lines(comparison)),
            "",
            f"**Summary:** {markdown_text(comparison.summary)}",
            "",
        ]
        lines += [f"> **warning:** {markdown_text(w)}  " for w in comparison.warnings]
        if comparison.warnings:
            lines.append("")
        lines += [_row(HEADER), _row(ALIGNMENT)]
        lines += [_row(_cells(p)) for p in comparison.parameters]
        return "\n".join(lines) + "\n"


def _cells(parameter: ParameterComparison) -> tuple[str, ...]:
    mark = "🟥 " if parameter.diverges else ""
    return (
        mark + markdown_code(parameter.name, in_table=True),
        _name_b(parameter),
        format_ratio(parameter.grad_norm_ratio_first),
        format_ratio(parameter.grad_norm_ratio_median),
        format_ratio(parameter.update_ratio_median),
        moves_pair(parameter),
        _verdict(parameter.verdict_a),
        _verdict(parameter.verdict_b),
        "" if parameter.first_divergent_step is None else str(parameter.first_divergent_step),
    )


def _name_b(parameter: ParameterComparison) -> str:
    """B's name where it differs, or in which run alone the parameter is."""
    if parameter.presence != "both":
        return f"*only in {parameter.presence.upper()}*"
    return "" if parameter.name_b is None else markdown_code(parameter.name_b, in_table=True)


def _verdict(verdict: str | None) -> str:
    return MISSING if verdict is None else f"{MARKS.get(verdict, '')} {verdict}"


def _row(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cells) + " |"
