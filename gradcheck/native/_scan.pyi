"""Type stub of the optional C extension ``gradcheck.native._scan`` (see ``_scan.c``; every
function has a numpy twin that defines its results: ``gradcheck.native``)."""

from typing import Any

import numpy as np

CRC_IMPLEMENTATION: str
SHARED: dict[str, int]
"""The numbers C shares with Python, by name (``gradcheck.native.shared`` says where each is
defined in Python; a test checks both agree)."""

class Scanner:
    """Scans TFRecord frames of event files into columns (``fastpath`` drives it)."""

    tags: list[str]
    def __init__(self, plugins: Any = ..., keep_unknown: bool = ...) -> None: ...
    def __getattr__(self, name: str) -> Any: ...

def gather(
    data: Any,
    rows: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    kinds: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    counts: np.ndarray,
) -> None: ...
def reduce(
    data: Any,
    rows: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    kinds: np.ndarray,
    fields: np.ndarray,
    weights: np.ndarray,
    stats: np.ndarray,
    fingerprints: np.ndarray,
) -> None: ...
def thin(
    steps: np.ndarray,
    stats: np.ndarray,
    l2_column: int,
    nonfinite_column: int,
    window: int,
    limit: int,
    kept: np.ndarray,
) -> tuple[int, int]: ...
def wasserstein(
    grid_a: np.ndarray, grid_b: np.ndarray, widths: np.ndarray, out: np.ndarray
) -> None: ...
def __getattr__(name: str) -> Any: ...
