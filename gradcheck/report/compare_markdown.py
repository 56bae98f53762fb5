"""``gradcheck compare --format markdown``: the comparison for a pull-request comment or
``$GITHUB_STEP_SUMMARY`` (GitHub-flavoured Markdown). Names from the log are inline code with
backticks and pipes escaped (:func:`gradcheck.report.markdown.code`) and control characters
written as ``\\xNN`` (:func:`gradcheck.report.compare_table.visible`)."""

from __future__ import annotations

from gradcheck.model import Comparison, ParameterComparison
from gradcheck.report.compare_table import header_lines, moves_pair, visible
from gradcheck.report.interface import ComparisonFormatter
from gradcheck.report.markdown import MARKS, code, escape
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
            f"- **A:** {code(visible(comparison.a))}",
            f"- **B:** {code(visible(comparison.b))}",
            *(f"- {escape(line)}" for line in header_lines(comparison)),
            "",
            f"**Summary:** {escape(visible(comparison.summary))}",
            "",
        ]
        lines += [f"> **warning:** {escape(visible(w))}  " for w in comparison.warnings]
        if comparison.warnings:
            lines.append("")
        lines += [_row(HEADER), _row(ALIGNMENT)]
        lines += [_row(_cells(p)) for p in comparison.parameters]
        return "\n".join(lines) + "\n"


def _cells(parameter: ParameterComparison) -> tuple[str, ...]:
    mark = "🟥 " if parameter.diverges else ""
    return (
        mark + code(visible(parameter.name)),
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
    return "" if parameter.name_b is None else code(visible(parameter.name_b))


def _verdict(verdict: str | None) -> str:
    return MISSING if verdict is None else f"{MARKS.get(verdict, '')} {verdict}"


def _row(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cells) + " |"
