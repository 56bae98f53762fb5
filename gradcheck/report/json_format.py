"""The JSON format: a versioned contract for scripts and CI (schema in docs/reference/json.md).

Every parameter appears, healthy ones included, sorted by severity (descending) within its run.
Non-finite numbers become ``null`` so that the document is strict JSON (``jq``, ``json.loads``
and JavaScript all accept it). Fields may be added within a schema version; renaming or
removing one increments ``SCHEMA_VERSION``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping
from typing import Any

from gradcheck.model import ClipInfo, HParamValue, LayerResult, Report, RunReport, Spike, Sweep
from gradcheck.report import json_text
from gradcheck.report.interface import Formatter
from gradcheck.report.view import verdict_counts

SCHEMA_VERSION = 1


class JsonFormatter(Formatter):
    """One JSON document (indented, UTF-8 text, trailing newline)."""

    def format(self, report: Report) -> str:
        return "".join(self.chunks(report))

    def chunks(self, report: Report) -> Iterator[str]:
        """The text of :func:`report_document`, one run at a time: its runs come last, so the
        rest is written first, then each run's document at the nesting depth of ``runs``'
        items (a large sweep's document and text held whole cost memory: ``bench/README.md``)."""
        head = json_text.dumps(head_document(report))  # "{\n  ...\n}"
        if not report.runs:
            yield head[:-2] + ',\n  "runs": []\n}\n'
            return
        yield head[:-2] + ',\n  "runs": ['
        for at, run in enumerate(report.runs):
            yield ("\n    " if at == 0 else ",\n    ") + json_text.dumps(run_document(run), depth=2)
        yield "\n  ]\n}\n"


def report_document(report: Report) -> dict[str, Any]:
    """The report as plain JSON-safe data (docs/reference/json.md)."""
    return {**head_document(report), "runs": [run_document(run) for run in report.runs]}


def head_document(report: Report) -> dict[str, Any]:
    """The report's document without ``runs``, its last key (docs/reference/json.md)."""
    document: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "gradcheck": report.version,
        "warnings": list(report.warnings),
    }
    if report.sweep is not None:  # only when the view is on: other reports stay as they were
        document["sweep"] = sweep_document(report.sweep)
    return document


def sweep_document(sweep: Sweep) -> dict[str, Any]:
    """The sweep view: runs per verdict, hyperparameters, their relations, the ranking."""
    return {
        "runs": sweep.runs,
        "counts": dict(sweep.counts),
        "hparams": dict(sweep.hparams),
        "relations": [
            {
                "hparam": relation.hparam,
                "verdict": relation.verdict,
                "kind": relation.kind,
                "threshold": finite(relation.threshold),
                "value": hparam_value(relation.value),
                "groups": [
                    {"label": group.label, "runs": group.runs, "matching": group.matching}
                    for group in relation.groups
                ],
                "text": relation.text,
            }
            for relation in sweep.relations
        ],
        "ranking": [
            {
                "run": run.run,
                "verdict": run.verdict,
                "flags": list(run.flags),
                "findings": run.findings,
                "worst": run.worst,
                "first_bad_step": run.first_bad_step,
                "severity": finite(run.severity),
                "hparams": {name: hparam_value(value) for name, value in run.hparams.items()},
            }
            for run in sweep.ranking
        ],
    }


def hparam_value(value: HParamValue | None) -> HParamValue | None:
    """A hyperparameter's value as JSON: text and bools as they are, numbers :func:`finite`."""
    if value is None or isinstance(value, (bool, str)):
        return value
    return finite(value)


def run_document(run: RunReport) -> dict[str, Any]:
    """One run: its files, step range, writers, warnings, verdict counts and every parameter."""
    layers = sorted(run.layers, key=lambda layer: -layer.severity)
    return {
        "run": run.run,
        "files": list(run.files),
        "steps": None if run.steps is None else [run.steps[0], run.steps[1]],
        "writers": list(run.writers),
        "warnings": list(run.warnings),
        "counts": dict(verdict_counts(run)),
        "judgeable": run.judgeable,
        "gradients": run.gradients,
        "holds": run.holds or None,
        "notes": list(run.notes),
        "updates": run.updates or None,
        "clipping": None if run.clipping is None else clipping_document(run.clipping),
        "spikes": [spike_document(spike) for spike in run.spikes],
        "layers": [layer_document(layer) for layer in layers],
    }


def spike_document(spike: Spike) -> dict[str, Any]:
    """A transient spike of the training loss and the parameters that led it."""
    return {
        "step": spike.step,
        "loss_ratio": finite(spike.loss_ratio),
        "led_by": list(spike.led_by),
        "gradient_step": spike.gradient_step,
        "rise": finite(spike.rise),
        "note": spike.note or None,
    }


def layer_document(layer: LayerResult) -> dict[str, Any]:
    """One parameter's verdict with its evidence and statistics."""
    return {
        "name": layer.name,
        "weight_tag": layer.weight_tag,
        "grad_tag": layer.grad_tag,
        "activation_tag": layer.activation_tag,
        "verdict": layer.verdict,
        "flags": list(layer.flags),
        "severity": finite(layer.severity),
        "first_bad_step": layer.first_bad_step,
        "onsets": dict(layer.onsets),
        "evidence": layer.evidence,
        "notes": list(layer.notes),
        "hint": layer.hint,
        "depth": layer.depth,
        "stats": finite_mapping(layer.stats),
        "trend_of": layer.trend_of,
        "trend": [finite(value) for value in layer.trend],
    }


def clipping_document(clip: ClipInfo) -> dict[str, Any]:
    """The run's global gradient norm summary and clip-norm suggestion."""
    return {
        "source": clip.source,
        "steps": [clip.steps[0], clip.steps[1]],
        "median": finite(clip.median),
        "p99": finite(clip.p99),
        "max": finite(clip.maximum),
        "clipped": clip.clipped,
        "ceiling": finite(clip.ceiling),
        "kind": clip.kind,
        "clip_value": finite(clip.clip_value),
        "clipped_share": finite(clip.clipped_share),
        "suggested_clip_norm": finite(clip.suggested_clip_norm),
        "suggested_share": finite(clip.suggested_share),
        "rule": clip.rule,
        "framework": clip.framework,
        "advice": clip.advice,
        "trend": [finite(value) for value in clip.trend],
    }


def finite(value: float | int | None) -> float | int | None:
    """``value`` as a JSON number, ``None`` for NaN/inf/absent (numpy scalars made plain)."""
    if type(value) is float:  # most values: a plain float
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):  # int and numpy integers
        return int(value)
    number = float(value)
    return number if math.isfinite(number) else None


def finite_mapping(stats: Mapping[str, float | int | None]) -> dict[str, float | int | None]:
    """``stats`` with every value passed through :func:`finite`."""
    return {str(key): finite(value) for key, value in stats.items()}
