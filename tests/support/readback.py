"""Read what the logging helpers wrote back through gradcheck's own reader, keyed for asserts.

Shared by the Keras, PyTorch and sample-run tests: ``read_logs(directory)`` gives every scalar
and histogram under ``directory`` as ``{tag: {step: value}}`` maps of gradcheck's records.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gradcheck.model import HistogramRecord, ScalarRecord
from tests.support.paths import REPO


@dataclass(frozen=True)
class Logs:
    """Every scalar and histogram of a directory, by tag then step (last value wins)."""

    scalars: dict[str, dict[int, float]]
    histograms: dict[str, dict[int, HistogramRecord]]

    def scalar(self, tag: str, step: int) -> float:
        return self.scalars[tag][step]

    def steps(self, tag: str) -> list[int]:
        series = self.scalars.get(tag) or self.histograms.get(tag) or {}
        return sorted(series)

    def tags_with_prefix(self, prefix: str) -> set[str]:
        return {tag for tag in (*self.scalars, *self.histograms) if tag.startswith(prefix)}


def read_logs(directory: str | Path) -> Logs:
    """Every histogram and scalar record under ``directory``, read by ``gradcheck.read``."""
    scalars: dict[str, dict[int, float]] = defaultdict(dict)
    histograms: dict[str, dict[int, HistogramRecord]] = defaultdict(dict)
    for record in _records(Path(directory)):
        if isinstance(record, ScalarRecord):
            scalars[record.tag][record.step] = record.value
        elif isinstance(record, HistogramRecord):
            histograms[record.tag][record.step] = record
    return Logs(dict(scalars), dict(histograms))


def _records(directory: Path) -> Iterator[object]:
    try:
        from gradcheck.api import read
    except ImportError:  # api.py is still being written: the reader's own entry points
        from gradcheck.events.discover import discover
        from gradcheck.events.reader import read_run

        for run in discover([str(directory)]):
            yield from read_run(run)
    else:
        yield from read(str(directory))


def bucket_total(record: HistogramRecord) -> float:
    """Number of values the histogram's buckets hold."""
    return float(np.sum(record.counts))


GUIDE = REPO / "docs" / "guides" / "better-logs.md"
"""The documentation's guide to the helpers (the README's snippets are blocks of it)."""


def readme_helper_examples(module: str, log_dir: Path) -> list[str]:
    """The ``python3`` code blocks of the helpers' guide that import ``module``, with their
    ``"logs/`` directories moved under ``log_dir``. (``python3``, not ``python``: these need
    TensorFlow or torch and data, so the framework-free docs test does not run them; the
    helper tests do, with a tiny model and data in scope.)"""
    section = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"^```python3\n(.*?)^```$", section, re.S | re.M)
    return [
        block.replace('"logs/', f'"{log_dir}/') for block in blocks if f"from {module}" in block
    ]
