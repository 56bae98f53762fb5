"""A census of a run's files with the C scanner: what they hold, per series, counted without
statistics (``gradcheck inspect``); the same listing as the reference reader's records give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gradcheck.engine.fastpath import Columns, RangeReader, ScannerState
from gradcheck.engine.parts import file_info
from gradcheck.events.reader import collision_notice, restart_notice, unreadable
from gradcheck.events.steps import StepWindow
from gradcheck.events.storage import NO_OPTIONS, StorageOptions, file_size, open_binary
from gradcheck.model import Record, Run
from gradcheck.native.shared import ENCODING_OF_KIND, FLAG_RESTART, K_SIMPLE


@dataclass(frozen=True)
class ValueGroups:
    """One batch of scanned values, grouped by series in order of first appearance.

    ``series[i]`` is ``(tag, index, histogram)`` (index 0 for scalars, as ``gradcheck.inspect``
    keys them); ``encodings[i]`` is the encoding of the group's first value, then its smallest
    and largest step and how many values it holds. ``element_counts`` holds ``(i, count)`` for
    each distinct ``reader.element_count`` of a group's histograms (None ones left out), in
    order of first appearance.
    """

    series: list[tuple[str, int, bool]]
    encodings: list[str]
    first_steps: list[int]
    last_steps: list[int]
    counts: list[int]
    element_counts: list[tuple[int, int]]


class Census(Protocol):
    """What :func:`census_run` tells, in the order ``reader.read_run`` would yield it."""

    def add(self, record: Record) -> None:
        """A damage, a notice, a value the reference decoder read, or a file's ``FileInfo``."""

    def add_values(self, run: str, file: str, values: ValueGroups) -> None:
        """A batch of values the scanner read from ``file`` (no object per value)."""


def census_run(run: Run, census: Census, storage: StorageOptions = NO_OPTIONS) -> None:
    """Tell ``census`` what ``run``'s files hold, as ``reader.read_run(run, storage)`` would
    (state carried across the files), but with values counted per series and batch by the
    scanner."""
    state = ScannerState(run.path, keep_unknown=False)
    for path in run.files:
        reader = _CensusReader(path, run.path, state, census)
        try:
            size = file_size(path, storage)
            stream = open_binary(path, storage)
        except OSError as error:
            census.add(unreadable(run.path, path, 0, error))
            census.add(file_info(run.path, path, None, reader.tally))
            continue
        with stream:
            reader.read_range(stream, 0, -1)
        reader.take_tally()
        for tag, step, counts in state.scanner.take_collisions():
            census.add(collision_notice(run.path, path, tag, step, counts))
        census.add(file_info(run.path, path, size, reader.tally))


class _CensusReader(RangeReader):
    """A range reader that counts values per series for a :class:`Census`: no statistics
    and no series are built (``reducer`` stays empty)."""

    def __init__(self, path: str, run: str, state: ScannerState, census: Census) -> None:
        super().__init__(path, run, StepWindow(), keep_unknown=False, state=state)
        self.census = census

    def _add_record(self, record: Record) -> None:
        self.census.add(record)

    def _consume(self, rows: int) -> None:
        c = self.columns
        tags = self.state.scanner.tags
        if c.flags[:rows].any():
            for i in np.flatnonzero(c.flags[:rows] & FLAG_RESTART).tolist():
                tag = tags[c.tag_ids[i]]
                self.census.add(
                    restart_notice(self.run, self.path, tag, int(c.aux[i]), int(c.steps[i]))
                )
        self.census.add_values(self.run, self.path, _value_groups(c, rows, tags))


def _value_groups(c: Columns, rows: int, tags: list[str]) -> ValueGroups:
    """The batch's values grouped by series (see :class:`ValueGroups`)."""
    kinds = c.kinds[:rows]
    histogram = kinds < K_SIMPLE
    indexes = np.where(histogram, c.indexes[:rows].astype(np.int64) + 1, 0)  # scalars: 0
    keys = c.tag_ids[:rows].astype(np.int64) << 32 | indexes
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(first, kind="stable")  # groups in order of first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    groups = rank[inverse]  # each row's group, numbered by first appearance
    by_group = np.argsort(groups, kind="stable")
    counts = np.bincount(groups, minlength=order.size)
    starts = np.cumsum(counts) - counts
    steps = c.steps[:rows][by_group]
    heads = first[order]
    series = [
        (tags[tag_id], index if is_histogram else 0, is_histogram)
        for tag_id, index, is_histogram in zip(
            c.tag_ids[heads].tolist(), c.indexes[heads].tolist(), histogram[heads].tolist(),
            strict=True,
        )
    ]  # fmt: skip
    return ValueGroups(
        series=series,
        encodings=[ENCODING_OF_KIND[kind] for kind in kinds[heads].tolist()],
        first_steps=np.minimum.reduceat(steps, starts).tolist(),
        last_steps=np.maximum.reduceat(steps, starts).tolist(),
        counts=counts.tolist(),
        element_counts=_element_counts(c.values[:rows], groups, histogram),
    )


def _element_counts(
    totals: np.ndarray, groups: np.ndarray, histogram: np.ndarray
) -> list[tuple[int, int]]:
    """``(group, count)`` for each distinct finite histogram total of each group, in order of
    first appearance (``reader.element_count``: the total as an int)."""
    rows = np.flatnonzero(histogram & np.isfinite(totals))
    if not rows.size:
        return []
    pairs = np.stack([groups[rows].astype(np.float64), totals[rows]], axis=1)
    _, first = np.unique(pairs, axis=0, return_index=True)
    first.sort()
    at = rows[first]
    return [
        (group, int(total))
        for group, total in zip(groups[at].tolist(), totals[at].tolist(), strict=True)
    ]
