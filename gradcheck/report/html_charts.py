"""The HTML report's charts as plotly figure specifications (plain ``{"data", "layout"}``
dicts, which plotly.js draws): one per group of findings (a layer row), the run's layer x
logged-step heatmap and its global gradient norm.

Plain dicts rather than ``plotly.graph_objects``: building and validating graph objects (and
their template) was many times slower (``bench/README.md``). Every text plotly draws (trace
names, axis titles, heatmap rows) goes through ``label``, the HTML format's escaper: plotly
renders a subset of HTML in its labels (``<b>``, ``<a href>``), so a tag name must reach it as
text, never as markup. Numbers are plain lists; non-finite values become ``None`` (a gap in
the line).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from gradcheck.model import ClipInfo, LayerResult, ParameterComparison, RunReport, StepSeries
from gradcheck.report.layers import LayerRow, common_prefix, split_name

Label = Callable[[str], str]
Figure = dict[str, Any]
NONFINITE_COLOR = "#d62728"
ZERO_COLOR = "#9e9e9e"
ONSET_COLOR = "#ff7f0e"
LEVEL_COLOR = "#7f7f7f"
RUN_COLORS = {"A": "#1f77b4", "B": "#2ca02c"}  # compare: run A's and run B's lines


def finding_figure(layer: LayerResult, label: Label) -> Figure | None:
    """The relevant norm over steps (log scale) with the thresholds the rule used, each flag's
    onset and the non-finite steps marked; the weights' update size in a panel under it."""
    series = layer.series
    if series is None:
        return None
    log = axis_type(series.values) == "log"
    data = [_line(series, label, log), *(_zero_marks(series) if log else [])]
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


MAX_GROUP_LINES = 8
"""Parameters drawn in one finding group's chart (the most severe first); the rest are in the
run's table."""


def group_figure(row: LayerRow, label: Label) -> Figure | None:
    """One chart for a group of findings (a layer row: its parameters with one verdict): each
    parameter's norm over steps (log scale), the worst one's thresholds, the row's onsets, the
    non-finite steps and the exact zeros marked."""
    members = [member for member in row.members if member.series is not None]
    members = members[:MAX_GROUP_LINES]
    if not members:
        return None
    series = [member.series for member in members if member.series is not None]
    values = np.concatenate([one.values for one in series])
    log = axis_type(values) == "log"
    data = [{**_line(one, label, log), "name": label(member.name)}
            for member, one in zip(members, series, strict=True)]  # fmt: skip
    joined = StepSeries(
        series[0].label,
        np.concatenate([one.steps for one in series]),
        values,
        np.unique(np.concatenate([one.nonfinite_steps for one in series])),
    )
    if log:
        data += _zero_marks(joined)
    data += _nonfinite_marks(joined)
    worst = members[0]
    data += [_level(joined, ref.value, label(ref.label)) for ref in worst.references]
    layout: dict[str, Any] = {
        "xaxis": {"title": {"text": "step"}},
        "yaxis": _value_axis(values, label(series[0].label)),
        "shapes": [],
        "annotations": [],
    }
    for position, (text, step) in enumerate(_onsets(worst)):
        layout["shapes"].append(_onset_line(step))
        layout["annotations"].append(_onset_label(step, text, 1.0 - 0.07 * position))
    return _styled(data, layout, height=340)


MAX_COLUMNS = 240
"""Columns of the layer heatmap: one per logged step up to this many, else runs of consecutive
logged steps (each cell the largest norm of its run, NaN/Inf if any step was)."""
GRADIENT = "gradient L2 norm"


def layer_heatmap(run: RunReport, label: Label) -> Figure | None:
    """Each layer's gradient norm (its parameters' norms combined, as the square root of the
    sum of their squares) at each logged step, first layer at the top: one column per logged
    step, no gaps between them. A vanishing gradient shows as rows decades darker than the
    others; NaN/Inf cells are red, exact zeros grey (a log scale has no zero). Without any
    gradient, the weights' norms."""
    rows = _heatmap_rows(run)
    if not rows:
        return None
    every = [one for _, members in rows for one in members]
    steps = np.unique(np.concatenate([s.steps for s in every] + [s.nonfinite_steps for s in every]))
    if steps.size == 0:
        return None
    columns = np.array_split(np.arange(steps.size), min(MAX_COLUMNS, steps.size))
    labels = [_column_label(steps, column) for column in columns]
    norms, zeros, bad = [], [], []
    for _, members in rows:
        level, nonfinite = _layer_level(members, steps)
        cells = [_cell(level[column], nonfinite[column]) for column in columns]
        norms.append([math.log10(c) if isinstance(c, float) and c > 0 else None for c in cells])
        zeros.append([1 if c == 0.0 else None for c in cells])
        bad.append([1 if c == BAD else None for c in cells])
    names = [label(name) for name, _ in rows]
    quantity = every[0].label
    common = {"x": labels, "y": names, "xgap": 0, "ygap": 1}
    data = [
        {
            "type": "heatmap", **common, "z": norms, "colorscale": "Viridis",
            "colorbar": {"title": {"text": f"log10 {quantity.split()[0]} norm"}},
            "hovertemplate": "%{y}<br>step %{x}<br>log10 norm %{z:.2f}<extra></extra>",
        },
        {
            "type": "heatmap", **common, "z": zeros, "name": "exactly 0", "showscale": False,
            "colorscale": [[0, ZERO_COLOR], [1, ZERO_COLOR]],
            "hovertemplate": "%{y}<br>step %{x}<br>exactly 0<extra></extra>",
        },
        {
            "type": "heatmap", **common, "z": bad, "name": "NaN or Inf", "showscale": False,
            "colorscale": [[0, NONFINITE_COLOR], [1, NONFINITE_COLOR]],
            "hovertemplate": "%{y}<br>step %{x}<br>NaN or Inf<extra></extra>",
        },
    ]  # fmt: skip
    layout = {
        "xaxis": {"title": {"text": "logged step"}, "type": "category", "nticks": 12},
        "yaxis": {"autorange": "reversed", "automargin": True, "type": "category"},
    }
    figure = _styled(data, layout, height=min(140 + 22 * len(rows), 900))
    figure["layout"]["showlegend"] = False
    return figure


