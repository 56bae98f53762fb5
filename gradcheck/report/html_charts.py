"""The HTML report's charts as plotly figure specifications (plain ``{"data", "layout"}``
dicts, which plotly.js draws): one per finding, the run's depth profile and its global
gradient norm.

Plain dicts rather than ``plotly.graph_objects``: building and validating graph objects (and
their template) took ~0.1 s a chart, 4.7 s for the 46 charts of ``sample_runs/`` against
0.09 s as dicts (medians of 3 and 5 runs). Every text plotly draws (trace names, axis titles,
heatmap rows) goes through ``label``, the HTML format's escaper: plotly renders a subset of
HTML in its labels (``<b>``, ``<a href>``), so a tag name must reach it as text, never as
markup. Numbers are plain lists; non-finite values become ``None`` (a gap in the line).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gradcheck.model import ClipInfo, LayerResult, ParameterComparison, RunReport, StepSeries

Label = Callable[[str], str]
Figure = dict[str, Any]
NONFINITE_COLOR = "#d62728"
ONSET_COLOR = "#ff7f0e"
LEVEL_COLOR = "#7f7f7f"
RUN_COLORS = {"A": "#1f77b4", "B": "#2ca02c"}  # compare: run A's and run B's lines
PROFILE_BINS = 120
"""Step bins of the depth profile: enough to see a trend across a phone's width."""


def finding_figure(layer: LayerResult, label: Label) -> Figure | None:
    """The relevant norm over steps (log scale) with the thresholds the rule used, each flag's
    onset and the non-finite steps marked; the weights' update size in a panel under it."""
    series = layer.series
    if series is None:
        return None
    data = [_line(series, label)]
    data += _nonfinite_marks(series)
    data += [
        _level(series, reference.value, label(reference.label)) for reference in layer.references
    ]
    layout: dict[str, Any] = {
        "xaxis": {"title": {"text": "step"}},
        "yaxis": _value_axis(series.values, label(series.label)),
        "shapes": [],
        "annotations": [],
    }
    for row, (text, step) in enumerate(_onsets(layer)):
        layout["shapes"].append(_onset_line(step))
        layout["annotations"].append(_onset_label(step, text, 1.0 - 0.07 * row))
    update = layer.update_series
    if update is None:
        return _styled(data, layout, height=320)
    data.append({**_line(update, label), "yaxis": "y2"})
    layout["yaxis"]["domain"] = [0.36, 1.0]
    layout["yaxis2"] = {
        **_value_axis(update.values, "update"),
        "domain": [0.0, 0.26],
        "anchor": "x",
    }
    layout["xaxis"]["anchor"] = "y2"
    return _styled(data, layout, height=420)


def profile_figure(run: RunReport, label: Label) -> Figure | None:
    """Every parameter's gradient norm over steps as one heatmap, first layer at the top: a
    vanishing gradient shows as rows decades darker than the ones below them."""
    charted = [(layer.depth, layer.name, layer.series) for layer in run.layers if layer.grad_tag]
    rows = sorted(
        ((depth, name, s) for depth, name, s in charted if s is not None and s.steps.size),
        key=lambda row: row[0],
    )
    series = [s for _, _, s in rows]
    if not series:
        return None
    first = min(int(s.steps.min()) for s in series)
    last = max(int(s.steps.max()) for s in series)
    edges = np.linspace(first, last + 1, PROFILE_BINS + 1)
    heatmap = {
        "type": "heatmap",
        "z": [_binned_log10(s, edges) for s in series],
        "x": ((edges[:-1] + edges[1:]) / 2).tolist(),
        "y": [label(name) for _, name, _ in rows],
        "colorscale": "Viridis",
        "colorbar": {"title": {"text": "log10 norm"}},
        "hovertemplate": "%{y}<br>step ~%{x:.0f}<br>log10 gradient norm %{z:.2f}<extra></extra>",
    }
    layout = {
        "xaxis": {"title": {"text": "step"}},
        "yaxis": {"autorange": "reversed", "automargin": True},
    }
    return _styled([heatmap], layout, height=min(160 + 18 * len(series), 900))


def clipping_figure(clip: ClipInfo, label: Label) -> Figure | None:
    """The run's global gradient norm with the clip ceiling it is pinned at and the suggested
    clip norm."""
    series = clip.series
    if series is None:
        return None
    data = [_line(series, label), *_nonfinite_marks(series)]
    if clip.ceiling is not None:
        data.append(_level(series, clip.ceiling, "clip ceiling"))
    if clip.suggested_clip_norm is not None:
        data.append(_level(series, clip.suggested_clip_norm, "suggested clip norm"))
    layout = {
        "xaxis": {"title": {"text": "step"}},
        "yaxis": _value_axis(series.values, "global norm"),
    }
    return _styled(data, layout, height=300)


def comparison_figure(parameter: ParameterComparison, label: Label) -> Figure | None:
    """A's and B's gradient norm over their common steps (log scale), the step where they
    part marked; their weight movement per step in a panel under it."""
    norms, updates = parameter.grad_norm_series, parameter.update_series
    if norms is None and updates is None:
        return None
    layout: dict[str, Any] = {"xaxis": {"title": {"text": "step"}}}
    data = _runs_overlaid(norms, "y", label)
    if norms is not None:
        layout["yaxis"] = _value_axis(_joined(norms), label(norms[0].label))
    if parameter.first_divergent_step is not None:
        step = parameter.first_divergent_step
        layout["shapes"] = [_onset_line(step)]
        layout["annotations"] = [_onset_label(step, f"parts at {step}", 1.0)]
    if updates is None:
        return _styled(data, layout, height=320)
    axis = "y2" if norms is not None else "y"
    data += _runs_overlaid(updates, axis, label)
    update_axis = _value_axis(_joined(updates), "movement")
    if norms is None:
        layout["yaxis"] = update_axis
        return _styled(data, layout, height=320)
    layout["yaxis"]["domain"] = [0.36, 1.0]
    layout["yaxis2"] = {**update_axis, "domain": [0.0, 0.26], "anchor": "x"}
    layout["xaxis"]["anchor"] = "y2"
    return _styled(data, layout, height=420)


