"""Renderings of ``gradcheck inspect``: what the event files hold, as a table or as JSON.

The inspect listing is a different document from the analysis report (no verdicts), so it has
its own two renderers rather than a place in ``FORMATS``: the JSON here, the table (rich, which
``--format json`` does not need to import) in ``inspect_table``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gradcheck import __version__
from gradcheck.inspect import FileSummary, InspectReport, RunSummary, TagSummary
from gradcheck.report import json_text
from gradcheck.report.interface import Env

INSPECT_SCHEMA_VERSION = 1


def format_inspect(report: InspectReport, format_name: str, env: Env) -> str:
    """The listing in ``format_name`` (``table`` or ``json``)."""
    if format_name == "json":
        return inspect_json(report)
    from gradcheck.report.inspect_table import inspect_table  # rich: the table only

    return inspect_table(report, env)


def inspect_json(report: InspectReport) -> str:
    """Runs -> files -> tags, damages and notices, as strict JSON."""
    document = {
        "schema": INSPECT_SCHEMA_VERSION,
        "gradcheck": __version__,
        "runs": [_run_document(run) for run in report.runs],
    }
    return json_text.dumps(document) + "\n"


def _run_document(run: RunSummary) -> dict[str, Any]:
    return {
        "run": run.path,
        "steps": None if run.steps is None else list(run.steps),
        "files": [_file_document(file) for file in run.files],
        "notices": [
            {"file": n.file, "kind": n.kind, "tag": n.tag, "step": n.step, "message": n.message}
            for n in run.notices
        ],
    }


def _file_document(file: FileSummary) -> dict[str, Any]:
    return {
        "path": file.path,
        "size": file.size,
        "records": file.records,
        "events": file.events,
        "writer": file.writer,
        "tags": [_tag_fields(tag) for tag in file.tags],
        "damages": [
            {"offset": d.offset, "kind": d.kind, "lost_bytes": d.lost_bytes, "message": d.message}
            for d in file.damages
        ],
    }


def _tag_fields(tag: TagSummary) -> dict[str, Any]:
    """Every field of the tag summary (all plain ints and strings)."""
    fields = dataclasses.asdict(tag)
    fields["element_counts"] = list(tag.element_counts)
    return fields
