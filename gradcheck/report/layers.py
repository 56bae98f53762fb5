"""A run's parameters as layers, for a reader: the rows of the default terminal view.

A layer is a parameter's name without its last component (``mlp/dense_0/kernel`` belongs to
``mlp/dense_0``, ``encoder.layers.0.in_proj_weight`` to ``encoder.layers.0``). A layer row
holds the parameters of one layer together: the worst verdict among them, the earliest onset
of that verdict, and the short names of the parameters that carry a finding (``kernel, bias``).
Consecutive layers (in the network's order) with the same verdict, onset and advice fold into
one row (``dense_0 … dense_5``), and the prefix every parameter shares (``mlp/``) is said once,
above the rows. Everything here is unescaped text: the formats escape it their own way.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model import VERDICTS, LayerResult, RunReport, Verdict
from gradcheck.report.advice import Advice, verdict_advice
from gradcheck.verdicts.registry import OK

ELLIPSIS = "…"


def split_name(name: str) -> tuple[str, str]:
    """``(layer, parameter)``: ``mlp/dense/kernel`` -> ``(mlp/dense, kernel)``, ``0.weight``
    -> ``(0, weight)``; a name without a separator (``kernel#1``, a run-level row such as
    ``(global gradient norm)``) is a layer of its own, ``(name, "")``. The ``/`` of a path
    wins over the ``.`` of a PyTorch name (``model/block.1/kernel``), as in
    :func:`gradcheck.verdicts.hints.layer_of`."""
    if name.startswith("("):
        return name, ""
    for separator in ("/", "."):
        if separator in name:
            layer, _, parameter = name.rpartition(separator)
            if layer and parameter:
                return layer, parameter
    return name, ""


def separator_of(name: str) -> str:
    """The separator of ``name``'s path: ``/`` when it has one, else ``.``."""
    return "/" if "/" in name else "."


def common_prefix(names: list[str]) -> str:
    """The leading path components every name shares, with their separator (``mlp/``), never
    so long that a name would lose its layer: at least a layer and a parameter stay. ``""``
    when the names share none, mix separators, or there is only one layer."""
    if not names or any(name.startswith("(") for name in names):
        return ""
    separator = separator_of(names[0])
    if any(separator_of(name) != separator for name in names):
        return ""
    paths = [name.split(separator) for name in names]
    shared = 0
    limit = min(len(path) for path in paths) - 2  # keep a layer and a parameter
    while shared < limit and all(path[shared] == paths[0][shared] for path in paths):
        shared += 1
    return "".join(part + separator for part in paths[0][:shared])


@dataclass(eq=False)
class LayerRow:
    """One row of the layer view: one layer, or consecutive layers folded together."""

    verdict: Verdict
    layers: tuple[str, ...]  # layer names without the run's common prefix, network order
    parameters: tuple[str, ...]  # short names of the parameters with this finding, in order
    onset: int | None  # the earliest first bad step among them
    members: tuple[LayerResult, ...]  # the parameters behind the row, worst first
    depth: int  # the first layer's position in the network
    advice: Advice | None = None  # the cause and fix of its worst finding of ``verdict``

    @property
    def worst(self) -> LayerResult:
        """The row's most severe parameter (its numbers and trend stand for the row)."""
        return self.members[0]

    def layer_text(self) -> str:
        """``dense_0``, ``dense_0, dense_1``, ``dense_0 … dense_5`` (the last layer without
        the path it shares with the first: ``generator/LSTM1 … Dense1``, ``bi/forward,
        backward``)."""
        if len(self.layers) == 1:
            return self.layers[0]
        first, last = self.layers[0], self.layers[-1]
        shared = common_prefix([f"{first}{separator_of(first)}x", f"{last}{separator_of(last)}x"])
        joint = ", " if len(self.layers) == 2 else f" {ELLIPSIS} "
        return f"{first}{joint}{last[len(shared) :]}"

    def parameter_text(self) -> str:
        """``kernel, bias``; ``""`` for layers that are a parameter of their own."""
        return ", ".join(self.parameters)


@dataclass(eq=False)
class LayerView:
    """A run's findings as layer rows, worst first, and what the rows leave out."""

    prefix: str  # said once, above the rows
    rows: tuple[LayerRow, ...]
    layers: int  # layers in the run
    healthy_layers: int  # layers without any finding


def _rank(layer: LayerResult) -> tuple[int, float]:
    return VERDICTS.index(layer.verdict), -layer.severity