def _runs_overlaid(
    pair: tuple[StepSeries, StepSeries] | None, axis: str, label: Label
) -> list[dict[str, Any]]:
    """Run A's and run B's line of one quantity, each in its run's colour."""
    if pair is None:
        return []
    traces = []
    for run, series in zip(RUN_COLORS, pair, strict=True):
        line = {"color": RUN_COLORS[run]}
        traces.append({**_line(series, label), "name": f"{run}: {label(series.label)}",
                       "line": line, "yaxis": axis})  # fmt: skip
        traces += [
            {**mark, "name": f"{run}: NaN or inf", "yaxis": axis}
            for mark in _nonfinite_marks(series)
        ]
    return traces


def _joined(pair: tuple[StepSeries, StepSeries]) -> np.ndarray:
    """Both runs' values (the axis type both share is chosen from them)."""
    return np.concatenate([pair[0].values, pair[1].values])


def axis_type(values: np.ndarray) -> str:
    """``log`` for a mostly positive quantity (norms span decades; a zero here and there is left
    out), ``linear`` when zeros dominate (a frozen weight's update, an all-zero bias)."""
    finite = values[np.isfinite(values)]
    return "log" if finite.size and (finite > 0).mean() >= 0.5 else "linear"


def _value_axis(values: np.ndarray, title: str) -> dict[str, Any]:
    return {"type": axis_type(values), "title": {"text": title}, "exponentformat": "e"}


def _line(series: StepSeries, label: Label) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines",
        "x": series.steps.tolist(),
        "y": _finite_or_none(series.values),
        "name": label(series.label),
        "hovertemplate": "step %{x}<br>%{y:.3g}<extra></extra>",
    }


def _level(series: StepSeries, value: float, name: str) -> dict[str, Any]:
    """A dashed horizontal line at ``value`` across the series' steps, named in the legend (a
    trace rather than a shape: plotly misplaces shape labels on log axes)."""
    ends = [int(series.steps.min()), int(series.steps.max())] if series.steps.size else [0, 0]
    return {
        "type": "scatter",
        "mode": "lines",
        "x": ends,
        "y": [value, value],
        "line": {"dash": "dash", "color": LEVEL_COLOR, "width": 1},
        "name": name,
        "hovertemplate": "%{fullData.name}: %{y:.3g}<extra></extra>",
    }


def _nonfinite_marks(series: StepSeries) -> list[dict[str, Any]]:
    """A red cross at the top of the chart at every step whose values held NaN or inf."""
    if series.nonfinite_steps.size == 0:
        return []
    finite = series.values[np.isfinite(series.values) & (series.values > 0)]
    top = float(finite.max()) * 2 if finite.size else 1.0
    mark = {
        "type": "scatter",
        "mode": "markers",
        "x": series.nonfinite_steps.tolist(),
        "y": [top] * int(series.nonfinite_steps.size),
        "marker": {"symbol": "x", "color": NONFINITE_COLOR, "size": 8},
        "name": "NaN or inf",
        "hovertemplate": "step %{x}: NaN or inf<extra></extra>",
    }
    return [mark]


def _onset_line(step: int) -> dict[str, Any]:
    return {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "x0": step,
        "x1": step,
        "y0": 0,
        "y1": 1,
        "line": {"color": ONSET_COLOR, "dash": "dot"},
    }


def _onsets(layer: LayerResult) -> list[tuple[str, int]]:
    """Each flag's onset (``exploding from 2``, ``nan from 21``), else the first bad step."""
    if layer.onsets:
        return [(f"{verdict} from {step}", step) for verdict, step in layer.onsets.items()]
    if layer.first_bad_step is not None:
        return [("first bad step", layer.first_bad_step)]
    return []


def _onset_label(step: int, text: str, height: float) -> dict[str, Any]:
    return {"x": step, "y": height, "xref": "x", "yref": "paper", "text": text,
            "showarrow": False, "xanchor": "left", "yanchor": "top"}  # fmt: skip


def _finite_or_none(values: np.ndarray) -> list[float | None]:
    return [float(v) if np.isfinite(v) else None for v in values.tolist()]


def _binned_log10(series: StepSeries, edges: np.ndarray) -> list[float | None]:
    """Mean log10 of the positive finite values in each step bin (None for an empty bin)."""
    keep = np.isfinite(series.values) & (series.values > 0)
    index = np.digitize(series.steps[keep], edges) - 1
    logs = np.log10(series.values[keep])
    sums = np.bincount(index, weights=logs, minlength=edges.size - 1)[: edges.size - 1]
    counts = np.bincount(index, minlength=edges.size - 1)[: edges.size - 1]
    return [float(s / c) if c else None for s, c in zip(sums, counts, strict=True)]


def _styled(data: list[dict[str, Any]], layout: dict[str, Any], height: int) -> Figure:
    layout = {
        **layout,
        "height": height,
        "autosize": True,  # as wide as the page (with the config's ``responsive``: on resize)
        "margin": {"l": 60, "r": 20, "t": 50, "b": 40},
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        "plot_bgcolor": "white",
        "showlegend": len(data) > 1,
    }
    for axis in ("xaxis", "yaxis", "yaxis2"):
        if axis in layout:
            layout[axis] = {"gridcolor": "#eee", "zeroline": False, **layout[axis]}
    return {"data": data, "layout": layout}
