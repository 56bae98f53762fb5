"""Sparklines: a series of norms drawn as one line of block characters.

Norms span decades, so the height is the logarithm of the value, scaled between the smallest
and largest positive finite values of the series. A non-finite value (NaN, inf) is drawn as
``!`` so that a blow-up is visible even when its number could not be logged; an exact zero
(a gradient that is never computed, a frozen weight's update) is drawn as ``·``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

BLOCKS = "▁▂▃▄▅▆▇█"
NONFINITE = "!"
ZERO = "·"


def sparkline(values: Sequence[float], width: int) -> str:
    """At most ``width`` characters for ``values``, log-scaled; empty for an empty series."""
    if width <= 0 or not values:
        return ""
    points = resample(values, width)
    logs = [math.log10(v) for v in points if math.isfinite(v) and v > 0]
    low, high = (min(logs), max(logs)) if logs else (0.0, 0.0)
    return "".join(_glyph(v, low, high) for v in points)


def resample(values: Sequence[float], width: int) -> list[float]:
    """Shrink ``values`` to ``width`` points, each the worst of its bin.

    A bin holding a non-finite value becomes that value; otherwise its largest value, so that a
    one-step spike in a long series still shows.
    """
    n = len(values)
    if n <= width:
        return [float(v) for v in values]
    bins: list[float] = []
    for i in range(width):
        chunk = [float(v) for v in values[i * n // width : (i + 1) * n // width]]
        bad = [v for v in chunk if not math.isfinite(v)]
        bins.append(bad[0] if bad else max(chunk))
    return bins


def _glyph(value: float, low: float, high: float) -> str:
    """The block for one value given the log10 range of the series."""
    if not math.isfinite(value):
        return NONFINITE
    if value <= 0:
        return ZERO
    if high - low < 1e-12:
        return BLOCKS[0]
    level = (math.log10(value) - low) / (high - low)
    return BLOCKS[min(len(BLOCKS) - 1, int(level * len(BLOCKS)))]
