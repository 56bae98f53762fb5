"""``gradcheck compare --format json``: the comparison as a versioned contract (see the docs).

Schema 1: ``schema``, ``gradcheck``, ``a``, ``b``, ``summary`` and per parameter ``name``,
``in``, ``verdict_a``, ``verdict_b``, ``grad_norm_ratio_first``, ``grad_norm_ratio_median``,
``update_ratio_median``, ``moves_a``, ``moves_b``, ``first_divergent_step``; fields may be added
within a schema version (``cause``, ``name_b``, ``step_size_ratio_median``, ...). Ratios are
always B over A; NaN and Inf become ``null``.
"""

from __future__ import annotations

from typing import Any

from gradcheck.model import Comparison, ParameterComparison
from gradcheck.report import json_text
from gradcheck.report.interface import ComparisonFormatter
from gradcheck.report.json_format import finite

COMPARE_SCHEMA_VERSION = 1


class ComparisonJsonFormatter(ComparisonFormatter):
    """One JSON document (indented, UTF-8 text, trailing newline)."""

    def format(self, comparison: Comparison) -> str:
        document = comparison_document(comparison)
        return json_text.dumps(document) + "\n"


def comparison_document(comparison: Comparison) -> dict[str, Any]:
    """The comparison as plain JSON-safe data."""
    return {
        "schema": COMPARE_SCHEMA_VERSION,
        "gradcheck": comparison.version,
        "a": comparison.a,
        "b": comparison.b,
        "summary": comparison.summary,
        "cause": comparison.cause,
        "compare_factor": finite(comparison.factor),
        "steps": None if comparison.steps is None else list(comparison.steps),
        "common_steps": comparison.common_steps,
        "names": comparison.names,
        "warnings": list(comparison.warnings),
        "parameters": [parameter_document(p) for p in comparison.parameters],
    }


def parameter_document(parameter: ParameterComparison) -> dict[str, Any]:
    """One parameter in both runs (or in one)."""
    return {
        "name": parameter.name,
        "in": parameter.presence,
        "verdict_a": parameter.verdict_a,
        "verdict_b": parameter.verdict_b,
        "grad_norm_ratio_first": finite(parameter.grad_norm_ratio_first),
        "grad_norm_ratio_median": finite(parameter.grad_norm_ratio_median),
        "update_ratio_median": finite(parameter.update_ratio_median),
        "moves_a": parameter.moves_a,
        "moves_b": parameter.moves_b,
        "first_divergent_step": parameter.first_divergent_step,
        "name_b": parameter.name_b,
        "matched_by": parameter.matched_by,
        "kind": parameter.kind,
        "common_steps": parameter.common_steps,
        "step_size_ratio_median": finite(parameter.step_size_ratio_median),
        "diverges": parameter.diverges,
    }