def layer_view(run: RunReport) -> LayerView:
    """The layer rows of ``run``'s findings: each layer's worst verdict and its earliest onset,
    consecutive layers with the same verdict and onset folded (within one sub-model, the
    first path component), rows worst verdict first, then earliest onset, then depth."""
    prefix = common_prefix([layer.name for layer in run.layers])
    grouped: dict[tuple[str, bool], list[LayerResult]] = {}
    for parameter in run.layers:
        layer = _layer_name(parameter, prefix)
        grouped.setdefault((layer, parameter.is_activation), []).append(parameter)
    ordered = sorted(grouped.items(), key=lambda item: min(p.depth for p in item[1]))
    singles = [_single(name, members) for (name, _), members in ordered]
    groups = _submodels([name for (name, _), _ in ordered])
    rows: list[LayerRow] = []
    for single in singles:
        previous = rows[-1] if rows else None
        if single is not None and previous is not None and _folds(previous, single, groups):
            rows[-1] = _folded(previous, single)
        elif single is not None:
            rows.append(single)
        else:
            rows.append(_HEALTHY)  # breaks a fold: the layers are no longer consecutive
    found = [row for row in rows if row is not _HEALTHY]
    found.sort(
        key=lambda row: (
            VERDICTS.index(row.verdict),
            row.onset if row.onset is not None else float("inf"),
            row.depth,
        )
    )
    healthy = sum(single is None for single in singles)
    return LayerView(prefix=prefix, rows=tuple(found), layers=len(singles), healthy_layers=healthy)


OUTPUTS = "outputs"
"""The parameters column of a layer row judged from its outputs (an activation histogram)."""


def _layer_name(layer: LayerResult, prefix: str) -> str:
    """The layer a row belongs to: a parameter's name without its last component; an
    activation row's name whole (it names a layer), both without the run's prefix."""
    name = layer.name[len(prefix) :] if layer.name.startswith(prefix) else layer.name
    return name if layer.is_activation else split_name(name)[0]


def _single(name: str, members: list[LayerResult]) -> LayerRow | None:
    """The row of one layer (None when none of its parameters has a finding)."""
    findings = sorted((p for p in members if p.verdict != OK), key=_rank)
    if not findings:
        return None
    verdict = findings[0].verdict
    onsets = [_onset(p, verdict) for p in findings if verdict in p.flags or p.verdict == verdict]
    known = [step for step in onsets if step is not None]
    in_order = sorted(findings, key=lambda p: p.depth)
    return LayerRow(
        verdict=verdict,
        layers=(name,),
        parameters=tuple(_short(p) for p in in_order if _short(p)),
        onset=min(known) if known else None,
        members=tuple(findings),
        depth=min(p.depth for p in members),
        advice=verdict_advice([p for p in findings if p.verdict == verdict]),
    )


def _onset(parameter: LayerResult, verdict: Verdict) -> int | None:
    """When ``parameter`` first showed ``verdict`` (its first bad step when not recorded)."""
    return parameter.onsets.get(verdict, parameter.first_bad_step)


def _short(layer: LayerResult) -> str:
    return OUTPUTS if layer.is_activation else split_name(layer.name)[1]


def _first_component(layer: str) -> str:
    separator = separator_of(layer)
    return layer.split(separator, 1)[0] if separator in layer else ""


def _submodels(layers: list[str]) -> dict[str, str]:
    """Each layer's sub-model: the first path component that several layers share
    (``generator`` of ``generator/LSTM1`` and ``generator/Dense1``), ``""`` for the others
    (``embedder_lstm_0/lstm_cell`` alone under its first component is a top-level layer)."""
    firsts = [_first_component(layer) for layer in layers]
    shared = {first for first in firsts if first and firsts.count(first) > 1}
    return {
        layer: first if first in shared else "" for layer, first in zip(layers, firsts, strict=True)
    }


def _folds(previous: LayerRow, row: LayerRow, submodels: dict[str, str]) -> bool:
    return (
        previous.verdict == row.verdict
        and previous.onset == row.onset
        and previous.advice == row.advice  # one cause: a frozen layer beside one left out of
        and submodels[previous.layers[0]] == submodels[row.layers[0]]  # the optimizer stays apart
    )


def _folded(previous: LayerRow, row: LayerRow) -> LayerRow:
    parameters = list(previous.parameters)
    parameters += [name for name in row.parameters if name not in parameters]
    return LayerRow(
        verdict=previous.verdict,
        layers=(*previous.layers, *row.layers),
        parameters=tuple(parameters),
        onset=previous.onset,
        members=tuple(sorted((*previous.members, *row.members), key=_rank)),
        depth=previous.depth,
        advice=previous.advice,
    )


_HEALTHY = LayerRow(verdict=OK, layers=(), parameters=(), onset=None, members=(), depth=-1)
