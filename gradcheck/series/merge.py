"""The cross-file merge: the reductions of a run's files joined in order, restarts purged
(the reader's rule, across files: a series going back to step ``s`` drops the rows ``>= s`` kept
so far), so that reducing files apart and merging gives what reducing the run's stream gives;
and series renamed mid-run joined under their newer name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np

from gradcheck.model import HistogramSeries, Notice, RunData, ScalarSeries, SeriesKey
from gradcheck.series import thin
from gradcheck.series.reduce import build_all, reduce_records
from gradcheck.series.thin import rows_before, thinned, thinning_notices

_K = TypeVar("_K")
_V = TypeVar("_V")


def merge(parts: Sequence[RunData], consume: bool = False) -> RunData:
    """Merge the reductions of a run's files (in file order) into one, purging restarts.

    With ``consume``, each part's series are taken out of its (dict) mappings as they are
    joined, so that a part's series is freed as soon as the joined one exists, instead of both
    halves and the joined result living until the end (the parts are left empty: only for
    parts nothing else reads afterwards).
    """
    if not parts:
        return reduce_records(())
    if len(parts) == 1:
        return _with_thinning_notice(parts[0])
    pieces: dict[SeriesKey, list[HistogramSeries]] = {}
    scalars: dict[str, ScalarSeries] = {}
    for part in parts:
        for key, series in _items(part.histograms, consume):
            pieces.setdefault(key, []).append(series)
        for tag, scalar in _items(part.scalars, consume):
            kept_scalar = scalars.get(tag)
            scalars[tag] = scalar if kept_scalar is None else _joined_scalars(kept_scalar, scalar)
    restarts = _restarts_across(parts)  # before the pieces are joined (and purged)
    histograms = build_all(pieces, _joined_histograms)
    files = tuple(dict.fromkeys(file for part in parts for file in part.files))
    run = next((part.run for part in parts if part.run), "")
    notices = [*(notice for part in parts for notice in part.notices), *restarts]
    return RunData(
        run=run,
        files=files,
        file_infos=tuple(info for part in parts for info in part.file_infos),
        damages=tuple(damage for part in parts for damage in part.damages),
        notices=thinning_notices(notices, run, files, histograms.values()),
        histograms=histograms,
        scalars=scalars,
        hparams={name: value for part in parts for name, value in part.hparams.items()},
    )


def _restarts_across(parts: Sequence[RunData]) -> list[Notice]:
    """A restart notice for each file whose series go back to steps an earlier file of the run
    already held (a resumed training writing a new file), first seen on one tag: the reader
    sees restarts within a file; this is the same notice across files."""
    from gradcheck.events.reader import restart_notice  # the reader's wording, one definition

    last: dict[object, int] = {}
    found = []
    for part in parts:
        went_back: tuple[str, int, int] | None = None
        keyed: list[tuple[object, str, np.ndarray]] = [
            *((key, key[0], series.steps) for key, series in part.histograms.items()),
            *((tag, tag, series.steps) for tag, series in part.scalars.items()),
        ]
        for key, tag, steps in keyed:
            if not steps.size:
                continue
            first = int(steps[0])
            if went_back is None and key in last and first <= last[key]:
                went_back = (tag, last[key], first)
            last[key] = max(last.get(key, first), int(steps[-1]))
        if went_back is not None and part.files:
            tag, before, step = went_back
            found.append(restart_notice(part.run, part.files[0], tag, before, step))
    return found


def _with_thinning_notice(data: RunData) -> RunData:
    """``data`` with its ``thinned`` notice last and naming its first file (a part's notice
    may precede the notices added after its reduction, and name no file)."""
    notices = thinning_notices(data.notices, data.run, data.files, data.histograms.values())
    return data if notices == data.notices else replace(data, notices=notices)


def _items(mapping: Mapping[_K, _V], consume: bool) -> Iterator[tuple[_K, _V]]:
    """The mapping's items in order; popped one by one from a dict when ``consume``."""
    if not consume or not isinstance(mapping, dict):
        yield from mapping.items()
        return
    for key in list(mapping):
        yield key, mapping.pop(key)


def _kept_before(kept_steps: np.ndarray, newer_steps: np.ndarray) -> int:
    """How many kept rows survive newer data starting at ``newer_steps[0]``."""
    return rows_before(kept_steps, int(newer_steps[0])) if newer_steps.size else kept_steps.size


