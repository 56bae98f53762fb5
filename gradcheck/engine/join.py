"""Joining consecutive readings of one event file into what one reading gives.

Two users: a file read in byte ranges by several processes (``engine.ranges``), and a file
followed as it grows, whose appended bytes are read as one more range (``engine.follow``). A
range starting mid-file does not know what came before it (the plugins of its tags, the last
steps): :class:`~gradcheck.engine.fastpath.RangeResult` carries what the join needs to settle
that, or to tell that the ranges cannot be joined exactly (then the file is read again whole).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from gradcheck.engine.fastpath import RangeResult
from gradcheck.events.reader import FileTally
from gradcheck.model import RunData
from gradcheck.series.merge import merge


def join_ranges(ranges: Sequence[RangeResult], boundaries: Sequence[int]) -> RangeResult | None:
    """Join the results of consecutive byte ranges of one file, as one reading would give;
    ``boundaries[i]`` is where ``ranges[i + 1]`` starts.

    Each range's pending tensors are settled with the plugins the ranges before it learnt
    (kept, or dropped as the reference would have skipped them). None when the ranges cannot
    be joined exactly (a restart, a tag whose reading depends on what came before a
    boundary): then the file is read again in one piece. Joined, the ranges' series are
    consumed (moved into the joined result, each piece freed as it is joined).
    """
    first = ranges[0]
    if first.restarts or len(boundaries) != len(ranges) - 1:
        return None
    if len(ranges) == 1:
        return first
    plugins = dict(first.plugins)  # known at the next boundary
    last = {tag: (hist[1], scalar[1]) for tag, (hist, scalar) in first.steps.items()}
    firsts = {tag: (hist[0], scalar[0]) for tag, (hist, scalar) in first.steps.items()}
    collisions = list(first.collisions)
    collided = {tag for tag, _, _ in collisions}
    read, kept, tally = first.values_read, first.values_kept, first.tally
    pieces = [first.data]
    previous = first
    for second, boundary in zip(ranges[1:], boundaries, strict=True):
        if second.restarts or previous.stopped_at != boundary:
            return None
        if any(plugins.get(tag) != name for tag, name in second.assumed.items()):
            return None  # the plugins assumed were not those at the boundary: read in one piece
        if any(plugins.get(tag) in _READ_PLUGINS for tag in second.unsure):
            return None
        dropped = _settle_pending(plugins, second)
        if dropped is None or _crosses_boundary(last, second, dropped):
            return None
        read += second.values_read - sum(second.pending[tag].read for tag in dropped)
        kept += second.values_kept - sum(second.pending[tag].kept for tag in dropped)
        later = [c for c in second.collisions if c[0] not in collided and c[0] not in dropped]
        collisions += later
        collided.update(tag for tag, _, _ in later)
        tally = _joined_tally(tally, second.tally)
        if len(dropped) < len(second.pending):
            tally.encodings.add("tensor")
        pieces.append(_without_tags(second.data, dropped))
        plugins.update(second.plugins)
        for tag, ((hist_first, hist_last), (scalar_first, scalar_last)) in second.steps.items():
            if tag not in dropped:
                before_hist, before_scalar = last.get(tag, (None, None))
                last[tag] = (
                    before_hist if hist_last is None else hist_last,
                    before_scalar if scalar_last is None else scalar_last,
                )
                first_hist, first_scalar = firsts.get(tag, (None, None))
                firsts[tag] = (
                    hist_first if first_hist is None else first_hist,
                    scalar_first if first_scalar is None else first_scalar,
                )
        previous = second
    return RangeResult(
        data=merge(pieces, consume=True),
        values_read=read,
        values_kept=kept,
        tally=tally,
        size=first.size,
        collisions=collisions,
        plugins=plugins,
        steps={  # so that the joined result can be joined again (a file followed as it grows)
            tag: ((hist_first, last[tag][0]), (scalar_first, last[tag][1]))
            for tag, (hist_first, scalar_first) in firsts.items()
        },
        stopped_at=previous.stopped_at,
        end=previous.end,
    )


_READ_PLUGINS = ("histograms", "scalars")
_PENDING_KIND = {"histograms": "histogram", "scalars": "scalar"}


def _settle_pending(plugins: Mapping[str, str], second: RangeResult) -> set[str] | None:
    """Tags whose pending values the reference would have skipped, given the ``plugins``
    known at the range's start; None if one cannot tell."""
    dropped = set()
    for tag, pending in second.pending.items():
        plugin = plugins.get(tag)
        if tag in second.plugins:
            return None  # the plugin is named again later in the range: values of both kinds
        if plugin in _PENDING_KIND:
            if pending.kinds != {_PENDING_KIND[plugin]}:
                return None  # e.g. a scalar-shaped tensor under "histograms": reference damage
        else:
            dropped.add(tag)
    return dropped


def _crosses_boundary(
    last: Mapping[str, tuple[int | None, int | None]], second: RangeResult, dropped: set[str]
) -> bool:
    """Whether a tag's steps do not rise across the boundary (restart or collision group),
    from the ``last`` histogram and scalar step of each tag before it."""
    for tag, ((hist_first, _), (scalar_first, _)) in second.steps.items():
        before = last.get(tag)
        if before is None or tag in dropped:
            continue
        hist_last, scalar_last = before
        if hist_first is not None and hist_last is not None and hist_first <= hist_last:
            return True
        if scalar_first is not None and scalar_last is not None and scalar_first <= scalar_last:
            return True
    return False


def _without_tags(data: RunData, tags: set[str]) -> RunData:
    if not tags:
        return data
    return replace(
        data,
        histograms={key: s for key, s in data.histograms.items() if key[0] not in tags},
        scalars={tag: s for tag, s in data.scalars.items() if tag not in tags},
    )


def _joined_tally(first: FileTally, second: FileTally) -> FileTally:
    return FileTally(
        records=first.records + second.records,
        events=first.events + second.events,
        file_version=first.file_version if first.file_version is not None else second.file_version,
        writer=first.writer if first.writer is not None else second.writer,
        whats=first.whats | second.whats,
        encodings=first.encodings | second.encodings,
    )
