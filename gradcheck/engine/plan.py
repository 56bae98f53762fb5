"""What a task is estimated to cost, so that work is shared out only when sharing pays.

The constants are measured on the bench logs and the test zoo; how and when is in
``bench/README.md`` ("The planner's constants"). An estimate only decides whether and how work
is split: results never depend on it.
"""

from __future__ import annotations

from collections.abc import Sequence

from gradcheck.model import RunData
from gradcheck.series import thin

VERDICT_SECONDS_PER_SERIES = 3.5e-4
"""Judging a run, per series (its pairing, signals and rules)."""
VERDICT_SECONDS_PER_ROW = 2.2e-7
"""Judging a run, per row of its series as merged."""
VERDICT_SPLIT_SECONDS = 0.05
"""Runs are judged on several processes only when each process's share is estimated to take
this long: starting a process and its first page faults cost a few ms."""


def verdict_seconds(parts: Sequence[RunData]) -> float:
    """Estimated time to judge a run made of these per-file parts: its series once each, their
    rows as merged (at most ``thin.MAX_ROWS`` each)."""
    rows: dict[object, int] = {}
    for data in parts:
        for group in (data.histograms, data.scalars):
            for key, one in group.items():
                rows[key] = rows.get(key, 0) + len(one)
    kept = sum(min(count, thin.MAX_ROWS) for count in rows.values())
    return len(rows) * VERDICT_SECONDS_PER_SERIES + kept * VERDICT_SECONDS_PER_ROW