def _joined_histograms(pieces: Sequence[HistogramSeries]) -> HistogramSeries:
    """One series from its pieces in file order, each purging the rows of the ones before it
    from its first step on, then thinned once at the largest window of the pieces with rows
    left, doubled while over :data:`MAX_ROWS`: as if one stream had been reduced (thinning once
    or in stages keeps the same rows: see :func:`thinned`)."""
    first = pieces[0]
    if len(pieces) == 1:
        return first
    ends = [0] * len(pieces)  # rows of each piece that survive the pieces after it
    later_first: int | None = None
    for at in range(len(pieces) - 1, -1, -1):
        steps = pieces[at].steps
        ends[at] = steps.size if later_first is None else rows_before(steps, later_first)
        if steps.size:
            later_first = int(steps[0]) if later_first is None else min(later_first, int(steps[0]))
    columns = [
        np.concatenate(
            [getattr(piece, name)[:end] for piece, end in zip(pieces, ends, strict=True)]
        )
        for name in ("steps", "wall_times", "stats", "fingerprints")
    ]
    # a piece purged whole by a later one (a run logged again from its start) sets no window
    surviving = (piece.window for piece, end in zip(pieces, ends, strict=True) if end)
    (steps, walls, stats, fingerprints), window = thinned(
        (columns[0], columns[1], columns[2], columns[3]), max(surviving, default=1), thin.MAX_ROWS
    )
    return HistogramSeries(
        tag=first.tag,
        index=first.index,
        encoding=first.encoding,
        steps=steps,
        wall_times=walls,
        stats=stats,
        fingerprints=fingerprints,
        window=window,
        rows_read=sum(
            piece.histograms_read - (len(piece) - end if piece.window == 1 else 0)
            for piece, end in zip(pieces, ends, strict=True)
        ),
    )


def _joined_scalars(kept: ScalarSeries, newer: ScalarSeries) -> ScalarSeries:
    n = _kept_before(kept.steps, newer.steps)
    return ScalarSeries(
        tag=kept.tag,
        steps=np.concatenate([kept.steps[:n], newer.steps]),
        values=np.concatenate([kept.values[:n], newer.values]),
    )


def join_renamed(data: RunData) -> RunData:
    """``data`` with series that changed name mid-run joined under their newer name.

    A Keras model reloaded from a checkpoint (``keras.models.load_model``) and fitted on in
    the same log directory names its variables without the model's own name:
    ``sequential/dense/kernel/histogram`` until the checkpoint, ``dense/kernel/histogram``
    after it. Two series are one when their tags differ by one path component, the same one
    for every such pair of the run (at least two pairs, or the run's only series), and their
    steps do not overlap; a notice says so."""
    histograms = dict(data.histograms)
    scalars = dict(data.scalars)
    pairs = _renamed_pairs([k[0] for k in histograms] + list(scalars), data)
    if not pairs:
        return data
    joined: list[int] = []  # the first step of each joined series under its new name
    for old, new in pairs:
        newer: HistogramSeries | ScalarSeries
        if (old, 0) in histograms and (new, 0) in histograms:
            newer = histograms[(new, 0)]
            series = replace(_joined_histograms([histograms[(old, 0)], newer]), tag=new, index=0)
            _replace_key(histograms, (old, 0), (new, 0), series)
        elif old in scalars and new in scalars:
            newer = scalars[new]
            _replace_key(scalars, old, new, _joined_scalars(scalars[old], newer))
        else:
            continue
        joined.append(int(newer.steps[0]))
    step = min(joined)
    component = _dropped_component(*pairs[0])
    notice = Notice(
        run=data.run,
        file=data.files[-1] if data.files else "",
        kind="other",
        tag=pairs[0][1],
        step=step,
        message=(
            f"{len(joined)} series changed name at step {step}: their tags lost the path component "
            f"'{component}' (as a Keras model reloaded from a checkpoint names its variables); "
            "each is joined with its earlier name into one parameter"
        ),
    )
    return replace(data, histograms=histograms, scalars=scalars, notices=(*data.notices, notice))


def _replace_key(mapping: dict[Any, Any], old_key: object, new_key: object, value: object) -> None:
    """Put ``value`` at ``old_key``'s position under ``new_key`` (the order is depth)."""
    items = [(new_key if k == old_key else k, value if k == old_key else v)
             for k, v in mapping.items() if k != new_key]  # fmt: skip
    mapping.clear()
    mapping.update(items)


def _dropped_component(old: str, new: str) -> str:
    parts = old.split("/")
    for at in range(len(parts)):
        if "/".join(parts[:at] + parts[at + 1 :]) == new:
            return parts[at]
    return ""


def _renamed_pairs(tags: list[str], data: RunData) -> list[tuple[str, str]]:
    """``(old, new)`` tag pairs: ``new`` is ``old`` without one path component, the same
    component for all pairs, the steps of ``old`` all before those of ``new``."""
    present = set(tags)
    by_component: dict[str, list[tuple[str, str]]] = {}
    for tag in tags:
        parts = tag.split("/")
        for at in range(len(parts) - 1):
            shorter = "/".join(parts[:at] + parts[at + 1 :])
            if shorter in present and _before(data, tag, shorter):
                by_component.setdefault(parts[at], []).append((tag, shorter))
    if len(by_component) != 1:
        return []
    (pairs,) = by_component.values()
    return pairs if len(pairs) >= 2 or len(tags) == 2 else []


def _before(data: RunData, old: str, new: str) -> bool:
    """Whether every step of ``old``'s series precedes every step of ``new``'s."""

    def steps(tag: str) -> np.ndarray | None:
        series = data.histograms.get((tag, 0)) or data.scalars.get(tag)
        return None if series is None or not len(series) else series.steps

    a, b = steps(old), steps(new)
    return a is not None and b is not None and int(a[-1]) < int(b[0])
