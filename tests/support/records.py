"""Reader records built by hand (``RUN``'s histograms and scalars) for the series tests."""

from __future__ import annotations

from gradcheck.model import HistogramRecord, Record, ScalarRecord
from tests.support.histograms import Buckets

RUN = "runs/a"


def histogram(tag: str, step: int, buckets: Buckets, *, index: int = 0, file: str = "f1") -> Record:
    encoding = "histo" if buckets.num is not None else "tensor"
    return HistogramRecord(
        run=RUN,
        file=file,
        offset=0,
        tag=tag,
        index=index,
        step=step,
        wall_time=1000.0 + step,
        encoding=encoding,
        left=buckets.left,
        right=buckets.right,
        counts=buckets.counts,
        **buckets.fields(),
    )


def scalar(tag: str, step: int, value: float, file: str = "f1") -> Record:
    return ScalarRecord(RUN, file, 0, tag, step, 1000.0 + step, "tensor", value)
