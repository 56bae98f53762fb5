"""What ``gradcheck watch`` shows of an update: the live view's status line, the line naming a
finding that stops the watch, and the JSON line written per update without a terminal.

The JSON line holds what changed since the previous line; the last line (``"final": true``)
holds the whole report as ``gradcheck analyze --format json`` gives it (``report``). Names
from the logs are escaped for the terminal here (``escape.terminal``); JSON keeps them exact.
"""

from __future__ import annotations

import json
from typing import Any

from gradcheck.report.escape import terminal
from gradcheck.report.json_format import report_document
from gradcheck.report.view import plural
from gradcheck.watch import Failure, Update

WATCH_SCHEMA = 1


def status_line(update: Update, paths: str) -> str:
    """``watching logs/ · update 12 · step 340 · 212 values/s · new data 0.4 s ago``."""
    parts = [f"watching {terminal(paths)}", f"update {update.number}"]
    if update.report is None:
        parts.append(terminal(update.waiting))
    else:
        runs = len(update.report.runs)
        step = "no step yet" if update.newest_step is None else f"step {update.newest_step}"
        parts += [plural(runs, "run"), step, f"{update.values_per_second:.0f} values/s"]
    parts.append(f"new data {update.seconds_since_data:.1f} s ago")
    return " · ".join(parts)


def failure_line(failure: Failure) -> str:
    """``runs/a: fc1.weight: nan at step 25: <evidence>`` (escaped for a terminal)."""
    layer = failure.layer
    at = "" if layer.first_bad_step is None else f" at step {layer.first_bad_step}"
    text = f"{failure.run}: {layer.name}: {layer.verdict}{at}: {layer.evidence}"
    return terminal(text)


def update_document(update: Update, reason: str = "") -> dict[str, Any]:
    """One update as JSON-safe data; ``reason`` (``finding``, ``idle``, ``interrupted``) for
    the last one, which carries the whole report."""
    document: dict[str, Any] = {
        "watch": WATCH_SCHEMA,
        "update": update.number,
        "elapsed": round(update.elapsed, 3),
        "seconds_since_data": round(update.seconds_since_data, 3),
        "new_bytes": update.new_bytes,
        "bytes": update.bytes_read,
        "values": update.values_read,
        "values_per_second": round(update.values_per_second, 1),
        "newest_step": update.newest_step,
        "waiting": update.waiting or None,
        "runs": None if update.report is None else len(update.report.runs),
        "changes": [
            {
                "run": change.run,
                "parameter": change.parameter,
                "verdict": change.verdict,
                "was": change.was,
                "first_bad_step": change.first_bad_step,
                "was_step": change.was_step,
            }
            for change in update.changes
        ],
        "failing": [
            {
                "run": failure.run,
                "parameter": failure.layer.name,
                "verdict": failure.layer.verdict,
                "first_bad_step": failure.layer.first_bad_step,
            }
            for failure in update.failures
        ],
        "warnings": list(update.warnings),
    }
    if reason:
        document["final"] = True
        document["exit"] = reason
        document["report"] = None if update.report is None else report_document(update.report)
    return document


def update_line(update: Update, reason: str = "") -> str:
    """:func:`update_document` as one line of JSON, with its newline."""
    document = update_document(update, reason)
    return json.dumps(document, ensure_ascii=False, allow_nan=False) + "\n"
