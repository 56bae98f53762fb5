"""The CI gate: which verdicts fail the command (``--fail-on``) and whether a report does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradcheck.errors import ConfigError
from gradcheck.verdicts.registry import DEFAULT_FAIL_ON, FINDINGS, Verdict

if TYPE_CHECKING:  # the model's dataclasses: not imported for `gradcheck --help` (issue 36)
    from gradcheck.model import LayerResult, Report, RunReport

__all__ = [
    "DEFAULT_FAIL_ON",
    "FINDINGS",
    "HOLDS_SHOWN",
    "LOGGING_ADVICE",
    "failing_layers",
    "failing_runs",
    "fails",
    "findings",
    "nothing_to_judge",
    "parse_fail_on",
]


def findings() -> tuple[Verdict, ...]:
    """Every verdict but ``ok``, most severe first: what ``--fail-on any`` means
    (:data:`.registry.FINDINGS`)."""
    return FINDINGS


def parse_fail_on(text: str) -> frozenset[Verdict]:
    """``"nan,exploding"``, ``"any"`` (every finding) or ``"none"`` (never fail).

    Raises ConfigError naming the unknown word and the accepted ones.
    """
    words = [word.strip().lower() for word in text.split(",") if word.strip()]
    if words == ["any"]:
        return frozenset(findings())
    if words == ["none"]:
        return frozenset()
    chosen: set[Verdict] = set()
    for word in words:
        verdict = _verdict(word)
        if verdict is None:
            accepted = ", ".join(findings())
            raise ConfigError(
                f"--fail-on {text!r}: unknown verdict {word!r} (use a comma list of "
                f"{accepted}, or any, or none)"
            )
        chosen.add(verdict)
    if not chosen:
        raise ConfigError("--fail-on is empty (use none to never fail)")
    return frozenset(chosen)


def _verdict(word: str) -> Verdict | None:
    """The finding verdict spelled ``word``, or None."""
    for verdict in findings():
        if word == verdict:
            return verdict
    return None


def failing_layers(report: Report, fail_on: frozenset[Verdict]) -> list[LayerResult]:
    """Parameters with at least one flag in ``fail_on`` (any run)."""
    return [layer for run in report.runs for layer in run.layers if fails(layer, fail_on)]


def fails(layer: LayerResult, fail_on: frozenset[Verdict]) -> bool:
    """Whether ``layer`` has a flag in ``fail_on`` (what makes the exit status 1)."""
    return bool(fail_on.intersection(layer.flags)) or layer.verdict in fail_on


def failing_runs(report: Report, fail_on: frozenset[Verdict]) -> list[RunReport]:
    """The runs with a parameter that fails ``fail_on``, in report order."""
    return [run for run in report.runs if any(fails(layer, fail_on) for layer in run.layers)]


LOGGING_ADVICE = "log weights and gradients (gradcheck.torch, gradcheck.keras)"
"""The shortest useful advice (the docs' "Writing better logs" has the rest)."""

HOLDS_SHOWN = 60
"""Characters of a run's ``holds`` quoted in the one-line message (its scalars can be many)."""


def nothing_to_judge(report: Report) -> str | None:
    """One line on what the logs hold when no run has anything to judge (else None): the
    gate must not pass a run it could not judge. Under ~200 characters: the first run is
    quoted, the others counted."""
    if not report.runs or any(run.judgeable for run in report.runs):
        return None
    first = report.runs[0]
    holds = first.holds if len(first.holds) <= HOLDS_SHOWN else first.holds[:HOLDS_SHOWN] + "…"
    others = len(report.runs) - 1
    more = f" (and {others} more run{'s' if others > 1 else ''})" if others else ""
    return f"{first.run}: {holds}{more}; {LOGGING_ADVICE}"
