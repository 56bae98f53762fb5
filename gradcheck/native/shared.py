"""The numbers the C extension and Python share, each defined once on the Python side.

``_scan.c`` has its own copies (enums and macros: C cannot import these) and exports them as
``_scan.SHARED``; ``tests/engine/test_twin_contract.py`` checks every one against its definition
here, or where it belongs in Python:

- here: how a scan stopped (``STOP_*``), the kinds of the rows it writes (``K_*``), their flags
  (``FLAG_*``) and the bits of its tally (``WHAT_*``: an Event's field; ``ENCODING_*``);
- ``model.STAT_NAMES``: the statistics' columns (``N_STATS``, ``S_*``; ``S_ACTIVATION``: the
  first of ``series.stats.ACTIVATION_STATS``);
- ``series.stats``: the width of a bucket of exact zeros (``ZERO_WIDTH``) and the margin of a
  bounded activation's bounds (``BOUND_MARGIN``);
- ``series.batch``: the fingerprints' weights (``MAX_WEIGHTS``) and mixing constant
  (``FINGERPRINT_MIX``);
- ``series.stats.QUANTILE_LEVELS``: the quantile grid's levels (``GRID_LEVELS``);
- ``events.framing.MAX_PLAUSIBLE_LENGTH``: the longest record read.
"""

from __future__ import annotations

STOP_FULL, STOP_MORE, STOP_DAMAGE, STOP_FALLBACK, STOP_LIMIT = range(5)
"""Why ``Scanner.scan`` returned: its columns are full, it needs more bytes, damage, a record
for the reference decoder, the range's limit."""

K_HISTO, K_TENSOR_HIST, K_SIMPLE, K_TENSOR_SCALAR = range(4)
"""The kind of a row the scanner writes: a ``HistogramProto``, a histogram tensor, a
``simple_value``, a scalar tensor (histograms first: ``kind < K_SIMPLE``)."""

FLAG_RESTART, FLAG_PENDING = 1, 2
"""A row's flags: its step restarts the tag's series; a tensor whose plugin is not yet known
(a range read from mid-file)."""

WHAT_NONE, WHAT_FILE_VERSION, WHAT_SUMMARY = 0, 3, 5
"""The bits of the tally's ``whats``: what an Event holds, by its field number."""

ENCODING_HISTO, ENCODING_TENSOR, ENCODING_SIMPLE_VALUE = range(3)
"""The bits of the tally's ``encodings``."""

WHATS = {WHAT_NONE: "", WHAT_FILE_VERSION: "file_version", WHAT_SUMMARY: "summary"}
"""The names ``FileTally.whats`` holds, by bit."""
ENCODINGS = {
    ENCODING_HISTO: "histo",
    ENCODING_TENSOR: "tensor",
    ENCODING_SIMPLE_VALUE: "simple_value",
}
"""The names ``FileTally.encodings`` holds, by bit."""
ENCODING_OF_KIND = {
    K_HISTO: ENCODINGS[ENCODING_HISTO],
    K_TENSOR_HIST: ENCODINGS[ENCODING_TENSOR],
    K_SIMPLE: ENCODINGS[ENCODING_SIMPLE_VALUE],
    K_TENSOR_SCALAR: ENCODINGS[ENCODING_TENSOR],
}
"""The encoding of a row of each kind."""