BAD = "NaN or Inf"  # a cell where a parameter was non-finite


def _heatmap_rows(run: RunReport) -> list[tuple[str, list[StepSeries]]]:
    """``(layer, its parameters' series)`` by depth: the gradient norms, or without any the
    weight norms; names without the prefix every parameter shares."""
    with_series = [
        layer for layer in run.layers if layer.series is not None and not layer.is_activation
    ]
    gradients = [layer for layer in with_series if layer.trend_of == GRADIENT]
    chosen = gradients or with_series
    prefix = common_prefix([layer.name for layer in run.layers])
    grouped: dict[str, list[LayerResult]] = {}
    for layer in sorted(chosen, key=lambda x: x.depth):
        grouped.setdefault(split_name(layer.name[len(prefix) :])[0], []).append(layer)
    return [
        (name, [member.series for member in members if member.series is not None])
        for name, members in grouped.items()
    ]


def _layer_level(members: list[StepSeries], steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The layer's norm at each of ``steps`` (NaN where none of its parameters was logged) and
    whether any parameter was NaN/Inf there."""
    squares = np.zeros(steps.size)
    logged = np.zeros(steps.size, dtype=bool)
    nonfinite = np.zeros(steps.size, dtype=bool)
    for series in members:
        at = np.searchsorted(steps, series.steps)
        finite = np.isfinite(series.values)
        np.add.at(squares, at[finite], series.values[finite] ** 2)
        logged[at[finite]] = True
        nonfinite[np.searchsorted(steps, series.nonfinite_steps)] = True
    return np.where(logged, np.sqrt(squares), np.nan), nonfinite


def _cell(levels: np.ndarray, nonfinite: np.ndarray) -> float | str | None:
    """A column's cell: :data:`BAD` if any step was NaN/Inf, else the largest norm, None if
    not logged."""
    if nonfinite.any():
        return BAD
    logged = levels[np.isfinite(levels)]
    return float(logged.max()) if logged.size else None


def _column_label(steps: np.ndarray, column: np.ndarray) -> str:
    """``120``, or ``120–128`` for a column standing for several logged steps."""
    first, last = int(steps[column[0]]), int(steps[column[-1]])
    return str(first) if first == last else f"{first}–{last}"


SPIKE_COLOR = "#d62728"


def loss_figure(run: RunReport, label: Label) -> Figure | None:
    """The training loss over the logged steps (log scale when positive), each transient spike
    marked with a dotted line at its step and labelled with the parameter that led it."""
    series = run.loss
    if series is None:
        return None
    data = [_line(series, label), *_nonfinite_marks(series)]
    layout: dict[str, Any] = {
        "xaxis": {"title": {"text": "step"}},
        "yaxis": _value_axis(series.values, "loss"),
        "shapes": [],
        "annotations": [],
    }
    for row, spike in enumerate(run.spikes):
        leader = spike.led_by[0] if spike.led_by else "no gradient leader"
        text = label(f"spike {spike.loss_ratio:.3g}x, led by {leader}")
        layout["shapes"].append(
            {**_onset_line(spike.step), "line": {"color": SPIKE_COLOR, "dash": "dot"}}
        )
        layout["annotations"].append(_onset_label(spike.step, text, 1.0 - 0.07 * (row % 4)))
    return _styled(data, layout, height=300)


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


def _line(series: StepSeries, label: Label, log: bool = False) -> dict[str, Any]:
    """The series as a line; on a log axis its exact zeros are gaps (``_zero_marks`` shows
    them), not a cliff down to the axis' floor."""
    values = np.where(series.values > 0, series.values, np.nan) if log else series.values
    return {
        "type": "scatter",
        "mode": "lines",
        "x": series.steps.tolist(),
        "y": _finite_or_none(values),
        "name": label(series.label),
        "hovertemplate": "step %{x}<br>%{y:.3g}<extra></extra>",
    }


def _zero_marks(series: StepSeries, name: str = "exactly 0") -> list[dict[str, Any]]:
    """A grey tick at the foot of a log chart at every step whose value is exactly zero (a log
    axis has no zero: drawn as a line, it fell off the chart as a vertical cliff)."""
    zeros = series.steps[series.values == 0]
    if zeros.size == 0:
        return []
    positive = series.values[np.isfinite(series.values) & (series.values > 0)]
    bottom = float(positive.min()) / 2 if positive.size else 1.0
    mark = {
        "type": "scatter",
        "mode": "markers",
        "x": zeros.tolist(),
        "y": [bottom] * int(zeros.size),
        "marker": {"symbol": "line-ns-open", "color": ZERO_COLOR, "size": 8},
        "name": name,
        "hovertemplate": "step %{x}: exactly 0<extra></extra>",
    }
    return [mark]


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
